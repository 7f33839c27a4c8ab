//! `leasequake compare`: two points of one real sweep whose difference is
//! known by construction, and what it refuses. The statistics themselves
//! (exact U, Hodges–Lehmann, Newcombe, Fisher, Holm, and how often two
//! samples of one distribution are called different) are unit-tested
//! beside their code.

use crate::helper::Timing;
use crate::helper::{Lab, bin};

/// Lease 8.5 s or 10.5 s, renewed every 3 s from the first acquisition,
/// watched every 1 s, `leaseUntil` kept to 10 ms (not the blog's whole
/// seconds, whose truncation would move each trial's expiry by up to a
/// second): the leader killed at 10.2 s (after its renewal at 9 s) leaves
/// a lease that ends at 17.5 s or 19.5 s, half a watch from any tick, and
/// is taken over at the 18 s or the 20 s tick. The kill gap is 2 s longer
/// with the longer lease in every trial. Eight trials a point: a trial the
/// machine disturbed is left out of the comparison, and six of eight still
/// make two samples that differ everywhere significant after Holm's
/// correction (six against four do not).
const SWEEP: &str = "name: cmp\nworkers: 3\nduration: 25s\ntrials: 8\nseed: 7\nrenew: 3s\nwatch: 1s\n\
                     expiry_resolution: 10ms\n\
                     faults:\n  - {at: 10.2s, target: leader, action: kill}\nsweep:\n  lease: [8.5s, 10.5s]\n";

/// Measured against the watch's half interval: holds the machine alone.
mod alone {
    use super::*;

    #[test]
    fn a_lease_two_seconds_longer_moves_the_kill_gap_by_two_seconds() {
        let lab = Lab::alone();
        let Some(timing) = Timing::new("compare: a lease 2 s longer", 10.0, 50.0) else { return };
        let scale = 0.1;
        let exp = lab.file("cmp.yaml", &(SWEEP.to_string() + &timing.yaml(scale)));
        let run = lab.run(&exp).scale(scale).jobs(2).output().expect_code(0);
        let trials = run.table("trials.csv");
        let mut points: Vec<String> = trials.iter().map(|t| t.get("setting").to_string()).collect();
        points.dedup();
        assert_eq!(points.len(), 2, "{points:?}");
        let dir = run.out.display().to_string();
        let side = |p: &str| format!("{dir}@{p}");
        let out = std::process::Command::new(bin())
            .args(["compare", &side(&points[0]), &side(&points[1]), "--json"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let differ = json["settings_differ"].as_array().unwrap();
        assert_eq!(differ.len(), 1, "only the lease differs: {differ:?}");
        assert_eq!(differ[0]["setting"], "lease");
        assert_eq!(json["same_run"], false);
        let kill = json["metrics"].as_array().unwrap().iter().find(|m| m["key"] == "gap.kill").expect("a kill gap row");
        // In the experiment's own time: the machine's tolerance, scaled.
        let tol_s = 2.0 * timing.tol / 1000.0 / scale;
        let (estimate, low, high) =
            (kill["estimate"].as_f64().unwrap(), kill["low"].as_f64().unwrap(), kill["high"].as_f64().unwrap());
        assert!((estimate - 2.0).abs() <= tol_s, "{kill}");
        assert!(low >= 2.0 - tol_s && high <= 2.0 + tol_s, "{kill}");
        // Significance needs the samples: judged where the machine left at
        // least six trials a point (what it disturbed is named in trials.csv).
        let kept = |side: &str| 8 - json[side]["disturbed_left_out"].as_u64().unwrap();
        if kept("a").min(kept("b")) >= 6 {
            assert_eq!(kill["significant"], true, "{kill}");
        } else {
            let reason = format!("the machine disturbed trials: {} and {} of 8 left", kept("a"), kept("b"));
            crate::helper::skip(crate::this_test!(), &format!("significance not judged: {reason}"));
        }
        let verdict = kill["verdict"].as_str().unwrap();
        assert!(verdict.starts_with("B's kill gap is ") && verdict.contains(" s longer ("), "{kill}");
        // The same point against itself: nothing differs, nothing is significant.
        let same =
            std::process::Command::new(bin()).args(["compare", &side(&points[0]), &side(&points[0])]).output().unwrap();
        let text = String::from_utf8_lossy(&same.stdout);
        assert_eq!(same.status.code(), Some(0), "{text}");
        assert!(text.contains("Settings: the same") && !text.contains("**"), "{text}");
        assert!(text.contains("A and B are the same run"), "{text}");
    }
}

#[test]
fn compare_refuses_what_it_cannot_compare_before_reading_anything_else() {
    let lab = Lab::new();
    let quiet = lab
        .file("quiet.yaml", "name: quiet\nworkers: 2\nduration: 2s\ntrials: 1\nseed: 1\nsweep:\n  lease: [9s, 12s]\n");
    let run = lab.run(&quiet).scale(0.1).output().expect_code(0);
    let dir = run.out.display().to_string();
    let cases: [(String, &str); 3] = [
        (dir.clone(), "has 2 sweep points: name one as"),
        (
            format!("{dir}@lease=10s"),
            "has no sweep point lease=10s (its points: lease=9s, lease=12s; as run, scaled, as trials.csv names them: \
             lease=900ms, lease=1200ms)",
        ),
        (lab.path().join("nowhere").display().to_string(), "not a results directory"),
    ];
    for (side, want) in cases {
        let out = std::process::Command::new(bin()).args(["compare", &side, &side]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{side}: {err}");
        assert!(err.contains(want), "{side}: want {want:?} in {err}");
    }
}
