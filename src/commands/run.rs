//! `leasequake run`: load every experiment (all errors before anything runs)
//! → for each: prepare its results directory → trials (each written and
//! flushed as it finishes) → summary → expectations. A directory of
//! experiments run into `--out` also gets a side-by-side README.md.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};

use super::inputs::expand;
use crate::check::{CheckParams, TrialMetrics, check};
use crate::cli::RunArgs;
use crate::error::exit;
use crate::experiment::{Overrides, load, to_yaml};
use crate::model::Experiment;
use crate::model::calibration::Quick;
use crate::model::clock::{utc_stamp, wall_ns};
use crate::report::compare::{Measured, markdown, points_markdown};
use crate::report::csv::{ResultsWriter, Tables};
use crate::report::summary::{Summary, per_unit, summarize, unit_of, units};
use crate::report::{host, terminal, timeline};
use crate::trial::{TrialError, TrialRecord, run_trial};

pub fn run(args: &RunArgs) -> u8 {
    let overrides = Overrides {
        time_scale: args.time_scale,
        trials: args.trials,
        seed: args.seed,
        jobs: args.jobs.map(|j| j as usize),
    };
    let started_ns = wall_ns();
    if let Some(dir) = &args.resume {
        return resume(dir, args);
    }
    let files = match expand(&args.paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    // Every file is checked before anything is spawned or written.
    let mut exps = Vec::new();
    let mut bad = false;
    for f in &files {
        match load(f, &overrides) {
            Ok(e) => exps.push(e),
            Err(e) => {
                eprintln!("error: {e}");
                bad = true;
            }
        }
    }
    if bad {
        return exit::BAD_INPUT;
    }
    let suite = files.len() > 1 || args.paths.iter().any(|p| p.is_dir());
    if suite && let Some(dup) = duplicate_name(&exps) {
        eprintln!("error: two experiments are named {dup:?}; names must be unique to share an output directory");
        return exit::BAD_INPUT;
    }
    if let Some(out) = &args.out {
        if out.exists() && !out.is_dir() {
            eprintln!("error: --out {}: exists and is not a directory", out.display());
            return exit::BAD_INPUT;
        }
        if out.read_dir().is_ok_and(|mut d| d.next().is_some()) {
            eprintln!("error: --out {}: directory exists and is not empty; refusing to mix two runs", out.display());
            return exit::BAD_INPUT;
        }
    }
    for exp in &exps {
        let most = units(exp).iter().map(|(u, _)| u.workers).max().unwrap_or(exp.workers);
        if let Err(e) = crate::trial::limits::ensure(most, exp.jobs) {
            eprintln!("error: {}: {e}", exp.source.display());
            return exit::HARNESS;
        }
    }
    if let Err(e) = servers_ready(&exps) {
        eprintln!("error: {e}");
        return exit::HARNESS;
    }
    let Some(exe) = worker_exe() else { return exit::HARNESS };
    let calibration = if args.no_calibrate { None } else { crate::calibrate::measure_quick() };
    let ctx = Ctx { exe, flags: install_signal_flags(), started_ns, calibration, quiet: args.quiet };

    let mut done = Vec::new();
    let mut code = exit::OK;
    for exp in &exps {
        let dir = match (&args.out, suite) {
            (Some(out), true) => out.join(&exp.name),
            (Some(out), false) => out.clone(),
            (None, _) => default_dir(&args.results_root, &exp.name),
        };
        let outcome = run_experiment(exp, &dir, args.out.is_none(), &ctx, None);
        code = worse(code, outcome.code);
        let stopped = matches!(outcome.code, exit::INTERRUPTED | exit::HARNESS);
        done.push((exp, outcome));
        if stopped {
            break;
        }
        if suite {
            println!();
        }
    }
    if let (Some(out), true) = (&args.out, suite)
        && let Err(e) = write_suite_readme(out, &args.paths, &done, &ctx)
    {
        eprintln!("error: {}: {e}", out.display());
        code = worse(code, exit::HARNESS);
    }
    code
}

/// Every lease server the experiments (and their sweep points) use answers,
/// checked before anything is spawned or written.
fn servers_ready(exps: &[Experiment]) -> Result<(), String> {
    let mut checked = std::collections::BTreeSet::new();
    for exp in exps {
        for (unit, _) in units(exp) {
            let s = &unit.substrate;
            if s.managed {
                if !checked.insert(("managed".to_string(), String::new())) {
                    continue;
                }
                let found = std::process::Command::new("redis-server")
                    .arg("--version")
                    .stdout(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|st| st.success());
                if !found {
                    return Err(format!(
                        "{}: a managed Redis needs `redis-server` on PATH (`apt-get install redis-server`)",
                        exp.source.display()
                    ));
                }
            } else if let Some(address) = s.address()
                && checked.insert((crate::model::setting_name(&s.kind), address.clone()))
            {
                crate::substrate::preflight(s.kind, &address).map_err(|e| format!("{}: {e}", exp.source.display()))?;
            }
        }
    }
    Ok(())
}

/// The executable that runs `leasequake worker`: this one.
fn worker_exe() -> Option<PathBuf> {
    std::env::current_exe()
        .map_err(|e| eprintln!("error: cannot find the leasequake executable to spawn workers: {e}"))
        .ok()
}

/// Severity order of exit codes: interrupted > harness > expect > ok.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::OK => 0,
        exit::EXPECT_FAILED => 1,
        exit::BAD_INPUT => 2,
        exit::HARNESS => 3,
        _ => 4,
    };
    if rank(b) > rank(a) { b } else { a }
}

