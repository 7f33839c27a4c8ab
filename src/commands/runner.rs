//! One experiment's trials into a results directory: what `run` does for
//! each experiment it loaded, and what `shrink` does for each candidate.
//! Each trial is checked as it finishes and written (with a fresh summary)
//! before the next starts; signals stop the trials after their clean-up.

use crate::check::adaptive::{self, Headline};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::inputs::demand;
use super::progress::Progress;
use crate::check::TrialMetrics;
use crate::error::{Error, exit};
use crate::experiment::to_yaml;
use crate::model::Experiment;
use crate::model::clock::wall_ns;
use crate::model::history::History;
use crate::report::csv::{ResultsWriter, Tables, TrialData};
use crate::report::host::RunFacts;
use crate::report::spool::{EventSpool, Spooling};
use crate::report::summary::{Summary, per_unit, summarize};
use crate::report::{host, terminal, timeline};
use crate::trial::{TrialError, TrialRecord, run_trial_within_limit};
use crate::{say, warnln};

/// Every lease server the experiments (and their sweep points) use answers,
/// checked before anything is spawned or written.
pub(super) fn servers_ready(exps: &[Experiment]) -> Result<(), Error> {
    let mut checked = std::collections::BTreeSet::new();
    for exp in exps {
        for (unit, _) in exp.units() {
            let s = &unit.substrate;
            if let Some(server) = s.managed_server() {
                if checked.insert((format!("managed {server:?}"), String::new()))
                    && let Err(problem) = crate::trial::server_installed(server)
                {
                    return Err(Error::Missing { experiment: exp.source.clone(), problem: problem.to_string() });
                }
            } else if let Some(address) = s.address()
                && checked.insert((
                    // What the check depends on: the lease's TTL (etcd), push (Redis).
                    format!(
                        "{} {:?} {:?}",
                        crate::model::setting_name(&s.kind),
                        unit.lease.lease,
                        unit.worker.watch_by
                    ),
                    address.clone(),
                ))
            {
                crate::substrate::preflight(unit, &address)
                    .map_err(|e| Error::Missing { experiment: exp.source.clone(), problem: e.to_string() })?;
            }
        }
    }
    Ok(())
}

fn unit_refs<'a>(units: &[(&'a Experiment, String)]) -> Vec<&'a Experiment> {
    units.iter().map(|(u, _)| *u).collect()
}

/// Ctrl-C, SIGTERM, SIGHUP: stop after cleaning up the current trial(s).
/// A second one exits at once; PR_SET_PDEATHSIG still kills the workers.
/// `signalled` is set by signals only (it arms the second-signal exit and
/// means exit 130); `stop` is also set by internal errors.
pub(super) fn install_signal_flags() -> StopFlags {
    let signalled = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let _ =
            signal_hook::flag::register_conditional_shutdown(sig, i32::from(exit::INTERRUPTED), Arc::clone(&signalled));
        let _ = signal_hook::flag::register(sig, Arc::clone(&signalled));
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    StopFlags { signalled, stop }
}

/// Why trials stop early: `stop` for any reason, `signalled` only for a
/// signal (exit 130 rather than 3).
pub(super) struct StopFlags {
    pub(super) signalled: Arc<AtomicBool>,
    pub(super) stop: Arc<AtomicBool>,
}

pub(super) struct Outcome {
    pub(super) result: Result<(), Error>,
    /// How the experiment's `expect:` failed, if it did.
    pub(super) failed: Vec<String>,
    /// Each `expect:` key and how it fared.
    pub(super) checks: Vec<crate::report::summary::ExpectCheck>,
    /// Wall time the experiment took, seconds.
    pub(super) seconds: f64,
    /// What stopped it (and the suite), other than a failed expectation.
    pub(super) broke: Option<String>,
    pub(super) summary: Summary,
    pub(super) metrics: Vec<(u32, TrialMetrics)>,
    pub(super) dir: PathBuf,
}

/// What every experiment of one `leasequake run` shares.
pub(super) struct Ctx {
    /// The executable that runs `leasequake worker`.
    pub(super) exe: PathBuf,
    pub(super) flags: StopFlags,
    /// For host.json: a suite's, written at the end, still says when the
    /// run began.
    pub(super) facts: RunFacts,
    pub(super) quiet: bool,
    /// No progress, no summary, no verdict: runs another command makes of
    /// its own (a shrink's candidates), which it reports itself.
    pub(super) silent: bool,
}

