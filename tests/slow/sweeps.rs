//! Sweeps: every point for its trials, one summary row per point, plots,
//! and resuming an interrupted sweep.

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::helper::{Lab, bin, processes_mentioning, read_table, wait_for};

/// Three lease settings; the kill stays clear of renewal ticks and the
/// phase of the whole-second truncation is fixed (see bounds.rs, blog.rs).
const SWEEP: &str = "name: sw\nworkers: 3\nduration: 20s\nseed: 4\nalign: 500ms\nfaults:\n  - at: 8.2s\n    jitter: 0.6s\n    target: leader\n    action: kill\nsweep:\n  points:\n    - {lease: 3s, renew: 1s, watch: 1s}\n    - {lease: 6s, renew: 2s, watch: 2s}\n    - {lease: 9s, renew: 3s, watch: 3s}\n";

fn medians(run: &crate::helper::Finished) -> BTreeMap<String, f64> {
    run.table("summary.csv").iter().map(|r| (r.get("setting").to_string(), r.f64("crash_gap_p50_ms"))).collect()
}

#[test]
fn a_sweep_has_one_summary_row_per_point_whatever_the_jobs() {
    let lab = Lab::new();
    let file = lab.file("sw.yaml", SWEEP);
    // Scale 0.1: the align margin (50 ms) stays wider than a start delayed by
    // eight trials sharing two cores.
    let parallel = lab.run(&file).arg("--time-scale=0.1").trials(3).jobs(8).output().expect_code(0);
    let trials = parallel.table("trials.csv");
    assert_eq!(trials.len(), 9);
    let order: Vec<u32> = trials.iter().map(|t| t.get("trial").parse().unwrap()).collect();
    assert_eq!(order, (1..=9).collect::<Vec<u32>>(), "rows in trial order, however the trials finished");
    let events = parallel.table("events.csv");
    assert!(events.windows(2).all(|w| w[0].f64("trial") <= w[1].f64("trial")), "events.csv in trial order");
    for t in &trials {
        let expected_lease = match t.get("setting") {
            "lease=300ms renew=100ms watch=100ms" => 300.0,
            "lease=600ms renew=200ms watch=200ms" => 600.0,
            "lease=900ms renew=300ms watch=300ms" => 900.0,
            other => panic!("unexpected point {other:?}"),
        };
        assert_eq!(t.f64("lease_ms"), expected_lease, "each row carries its point's settings: {t:?}");
        assert_eq!(t.f64("time_scale"), 0.1);
    }
    for r in parallel.table("summary.csv") {
        assert_eq!(r.get("n"), "3");
        let (lo, hi) = (r.f64("crash_gap_bound_min_ms"), r.f64("crash_gap_bound_max_ms"));
        let (p10, p90) = (r.f64("crash_gap_p10_ms"), r.f64("crash_gap_p90_ms"));
        assert!(p10 >= lo - 25.0 && p90 <= hi + 25.0, "{r:?}");
    }
    for f in ["dial.svg", "histograms.svg"] {
        let svg = std::fs::read_to_string(parallel.out.join(f)).unwrap();
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    // The same sweep one trial at a time: the same medians.
    let serial = lab.run(&file).arg("--time-scale=0.1").trials(3).jobs(1).output().expect_code(0);
    let (a, b) = (medians(&parallel), medians(&serial));
    assert_eq!(a.len(), 3);
    for (point, m) in &a {
        assert!((m - b[point]).abs() < 25.0, "{point}: {m} ms with --jobs 8, {} with --jobs 1", b[point]);
    }
    // `plot` redraws from the CSVs alone, identically.
    let before = std::fs::read_to_string(parallel.out.join("dial.svg")).unwrap();
    std::fs::remove_file(parallel.out.join("dial.svg")).unwrap();
    let status = std::process::Command::new(bin()).arg("plot").arg(&parallel.out).output().unwrap();
    assert!(status.status.success());
    let after = std::fs::read_to_string(parallel.out.join("dial.svg")).unwrap();
    // The title is the directory name when redrawn; everything else matches.
    assert_eq!(before.matches("<circle").count(), after.matches("<circle").count());
}

#[test]
fn an_interrupted_sweep_resumes_with_only_the_missing_trials() {
    let lab = Lab::new();
    let file = lab.file("sw.yaml", SWEEP);
    let (child, out) = lab.run(&file).arg("--time-scale=0.05").trials(4).spawn();
    let done = || read_table(&out.join("trials.csv")).len();
    wait_for(Duration::from_secs(30), "two finished trials", || {
        (out.join("trials.csv").exists() && done() >= 2).then_some(())
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let kept = done();
    assert!((2..12).contains(&kept), "kept {kept}");
    assert!(processes_mentioning(&out).is_empty());

    let resumed = std::process::Command::new(bin()).arg("run").arg("--resume").arg(&out).arg("-q").output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let mut trials: Vec<u32> =
        read_table(&out.join("trials.csv")).iter().map(|t| t.get("trial").parse().unwrap()).collect();
    trials.sort();
    assert_eq!(trials, (1..=12).collect::<Vec<_>>(), "every trial exactly once");
    // No trial's events twice: each trial has exactly one barrier.
    let barriers = read_table(&out.join("events.csv")).into_iter().filter(|e| e.get("event") == "barrier").count();
    assert_eq!(barriers, 12);
    assert_eq!(read_table(&out.join("summary.csv")).len(), 3);
}