fn duplicate_name(exps: &[Experiment]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    exps.iter().find(|e| !seen.insert(e.name.as_str())).map(|e| e.name.clone())
}

/// `results/<name>/<UTC timestamp>`, never reusing a directory: it is
/// created here, and a name another run took first is skipped.
fn default_dir(root: &Path, name: &str) -> PathBuf {
    let parent = root.join(name);
    let stamp = utc_stamp(wall_ns() / 1_000_000_000);
    let _ = std::fs::create_dir_all(&parent);
    let mut dir = parent.join(&stamp);
    let mut n = 2;
    while let Err(e) = std::fs::create_dir(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists || n > 1000 {
            break; // prepare_dir reports the real error
        }
        dir = parent.join(format!("{stamp}-{n}"));
        n += 1;
    }
    dir
}

/// Ctrl-C, SIGTERM, SIGHUP: stop after cleaning up the current trial(s).
/// A second one exits at once; PR_SET_PDEATHSIG still kills the workers.
/// `signalled` is set by signals only (it arms the second-signal exit and
/// means exit 130); `stop` is also set by internal errors.
fn install_signal_flags() -> StopFlags {
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
struct StopFlags {
    signalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

struct Outcome {
    code: u8,
    summary: Summary,
    metrics: Vec<(u32, TrialMetrics)>,
    dir: PathBuf,
}

/// What every experiment of one `leasequake run` shares.
struct Ctx {
    /// The executable that runs `leasequake worker`.
    exe: PathBuf,
    flags: StopFlags,
    /// When the run began (wall clock): a suite's host.json, written at the
    /// end, still says when the run began.
    started_ns: i64,
    calibration: Option<Quick>,
    quiet: bool,
}

fn run_experiment(exp: &Experiment, dir: &Path, link_latest: bool, ctx: &Ctx, done: Option<Done>) -> Outcome {
    let (exe, flags, quiet) = (&ctx.exe, &ctx.flags, ctx.quiet);
    let failed = |code: u8, message: String| {
        eprintln!("error: {message}");
        Outcome { code, summary: summarize(&[]), metrics: Vec::new(), dir: dir.to_path_buf() }
    };
    let resuming = done.is_some();
    let done = done.unwrap_or_default();
    if !resuming && let Err(e) = prepare_dir(exp, dir, link_latest, ctx) {
        return failed(exit::HARNESS, e);
    }
    let writer = if resuming {
        let completed = done.iter().map(|(t, _, _)| *t).collect();
        ResultsWriter::resume(dir, &completed)
    } else {
        ResultsWriter::create(dir, Tables::All)
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => return failed(exit::HARNESS, e.to_string()),
    };
    // A plain experiment is one unit; a sweep has one unit per point. Trial
    // numbers are unique across the run; point p's trials share seeds with
    // every other point's (common random numbers: only the settings differ).
    let units = units(exp);
    let trials_per_unit = exp.trials;
    let total = units.len() as u32 * trials_per_unit;
    // Trial indices (0-based) still to run: all, or those a resume lacks.
    let finished: std::collections::HashSet<u32> = done.iter().map(|(t, _, _)| *t).collect();
    let todo: Vec<u32> = (0..total).filter(|i| !finished.contains(&(i + 1))).collect();
    if !quiet {
        let what = if resuming { format!("{} missing of {total}", todo.len()) } else { total.to_string() };
        eprintln!("leasequake: {what} trials of {} → {}", exp.name, dir.display());
    }
    let progress = if quiet { ProgressBar::hidden() } else { ProgressBar::new(u64::from(total)) };
    progress.set_position(u64::from(total) - todo.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} trials, {elapsed} (ETA {eta}) {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    progress.set_prefix(exp.name.clone());

    let stop: &AtomicBool = &flags.stop;
    let sink = Mutex::new(Sink { writer, dir: dir.to_path_buf(), metrics: done, error: None });
    let next = AtomicU32::new(0);
    let trials_dir = dir.join("trials");
    let worker_loop = || {
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Some(&index) = todo.get(next.fetch_add(1, Ordering::SeqCst) as usize) else { return };
            let (unit, local) = ((index / trials_per_unit) as usize, index % trials_per_unit + 1);
            let trial = index + 1;
            let (unit_exp, label) = &units[unit];
            let trial_dir = trials_dir.join(format!("{trial:04}"));
            let result = run_trial(unit_exp, trial, exp.trial_seed(local), &trial_dir, exe, stop);
            let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(record) => {
                    // The trial hands back its history; judging it is ours.
                    let metrics = check(&record.history, &CheckParams::of(unit_exp));
                    let outcome = metrics.outcome();
                    if let Err(e) = sink.record(&units, unit, record, metrics) {
                        sink.error.get_or_insert(e);
                        stop.store(true, Ordering::SeqCst);
                    }
                    if units.len() > 1 {
                        // Points done: every trial of the point is in.
                        let full = (0..units.len())
                            .filter(|u| {
                                sink.metrics.iter().filter(|(_, m, _)| m == u).count() as u32 >= trials_per_unit
                            })
                            .count();
                        progress.set_message(format!("{full}/{} points; {label}: {outcome}", units.len()));
                    } else {
                        progress.set_message(outcome);
                    }
                    progress.inc(1);
                }
                Err(TrialError::Interrupted) => return,
                Err(e) => {
                    sink.error.get_or_insert(format!("trial {trial}: {e}"));
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    };
    if exp.jobs == 1 {
        worker_loop();
    } else {
        // Each trial's workers die with the thread that spawned them
        // (PR_SET_PDEATHSIG is per thread): the thread lives until reaped.
        std::thread::scope(|s| {
            for _ in 0..exp.jobs {
                s.spawn(worker_loop);
            }
        });
    }
    progress.finish_and_clear();

    let sink = sink.into_inner().unwrap_or_else(|p| p.into_inner());
    let all: Vec<&TrialMetrics> = sink.metrics.iter().map(|(_, _, m)| m).collect();
    let summary = summarize(&all);
    print!("{}", terminal::render(exp, &summary, dir));
    if !exp.points.is_empty() {
        // Drawn from the CSVs just written, exactly as `leasequake plot` would.
        if let Err(e) = crate::report::plots::draw(dir, &exp.name) {
            eprintln!("warning: plots in {}: {e}", dir.display());
        }
        print!("{}", terminal::points(&per_unit(&units, &sink.metrics)));
    }
    let by_trial: Vec<(u32, &TrialMetrics)> = sink.metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let parts = terminal::decomposition(&by_trial);
    if !parts.is_empty() {
        print!("  decomposition:\n{parts}");
    }
    let code = if let Some(e) = &sink.error {
        eprintln!("error: {e}");
        exit::HARNESS
    } else if flags.signalled.load(Ordering::SeqCst) {
        eprintln!("interrupted: {} of {total} trials completed and kept in {}", all.len(), dir.display());
        exit::INTERRUPTED
    } else {
        super::inputs::verdict(exp, &by_trial)
    };
    let metrics = sink.metrics.into_iter().map(|(t, _, m)| (t, m)).collect();
    Outcome { code, summary, metrics, dir: dir.to_path_buf() }
}

/// The trials a resumed run already has: (trial, unit, metrics).
type Done = Vec<(u32, usize, TrialMetrics)>;

/// `run --resume DIR`: the experiment as it ran (DIR/experiment.yaml), the
/// finished trials re-checked from DIR/events.csv, then the missing ones.
fn resume(dir: &Path, args: &RunArgs) -> u8 {
    let overrides = Overrides { jobs: args.jobs.map(|j| j as usize), ..Overrides::default() };
    let exp = match load(&dir.join("experiment.yaml"), &overrides) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: --resume {}: {e}", dir.display());
            return exit::BAD_INPUT;
        }
    };
    let trials_csv = dir.join("trials.csv");
    let completed: std::collections::BTreeSet<u32> = match csv::Reader::from_path(&trials_csv) {
        Ok(mut r) => r.records().filter_map(|rec| rec.ok()?.get(0)?.parse().ok()).collect(),
        Err(e) => {
            eprintln!("error: --resume {}: {e}", trials_csv.display());
            return exit::BAD_INPUT;
        }
    };
    let mut histories = match crate::report::read::read_histories(dir) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: --resume: {e}");
            return exit::BAD_INPUT;
        }
    };
    // A trial interrupted half-written has events but no trials.csv row.
    histories.retain(|t, _| completed.contains(t));
    let done: Done = super::inputs::recheck(&exp, &histories);
    let Some(exe) = worker_exe() else { return exit::HARNESS };
    // A resumed run keeps its host.json: no new calibration.
    let ctx = Ctx { exe, flags: install_signal_flags(), started_ns: wall_ns(), calibration: None, quiet: args.quiet };
    run_experiment(&exp, dir, false, &ctx, Some(done)).code
}

