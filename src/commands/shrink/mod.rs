//! `leasequake shrink DIR --trial N` (and `run --shrink`): from a trial
//! that violated something to the smallest schedule that still does. Every
//! input is checked before anything runs; every candidate is a results
//! directory of its own under the shrink's directory, and its row of
//! steps.csv is on disk before the next candidate starts.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::inputs::new_dir;
use super::runner::{Ctx, preflight, run_silently};
use crate::check::stats::wilson95;
use crate::check::{CheckParams, check};
use crate::cli::{ShrinkArgs, ShrinkHow};
use crate::error::Error;
use crate::experiment::{Overrides, load};
use crate::model::{Dur, Experiment, Fault, Target};
use crate::report::read::{fault_rows, finished_trials, read_histories};
use crate::report::shrunk::{Confirm, Shrunk, Undisturbed};
use crate::sayln;
use crate::shrink::recorded::{anchor, recorded};
use crate::shrink::{Candidate, Element, Outcome, Probe, Settings, Violation, violations};
use crate::trial::trial_faults;

mod written;
use written::{readme, shrunk_yaml, timeline, write_result};

pub fn shrink(args: &ShrinkArgs) -> Result<(), Error> {
    // A shrink into --out only reads the run's directory.
    let how = if args.out.is_some() { super::owner::Use::Read } else { super::owner::Use::Write };
    let _held = super::owner::hold(&args.dir, how)?;
    let trial = match (&args.point, args.trial) {
        (Some(point), _) => first_in_point(&args.dir, point, &args.how)?,
        (None, Some(trial)) => trial,
        (None, None) => return Err(Error::Conflict("shrink: name --trial N or --point SETTING".into())),
    };
    let plan = prepare(&args.dir, trial, &args.how, args.jobs.map(|j| j as usize))?;
    if let Some(out) = &args.out {
        super::inputs::ensure_empty(out, "--out")?;
    }
    preflight(&plan.base)?;
    let out = match &args.out {
        Some(out) => {
            std::fs::create_dir_all(out).map_err(|source| Error::Io { path: out.clone(), source })?;
            out.clone()
        }
        None => new_dir(&args.dir.join("shrink"), &format!("trial-{trial}-"))?,
    };
    let ctx = Ctx::silent()?;
    let done = run_shrink(&plan, &out, &ctx)?;
    match done.confirmed {
        Some(_) => Ok(()),
        None => Err(Error::NotReproduced {
            what: format!(
                "trial {} of {}: its recorded schedule did not fail the same way ({}) in {} of {} runs",
                plan.trial,
                plan.dir.display(),
                plan.violation.name(),
                plan.settings.need,
                plan.settings.repeats
            ),
            dir: out,
        }),
    }
}

/// `run --shrink`: the first trial of a finished run that violated
/// something (the first the machine did not disturb, where there is one),
/// shrunk into DIR/shrink/, found among the metrics the run already
/// checked. Nothing to shrink is not an error.
pub(super) fn after_run(
    dir: &Path,
    exp: &Experiment,
    metrics: &[(u32, crate::check::TrialMetrics)],
    how: &ShrinkHow,
    ctx: &Ctx,
) -> Result<Option<Shrunk>, Error> {
    let wanted = options(how)?;
    let units = exp.units();
    let violating: Vec<(u32, bool)> = metrics
        .iter()
        .filter(|(t, m)| {
            let found = violations(units[exp.unit_of(units.len(), *t)].0, m);
            wanted.as_ref().map_or(!found.is_empty(), |v| found.contains(v))
        })
        .map(|(t, m)| (*t, m.disturbance.disturbed()))
        .collect();
    let Some(trial) = first_to_shrink(&violating) else {
        let what = wanted.map_or("anything".to_string(), |v| v.name());
        sayln!("shrink: no trial of {} violated {what}; nothing to shrink", exp.name);
        return Ok(None);
    };
    let plan = prepare(dir, trial, how, Some(exp.jobs))?;
    let out = new_dir(&dir.join("shrink"), &format!("trial-{trial}-"))?;
    run_shrink(&plan, &out, ctx).map(Some)
}

/// Of the trials that violated what is wanted (trial, disturbed), the one
/// to shrink: the first the machine left undisturbed, whose schedule is the
/// experiment's own, else the first.
fn first_to_shrink(violating: &[(u32, bool)]) -> Option<u32> {
    violating.iter().min_by_key(|&&(t, disturbed)| (disturbed, t)).map(|&(t, _)| t)
}

