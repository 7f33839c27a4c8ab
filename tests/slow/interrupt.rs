//! The harness under its own fault injection: SIGINT, SIGTERM and SIGKILL
//! of the harness at random moments of a multi-trial run (in the
//! calibration, in a gap, in the writing of a row), each followed by
//! `--resume`. Afterwards: no process left, no finished trial lost, no
//! torn table, and per trial the same results as a run never interrupted,
//! with the same seeds.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::{Rng, SeedableRng};

use crate::helper::{Lab, bin, processes_in, read_table, wait_for};

/// Kill at 8.2 s with the barrier half a second past a wall-clock second:
/// every trial's gap is fixed by its seed to within scheduling noise.
const EXPERIMENT: &str = "name: i\nworkers: 3\nduration: 16s\nseed: 77\nalign: 500ms\n\
    faults:\n  - at: 8.2s\n    jitter: 2.6s\n    target: leader\n    action: kill\n";
const TRIALS: usize = 6;

/// Per trial: what must not differ between an interrupted and resumed run
/// and one left alone.
fn results(out: &Path) -> Vec<(String, String, String, String, f64)> {
    let mut rows: Vec<_> = read_table(&out.join("trials.csv"))
        .into_iter()
        .map(|t| {
            let s = |c: &str| t.get(c).to_string();
            (s("trial"), s("seed"), s("outcome"), s("gaps"), t.f64("leaderless_ms"))
        })
        .collect();
    rows.sort_by_key(|r| r.0.parse::<u32>().unwrap());
    rows
}

/// Every table ends with a whole line and parses; every listed trial has
/// its whole history.
fn whole(out: &Path) {
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".csv") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            assert!(text.ends_with('\n'), "{name} is torn");
            let mut r = csv::Reader::from_reader(text.as_bytes());
            assert!(r.records().all(|rec| rec.is_ok()), "{name} does not parse");
        }
        assert!(!name.ends_with(".tmp"), "{name} left behind");
    }
    let events = read_table(&out.join("events.csv"));
    for t in read_table(&out.join("trials.csv")) {
        let ended = events.iter().any(|e| e.get("trial") == t.get("trial") && e.get("event") == "trial_end");
        assert!(ended, "trial {} listed without its whole history", t.get("trial"));
    }
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`).
mod alone {
    use super::*;

    #[test]
    fn interrupted_and_resumed_at_random_moments_the_run_is_the_same_run() {
        let lab = Lab::alone();
        let file = lab.file("i.yaml", EXPERIMENT);
        let reference = lab.run(&file).scale(0.1).trials(TRIALS as u32).output().expect_code(0);

        let out = lab.path().join("interrupted");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2026);
        let signals = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGKILL];
        let mut log = Vec::new();
        let started = Instant::now();
        for round in 0.. {
            let mut cmd = Command::new(bin());
            if out.join("experiment.yaml").exists() {
                cmd.args(["run", "--quiet", "--resume"]).arg(&out);
            } else {
                // The first run calibrates, so that signals land in it too.
                cmd.args(["run", "--quiet", "--time-scale", "0.1", "--trials"]).arg(TRIALS.to_string());
                cmd.arg(&file).arg("--out").arg(&out);
                if round > 0 {
                    cmd.arg("--no-calibrate");
                }
            }
            let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
            if round == 8 {
                // Enough: let it finish.
                let status = child.wait().unwrap();
                assert_eq!(status.code(), Some(0), "the last resume: {log:?}");
                break;
            }
            let after = Duration::from_millis(rng.random_range(50..2500));
            let signal = signals[rng.random_range(0..signals.len())];
            std::thread::sleep(after);
            let _ = kill(Pid::from_raw(child.id() as i32), signal);
            let status = child.wait_with_output().unwrap();
            let done = if out.join("trials.csv").exists() { read_table(&out.join("trials.csv")).len() } else { 0 };
            log.push(format!(
                "round {round}: {signal} after {after:?}: {:?}, {done} trials kept",
                status.status.code()
            ));
            let stderr = String::from_utf8_lossy(&status.stderr);
            assert!(!stderr.contains("panicked"), "{log:?}: {stderr}");
            match (signal, status.status.code()) {
                (_, Some(0)) => break, // finished before the signal came
                (Signal::SIGKILL, None) => {}
                (_, Some(130)) => {}
                other => panic!("{other:?}: {log:?}\n{stderr}"),
            }
            wait_for(Duration::from_secs(5), "no process of the interrupted run", || {
                processes_in(&out).is_empty().then_some(())
            });
        }
        eprintln!("{}", log.join("\n"));
        assert!(started.elapsed() < Duration::from_secs(120));
        whole(&out);
        let (alone, interrupted) = (results(&reference.out), results(&out));
        assert_eq!(interrupted.len(), TRIALS, "{log:?}");
        for (a, b) in alone.iter().zip(&interrupted) {
            assert_eq!((&a.0, &a.1, &a.2, &a.3), (&b.0, &b.1, &b.2, &b.3), "{log:?}");
            assert!((a.4 - b.4).abs() < 25.0, "trial {}: leaderless {} vs {} ms; {log:?}", a.0, a.4, b.4);
        }
    }
}
