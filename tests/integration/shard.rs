//! `run --shard`: shards run as separate processes hold, together, exactly
//! the unsharded run's trials, each with its number, seed and fault
//! schedule; what no shard could run consistently is refused up front.

use std::collections::BTreeMap;

use crate::helper::{Lab, Row, read_table};

const SWEPT: &str = "name: sharded\nworkers: 3\nduration: 4s\nseed: 42\ntrials: 5\n\
    faults:\n  - {at: 2s, jitter: 1s, target: leader, action: kill}\n  - {at: 1s, jitter: 2s, target: watcher, action: pause, duration: 500ms}\n\
    sweep:\n  workers: [2, 3]\n";

/// trial → (setting, seed).
type Units = BTreeMap<String, (String, String)>;
/// (trial, fault, action) → scheduled_ms.
type Schedule = BTreeMap<(String, String, String), String>;

fn units(trials: &[Row], faults: &[Row]) -> (Units, Schedule) {
    let t =
        trials.iter().map(|r| (r.get("trial").to_string(), (r.get("setting").to_string(), r.get("seed").to_string())));
    let f = faults.iter().map(|r| {
        (
            (r.get("trial").to_string(), r.get("fault").to_string(), r.get("action").to_string()),
            r.get("scheduled_ms").to_string(),
        )
    });
    (t.collect(), f.collect())
}

#[test]
fn shards_run_apart_are_together_the_unsharded_run() {
    let lab = Lab::new();
    let file = lab.file("sharded.yaml", SWEPT);
    let whole = lab.run(&file).scale(0.05).jobs(2).output().expect_code(0);
    let (all_trials, all_faults) = units(&whole.table("trials.csv"), &whole.table("faults.csv"));
    assert_eq!(all_trials.len(), 10, "5 trials × 2 points");
    // Three shards at once, each its own process, as a scheduler runs them.
    let runs: Vec<_> =
        (0..3).map(|k| lab.run(&file).scale(0.05).arg("--shard").arg(format!("{k}/3")).spawn()).collect();
    let (mut trials, mut faults) = (BTreeMap::new(), BTreeMap::new());
    for (k, (child, out)) in runs.into_iter().enumerate() {
        let done = child.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(0), "shard {k}: {}", String::from_utf8_lossy(&done.stderr));
        let (t, f) = units(&read_table(&out.join("trials.csv")), &read_table(&out.join("faults.csv")));
        for (trial, unit) in t {
            let n: u64 = trial.parse().unwrap();
            assert_eq!((n - 1) % 3, k as u64, "trial {trial} in shard {k}");
            assert!(trials.insert(trial.clone(), unit).is_none(), "trial {trial} in two shards");
        }
        faults.extend(f);
        let host: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("host.json")).unwrap()).unwrap();
        assert_eq!(host["shard"], serde_json::json!({"index": k, "count": 3, "first_unit": 0}));
        // One file, one build: what a merge will hold the shards to.
        let unsharded: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(whole.out.join("host.json")).unwrap()).unwrap();
        assert_eq!((&host["experiment_hash"], &host["build"]), (&unsharded["experiment_hash"], &unsharded["build"]));
        assert_eq!(host["experiment_hash"].as_str().map(str::len), Some(16));
    }
    assert_eq!(trials, all_trials, "the same trials, settings and seeds");
    assert_eq!(faults, all_faults, "the same fault schedule, to the µs");
}

#[test]
fn a_shard_that_could_not_know_its_units_is_refused_before_anything_runs() {
    let lab = Lab::new();
    let drawn = lab.file("drawn.yaml", &SWEPT.replace("seed: 42\n", ""));
    let fixed = lab.file("fixed.yaml", SWEPT);
    let adaptive = lab.file("adaptive.yaml", &SWEPT.replace("trials: 5", "trials: {until: {ci_width: 20%}, max: 50}"));
    type Case<'a> = (&'a std::path::Path, &'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 6] = [
        (&drawn, &["--shard", "0/2"], &[], "needs a fixed seed"),
        (&adaptive, &["--shard", "0/2"], &[], "no shard can know"),
        (&fixed, &["--shard", "2/2"], &[], "counts from 0"),
        (&fixed, &["--shard", "k8s/2"], &[], "JOB_COMPLETION_INDEX is not set"),
        (
            &fixed,
            &["--shard", "slurm"],
            &[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MIN", "5"), ("SLURM_ARRAY_TASK_COUNT", "4")],
            "below SLURM_ARRAY_TASK_MIN",
        ),
        (&fixed, &["--shard", "1:2"], &[], "expected K/N"),
    ];
    for (file, args, env, want) in cases {
        let mut run = lab.run(file).args(args.iter().copied());
        for (k, v) in env {
            run = run.env(k, v);
        }
        let done = run.output().expect_code(2);
        assert!(done.stderr().contains(want), "{args:?}: want {want:?} in {}", done.stderr());
        assert!(!done.out.exists(), "{args:?} wrote {}", done.out.display());
    }
    // --seed fixes a drawn one; a Slurm array from 5 runs its task 6 as shard 1.
    let env = [("SLURM_ARRAY_TASK_ID", "6"), ("SLURM_ARRAY_TASK_MIN", "5"), ("SLURM_ARRAY_TASK_COUNT", "4")];
    let mut run = lab.run(&drawn).scale(0.05).args(["--seed", "42", "--shard", "slurm"]);
    for (k, v) in env {
        run = run.env(k, v);
    }
    let done = run.output().expect_code(0);
    let trials: Vec<String> = done.table("trials.csv").iter().map(|t| t.get("trial").to_string()).collect();
    assert_eq!(trials, ["2", "6", "10"]);
}
