//! `run --shard` and `merge`: shards run as separate processes hold,
//! together, exactly the unsharded run's trials, each with its number, seed
//! and fault schedule, and merge back into the directory the unsharded run
//! writes; what no shard could run consistently, and any set of shards that
//! is not one whole run, is refused up front.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::helper::{Lab, bin, read_table, undisturbed_verdicts, units_of};

const SWEPT: &str = "name: sharded\nworkers: 3\nduration: 4s\nseed: 42\ntrials: 5\n\
    faults:\n  - {at: 2s, jitter: 1s, target: leader, action: kill}\n  - {at: 1s, jitter: 2s, target: watcher, action: pause, duration: 500ms}\n\
    sweep:\n  workers: [2, 3]\n";

#[test]
fn shards_run_apart_are_together_the_unsharded_run() {
    let lab = Lab::new();
    let file = lab.file("sharded.yaml", SWEPT);
    let whole = lab.run(&file).scale(0.05).jobs(2).output().expect_code(0);
    let (all_trials, all_faults) = units_of(&whole.out);
    assert_eq!(all_trials.len(), 10, "5 trials × 2 points");
    // Three shards at once, each its own process, as a scheduler runs them.
    let runs: Vec<_> =
        (0..3).map(|k| lab.run(&file).scale(0.05).arg("--shard").arg(format!("{k}/3")).spawn()).collect();
    let (mut trials, mut faults, mut shards) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
    for (k, (child, out)) in runs.into_iter().enumerate() {
        let done = child.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(0), "shard {k}: {}", String::from_utf8_lossy(&done.stderr));
        let (t, f) = units_of(&out);
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
        shards.push(out);
    }
    assert_eq!(trials, all_trials, "the same trials, settings and seeds");
    assert_eq!(faults, all_faults, "the same fault schedule, to the µs");

    // Merged (given out of order), they are the unsharded run's directory.
    let merged = lab.path().join("merged");
    let done = merge(&merged, &[&shards[2], &shards[0], &shards[1]]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let (t, f) = units_of(&merged);
    assert_eq!(t, all_trials, "merged: the same units and seeds");
    assert_eq!(f, all_faults, "merged: the same fault schedule");
    // What the checker makes of each trial: with the leader killed 1–3 s
    // into a 9 s lease, the gap it opens is still open at 4 s in every trial.
    let (merged_verdicts, whole_verdicts, disturbed) = undisturbed_verdicts(&merged, &whole.out);
    assert_eq!(merged_verdicts, whole_verdicts, "the same per-trial checker results (disturbed: {disturbed:?})");
    assert!(merged_verdicts.values().all(|v| v == &["1", "1", "1", "false", "ok"]), "{merged_verdicts:?}");
    // The history is the shards' rows, in trial order; what is derived from
    // it is exactly what the checker recomputes from it.
    let events = read_table(&merged.join("events.csv"));
    let shard_events: usize = shards.iter().map(|d| read_table(&d.join("events.csv")).len()).sum();
    assert_eq!(events.len(), shard_events);
    let order: Vec<u32> = events.iter().map(|r| r.get("trial").parse().unwrap()).collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "events.csv in trial order");
    let checked = lab.path().join("checked");
    let check =
        std::process::Command::new(bin()).arg("check").arg(&merged).arg("--out").arg(&checked).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stderr));
    for table in ["trials.csv", "gaps.csv", "summary.csv", "evictions.csv", "pauses.csv"] {
        let read = |d: &Path| std::fs::read_to_string(d.join(table)).unwrap();
        assert_eq!(read(&merged), read(&checked), "{table}: as the checker recomputes it");
    }
    let summary = read_table(&merged.join("summary.csv"));
    assert_eq!(summary.iter().map(|r| r.get("n")).collect::<Vec<_>>(), ["5", "5"]);
    for file in ["timeline.svg", "dial.svg", "report.html", "trials/0001", "trials/0010"] {
        assert!(merged.join(file).exists(), "{file}");
    }
    // Every shard's host record, in shard order.
    let host: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("host.json")).unwrap()).unwrap();
    let indices: Vec<_> = host["shards"].as_array().unwrap().iter().map(|h| h["shard"]["index"].clone()).collect();
    assert_eq!(indices, [0, 1, 2]);
    assert_eq!(host["seed"], 42);
    assert!(std::fs::read_to_string(merged.join("report.html")).unwrap().contains("Merged by"));
}

