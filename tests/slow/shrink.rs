//! Campaigns and shrinking end to end: a random campaign finds a double
//! leader, the shrinker takes its trial down to the fault that makes it, and
//! the shrunk file reproduces on its own. Real workers, real pauses, kills
//! and SIGTERMs; tens of seconds each, so the slow tier.
//!
//! The violation these campaigns find is no race: every trial pauses its
//! leader well past the lease, so the recorded schedule reproduces and the
//! search comes down to that pause every time; a run where it does not is
//! a defect, not bad luck. How often the shrunk file reproduces is not
//! asserted: the search shortens the pause towards the shortest that still
//! breaks things, where reproducing is a matter of phase, and measures
//! that rate on fresh seeds; the test holds its report to its own runs.
//! (So are the takeover race's shrinks: their rates are measured results,
//! results/shrink, not tests.) The search's logic is unit-tested over a
//! fake probe (src/shrink/search.rs).

use std::path::{Path, PathBuf};

use crate::helper::{Lab, Row, bin, read_table};

const SCALE: f64 = 0.05;

/// Every trial pauses its leader for 16–18 s of a 9 s lease (renewed and
/// watched every 3 s): a watcher takes over while the paused one still
/// believes it leads, a double leader with 3 s (150 ms scaled) to spare
/// on either side, among faults that change nothing of it: short pauses, a
/// kill and a SIGTERM of watchers (four workers, so one watcher is always
/// left to take over). `{worker}` is the worker's own block: the built-in
/// one's, or a program under test.
fn pause_campaign(name: &str, worker: &str) -> String {
    format!(
        "name: {name}\nworkers: 4\nduration: 40s\nseed: 3\ntrials: 2\njobs: 2\n{worker}\
         faults:\n  random:\n    window: [6s, 14s]\n    kinds:\n\
         \x20     - {{action: pause, target: leader, count: 1, duration: {{uniform: [16s, 18s]}}}}\n\
         \x20     - {{action: pause, target: watcher, count: [1, 3], duration: {{uniform: [200ms, 1s]}}}}\n\
         \x20     - {{action: kill, target: watcher, count: [0, 1]}}\n\
         \x20     - {{action: term, target: watcher, count: [0, 1]}}\n"
    )
}

const SHRINK: [&str; 8] = ["--repeats", "2", "--need", "2", "--budget", "30", "--confirm", "4"];

