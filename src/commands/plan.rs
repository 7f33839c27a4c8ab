//! `leasequake plan`: what a run would do, before it does it. Points ×
//! trials and the estimated wall time, trial 1's fault schedule as absolute
//! times (drawn by the same pure schedule a run uses, from trial 1's seed),
//! and a warning where a scaled interval comes near the harness's precision
//! or the workers' own operations fill a sizeable part of it. Nothing is
//! spawned or written.

use std::path::PathBuf;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::inputs::{Depth, expand, filter, load_all};
use super::words::{counted, human};
use crate::error::Error;
use crate::experiment::Overrides;
use crate::model::{Action, Dur, Experiment, Target};
use crate::report::terminal::describe;
use crate::sayln;
use crate::trial::{Live, Schedule};

/// A trial's cost beyond its duration: spawning and readying its workers,
/// releasing them, the clean-up's grace. The progress line's ETA measures
/// the real pace; this is only for the estimate before anything ran.
fn overhead_s(exp: &Experiment) -> f64 {
    0.25 + 0.002 * exp.workers as f64 + if exp.program.is_some() { 0.3 } else { 0.0 }
}

/// How closely the harness places a fault, as a budget: a fault error above
/// 1 % of the smallest scaled interval blurs what the trial measures.
/// `leasequake calibrate` measures this machine's error.
const FAULT_ERROR_MS: f64 = 1.0;

/// Trial 1's faults listed at most.
const SHOWN: usize = 20;

pub fn plan(files: &[PathBuf], globs: &[String], overrides: &Overrides) -> Result<(), Error> {
    let exps = filter(load_all(&expand(files, Depth::Deep)?, overrides)?, globs)?;
    let mut total_trials = 0u64;
    let mut total_s = 0.0;
    for exp in &exps {
        let (trials, seconds) = estimate(exp);
        total_trials += trials;
        total_s += seconds;
        sayln!("{}", one(exp, trials, seconds));
    }
    if exps.len() > 1 {
        sayln!("total: {} experiments, {}, about {}", exps.len(), counted(total_trials, "trial"), human(total_s));
    }
    Ok(())
}

/// Trials and the estimated wall time of `exp` at its own jobs.
fn estimate(exp: &Experiment) -> (u64, f64) {
    let units = exp.units();
    let trials = u64::from(exp.trials) * units.len() as u64;
    let serial: f64 =
        units.iter().map(|(u, _)| (u.duration.as_ms_f64() / 1000.0 + overhead_s(u)) * f64::from(exp.trials)).sum();
    // More jobs than trials run no faster than one trial a job.
    (trials, serial / (exp.jobs as u64).min(trials).max(1) as f64)
}

fn one(exp: &Experiment, trials: u64, seconds: f64) -> String {
    let scale = exp.time_scale;
    let own = |d: Dur| d.scaled(1.0 / scale);
    let mut out = format!("{} ({})\n  {}\n", exp.name, exp.source.display(), describe(exp));
    let of = |n: u64| if n == 1 { "1 trial".to_string() } else { format!("{n} trials") };
    let count = if exp.points.is_empty() {
        of(trials)
    } else {
        format!("{} points × {} = {}", exp.points.len(), of(u64::from(exp.trials)), of(trials))
    };
    let scaled = if scale == 1.0 { String::new() } else { format!(" (time scale {scale}: {} each)", exp.duration) };
    out += &format!(
        "  {count} of {}{scaled}; {} at a time: about {}\n",
        own(exp.duration),
        (exp.jobs as u64).min(trials).max(1),
        human(seconds)
    );
    if let Some(w) = exp.window {
        out += &format!("  kept in windows of {}: a stopped run resumes from its last whole one\n", own(w));
    }
    out += &points(exp);
    out += &schedule(exp);
    for w in warnings(exp) {
        out += &format!("  ! {w}\n");
    }
    out
}

/// The sweep's points in the experiment's own time, and scaled as
/// trials.csv names them (`setting`) where that differs, the first twenty
/// of many.
fn points(exp: &Experiment) -> String {
    const SHOWN: usize = 20;
    if exp.points.is_empty() {
        return String::new();
    }
    let labels: Vec<String> = exp.points.iter().take(SHOWN).map(|p| p.label()).collect();
    let own: Vec<String> = labels.iter().map(|l| crate::experiment::own_label(l, exp.time_scale)).collect();
    let more = exp.points.len().saturating_sub(SHOWN);
    let more = if more > 0 { format!(", … {more} more") } else { String::new() };
    let mut out = format!("  points: {}{more}\n", own.join(", "));
    if own != labels {
        out += &format!("  as run (trials.csv's setting): {}{more}\n", labels.join(", "));
    }
    out
}