struct Sink {
    writer: ResultsWriter,
    dir: PathBuf,
    /// (trial, unit, metrics) of every finished trial.
    metrics: Vec<(u32, usize, TrialMetrics)>,
    error: Option<String>,
}

impl Sink {
    /// Write the trial and a fresh summary before anything else happens.
    fn record(
        &mut self,
        units: &[(&Experiment, String)],
        unit: usize,
        r: TrialRecord,
        metrics: TrialMetrics,
    ) -> Result<(), String> {
        let (exp, label) = &units[unit];
        self.writer
            .append(exp, label, r.trial, r.seed, &r.history, &r.deliveries, &metrics, &r.outcomes.join("; "))
            .map_err(|e| e.to_string())?;
        if r.trial == 1 {
            // The first trial's timeline, to set beside the blog's diagram. A
            // plot is derived output: failing to draw it loses no result.
            let title = format!("{}: trial 1 ({})", exp.name, terminal::describe(exp));
            let path = self.dir.join("timeline.svg");
            if let Err(e) = timeline::render(&path, &title, &r.history, &metrics, exp.workers) {
                eprintln!("warning: {}: {e}", path.display());
            }
        }
        self.metrics.push((r.trial, unit, metrics));
        let rows = per_unit(units, &self.metrics);
        self.writer.write_summary(&rows).map_err(|e| e.to_string())
    }
}