impl Ctx {
    /// For runs another command makes: silent, signals ours from here.
    pub(super) fn silent() -> Result<Ctx, Error> {
        let exe = std::env::current_exe().map_err(|source| Error::Io { path: "leasequake".into(), source })?;
        let facts = super::facts::run_facts(None, None);
        Ok(Ctx { exe, flags: install_signal_flags(), facts, quiet: true, silent: true })
    }

    /// The same run's context, for a command it goes on to (`--shrink`).
    pub(super) fn quietened(&self) -> Ctx {
        Ctx {
            exe: self.exe.clone(),
            flags: StopFlags { signalled: Arc::clone(&self.flags.signalled), stop: Arc::clone(&self.flags.stop) },
            facts: RunFacts {
                started_ns: wall_ns(),
                calibration: None,
                calibration_loaded: None,
                ..self.facts.clone()
            },
            quiet: true,
            silent: true,
        }
    }
}

/// Run `exp` into the new directory `dir` without a word: every trial
/// written there as a run writes it; each trial's number and metrics.
pub(super) fn run_silently(exp: &Experiment, dir: &Path, ctx: &Ctx) -> Result<Vec<(u32, TrialMetrics)>, Error> {
    let outcome = run_experiment(exp, dir, false, ctx, None, None);
    outcome.result.map(|()| outcome.metrics)
}

/// What a run checks before anything is spawned: the limits raised, the
/// servers there.
pub(super) fn preflight(exp: &Experiment) -> Result<(), Error> {
    crate::trial::ensure_limits(&demand(exp))
        .map_err(|source| Error::Limits { experiment: exp.source.clone(), source })?;
    servers_ready(std::slice::from_ref(exp))
}

pub(super) fn run_experiment(
    exp: &Experiment,
    dir: &Path,
    link_latest: bool,
    ctx: &Ctx,
    done: Option<Done>,
    shard: Option<host::ShardRecord>,
) -> Outcome {
    let began = std::time::Instant::now();
    let failed = |e: Error| Outcome {
        result: Err(e),
        failed: Vec::new(),
        checks: Vec::new(),
        seconds: began.elapsed().as_secs_f64(),
        broke: None,
        summary: summarize(&[]),
        metrics: Vec::new(),
        dir: dir.to_path_buf(),
    };
    let resuming = done.is_some();
    let done = done.unwrap_or_default();
    let writer = match open_writer(exp, dir, link_latest, ctx, &done, resuming, shard) {
        Ok(w) => w,
        Err(e) => return failed(e),
    };
    let mut sink = Sink { writer, dir: dir.to_path_buf(), metrics: done, error: None };
    if resuming && let Err(e) = record_stopped(exp, &mut sink, ctx) {
        return failed(e);
    }
    let plan = TrialPlan::new(exp, &sink.metrics, shard);
    if !ctx.quiet {
        let what =
            if resuming { format!("{} missing of {}", plan.todo.len(), plan.total) } else { plan.total.to_string() };
        warnln!("leasequake: {what} trials of {} → {}", exp.name, dir.display());
        for w in super::plan::warnings(exp) {
            warnln!("leasequake: {}: {w}", exp.name);
        }
    }
    let progress = Progress::new(exp, plan.total, plan.todo.len(), ctx.quiet);
    // The servers the harness runs live for this experiment's run.
    let servers = match crate::trial::Servers::start(&unit_refs(&plan.units), dir, exp.jobs) {
        Ok(s) => Arc::new(s),
        Err(e) => return failed(Error::Server { experiment: exp.source.clone(), source: e }),
    };
    let sink = Mutex::new(sink);
    {
        let sink = sink.lock().unwrap_or_else(|p| p.into_inner());
        for unit in 0..plan.units.len() {
            plan.settle(exp, &sink.metrics, unit);
        }
    }
    run_trials(exp, dir, ctx, &plan, &sink, &servers, &progress);
    progress.finish();
    let sink = sink.into_inner().unwrap_or_else(|p| p.into_inner());
    conclude(exp, dir, ctx, &plan, sink, began)
}

/// The trial a stopped run of a soak kept in windows was in, kept up to
/// its last whole window (or whole) and written as a finished trial.
fn record_stopped(exp: &Experiment, sink: &mut Sink, ctx: &Ctx) -> Result<(), Error> {
    let Some(kept) = super::window::keep_stopped(exp, &sink.dir, &sink.metrics)? else { return Ok(()) };
    let (trial, cut) = (kept.record.trial, kept.metrics.cut);
    let end = crate::model::Dur::from_us(kept.metrics.end_us.max(0) as u64);
    sink.record(exp, &exp.units(), 0, (kept.record, &kept.events, &kept.drawn), kept.metrics)?;
    let _ = std::fs::remove_file(&kept.events);
    if !ctx.quiet {
        let how = if cut { format!("kept up to {end}, its last whole window") } else { "kept whole".into() };
        warnln!("leasequake: trial {trial} of {}, stopped, {how}", exp.name);
    }
    Ok(())
}