/// `shrink --point SETTING`: the trial of that sweep point to shrink,
/// chosen as `run --shrink` chooses among a run's trials.
fn first_in_point(dir: &Path, point: &str, how: &ShrinkHow) -> Result<u32, Error> {
    super::inputs::same_format(dir)?;
    let wanted = options(how)?;
    let exp = load(&dir.join("experiment.yaml"), &Overrides::default()).map_err(|e| Error::Experiments(vec![e]))?;
    let unit = super::inputs::unit_named(&exp, dir, point, &format!("--point {point}"))?;
    let base = exp.units()[unit].0;
    let checked = super::inputs::unit_metrics(dir, &exp, "shrink", unit)?;
    let violating: Vec<(u32, bool)> = checked
        .iter()
        .filter(|(_, m)| {
            let found = violations(base, m);
            wanted.as_ref().map_or(!found.is_empty(), |v| found.contains(v))
        })
        .map(|(t, m)| (*t, m.disturbance.disturbed()))
        .collect();
    first_to_shrink(&violating).ok_or_else(|| {
        Error::Conflict(format!(
            "--point {point}: none of its {} finished trials in {} violated {}: there is nothing to shrink",
            checked.len(),
            dir.display(),
            wanted.map_or("anything".to_string(), |v| v.name())
        ))
    })
}

/// Everything a shrink needs, checked before anything runs.
struct Plan {
    dir: PathBuf,
    trial: u32,
    /// The trial's experiment (its sweep point's), with no faults.
    base: Experiment,
    /// The trial's own seed: a candidate's first run uses it.
    seed: u64,
    violation: Violation,
    original: Vec<Element>,
    settings: Settings,
    confirm: u32,
}

/// The options, checked on their own (before a `run --shrink` starts).
pub(super) fn options(how: &ShrinkHow) -> Result<Option<Violation>, Error> {
    let (repeats, need, budget) = (how.repeats(), how.need(), how.budget());
    if need > repeats {
        return Err(Error::Conflict(format!("--need {need} is more than --repeats {repeats}")));
    }
    if budget < repeats {
        return Err(Error::Conflict(format!(
            "--budget {budget} cannot pay for one candidate's {repeats} runs (--repeats)"
        )));
    }
    how.violation
        .as_ref()
        .map(|name| {
            Violation::from_name(name)
                .ok_or_else(|| Error::Conflict(format!("--violation {name}: expected one of {}", Violation::names())))
        })
        .transpose()
}

fn prepare(dir: &Path, trial: u32, how: &ShrinkHow, jobs: Option<usize>) -> Result<Plan, Error> {
    super::inputs::same_format(dir)?;
    let wanted = options(how)?;
    let (repeats, need, budget) = (how.repeats(), how.need(), how.budget());
    let overrides = Overrides { jobs, ..Overrides::default() };
    let exp = load(&dir.join("experiment.yaml"), &overrides).map_err(|e| Error::Experiments(vec![e]))?;
    let finished = finished_trials(dir)?;
    if !finished.contains(&trial) {
        let last = finished.iter().next_back().map_or("none".to_string(), |t| t.to_string());
        return Err(Error::Path {
            path: dir.join("trials.csv"),
            problem: format!("--trial {trial}: no such finished trial (the last is {last})"),
        });
    }
    let units = exp.units();
    let unit = exp.unit_of(units.len(), trial);
    let mut base = units[unit].0.clone();
    base.points.clear();
    base.jobs = jobs.unwrap_or(exp.jobs);
    let seed = exp.seed_of(trial);
    let workers = super::inputs::most_workers(&exp);
    let history = read_histories(dir, Some(&[trial].into()), workers)?.remove(&trial).ok_or_else(|| Error::Path {
        path: dir.join("events.csv"),
        problem: format!("holds no events of trial {trial}"),
    })?;
    let judged = check(&history, &CheckParams::of(&base));
    if exp.window.is_some() && (trial > 1 || judged.cut) {
        return Err(Error::Conflict(format!(
            "--trial {trial}: a soak's trial after a stop (cut where its run stopped, or the rest of the soak \
             from there), which a shrink cannot replay alone; shrink a soak's first trial that ran whole"
        )));
    }
    let found = violations(&base, &judged);
    let violation = match wanted {
        None => found.first().cloned().ok_or_else(|| Error::Path {
            path: dir.to_path_buf(),
            problem: format!("trial {trial} violated nothing: there is nothing to shrink"),
        })?,
        Some(v) if found.contains(&v) => v,
        Some(v) => {
            let had: Vec<String> = found.iter().map(Violation::name).collect();
            return Err(Error::Conflict(format!(
                "--violation {}: trial {trial} did not violate that (it violated: {})",
                v.name(),
                if had.is_empty() { "nothing".into() } else { had.join(", ") }
            )));
        }
    };
    let drawn = trial_faults(&base, seed);
    let rows = fault_rows(dir, trial)?;
    let original = recorded(&drawn, &rows, &history, base.workers, base.duration)
        .into_iter()
        .map(|r| {
            // Anchored to the one worker it hit, by that worker's role then
            // (a fault that hit several, or the lock, has no anchor).
            let at = r.fault.at.as_us() as i64;
            let one = matches!(r.fault.target, Target::Leader | Target::Watcher | Target::Worker(_));
            let anchor = r.hit.filter(|_| one).and_then(|(w, led)| anchor(&history, w, at, led));
            Element { anchor: anchor.map(|(k, t)| (k, Dur::from_us(t.max(0) as u64))), fault: r.fault }
        })
        .collect();
    // Every candidate runs as the trial did: behind the proxy if it was,
    // whatever faults are left.
    base.substrate.proxy = base.proxied();
    base.faults = Vec::new();
    base.random = None;
    let s = base.time_scale;
    let settings = Settings {
        repeats,
        need,
        budget,
        grids: [Dur::from_secs(1), Dur::from_ms(100), Dur::from_ms(10)].map(|g| g.scaled(s)).to_vec(),
        arm_before: Dur::from_us(base.lease.renew.min(base.lease.watch).as_us() / 2),
        end: base.duration,
        scale: s,
    };
    Ok(Plan { dir: dir.to_path_buf(), trial, base, seed, violation, original, settings, confirm: how.confirm() })
}

