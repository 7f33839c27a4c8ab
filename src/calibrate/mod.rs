//! `leasequake calibrate`: the instrument's own error bars, measured on this
//! machine, each next to what a person would write in a shell, measured in
//! the same run (`harness`): the start spread of workers released together,
//! the error of each signal fault, and the event delay of observing a
//! program, from the moment it stamps a line (CLOCK_MONOTONIC) to the moment
//! the harness has read and parsed it, through the protocol pipe (fd 3) and
//! through log patterns (stdout). Every run records a short version in its
//! host record (`measure_quick`).

pub mod emit;
pub mod harness;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

use crate::experiment::program::{Observe, Pattern, Program, Stamp};
use crate::history::EventKind;
use crate::report::stats::percentile;
use crate::trial::spawn::{Msg, SpawnSpec, spawn};

/// Delays in µs: median, p99, max over `n` lines.
#[derive(Clone, Debug, Serialize)]
pub struct Delay {
    pub n: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EventDelay {
    pub protocol: Option<Delay>,
    pub patterns: Option<Delay>,
}

/// The short calibration recorded in every run's host.json.
#[derive(Clone, Debug, Serialize)]
pub struct Quick {
    pub start_spread_3_workers: Option<Delay>,
    pub start_spread_30_workers: Option<Delay>,
    pub sigterm_error: Option<Delay>,
    pub sigstop_error: Option<Delay>,
    pub sigkill_error: Option<Delay>,
    pub event_delay: EventDelay,
}

static QUICK: std::sync::OnceLock<Quick> = std::sync::OnceLock::new();

/// Measure the short calibration once for this run (about 2 s).
pub fn measure_quick() {
    let Ok(dir) = tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir() else { return };
    let spread = |n| harness::start_spread(n, 2, dir.path()).ok().and_then(harness::summarize);
    let faults = harness::fault_error(2, dir.path()).ok();
    let fault = |i: usize| faults.as_ref().and_then(|f| harness::summarize(f[i].1.clone()));
    let _ = QUICK.set(Quick {
        start_spread_3_workers: spread(3),
        start_spread_30_workers: spread(30),
        sigterm_error: fault(0),
        sigstop_error: fault(1),
        sigkill_error: fault(2),
        event_delay: event_delay(100, Duration::from_millis(1)),
    });
}

/// This run's short calibration, if it was measured.
pub fn quick() -> Option<Quick> {
    QUICK.get().cloned()
}

/// Measure both paths with `lines` lines, one every `interval`.
pub fn event_delay(lines: usize, interval: Duration) -> EventDelay {
    EventDelay {
        protocol: one_path(Observe::Protocol, lines, interval).ok(),
        patterns: one_path(Observe::Patterns, lines, interval).ok(),
    }
}

/// Spawn the emitter as a program, exactly as a trial would, and read its
/// lines through the same readers a trial uses.
fn one_path(observe: Observe, lines: usize, interval: Duration) -> Result<Delay, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir().map_err(|e| e.to_string())?;
    let program = Program {
        command: vec![
            exe.display().to_string(),
            "calibrate-emit".into(),
            "--lines".into(),
            lines.to_string(),
            "--interval-us".into(),
            interval.as_micros().to_string(),
        ],
        shell: false,
        env: BTreeMap::new(),
        observe,
        timestamps: Stamp::Receipt,
        // The source time rides in the token.
        patterns: vec![Pattern {
            regex: regex::Regex::new(r"t_ns=(?P<token>\d+)").expect("valid"),
            event: EventKind::HeldBy,
        }],
        ready: false,
        max_lines: crate::trial::program::MAX_LINES,
        experiment_dir: String::new(),
    };
    let values = |_: usize| BTreeMap::new();
    let none = |_: usize| Vec::new();
    let spec = SpawnSpec {
        exe: &exe,
        args: Vec::new(),
        dir: dir.path(),
        count: 1,
        per_worker: &none,
        program: Some((&program, &values)),
    };
    let (tx, rx) = mpsc::sync_channel(crate::trial::EVENT_BACKLOG);
    let (mut workers, barrier) = spawn(&spec, &tx).map_err(|e| e.to_string())?;
    drop(tx);
    drop(barrier);
    let mut delays = Vec::with_capacity(lines);
    let deadline = std::time::Instant::now() + interval * lines as u32 + Duration::from_secs(10);
    // The exit can overtake the last lines: read until every reader is
    // done (the channel disconnects).
    while let Ok(msg) = rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        for msg in msg.unpack() {
            if let Msg::Event { event, .. } = msg
                && let Some(sent) = event.detail.token
            {
                delays.push((event.t_ns - sent as i64) as f64 / 1000.0);
            }
        }
    }
    drop(rx);
    workers.join();
    summarize(delays).ok_or_else(|| format!("no line arrived (see {})", dir.path().display()))
}