/// `leasequake merge OUT DIR…`.
fn merge(out: &Path, dirs: &[&Path]) -> std::process::Output {
    std::process::Command::new(bin()).arg("merge").arg(out).args(dirs).output().unwrap()
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

const SMALL: &str = "name: small\nworkers: 2\nduration: 1s\nseed: 9\ntrials: 4\n\
    faults:\n  - {at: 500ms, target: leader, action: kill}\n";

#[test]
fn shards_that_are_not_one_whole_run_are_refused_before_anything_is_written() {
    let lab = Lab::new();
    let file = lab.file("small.yaml", SMALL);
    let shard = |k: u32, scale: f64, extra: &[&str]| {
        let done =
            lab.run(&file).scale(scale).arg("--shard").arg(format!("{k}/2")).args(extra.iter().copied()).output();
        done.expect_code(0).out
    };
    let s0 = shard(0, 0.05, &[]);
    // The same file by another path, with its own --jobs: the same run.
    let s1 = {
        let by_another_path = lab.path().join(".").join("small.yaml");
        let run = lab.run(by_another_path).scale(0.05).args(["--shard", "1/2", "--jobs", "2"]);
        run.output().expect_code(0).out
    };
    let other_seed = shard(1, 0.05, &["--seed", "7"]);
    let other_scale = shard(1, 0.1, &[]);
    let whole = lab.run(&file).scale(0.05).output().expect_code(0).out;
    // A shard copied and changed as another build, file or shard would have.
    let altered = |name: &str, from: &Path, edit: &dyn Fn(&mut serde_json::Value)| -> PathBuf {
        let to = lab.path().join(name);
        let copied = std::process::Command::new("cp").arg("-r").arg(from).arg(&to).status().unwrap();
        assert!(copied.success());
        let mut host: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(to.join("host.json")).unwrap()).unwrap();
        edit(&mut host);
        std::fs::write(to.join("host.json"), host.to_string()).unwrap();
        to
    };
    let other_build = altered("build", &s1, &|h| h["build"] = "0123abcd".into());
    let other_file = altered("file", &s1, &|h| h["experiment_hash"] = "00000000deadbeef".into());
    let posing = altered("posing", &s0, &|h| h["shard"]["index"] = 1.into());
    let unfinished = altered("unfinished", &s1, &|_| {});
    let rows = std::fs::read_to_string(unfinished.join("trials.csv")).unwrap();
    let kept: Vec<&str> = rows.lines().collect();
    std::fs::write(unfinished.join("trials.csv"), kept[..kept.len() - 1].join("\n") + "\n").unwrap();
    let full = lab.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("mine.txt"), "a user's file").unwrap();

    let out = lab.path().join("merged");
    let inside = s0.join("trials").join("merged");
    let cases: [(&[&Path], &Path, &str); 12] = [
        (&[&s0], &out, "shard(s) 1 of 2 missing"),
        (&[&s0, &s1, &s0], &out, "shard 0 of 2 is given twice"),
        (&[&s0, &whole], &out, "was not run with --shard"),
        (&[&s0, &other_build], &out, "different builds of leasequake"),
        (&[&s0, &other_file], &out, "different experiment files"),
        (&[&s0, &other_seed], &out, "different seeds (9 and 7)"),
        (&[&s0, &other_scale], &out, "scaled_by"),
        (&[&s0, &posing], &out, "holds trial 1, which belongs to"),
        (&[&s0, &unfinished], &out, "lacks trial(s) 4 of its 2"),
        (&[&s0, &s1], &full, "not empty"),
        (&[&s0, &s1], &inside, "inside the shard directory"),
        (&[&s0, &s1], Path::new("."), "name a new directory"),
    ];
    for (dirs, to, want) in cases {
        let done = merge(to, dirs);
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(2), "{want}: {stderr}");
        assert!(stderr.contains(want), "want {want:?} in {stderr}");
        assert!(!out.exists(), "{want}: {} written", out.display());
        let leftovers: Vec<_> = std::fs::read_dir(lab.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("merging"))
            .collect();
        assert!(leftovers.is_empty(), "{want}: {leftovers:?}");
    }
    assert_eq!(std::fs::read_to_string(full.join("mine.txt")).unwrap(), "a user's file");
    assert!(!inside.exists());
    // A shard's trials are credited to the build that began it: another
    // build may not finish it either.
    let resumed = std::process::Command::new(bin()).args(["run", "--resume"]).arg(&other_build).output().unwrap();
    assert_eq!(resumed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&resumed.stderr).contains("was begun by build 0123abcd"));
    // The shards themselves, untouched, merge; an empty OUT is taken.
    std::fs::create_dir(&out).unwrap();
    let done = merge(&out, &[&s1, &s0]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let trials: Vec<String> = read_table(&out.join("trials.csv")).iter().map(|r| r.get("trial").to_string()).collect();
    assert_eq!(trials, ["1", "2", "3", "4"]);
}

