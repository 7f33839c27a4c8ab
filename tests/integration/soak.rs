//! A soak kept in windows (`window:`) stopped by `kill -9` and resumed: its
//! trial is kept up to its last whole window, and the rest of the soak runs
//! as the next trial, with the soak's own faults from there on.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::helper::{Lab, processes_mentioning, read_table, wait_for};

/// Ten seconds in windows of one, the leader paused now and then.
const SOAK: &str = "name: soak\nworkers: 3\ntrials: 1\nseed: 38\nduration: 10s\nwindow: 1s\nlease: 900ms\n\
     renew: 300ms\nwatch: 300ms\nfaults:\n  random:\n    kinds:\n      \
     - {action: pause, target: leader, mean_interval: 2s, duration: 400ms}\n";

/// The time of the last whole row of a running trial's events file, ms.
fn written_up_to(events: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(events).ok()?;
    let whole = &text[..text.rfind('\n')?];
    whole.lines().last()?.split(',').nth(1)?.parse().ok()
}

#[test]
fn a_soak_stopped_by_kill_9_keeps_its_whole_windows_and_resumes_with_the_rest() {
    let lab = Lab::new();
    let file = lab.file("soak.yaml", SOAK);
    let (mut child, out) = lab.run(&file).spawn();
    let events = out.join("trials").join("0001").join("events.csv");
    // Three whole windows on disk, whenever the machine gets there.
    wait_for(Duration::from_secs(30), "three windows written", || {
        written_up_to(&events).is_some_and(|t| t >= 3000.0).then_some(())
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9 the harness");
    let _ = child.wait();
    wait_for(Duration::from_secs(5), "workers to die with the harness", || {
        processes_mentioning(&out).is_empty().then_some(())
    });
    let reached = written_up_to(&events).expect("the stopped trial's events");

    let resumed =
        std::process::Command::new(crate::helper::bin()).args(["run", "--resume"]).arg(&out).output().unwrap();
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{said}");
    let trials = read_table(&out.join("trials.csv"));
    assert_eq!(trials.len(), 2, "{trials:?}");
    // Cut at the last whole window the file reached, and said so.
    let cut = trials[0].f64("end_ms");
    assert_eq!(cut, (reached / 1000.0).floor() * 1000.0, "{trials:?}");
    assert!(trials[0].get("worker_outcomes").starts_with(&format!("cut at {}s", cut / 1000.0)), "{trials:?}");
    assert!(said.contains(&format!("trial 1 of soak, stopped, kept up to {}s", cut / 1000.0)), "{said}");
    // The rest of the soak: to its end, no further.
    let rest = trials[1].f64("end_ms");
    assert!(rest >= 10_000.0 - cut && rest < 10_000.0 - cut + 1000.0, "{trials:?}");
    assert_ne!(trials[0].get("seed"), trials[1].get("seed"));
    // The soak's faults before the cut fired in the first trial, those
    // after it in the second, earlier by the cut.
    let faults = read_table(&out.join("faults.csv"));
    let stops = |trial: &str| -> Vec<f64> {
        faults
            .iter()
            .filter(|f| f.get("trial") == trial && f.get("action") == "stop")
            .map(|f| f.f64("scheduled_ms"))
            .collect()
    };
    assert!(stops("1").iter().all(|t| *t < cut) && !stops("1").is_empty(), "{faults:?}");
    assert!(stops("2").iter().all(|t| *t + cut < 10_000.0), "{faults:?}");
    assert!(!out.join("trials").join("0001").join("events.csv").exists(), "its rows are in events.csv");
    // What was written re-checks whole, the cut trial included.
    let check = std::process::Command::new(crate::helper::bin()).arg("check").arg(&out).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stderr));
    // Whole now: a further resume runs nothing.
    let mut again = std::process::Command::new(crate::helper::bin());
    assert_eq!(again.args(["run", "--quiet", "--resume"]).arg(&out).output().unwrap().status.code(), Some(0));
    assert_eq!(read_table(&out.join("trials.csv")).len(), 2);
}
