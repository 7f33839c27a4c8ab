//! The event delay of observing a program, and the summary of a series of
//! delays.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use crate::check::stats::percentile;
use crate::model::calibration::{Delay, EventDelay};
use crate::model::history::EventKind;
use crate::model::program::{MAX_LINES, Observe, Pattern, Program, Stamp};
use crate::trial::Msg;
use crate::trial::{SpawnSpec, spawn};

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
        clock: Default::default(),
        observe,
        timestamps: Stamp::Receipt,
        // The source time rides in the token.
        patterns: vec![Pattern {
            regex: regex::Regex::new(r"t_ns=(?P<token>\d+)").expect("valid"),
            event: EventKind::HeldBy,
            detail: BTreeMap::new(),
        }],
        ready: false,
        max_lines: MAX_LINES,
        expiry: crate::model::program::ProgramExpiry::Exact,
        cwd: None,
        experiment_dir: String::new(),
    };
    let values = |_: usize| BTreeMap::new();
    let group = crate::trial::TrialGroup::new(0);
    let spec = SpawnSpec {
        exe: &exe,
        args: Vec::new(),
        dir: dir.path(),
        count: 1,
        program: Some((&program, &values)),
        group: &group,
        clocks: None,
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