#[test]
fn a_suites_shards_merge_into_the_suite_with_its_readme() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::fs::write(suite.join("a.yaml"), SMALL.replace("name: small", "name: first")).unwrap();
    // The second expects what never happens: every shard, and the merge,
    // fail it as the unsharded run would.
    let second = SMALL.replace("name: small", "name: second").replace("trials: 4", "trials: 3");
    std::fs::write(suite.join("b.yaml"), second + "expect: {wedged: true}\n").unwrap();
    let runs: Vec<_> =
        (0..2).map(|k| lab.run(&suite).scale(0.05).arg("--shard").arg(format!("{k}/2")).spawn()).collect();
    let mut shards = Vec::new();
    for (child, out) in runs {
        let done = child.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(1), "{}", String::from_utf8_lossy(&done.stderr));
        shards.push(out);
    }
    // The suite's 7 units: first's trials are units 0–3, second's 4–6.
    let held = |d: &Path, name: &str| -> Vec<String> {
        read_table(&d.join(name).join("trials.csv")).iter().map(|r| r.get("trial").to_string()).collect()
    };
    assert_eq!(
        (held(&shards[0], "first"), held(&shards[0], "second")),
        (vec!["1".into(), "3".into()], vec!["1".into(), "3".into()])
    );
    assert_eq!(
        (held(&shards[1], "first"), held(&shards[1], "second")),
        (vec!["2".into(), "4".into()], vec!["2".into()])
    );
    // A suite writes its own record last: a shard killed and then finished
    // experiment by experiment (`run --resume`) has none.
    std::fs::remove_file(shards[1].join("host.json")).unwrap();
    let out = lab.path().join("merged");
    let done = merge(&out, &[&shards[0], &shards[1]]);
    assert_eq!(done.status.code(), Some(1), "{}", String::from_utf8_lossy(&done.stderr));
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(said.contains("expectations:   1 of 1 failed") && said.contains("    ✗ wedged: true\n"), "{said}");
    assert_eq!(said.matches("(expected wedged: true)").count(), 3, "each of the 3 trials: {said}");
    assert_eq!(held(&out, "first"), ["1", "2", "3", "4"]);
    assert_eq!(held(&out, "second"), ["1", "2", "3"]);
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("[first](first)") && readme.contains("[second](second)"), "{readme}");
    assert!(readme.contains("from 2 shards of one run"), "{readme}");
    assert!(out.join("report.html").exists() && out.join("second/timeline.svg").exists());
}