/// The results directory made ready (or a resumed one reopened) and its
/// writer.
fn open_writer(
    exp: &Experiment,
    dir: &Path,
    link_latest: bool,
    ctx: &Ctx,
    done: &Done,
    resuming: bool,
    shard: Option<host::ShardRecord>,
) -> Result<ResultsWriter, Error> {
    if resuming {
        let completed = done.iter().map(|(t, _, _)| *t).collect();
        return Ok(ResultsWriter::resume(dir, exp, &completed)?);
    }
    prepare_dir(exp, dir, link_latest, ctx, shard)?;
    Ok(ResultsWriter::create(dir, exp, Tables::All)?)
}

/// Which trials a run of an experiment runs, in what order, and when a
/// unit stops. A plain experiment is one unit; a sweep has one unit per
/// point. Trial numbers are unique across the run; point p's trials share
/// seeds with every other point's (common random numbers: only the
/// settings differ).
struct TrialPlan<'e> {
    units: Vec<(&'e Experiment, String)>,
    trials_per_unit: u32,
    total: u32,
    /// Trial indices (0-based) still to run, in order: all, or those a
    /// resume lacks, of this shard's.
    todo: Vec<u32>,
    /// `trials: {until: …}`: a unit whose headline rate is known well
    /// enough starts no more trials (those already running finish and are
    /// kept).
    unit_done: Vec<AtomicBool>,
    /// A soak kept in windows: its trials are its stretches, one after
    /// another (each a resume after a stop).
    windowed: bool,
    /// What the soak's next trial runs once its first was cut: the rest
    /// of it.
    rest: Option<Experiment>,
}