/// Median, p99 and max of delays in µs; None without any.
pub fn summarize(mut delays: Vec<f64>) -> Option<Delay> {
    if delays.is_empty() {
        return None;
    }
    delays.sort_by(f64::total_cmp);
    Some(Delay {
        n: delays.len(),
        median_us: percentile(&delays, 0.5).unwrap_or_default(),
        p99_us: percentile(&delays, 0.99).unwrap_or_default(),
        max_us: *delays.last().expect("not empty"),
    })
}

fn show(name: &str, d: &Option<Delay>) {
    match d {
        Some(x) => println!(
            "  {name:<34} median {:>9.1} µs   p99 {:>9.1} µs   max {:>9.1} µs   (n {})",
            x.median_us, x.p99_us, x.max_us, x.n
        ),
        None => println!("  {name:<34} not measured"),
    }
}

/// How many times tighter than the shell, at the median and the p99.
fn show_ratio(ours: &Option<Delay>, shell: &Option<Delay>) {
    if let (Some(o), Some(s)) = (ours, shell) {
        let ratio = |a: f64, b: f64| if a > 0.0 { format!("{:.0}×", b / a) } else { "∞".into() };
        println!(
            "  {:<34} median {:>9}      p99 {:>9}",
            "→ shell / leasequake",
            ratio(o.median_us, s.median_us),
            ratio(o.p99_us, s.p99_us)
        );
    }
}

/// `leasequake calibrate`: print the measurements; exit 0.
pub fn run(lines: usize) -> u8 {
    let dir = match tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a scratch directory: {e}");
            return crate::commands::exit::HARNESS;
        }
    };
    println!("Start spread: first timestamp after release, latest − earliest");
    for (n, trials) in [(3usize, 10u32), (30, 10), (300, 3)] {
        let ours = match harness::start_spread(n, trials, dir.path()) {
            Ok(v) => harness::summarize(v),
            Err(e) => {
                println!("  {n} workers, barrier: failed: {e}");
                None
            }
        };
        show(&format!("{n} workers, barrier"), &ours);
        let shell = harness::summarize(harness::shell_start_spread(n, trials));
        show(&format!("{n} processes, shell `&` loop"), &shell);
        show_ratio(&ours, &shell);
    }
    println!("Fault error: actual − scheduled (20 trials each)");
    let ours = harness::fault_error(20, dir.path()).unwrap_or_else(|e| {
        println!("  harness: failed: {e}");
        Default::default()
    });
    for (name, v) in ours {
        let ours = harness::summarize(v);
        let Ok(signal) = name.parse::<nix::sys::signal::Signal>() else {
            show(&name, &ours);
            continue;
        };
        show(&format!("{name}, harness"), &ours);
        let shell = harness::summarize(harness::shell_fault_error(signal, 20));
        show(&format!("{name}, shell `sleep; kill`"), &shell);
        show_ratio(&ours, &shell);
    }
    println!("Event delay: program's timestamp → harness has the event ({lines} lines, one per ms)");
    let d = event_delay(lines, Duration::from_millis(1));
    for (name, delay) in [("protocol (fd 3)", &d.protocol), ("log patterns (stdout)", &d.patterns)] {
        match delay {
            Some(x) => println!(
                "  {name:<22} median {:>7.1} µs   p99 {:>8.1} µs   max {:>8.1} µs   (n {})",
                x.median_us, x.p99_us, x.max_us, x.n
            ),
            None => println!("  {name:<22} not measured (the emitter did not run)"),
        }
    }
    0
}
