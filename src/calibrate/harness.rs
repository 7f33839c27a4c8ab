//! The harness's own precision, next to what a person would write in a
//! shell: start spread (N workers released by the barrier vs N processes
//! started with `&`), and fault error (a signal at a scheduled moment vs
//! `sleep T; kill`), measured in the same run on this machine.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;

pub use super::delays::summarize;
use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;

use crate::error::Error;
use crate::experiment::{Overrides, load_str};
use crate::model::clock::wall_ns;
use crate::model::history::{EventKind, History};
use crate::trial::{Servers, Stop, TrialEnv, TrialGroup, poll_stopped, run_trial};

/// Start spread (µs) of `n` built-in workers released by the barrier, over
/// `trials` trials.
pub fn start_spread(n: usize, trials: u32, dir: &Path) -> Result<Vec<f64>, Error> {
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "leasequake".into(), source })?;
    let yaml = format!("name: spread\nworkers: {n}\nduration: 200ms\nworker: {{mode: one-shot}}\n");
    let exp =
        load_str(Path::new("calibrate"), &yaml, &Overrides::default()).map_err(|e| Error::Experiments(vec![e]))?;
    let stop = AtomicBool::new(false);
    let mut out = Vec::new();
    for t in 1..=trials {
        // A calibration trial is short: its history is kept whole.
        let mut events = Vec::new();
        let group = TrialGroup::new(t);
        let dir = dir.join(format!("spread-{n}-{t}"));
        run_trial(&exp, t, u64::from(t), &dir, &env(&exe, &stop, &group), &mut events)
            .map_err(|source| Error::Trial { trial: t, source })?;
        let metrics = crate::check::check(&History::new(events), &crate::check::CheckParams::of(&exp));
        out.extend(metrics.start_spread_us.map(|us| us as f64));
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
/// four one-shot workers: SIGTERM to a watcher (its own timestamp of
/// receipt: the `exiting` it reports from sigtimedwait; a watcher, because
/// a leader first releases its lease), SIGSTOP to another watcher (the
/// moment the kernel reports it stopped), SIGKILL to the leader (its death,
/// as observed by the harness). A final SIGCONT keeps the trial open until
/// every death is seen.
///
/// A fourth series is the kernel's share of the SIGKILL figure: from the
/// kill() call to the death being observed (tearing down a process takes
/// a few hundred µs here, whoever sends the signal).
pub fn fault_error(trials: u32, dir: &Path) -> Result<[(String, Vec<f64>); 4], Error> {
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "leasequake".into(), source })?;
    let yaml = "name: fault-error\nworkers: 4\nduration: 400ms\nworker: {mode: one-shot}\nfaults:\n  \
                - {at: 100ms, target: watcher, action: term}\n  - {at: 200ms, target: watcher, action: stop}\n  \
                - {at: 300ms, target: leader, action: kill}\n  - {at: 380ms, target: all, action: cont}\n";
    let exp = load_str(Path::new("calibrate"), yaml, &Overrides::default()).map_err(|e| Error::Experiments(vec![e]))?;
    let stop = AtomicBool::new(false);
    let (mut term, mut stp, mut kill, mut teardown) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for t in 1..=trials {
        let mut events = Vec::new();
        let group = TrialGroup::new(t);
        let dir = dir.join(format!("faults-{t}"));
        let r = run_trial(&exp, t, u64::from(t), &dir, &env(&exe, &stop, &group), &mut events)
            .map_err(|source| Error::Trial { trial: t, source })?;
        let history = History::new(events);
        let first = |w: usize, kind: EventKind| {
            history.events.iter().find(|e| e.worker == Some(w) && e.kind == kind).map(|e| e.t_us)
        };
        let delivered = |action: &str| r.deliveries.iter().find(|d| d.action == action && d.error.is_none());
        if let Some(d) = delivered("term")
            && let Some(got) = d.worker.and_then(|w| first(w, EventKind::Exiting))
        {
            term.push((got - d.scheduled_us) as f64);
        }
        if let Some(d) = delivered("stop") {
            stp.push((d.actual_us - d.scheduled_us) as f64);
        }
        if let Some(d) = delivered("kill")
            && let Some(died) = d.worker.and_then(|w| first(w, EventKind::Exit))
        {
            kill.push((died - d.scheduled_us) as f64);
            teardown.push((died - d.actual_us) as f64);
        }
    }
    Ok([
        ("SIGTERM".into(), term),
        ("SIGSTOP".into(), stp),
        ("SIGKILL".into(), kill),
        ("SIGKILL, kill() → death observed".into(), teardown),
    ])
}

/// The shell's fault error (µs) for `signal`: `echo S $(date +%s%N); sleep
/// 0.1; kill -s SIG $pid`, the way a person would script it, against a
/// victim we spawned and watch exactly as a trial watches its workers: its
/// own stamp of receipt (SIGTERM), the kernel's stop report (SIGSTOP), its
/// observed death (SIGKILL). Wall-clock ns on both sides.
pub fn shell_fault_error(signal: Signal, trials: u32) -> Vec<f64> {
    (0..trials).filter_map(|_| shell_fault_once(signal)).collect()
}

fn shell_fault_once(signal: Signal) -> Option<f64> {
    use std::io::BufRead;
    let exe = std::env::current_exe().ok()?;
    let mut victim = Command::new(exe).arg("calibrate-target").stdout(Stdio::piped()).spawn().ok()?;
    let pid = Pid::from_raw(victim.id() as i32);
    let mut said = std::io::BufReader::new(victim.stdout.take()?).lines();
    // The victim blocks SIGTERM before it says so.
    let ready = said.next().and_then(Result::ok).is_some_and(|l| l == "ready");
    let name = signal.as_str().trim_start_matches("SIG");
    let script = format!("echo S $(date +%s%N); sleep 0.1; kill -s {name} {pid}");
    let mut shell = Command::new("sh").arg("-c").arg(script).stdout(Stdio::piped()).spawn().ok()?;
    let mut line = String::new();
    std::io::BufReader::new(shell.stdout.take()?).read_line(&mut line).ok()?;
    let due = line.strip_prefix("S ")?.trim().parse::<i64>().ok()? + 100_000_000;
    let got = if !ready {
        None
    } else if signal == Signal::SIGTERM {
        said.next().and_then(Result::ok).and_then(|l| l.strip_prefix("R ")?.parse::<i64>().ok())
    } else if signal == Signal::SIGSTOP {
        // Sleep to just before the moment, then poll as the harness does.
        let early = due - 2_000_000 - wall_ns();
        if early > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(early as u64));
        }
        (poll_stopped(pid, 2_000_000_000) == Stop::Stopped).then(wall_ns)
    } else {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => Some(wall_ns()),
            Err(_) => None,
        }
    };
    let _ = shell.wait();
    let _ = victim.kill();
    let _ = victim.wait();
    got.map(|t| (t - due) as f64 / 1000.0)
}

/// Calibration trials run on no managed server.
fn env<'a>(exe: &'a Path, stop: &'a AtomicBool, group: &'a TrialGroup) -> TrialEnv<'a> {
    static NONE: std::sync::OnceLock<Servers> = std::sync::OnceLock::new();
    TrialEnv { exe, stop, group, servers: NONE.get_or_init(Servers::none) }
}