impl<'e> TrialPlan<'e> {
    fn new(exp: &'e Experiment, done: &Done, shard: Option<host::ShardRecord>) -> TrialPlan<'e> {
        let units = exp.units();
        let unit_done = (0..units.len()).map(|_| AtomicBool::new(false)).collect();
        if exp.window.is_some() {
            let next = super::window::rest(done);
            let todo: Vec<u32> = next.iter().map(|(trial, _)| trial - 1).collect();
            let total = done.len() as u32 + todo.len() as u32;
            let rest = next
                .filter(|(_, start)| *start > crate::model::Dur::ZERO)
                .map(|(_, start)| super::window::rest_of_soak(exp, start));
            return TrialPlan { units, trials_per_unit: 1, total, todo, unit_done, windowed: true, rest };
        }
        let total = units.len() as u32 * exp.trials;
        let finished: std::collections::HashSet<u32> = done.iter().map(|(t, _, _)| *t).collect();
        let todo = (0..total)
            .filter(|i| !finished.contains(&(i + 1)) && shard.is_none_or(|s| s.owns(u64::from(*i))))
            .collect();
        TrialPlan { units, trials_per_unit: exp.trials, total, todo, unit_done, windowed: false, rest: None }
    }

    /// Trial `index`'s (0-based) unit and its number within the unit.
    fn place(&self, index: u32) -> (usize, u32) {
        if self.windowed {
            return (0, index + 1);
        }
        ((index / self.trials_per_unit) as usize, index % self.trials_per_unit + 1)
    }

    /// Mark `unit` done once its `until` is met over `metrics`.
    fn settle(&self, exp: &Experiment, metrics: &[(u32, usize, TrialMetrics)], unit: usize) {
        if let Some(until) = &exp.until {
            let mine: Vec<&TrialMetrics> = metrics.iter().filter(|(_, u, _)| *u == unit).map(|(_, _, m)| m).collect();
            let counts = summarize(&mine).counts();
            let headline = Headline::of(self.units[unit].0, &counts);
            if adaptive::settled(until, counts.trials, &headline).1 {
                self.unit_done[unit].store(true, Ordering::SeqCst);
            }
        }
    }

    /// Points with every trial in.
    fn points_full(&self, metrics: &[(u32, usize, TrialMetrics)]) -> usize {
        (0..self.units.len())
            .filter(|u| metrics.iter().filter(|(_, m, _)| m == u).count() as u32 >= self.trials_per_unit)
            .count()
    }
}

/// The plan's trials, `exp.jobs` at once, each checked and written as it
/// finishes; the first error stops the rest.
fn run_trials(
    exp: &Experiment,
    dir: &Path,
    ctx: &Ctx,
    plan: &TrialPlan<'_>,
    sink: &Mutex<Sink>,
    servers: &Arc<crate::trial::Servers>,
    progress: &Progress,
) {
    let stop: &Arc<AtomicBool> = &ctx.flags.stop;
    let next = AtomicU32::new(0);
    let trials_dir = dir.join("trials");
    let worker_loop = || {
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Some(&index) = plan.todo.get(next.fetch_add(1, Ordering::SeqCst) as usize) else { return };
            let (unit, _) = plan.place(index);
            if plan.unit_done[unit].load(Ordering::SeqCst) {
                progress.bar.inc(1);
                continue;
            }
            let trial = index + 1;
            let (unit_exp, label) = &plan.units[unit];
            let unit_exp = plan.rest.as_ref().unwrap_or(unit_exp);
            let trial_dir = trials_dir.join(format!("{trial:04}"));
            let events = trial_dir.join("events.csv");
            let spool = match Spooling::start(EventSpool::new(events.clone(), trial)) {
                Ok(spool) => spool,
                Err(source) => {
                    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                    sink.error.get_or_insert(Error::Thread { what: "a trial's events writer", source });
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            };
            let seeded = (trial, exp.seed_of(trial));
            let (result, spool) = run_trial_within_limit(unit_exp, seeded, &trial_dir, &ctx.exe, stop, servers, spool);
            // Every event handed over written and the late ones merged in,
            // whatever became of the trial: a failed one's file is whole too.
            let closed = spool.map(|s| s.finish().and_then(EventSpool::close));
            match result {
                Ok(record) => {
                    // Judged from what is on disk: the very history a
                    // reader of the results gets.
                    let judged = match closed {
                        Some(Ok(Some(events))) => super::inputs::judge_trial(&events, exp, trial, true)
                            .map(|(metrics, drawn)| (events, metrics, drawn)),
                        Some(Err(e)) => Err(Error::Trial { trial, source: TrialError::Events(e) }),
                        Some(Ok(None)) | None => Err(Error::Path {
                            path: events.clone(),
                            problem: format!("trial {trial} recorded no event"),
                        }),
                    };
                    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                    let (events, metrics, drawn) = match judged {
                        Ok(judged) => judged,
                        Err(e) => {
                            sink.error.get_or_insert(e);
                            stop.store(true, Ordering::SeqCst);
                            return;
                        }
                    };
                    let outcome = metrics.outcome();
                    match sink.record(exp, &plan.units, unit, (record, &events, &drawn), metrics) {
                        // Its rows are in events.csv now.
                        Ok(()) => {
                            let _ = std::fs::remove_file(&events);
                        }
                        Err(e) => {
                            sink.error.get_or_insert(e);
                            stop.store(true, Ordering::SeqCst);
                        }
                    }
                    plan.settle(exp, &sink.metrics, unit);
                    let n = plan.units.len();
                    progress.finished_one(if n > 1 {
                        format!("{}/{n} points; {label}: {outcome}", plan.points_full(&sink.metrics))
                    } else {
                        outcome.to_string()
                    });
                }
                Err(TrialError::Interrupted) => return,
                Err(source) => {
                    // A writer's failure is the trial's error already.
                    if let (Some(Err(e)), false) = (closed, matches!(source, TrialError::Events(_))) {
                        warnln!("warning: trial {trial}: {e}");
                    }
                    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                    sink.error.get_or_insert(Error::Trial { trial, source });
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    };
    if exp.jobs == 1 {
        worker_loop();
        return;
    }
    // Each trial's workers die with the thread that spawned them
    // (PR_SET_PDEATHSIG is per thread): the thread lives until reaped.
    std::thread::scope(|s| {
        for started in 0..exp.jobs {
            if let Err(source) = std::thread::Builder::new().spawn_scoped(s, worker_loop) {
                // Those already started carry the run; with none, stop.
                if started == 0 {
                    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                    sink.error.get_or_insert(Error::Thread { what: "a trial runner", source });
                } else {
                    warnln!("warning: {started} of {} trials at once: {source}", exp.jobs);
                }
                break;
            }
        }
    });
}

/// After the last trial: the tables closed, the terminal's summary, a
/// sweep's plots, the expectations judged once, the report page.
fn conclude(
    exp: &Experiment,
    dir: &Path,
    ctx: &Ctx,
    plan: &TrialPlan<'_>,
    mut sink: Sink,
    began: std::time::Instant,
) -> Outcome {
    if let Err(e) = sink.writer.finish() {
        sink.error.get_or_insert(e.into());
    }
    let all: Vec<&TrialMetrics> = sink.metrics.iter().map(|(_, _, m)| m).collect();
    let summary = summarize(&all);
    if !ctx.silent {
        say!("{}", terminal::render(exp, &summary, dir));
    }
    if !exp.points.is_empty() {
        // Drawn from the CSVs just written, exactly as `leasequake plot` would.
        if let Err(e) = crate::report::plots::draw(dir, &exp.name) {
            warnln!("warning: plots in {}: {e}", dir.display());
        }
        if !ctx.silent {
            say!("{}", terminal::points(&per_unit(&plan.units, &sink.metrics)));
        }
    }
    if let Some(until) = &exp.until
        && !ctx.silent
    {
        for row in per_unit(&plan.units, &sink.metrics) {
            say!("{}", terminal::adaptive(&row, until, exp.trials));
        }
    }
    let by_trial: Vec<(u32, &TrialMetrics)> = sink.metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let parts = terminal::decomposition(&by_trial, exp.time_scale);
    if !parts.is_empty() && !ctx.silent {
        say!("  decomposition:\n{parts}");
    }
    let done = all.len();
    let checks = crate::report::thresholds::checks(exp, &by_trial);
    let result = if let Some(e) = sink.error {
        Err(e)
    } else if ctx.flags.signalled.load(Ordering::SeqCst) {
        Err(Error::Interrupted { done, total: plan.total, dir: dir.to_path_buf() })
    } else if ctx.silent {
        Ok(())
    } else {
        super::inputs::said_verdict(exp, &checks)
    };
    let failed: Vec<String> = checks.iter().flat_map(|c| c.failures.iter().cloned()).collect();
    // Derived output: a report that cannot be written loses no result.
    if let Err(e) = super::report::experiment(dir, exp, &sink.metrics, &failed) {
        warnln!("warning: {e}");
    }
    let metrics = sink.metrics.into_iter().map(|(t, _, m)| (t, m)).collect();
    let seconds = began.elapsed().as_secs_f64();
    Outcome { result, failed, checks, seconds, broke: None, summary, metrics, dir: dir.to_path_buf() }
}

pub(super) fn flags_signalled(ctx: &Ctx) -> bool {
    ctx.flags.signalled.load(Ordering::SeqCst)
}

/// The trials a resumed run already has: (trial, unit, metrics).
pub(super) type Done = Vec<(u32, usize, TrialMetrics)>;

struct Sink {
    writer: ResultsWriter,
    dir: PathBuf,
    /// (trial, unit, metrics) of every finished trial.
    metrics: Vec<(u32, usize, TrialMetrics)>,
    error: Option<Error>,
}

impl Sink {
    /// Write the trial (its record, its events file, what its timeline
    /// draws) and a fresh summary before anything else happens.
    fn record(
        &mut self,
        run: &Experiment,
        units: &[(&Experiment, String)],
        unit: usize,
        (r, events, drawn): (TrialRecord, &Path, &History),
        metrics: TrialMetrics,
    ) -> Result<(), Error> {
        let (exp, label) = &units[unit];
        let trial = TrialData {
            trial: r.trial,
            seed: r.seed,
            events: Some(events),
            faults: &r.deliveries,
            metrics: &metrics,
            outcomes: &r.outcomes.join("; "),
        };
        self.writer.append(run, (exp, &exp.setting_label(label)), trial)?;
        if r.trial == 1 {
            timeline::trial_one(&self.dir, exp, drawn, &metrics);
        }
        self.metrics.push((r.trial, unit, metrics));
        let rows = per_unit(units, &self.metrics);
        Ok(self.writer.write_summary(run, &rows)?)
    }
}

/// Create the results directory, write experiment.yaml and host.json, and
/// (for default locations) point `<root>/<name>/latest` at it.
fn prepare_dir(
    exp: &Experiment,
    dir: &Path,
    link_latest: bool,
    ctx: &Ctx,
    shard: Option<host::ShardRecord>,
) -> Result<(), Error> {
    let io = Error::io;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::write(dir.join("experiment.yaml"), to_yaml(exp)).map_err(io(dir))?;
    let record = host::Host {
        shard,
        ..host::describe(exp, super::facts::experiment_hash(exp), super::facts::machine(), &ctx.facts)
    };
    std::fs::write(dir.join("host.json"), host::to_json(&record)).map_err(io(dir))?;
    if link_latest && let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        // Replace the link atomically: a new link under a temp name, renamed.
        // The name is this process's own: two runs at once into one root
        // would otherwise remove or rename each other's.
        let tmp = parent.join(format!(".latest.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(name, &tmp).map_err(io(&tmp))?;
        std::fs::rename(&tmp, parent.join("latest")).map_err(io(parent))?;
    }
    Ok(())
}
