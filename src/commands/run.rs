//! `leasequake run`: load → prepare the results directory → trials (each
//! written and flushed as it finishes) → summary → expectations.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};

use super::exit;
use crate::check::TrialMetrics;
use crate::cli::RunArgs;
use crate::clock::{utc_stamp, wall_ns};
use crate::experiment::{Experiment, Overrides, load, to_yaml};
use crate::report::csv::{ResultsWriter, Tables};
use crate::report::summary::{expectation_failures, summarize};
use crate::report::{host, terminal, timeline};
use crate::trial::{TrialError, TrialRecord, run_trial};

pub fn run(args: &RunArgs) -> u8 {
    let overrides = Overrides {
        time_scale: args.time_scale,
        trials: args.trials,
        seed: args.seed,
        jobs: args.jobs.map(|j| j as usize),
    };
    let exp = match load(&args.file, &overrides) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let dir = match prepare_dir(&exp, args) {
        Ok(d) => d,
        Err(DirError::Exists(d)) => {
            eprintln!("error: --out {}: directory exists and is not empty; refusing to mix two runs", d.display());
            return exit::BAD_INPUT;
        }
        Err(DirError::Io(d, e)) => {
            eprintln!("error: {}: {e}", d.display());
            return exit::HARNESS;
        }
    };
    if !args.quiet {
        eprintln!("leasequake: {} trials of {} → {}", exp.trials, exp.name, dir.display());
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot find the leasequake executable to spawn workers: {e}");
            return exit::HARNESS;
        }
    };

    // Ctrl-C, SIGTERM, SIGHUP: stop after cleaning up the current trial(s).
    // A second one exits at once; PR_SET_PDEATHSIG still kills the workers.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let _ = signal_hook::flag::register_conditional_shutdown(sig, i32::from(exit::INTERRUPTED), Arc::clone(&stop));
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }

    let writer = match ResultsWriter::create(&dir, Tables::All) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::HARNESS;
        }
    };
    let progress = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(u64::from(exp.trials)) };
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} trials, {elapsed} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    progress.set_prefix(exp.name.clone());

    let sink = Mutex::new(Sink { writer, dir: dir.clone(), metrics: Vec::new(), error: None });
    let next = AtomicU32::new(1);
    let trials_dir = dir.join("trials");
    let worker_loop = || {
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let trial = next.fetch_add(1, Ordering::SeqCst);
            if trial > exp.trials {
                return;
            }
            let trial_dir = trials_dir.join(format!("{trial:04}"));
            let result = run_trial(&exp, trial, &trial_dir, &exe, &stop);
            let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(record) => {
                    progress.set_message(record.metrics.outcome());
                    if let Err(e) = sink.record(&exp, record) {
                        sink.error.get_or_insert(e);
                        stop.store(true, Ordering::SeqCst);
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
    let metrics: Vec<&TrialMetrics> = sink.metrics.iter().map(|(_, m)| m).collect();
    let summary = summarize(&metrics);
    print!("{}", terminal::render(&exp, &summary, &dir));
    if let Some(e) = sink.error {
        eprintln!("error: {e}");
        return exit::HARNESS;
    }
    if stop.load(Ordering::SeqCst) {
        eprintln!("interrupted: {} of {} trials completed and kept in {}", metrics.len(), exp.trials, dir.display());
        return exit::INTERRUPTED;
    }
    let by_trial: Vec<(u32, &TrialMetrics)> = sink.metrics.iter().map(|(t, m)| (*t, m)).collect();
    let failures = expectation_failures(&exp, &by_trial);
    if failures.is_empty() {
        if !exp.expect.is_empty() {
            println!("  expectations:   all held");
        }
        exit::OK
    } else {
        println!("  expectations:   {} failed", failures.len());
        for f in failures.iter().take(20) {
            println!("    - {f}");
        }
        exit::EXPECT_FAILED
    }
}

struct Sink {
    writer: ResultsWriter,
    dir: PathBuf,
    metrics: Vec<(u32, TrialMetrics)>,
    error: Option<String>,
}

impl Sink {
    /// Write the trial and a fresh summary before anything else happens.
    fn record(&mut self, exp: &Experiment, r: TrialRecord) -> Result<(), String> {
        self.writer.append(exp, r.trial, r.seed, &r.history, &r.deliveries, &r.metrics).map_err(|e| e.to_string())?;
        if r.trial == 1 {
            // The first trial's timeline, to set beside the blog's diagram.
            let title = format!("{}: trial 1 ({})", exp.name, crate::trial::describe(exp));
            let path = self.dir.join("timeline.svg");
            timeline::render(&path, &title, &r.history, &r.metrics, exp.workers)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        self.metrics.push((r.trial, r.metrics));
        let all: Vec<&TrialMetrics> = self.metrics.iter().map(|(_, m)| m).collect();
        self.writer.write_summary(exp, &summarize(&all)).map_err(|e| e.to_string())
    }
}

enum DirError {
    Exists(PathBuf),
    Io(PathBuf, std::io::Error),
}

/// Create the results directory, write experiment.yaml and host.json, and
/// point `<root>/<name>/latest` at it.
fn prepare_dir(exp: &Experiment, args: &RunArgs) -> Result<PathBuf, DirError> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| DirError::Io(p, e)
    };
    let dir = match &args.out {
        Some(out) => {
            if out.read_dir().is_ok_and(|mut d| d.next().is_some()) {
                return Err(DirError::Exists(out.clone()));
            }
            out.clone()
        }
        None => {
            let parent = args.results_root.join(&exp.name);
            let stamp = utc_stamp(wall_ns() / 1_000_000_000);
            let mut dir = parent.join(&stamp);
            let mut n = 2;
            while dir.exists() {
                dir = parent.join(format!("{stamp}-{n}"));
                n += 1;
            }
            dir
        }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    std::fs::write(dir.join("experiment.yaml"), to_yaml(exp)).map_err(io(&dir))?;
    std::fs::write(dir.join("host.json"), host::to_json(&host::describe(exp))).map_err(io(&dir))?;
    if args.out.is_none()
        && let (Some(parent), Some(name)) = (dir.parent(), dir.file_name())
    {
        // Replace the link atomically: a new link under a temp name, renamed.
        let tmp = parent.join(".latest.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(name, &tmp).map_err(io(&tmp))?;
        std::fs::rename(&tmp, parent.join("latest")).map_err(io(parent))?;
    }
    Ok(dir)
}