/// A candidate: the base experiment with this schedule, `trials` runs whose
/// seeds start at `first_seed`.
fn candidate(plan: &Plan, faults: &[Fault], trials: u32, first_seed: u64, name: &str) -> Experiment {
    Experiment {
        name: name.to_string(),
        faults: faults.to_vec(),
        trials,
        until: None,
        seed: first_seed.wrapping_sub(1),
        // Its trials are the candidate's repeats, not one soak's windows.
        window: None,
        ..plan.base.clone()
    }
}

/// Runs each candidate into OUT/candidates/NNN and logs it to steps.csv.
struct Runs<'a> {
    plan: &'a Plan,
    out: &'a Path,
    ctx: &'a Ctx,
    steps: csv::Writer<std::fs::File>,
    /// The last schedule kept: what is left if the search is cut short.
    best: Option<Vec<Fault>>,
}

#[derive(serde::Serialize)]
struct StepRow<'a> {
    step: usize,
    phase: &'a str,
    change: &'a str,
    faults: usize,
    reproduced: u32,
    runs: u32,
    kept: bool,
    dir: String,
}

impl Probe for Runs<'_> {
    type Error = Error;

    fn run(&mut self, c: &Candidate<'_>) -> Result<u32, Error> {
        let rel = format!("candidates/{:03}", c.step);
        let exp = candidate(
            self.plan,
            c.faults,
            c.repeats,
            self.plan.seed,
            &format!("{}-{:03}", self.plan.base.name, c.step),
        );
        let hits = reproduced(&exp, &run_silently(&exp, &self.out.join(&rel), self.ctx)?, &self.plan.violation);
        let kept = hits >= self.plan.settings.need;
        if kept {
            self.best = Some(c.faults.to_vec());
        }
        sayln!(
            "  {:>3}  {:<14} {:<52} faults {:>2}  {hits}/{} {}",
            c.step,
            c.phase,
            c.change,
            c.faults.len(),
            c.repeats,
            if kept { "kept" } else { "" }
        );
        let row = StepRow {
            step: c.step,
            phase: c.phase,
            change: c.change,
            faults: c.faults.len(),
            reproduced: hits,
            runs: c.repeats,
            kept,
            dir: rel,
        };
        let io = |e: csv::Error| Error::Io { path: self.out.join("steps.csv"), source: e.into() };
        self.steps.serialize(row).map_err(io)?;
        self.steps.flush().map_err(|source| Error::Io { path: self.out.join("steps.csv"), source })?;
        Ok(hits)
    }
}

fn reproduced(exp: &Experiment, metrics: &[(u32, crate::check::TrialMetrics)], v: &Violation) -> u32 {
    metrics.iter().filter(|(_, m)| violations(exp, m).contains(v)).count() as u32
}

/// What a shrink found, as its README says it.
struct Found {
    outcome: Outcome,
    confirm: Confirm,
    seconds: f64,
}

/// Of the confirmation runs `metrics`, those the machine did not disturb,
/// and how many of them reproduced `v`.
fn undisturbed(exp: &Experiment, metrics: &[(u32, crate::check::TrialMetrics)], v: &Violation) -> Undisturbed {
    let clean: Vec<_> = metrics.iter().filter(|(_, m)| !m.disturbance.disturbed()).cloned().collect();
    Undisturbed { hits: reproduced(exp, &clean, v), runs: clean.len() as u32 }
}