/// The one shrink directory under a run's `shrink/`.
fn shrink_dir(run: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> =
        std::fs::read_dir(run.join("shrink")).expect("a shrink/ directory").map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// faults.csv rows of one trial, a pause's stop and cont counted once.
fn recorded(faults: &[Row], trial: &str) -> usize {
    faults.iter().filter(|r| r.get("trial") == trial && r.get("error").is_empty() && r.get("action") != "cont").count()
}

/// Every trial of the campaign violated (the pause makes sure of it); the
/// one to shrink is the first the machine did not disturb, as `--shrink`
/// takes it, else the first.
fn every_trial_double_led(trials: &[Row]) -> &Row {
    for t in trials {
        assert_ne!(t.get("max_leaders"), "1", "a leader paused past its lease, yet one leader: {t:?}");
    }
    trials.iter().find(|t| t.get("disturbed") == "false").unwrap_or(&trials[0])
}

/// A duration as the resolved file writes it (`447384us`, `400ms`,
/// `1.5s`), in ms.
fn ms_of(d: &str) -> Option<f64> {
    if let Some(us) = d.strip_suffix("us") {
        return us.parse::<f64>().ok().map(|us| us / 1000.0);
    }
    match d.strip_suffix("ms") {
        Some(ms) => ms.parse().ok(),
        None => d.strip_suffix('s')?.parse::<f64>().ok().map(|s| s * 1000.0),
    }
}

/// What a shrink must have done: the original reproduced, within budget,
/// down to the one pause of the leader, longer than the least lease it
/// can have left the leader (a pause within that never double-leads, so
/// no such candidate can have been kept); a rate that is what its confirmation runs show;
/// and a file that runs on its own, as a user would run it.
fn assert_shrunk_to_the_pause(lab: &Lab, dir: &Path, recorded: usize, runs: u32) {
    let steps = read_table(&dir.join("steps.csv"));
    let spent: u32 = steps.iter().map(|s| s.get("runs").parse::<u32>().unwrap()).sum();
    assert!(spent <= 30, "{spent} trials spent of a budget of 30: {steps:?}");
    assert_eq!((steps[0].get("phase"), steps[0].get("kept")), ("original", "true"), "{steps:?}");
    let yaml = std::fs::read_to_string(dir.join("shrunk.yaml")).expect("shrunk.yaml");
    let faults: Vec<&str> = yaml.lines().filter(|l| l.starts_with("  - at:")).collect();
    assert_eq!(faults.len(), 1, "{recorded} faults recorded; the leader's pause alone must be left:\n{yaml}");
    let targets: Vec<&str> = yaml.lines().filter_map(|l| l.trim().strip_prefix("target: ")).collect();
    let actions: Vec<&str> = yaml.lines().filter_map(|l| l.trim().strip_prefix("action: ")).collect();
    assert_eq!((targets, actions), (vec!["leader"], vec!["pause"]), "by role, never by worker number:\n{yaml}");
    // The fault's `duration:` is its only one indented (the trial's is not).
    let pause_ms: f64 = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("    duration: "))
        .find_map(ms_of)
        .unwrap_or_else(|| panic!("the pause's duration:\n{yaml}"));
    // The lease left at the pause: the whole lease less the delay after a
    // renewal, where the search tied the pause to one; else at least the
    // lease less a renew interval, as renewals come every interval. Either
    // way less up to one expiry resolution: the renewal's `leaseUntil` is
    // truncated to it (1 s, scaled), so a renewal leaves between the lease
    // less that and the whole lease.
    let field = |key: &str| yaml.lines().find_map(|l| l.trim().strip_prefix(key).map(str::to_string));
    let after_renewal_ms = match (field("after: ").as_deref(), field("delay: ")) {
        (Some("renewed"), Some(d)) => ms_of(&d),
        _ => None,
    };
    let resolution_ms = 1000.0 * SCALE;
    let left_ms = match after_renewal_ms {
        Some(delay) => 9000.0 * SCALE - delay - resolution_ms,
        None => (9000.0 - 3000.0) * SCALE - resolution_ms,
    };
    assert!(pause_ms > left_ms, "a pause of {pause_ms} ms within the {left_ms} ms of lease it left was kept:\n{yaml}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains(&format!("**{recorded} → 1**")), "{readme}");
    let confirmed = read_table(&dir.join("confirm/trials.csv"));
    let hits = confirmed.iter().filter(|t| t.get("max_leaders") != "1").count();
    let rate = format!("failed the same way in {hits}/{} runs on fresh seeds", confirmed.len());
    assert!(yaml.contains(&rate), "the rate must be its confirmation runs' ({rate}):\n{yaml}");
    if hits > 0 {
        assert!(dir.join("timeline.svg").exists(), "a reproducing run's timeline");
    }
    let again = lab.run(dir.join("shrunk.yaml")).trials(runs).jobs(2).output().expect_code(0);
    assert_eq!(again.table("trials.csv").len(), runs as usize, "{yaml}");
}

#[test]
fn a_campaigns_double_leader_shrinks_to_the_pause_that_makes_it() {
    let lab = Lab::new();
    let file = lab.file("campaign.yaml", &pause_campaign("pause-campaign", ""));
    let run = lab.run(&file).scale(SCALE).arg("--shrink").args(SHRINK).output().expect_code(0);
    let first = every_trial_double_led(&run.table("trials.csv")).get("trial").to_string();
    let dir = shrink_dir(&run.out);
    assert!(dir.file_name().unwrap().to_str().unwrap().starts_with(&format!("trial-{first}-")), "{dir:?}");
    assert_shrunk_to_the_pause(&lab, &dir, recorded(&run.table("faults.csv"), &first), 4);

    // Interrupted after its first candidate: exit 130, what finished kept.
    let out = run.out.join("interrupted");
    let child = std::process::Command::new(bin())
        .args(["shrink", run.out.to_str().unwrap(), "--trial", &first, "--repeats", "2"])
        .arg("--out")
        .arg(&out)
        .env("TMPDIR", lab.path().join("tmp"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::helper::wait_for(std::time::Duration::from_secs(30), "a first candidate", || {
        let rows = std::fs::read_to_string(out.join("steps.csv")).ok()?;
        (rows.lines().count() >= 2).then_some(())
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", String::from_utf8_lossy(&output.stderr));
    let steps = read_table(&out.join("steps.csv"));
    assert!(!steps.is_empty() && steps[0].get("step") == "1", "{steps:?}");
    assert!(out.join("candidates/001/trials.csv").exists());
}

#[test]
fn a_program_under_tests_campaign_shrinks_with_the_shrink_command() {
    let lab = Lab::new();
    let script = crate::helper::repo().join("examples/python/lease_worker.py");
    let program = format!(
        "program:\n  command: [python3, \"{}\", --lock, \"{{lock}}\", --lease-ms, \"{{lease_ms}}\", \
         --renew-ms, \"{{renew_ms}}\", --watch-ms, \"{{watch_ms}}\"]\n  ready: true\n",
        script.display()
    );
    let file = lab.file("campaign.yaml", &pause_campaign("program-pause-campaign", &program));
    let run = lab.run(&file).scale(SCALE).output().expect_code(0);
    let trial = every_trial_double_led(&run.table("trials.csv")).get("trial").to_string();
    let out = run.out.join("shrunk");
    let shrink = std::process::Command::new(bin())
        .args(["shrink", run.out.to_str().unwrap(), "--trial", &trial, "--violation", "double-leader"])
        .args(SHRINK)
        .arg("--out")
        .arg(&out)
        .env("TMPDIR", lab.path().join("tmp"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&shrink.stdout);
    let err = String::from_utf8_lossy(&shrink.stderr);
    assert_eq!(shrink.status.code(), Some(0), "{said}{err}");
    assert_shrunk_to_the_pause(&lab, &out, recorded(&run.table("faults.csv"), &trial), 4);
}
