//! The harness's own precision, next to what a person would write in a
//! shell: start spread (N workers released by the barrier vs N processes
//! started with `&`), and fault error (a signal at a scheduled moment vs
//! `sleep T; kill`), measured in the same run on this machine.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

pub use super::summarize;
use crate::experiment::{Overrides, load_str};
use crate::history::EventKind;
use crate::trial::run_trial;

/// Start spread (µs) of `n` built-in workers released by the barrier, over
/// `trials` trials.
pub fn start_spread(n: usize, trials: u32, dir: &Path) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let yaml = format!("name: spread\nworkers: {n}\nduration: 200ms\nworker: {{mode: one-shot}}\n");
    let exp = load_str(Path::new("calibrate"), &yaml, &Overrides::default()).map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let mut out = Vec::new();
    for t in 1..=trials {
        let r = run_trial(&exp, t, u64::from(t), &dir.join(format!("spread-{n}-{t}")), &exe, &stop)
            .map_err(|e| e.to_string())?;
        out.extend(r.metrics.start_spread_us.map(|us| us as f64));
    }
    Ok(out)
}

/// The shell's start spread (µs): `n` copies of `date +%s%N` started with
/// `&` in a loop; spread = latest − earliest printed time.
pub fn shell_start_spread(n: usize, trials: u32) -> Vec<f64> {
    let script = format!("for i in $(seq {n}); do date +%s%N & done; wait");
    (0..trials)
        .filter_map(|_| {
            let out = Command::new("sh").arg("-c").arg(&script).output().ok()?;
            let times: Vec<i64> =
                String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
            Some((times.iter().max()? - times.iter().min()?) as f64 / 1000.0)
        })
        .collect()
}

/// Fault error (µs, actual − scheduled) per signal, over `trials` trials of
/// three workers: SIGTERM to worker 1 (its own timestamp of receipt: the
/// `exiting` it reports from sigtimedwait), SIGSTOP to worker 2 (the moment
/// /proc shows it stopped), SIGKILL to worker 0 (its death, as observed).
pub fn fault_error(trials: u32, dir: &Path) -> Result<[(String, Vec<f64>); 3], String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let yaml = "name: fault-error\nworkers: 3\nduration: 400ms\nworker: {mode: one-shot}\nfaults:\n  \
                - {at: 100ms, target: 1, action: term}\n  - {at: 200ms, target: 2, action: stop}\n  \
                - {at: 300ms, target: 0, action: kill}\n";
    let exp = load_str(Path::new("calibrate"), yaml, &Overrides::default()).map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let (mut term, mut stp, mut kill) = (Vec::new(), Vec::new(), Vec::new());
    for t in 1..=trials {
        let r = run_trial(&exp, t, u64::from(t), &dir.join(format!("faults-{t}")), &exe, &stop)
            .map_err(|e| e.to_string())?;
        let first = |w: usize, kind: EventKind| {
            r.history.events.iter().find(|e| e.worker == Some(w) && e.kind == kind).map(|e| e.t_us)
        };
        let scheduled = |action: &str| r.deliveries.iter().find(|d| d.action == action).map(|d| d.scheduled_us);
        if let (Some(s), Some(got)) = (scheduled("term"), first(1, EventKind::Exiting)) {
            term.push((got - s) as f64);
        }
        if let Some(d) = r.deliveries.iter().find(|d| d.action == "stop") {
            stp.push((d.actual_us - d.scheduled_us) as f64);
        }
        if let (Some(s), Some(died)) = (scheduled("kill"), first(0, EventKind::Exit)) {
            kill.push((died - s) as f64);
        }
    }
    Ok([("SIGTERM".into(), term), ("SIGSTOP".into(), stp), ("SIGKILL".into(), kill)])
}

/// The shell's fault error (µs): `t=$(date +%s%N); sleep 0.1; kill -TERM $pid`
/// against a process that stamps the signal's receipt (wall clock ns).
pub fn shell_fault_error(trials: u32) -> Vec<f64> {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    let script = format!(
        "\"{exe}\" calibrate-target & pid=$!; sleep 0.05; t=$(date +%s%N); sleep 0.1; kill -TERM $pid; echo S $t; wait $pid"
    );
    (0..trials)
        .filter_map(|_| {
            let out = Command::new("sh").arg("-c").arg(&script).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let find =
                |tag: &str| text.lines().find_map(|l| l.strip_prefix(tag).and_then(|v| v.trim().parse::<i64>().ok()));
            let (scheduled, got) = (find("S ")?, find("R ")?);
            Some((got - (scheduled + 100_000_000)) as f64 / 1000.0)
        })
        .collect()
}