fn run_shrink(plan: &Plan, out: &Path, ctx: &Ctx) -> Result<Shrunk, Error> {
    let began = Instant::now();
    let io = |p: PathBuf| move |source| Error::Io { path: p, source };
    sayln!(
        "shrink: {} trial {} ({}; {} faults recorded) → {}",
        plan.base.name,
        plan.trial,
        plan.violation.name(),
        plan.original.len(),
        out.display()
    );
    let steps = csv::Writer::from_path(out.join("steps.csv"))
        .map_err(|e| Error::Io { path: out.join("steps.csv"), source: e.into() })?;
    let mut runs = Runs { plan, out, ctx, steps, best: None };
    let outcome = match crate::shrink::shrink(plan.original.clone(), &plan.settings, &mut runs) {
        Ok(o) => o,
        Err(e) => {
            // Cut short (an interrupt, a broken trial): what was kept so
            // far is still a result, unconfirmed.
            if let Some(best) = &runs.best {
                let exp = candidate(
                    plan,
                    best,
                    plan.confirm,
                    plan.seed.wrapping_add(u64::from(plan.settings.repeats)),
                    &format!("{}-shrunk", plan.base.name),
                );
                let note = format!(
                    "# Shrink: {}, trial {} (cut short)\n\nThe search stopped early ({e}). `shrunk.yaml` holds the \
                     smallest schedule kept so far ({} of the {} recorded faults), unconfirmed; `steps.csv` lists \
                     every candidate that finished.\n",
                    plan.base.name,
                    plan.trial,
                    best.len(),
                    plan.original.len()
                );
                let _ =
                    std::fs::write(out.join("shrunk.yaml"), shrunk_yaml(plan, &exp, out, best.len(), Confirm::Pending));
                let _ = std::fs::write(out.join("README.md"), note);
            }
            return Err(e);
        }
    };
    let mut found = Found {
        confirm: if outcome.reproduced { Confirm::Pending } else { Confirm::Nothing },
        outcome,
        seconds: began.elapsed().as_secs_f64(),
    };
    if found.outcome.reproduced {
        // Fresh seeds, after those the search used.
        let first = plan.seed.wrapping_add(u64::from(plan.settings.repeats));
        let name = format!("{}-shrunk", plan.base.name);
        let exp = candidate(plan, &found.outcome.shrunk, plan.confirm, first, &name);
        // On disk before the confirmation, which may be cut short.
        write_result(plan, out, &exp, &found)?;
        let metrics = run_silently(&exp, &out.join("confirm"), ctx)?;
        let hits = reproduced(&exp, &metrics, &plan.violation);
        let example = metrics.iter().find(|(_, m)| violations(&exp, m).contains(&plan.violation)).map(|(t, _)| *t);
        let clean = undisturbed(&exp, &metrics, &plan.violation);
        found.confirm = Confirm::Done(hits, plan.confirm, example, clean);
        found.seconds = began.elapsed().as_secs_f64();
        write_result(plan, out, &exp, &found)?;
        if let Some(t) = example {
            timeline(plan, &exp, &out.join("confirm"), t, &out.join("timeline.svg"));
        }
    } else {
        std::fs::write(out.join("README.md"), readme(plan, &found)).map_err(io(out.join("README.md")))?;
    }
    let o = &found.outcome;
    match found.confirm {
        Confirm::Done(k, n, _, clean) => {
            let (lo, hi) = wilson95(k as usize, n as usize);
            sayln!(
                "shrink: faults {} → {}; reproduced {k}/{n} ({:.0}–{:.0} %{}); {} trials in {} candidates + {n} to confirm, {:.0} s{}",
                plan.original.len(),
                o.shrunk.len(),
                lo * 100.0,
                hi * 100.0,
                clean.words(n),
                o.spent,
                o.steps.len(),
                found.seconds,
                if o.out_of_budget { " (the budget ran out first)" } else { "" }
            );
            sayln!("  shrunk.yaml: {}", out.join("shrunk.yaml").display());
        }
        _ => sayln!("shrink: the recorded schedule did not reproduce; nothing was shrunk"),
    }
    Ok(Shrunk {
        dir: out.to_path_buf(),
        trial: plan.trial,
        violation: plan.violation.name(),
        recorded: plan.original.len(),
        left: o.shrunk.len(),
        confirmed: match found.confirm {
            Confirm::Done(k, n, _, _) => Some((k, n)),
            _ => None,
        },
        undisturbed: match found.confirm {
            Confirm::Done(_, _, _, clean) => Some((clean.hits, clean.runs)),
            _ => None,
        },
        spent: o.spent,
        candidates: o.steps.len(),
        seconds: found.seconds,
        out_of_budget: o.out_of_budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_undisturbed_violation_is_shrunk_else_the_first() {
        assert_eq!(first_to_shrink(&[(2, true), (5, false), (3, false)]), Some(3));
        assert_eq!(first_to_shrink(&[(4, true), (2, true)]), Some(2));
        assert_eq!(first_to_shrink(&[]), None);
    }
}