/// Create the results directory, write experiment.yaml and host.json, and
/// (for default locations) point `<root>/<name>/latest` at it.
fn prepare_dir(exp: &Experiment, dir: &Path, link_latest: bool, ctx: &Ctx) -> Result<(), String> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e: std::io::Error| format!("{}: {e}", p.display())
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::write(dir.join("experiment.yaml"), to_yaml(exp)).map_err(io(dir))?;
    std::fs::write(dir.join("host.json"), host::to_json(&host::describe(exp, ctx.started_ns, ctx.calibration.clone())))
        .map_err(io(dir))?;
    if link_latest && let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        // Replace the link atomically: a new link under a temp name, renamed.
        let tmp = parent.join(".latest.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(name, &tmp).map_err(io(&tmp))?;
        std::fs::rename(&tmp, parent.join("latest")).map_err(io(parent))?;
    }
    Ok(())
}

/// README.md (the side-by-side table) and host.json for a suite run.
fn write_suite_readme(
    out: &Path,
    paths: &[PathBuf],
    done: &[(&Experiment, Outcome)],
    ctx: &Ctx,
) -> std::io::Result<()> {
    let Some((first, _)) = done.first() else { return Ok(()) };
    let h = host::describe(first, ctx.started_ns, ctx.calibration.clone());
    std::fs::write(out.join("host.json"), host::to_json(&h))?;
    let runs: Vec<Measured<'_>> = done
        .iter()
        .map(|(exp, o)| Measured {
            exp,
            summary: &o.summary,
            metrics: o.metrics.iter().map(|(_, m)| m).collect(),
            link: o.dir.strip_prefix(out).unwrap_or(&o.dir).display().to_string(),
        })
        .collect();
    let sources: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let scales: std::collections::BTreeSet<String> = done.iter().map(|(e, _)| e.time_scale.to_string()).collect();
    let preamble = format!(
        "Produced by `{}` on {} ({}, {} cores, kernel {}), started at {} UTC, leasequake {}.\n\
         Time scale {}: measured durations are shown divided by it, in the blog's time. \
         Each experiment's directory holds its CSVs, `timeline.svg` (trial 1) and `experiment.yaml`.",
        h.command.join(" "),
        h.hostname,
        h.cpu,
        h.cores,
        h.kernel,
        h.started_utc,
        h.leasequake_version,
        scales.into_iter().collect::<Vec<_>>().join(", "),
    );
    let title = format!("leasequake: {}", sources.join(" "));
    let mut text = markdown(&title, &preamble, &runs);
    for (exp, o) in done.iter().filter(|(e, _)| !e.points.is_empty()) {
        let units = units(exp);
        let tagged: Vec<(u32, usize, TrialMetrics)> =
            o.metrics.iter().map(|(t, m)| (*t, unit_of(exp, units.len(), *t), m.clone())).collect();
        text += &points_markdown(&exp.name, exp.time_scale, &per_unit(&units, &tagged));
    }
    text += &crate::report::compare::jobs_markdown(&runs);
    let all_units: Vec<_> = done
        .iter()
        .flat_map(|(exp, o)| {
            let units = units(exp);
            let tagged: Vec<(u32, usize, TrialMetrics)> =
                o.metrics.iter().map(|(t, m)| (*t, unit_of(exp, units.len(), *t), m.clone())).collect();
            per_unit(&units, &tagged)
        })
        .collect();
    text += &crate::report::compare::substrates_markdown(&all_units);
    std::fs::write(out.join("README.md"), text)
}