/// Trial 1's faults, drawn as a run draws them, in the experiment's own time.
fn schedule(exp: &Experiment) -> String {
    let seed = exp.trial_seed(1);
    let faults = crate::trial::trial_faults(exp, seed);
    if faults.is_empty() {
        return "  no faults\n".into();
    }
    let scale = exp.time_scale;
    let own = |ns: i64| format!("{:.3} s", ns as f64 / 1e9 / scale);
    let of = if exp.points.is_empty() { "" } else { "; each point replaces what it sweeps" };
    let mut out = format!("  trial 1's faults (seed {seed}, in the experiment's own time{of}):\n");
    let mut schedule = Schedule::new(&faults, 0, ChaCha8Rng::seed_from_u64(seed));
    // Nobody's events are known before the run: the leader is taken to be
    // worker 0 throughout, and every worker alive.
    let mut live = Live::new(exp.workers);
    live.leaders.push(0);
    let end = exp.duration.as_ns() as i64;
    let mut shown = 0;
    while let Some(due) = schedule.next_due().filter(|&t| t <= end) {
        while let Some(order) = schedule.next_order(due, &live) {
            if shown < SHOWN {
                out +=
                    &format!("    {:>10}  {}\n", own(order.scheduled_ns).to_string(), what(order.action, order.target));
            }
            shown += 1;
        }
    }
    if shown > SHOWN {
        out += &format!("    … {} more\n", shown - SHOWN);
    }
    for f in schedule.never_fired() {
        if let Some(after) = faults[f.fault].after {
            out += &format!(
                "    {:>10}  {}: armed, fires {} after the target's next `{}`\n",
                own(f.scheduled_ns),
                what(f.action, f.target),
                own(after.delay.as_ns() as i64),
                after.event.name()
            );
        }
    }
    out
}

fn what(action: Action, target: Target) -> String {
    match target {
        Target::Worker(i) => format!("{} worker {i}", action.name()),
        t => format!("{} {t}", action.name()),
    }
}

/// Where a scaled interval is too short for the harness's precision, or
/// for the workers' own operations.
pub fn warnings(exp: &Experiment) -> Vec<String> {
    let mut out = Vec::new();
    let l = &exp.lease;
    let gap = Dur::from_us(l.lease.as_us().saturating_sub(l.renew.as_us()));
    let mut intervals = vec![("renew", l.renew), ("watch", l.watch), ("lease − renew", gap)];
    for f in exp.fault_kinds() {
        if let Some(every) = f.every {
            intervals.push(("every", every));
        }
    }
    let Some((name, smallest)) = intervals.into_iter().filter(|(_, d)| *d > Dur::ZERO).min_by_key(|(_, d)| *d) else {
        return out;
    };
    let ms = smallest.as_ms_f64();
    let share = FAULT_ERROR_MS / ms * 100.0;
    if share > 1.0 {
        out.push(format!(
            "{name} runs at {ms:.1} ms: a fault placed to within {FAULT_ERROR_MS} ms (more on a busy machine; \
             `leasequake calibrate` measures this one) is {share:.1} % of it"
        ));
    }
    // Time scaling shrinks the protocol's intervals, not its syscalls.
    let per_ms = 100.0 / l.renew.as_ms_f64();
    if exp.program.is_none() && per_ms >= OPERATION_SHARE {
        out.push(format!(
            "a renewal is a real operation on the {} (a fraction of a millisecond on a file, more on a server): \
             at renew {:.1} ms each millisecond of it is {per_ms:.2} % of the interval, the chance that a kill at \
             a uniform moment lands inside one; the run reports the measured share",
            crate::model::setting_name(&exp.substrate.kind),
            l.renew.as_ms_f64(),
        ));
    }
    if exp.program.is_some() && exp.time_scale != 1.0 {
        out.push(format!(
            "time scale {}: a program is scaled only through what it is handed ({{lease_ms}}, {{renew_ms}}, \
             {{watch_ms}}) and the faults' times; constants inside it or its libraries (retry delays, socket \
             timeouts, minimum TTLs, poll intervals) keep their length (docs/worker-protocol.md, \
             \"Time scale\")",
            exp.time_scale
        ));
    }
    out.extend(network_warnings(exp));
    out
}

/// What would make network faults or a local deadline measure less than
/// they seem to.
fn network_warnings(exp: &Experiment) -> Vec<String> {
    let mut out = Vec::new();
    let network = exp.fault_kinds().any(|f| f.action.is_network());
    if let Some(p) = &exp.program
        && network
        && !p.command.iter().chain(p.env.values()).any(|w| ["{address}", "{members}"].iter().any(|p| w.contains(p)))
    {
        out.push(
            "the program is not given `{address}`: it reaches its server directly, and the network faults \
             never touch it"
                .to_string(),
        );
    }
    if exp.program.is_none() && exp.worker.belief == crate::model::Belief::LocalDeadline {
        let lease = exp.lease.lease.as_ms_f64();
        let believed = lease - exp.worker.belief_margin.least().as_ms_f64();
        let slowest = exp.worker.clock_rate.all().into_iter().fold(f64::INFINITY, f64::min);
        if believed > lease * slowest {
            out.push(format!(
                "belief: local-deadline on a clock as slow as {slowest}: the belief may outlast the grant by \
                 {:.1} ms (raise belief_margin to at least {:.1} ms for one leader at a time)",
                believed / slowest - lease,
                lease - lease * slowest
            ));
        } else if exp.worker.belief_margin.least() == Dur::ZERO {
            out.push(
                "belief: local-deadline with no margin: a renewal begun just before the deadline blocks in its \
                 socket's timeout, which can overshoot by milliseconds, past the grant"
                    .to_string(),
            );
        }
    }
    out
}

/// A millisecond of renewal above this share (%) of the renew interval is
/// worth a warning: a kill lands inside a renewal that often, and on a lock
/// file rewritten in place that leaves it empty.
const OPERATION_SHARE: f64 = 0.5;
