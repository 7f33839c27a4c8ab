//! deploy/: what a scheduler runs, run here. The Slurm scripts and the
//! Kubernetes pods' commands are executed as their scheduler would (its
//! variables set, one process per task, all at once), the GNU parallel
//! line on this machine (`HOSTS=:`), and each ends in a merge that holds
//! every unit of the run. Linters check what cannot run here: shellcheck
//! every script, kubernetes-validate the manifests against the API schema.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::helper::{Lab, bin, read_table, repo};

/// 8 units, one per shard of the deploy files' 8.
const EIGHT: &str = "name: deployed\nworkers: 2\nduration: 1s\nseed: 5\ntrials: 8\n\
    faults:\n  - {at: 500ms, target: leader, action: kill}\n";

/// Run options every task gets here: fast, and no calibration per shard.
const QUICK: [&str; 4] = ["--time-scale", "0.05", "--no-calibrate", "--quiet"];

fn deploy(path: &str) -> PathBuf {
    repo().join("deploy").join(path)
}

/// A command with the built leasequake first on PATH, as in the image.
fn with_leasequake(program: impl AsRef<std::ffi::OsStr>, lab: &Lab) -> Command {
    let dir = bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(program);
    cmd.env("PATH", path).env("TMPDIR", lab.path().join("tmp")).current_dir(lab.path());
    cmd
}

fn ok(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A linter the tests need (scripts/test.sh installs it), run on `files`.
fn lint(tool: &str, args: &[&str], files: &[PathBuf]) {
    let out = Command::new(tool).args(args).args(files).output().unwrap_or_else(|e| {
        panic!("{tool}: {e}: the deploy checks need it (scripts/test.sh installs it)");
    });
    ok(tool, out);
}

fn trials_of(dir: &Path) -> Vec<String> {
    read_table(&dir.join("trials.csv")).iter().map(|r| r.get("trial").to_string()).collect()
}

fn all_eight() -> Vec<String> {
    (1..=8).map(|t| t.to_string()).collect()
}

#[test]
fn the_slurm_array_runs_its_shards_and_the_merge_job_merges_them() {
    let lab = Lab::new();
    let scripts =
        [deploy("shard.sh"), deploy("parallel.sh"), deploy("slurm/leasequake.sbatch"), deploy("slurm/merge.sbatch")];
    lint("shellcheck", &["-x"], &scripts);
    let batch = std::fs::read_to_string(deploy("slurm/leasequake.sbatch")).unwrap();
    let array = batch.lines().find_map(|l| l.strip_prefix("#SBATCH --array=")).expect("an #SBATCH --array line");
    let (first, last) = array.split_once('-').expect("an array A-B");
    let (first, last): (u32, u32) = (first.parse().unwrap(), last.parse().unwrap());
    assert_eq!(last - first + 1, 8, "the script's array is the 8 this test's experiment is cut for");
    // The count and first index the script writes out agree with its array.
    let var = |name: &str| -> u32 {
        batch.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).expect(name).parse().unwrap()
    };
    assert_eq!((var("first"), var("shards")), (first, 8));
    let file = lab.file("deployed.yaml", EIGHT);
    let results = lab.path().join("results");
    let task = |id: u32, (min, count): (u32, u32)| {
        with_leasequake("bash", &lab)
            .arg(deploy("slurm/leasequake.sbatch"))
            .env("SLURM_ARRAY_TASK_ID", id.to_string())
            .env("SLURM_ARRAY_TASK_MIN", min.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", count.to_string())
            .env("SLURM_SUBMIT_DIR", repo())
            .env("EXPERIMENTS", &file)
            .env("RESULTS", &results)
            .env("RUN_OPTIONS", QUICK.join(" "))
            .spawn()
            .unwrap()
    };
    // Task 3 first alone, as `sbatch --array=3` resubmits it (an array of
    // one): still shard 3 of 8. Then the whole array, task 3 again among
    // them: its shard is finished (nothing was missing), not run twice.
    ok("task 3 alone", task(first + 3, (first + 3, 1)).wait_with_output().unwrap());
    assert_eq!(trials_of(&results.join("shard-3")), ["4"]);
    let tasks: Vec<_> = (first..=last).map(|id| task(id, (first, 8))).collect();
    for t in tasks {
        ok("an array task", t.wait_with_output().unwrap());
    }
    assert_eq!(trials_of(&results.join("shard-3")), ["4"]);
    assert!(!results.join("interrupted").exists(), "nothing was set aside");
    let merge =
        with_leasequake("bash", &lab).arg(deploy("slurm/merge.sbatch")).env("RESULTS", &results).output().unwrap();
    ok("merge.sbatch", merge);
    assert_eq!(trials_of(&results.join("merged")), all_eight());
}

#[test]
fn the_kubernetes_jobs_are_valid_and_their_pods_commands_run_and_merge() {
    let lab = Lab::new();
    let manifests =
        [deploy("kubernetes/job.yaml"), deploy("kubernetes/merge-job.yaml"), deploy("kubernetes/volume.yaml")];
    lint("python3", &["-m", "kubernetes_validate", "--strict", "--quiet"], &manifests);
    let read =
        |p: &Path| -> serde_json::Value { serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let job = read(&manifests[0]);
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let pod = &spec["template"]["spec"]["containers"][0];
    let args: Vec<String> = pod["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let n: u64 = args.iter().find_map(|a| a.strip_prefix("k8s/")).expect("--shard k8s/N").parse().unwrap();
    assert_eq!((spec["completions"].as_u64(), spec["parallelism"].as_u64()), (Some(n), Some(n)), "one shard per pod");
    assert_eq!(n, 8, "the 8 this test's experiment is cut for");
    assert_eq!(pod["command"][0], "leasequake-shard", "deploy/shard.sh, as the Dockerfile installs it");
    let mounts: Vec<&str> =
        pod["volumeMounts"].as_array().unwrap().iter().map(|m| m["mountPath"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["/experiments", "/results"]);
    // The ConfigMap's files in /experiments, the volume at /results: each
    // pod's command, with its index, as the Job controller starts it.
    let experiments = lab.path().join("experiments");
    std::fs::create_dir(&experiments).unwrap();
    std::fs::write(experiments.join("deployed.yaml"), EIGHT).unwrap();
    let results = lab.path().join("results");
    let here = |a: &str| {
        a.replace("/experiments", &experiments.display().to_string())
            .replace("/results", &results.display().to_string())
    };
    let pods: Vec<_> = (0..n)
        .map(|k| {
            with_leasequake(deploy("shard.sh"), &lab)
                .args(args.iter().map(|a| here(a)))
                .args(QUICK)
                .env("JOB_COMPLETION_INDEX", k.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for p in pods {
        ok("a pod", p.wait_with_output().unwrap());
    }
    let merge = read(&manifests[1]);
    let command: Vec<String> = merge["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| here(a.as_str().unwrap()))
        .collect();
    ok("the merge pod", with_leasequake(&command[0], &lab).args(&command[1..]).output().unwrap());
    // A directory of experiments: a suite, merged with its README.
    assert_eq!(trials_of(&results.join("merged/deployed")), all_eight());
    assert!(results.join("merged/README.md").exists());
}

#[test]
fn the_gnu_parallel_line_runs_the_shards_and_merges_them() {
    let lab = Lab::new();
    let file = lab.file("deployed.yaml", EIGHT);
    let parallel = |out: &str| {
        with_leasequake("bash", &lab)
            .arg(deploy("parallel.sh"))
            .args(["deployed.yaml", "4", out])
            .env("HOSTS", ":")
            .env("RUN_OPTIONS", QUICK[..3].join(" "))
            .output()
            .unwrap_or_else(|e| panic!("bash: {e}"))
    };
    ok("parallel.sh (GNU parallel: scripts/test.sh installs it)", parallel("merged"));
    assert_eq!(trials_of(&lab.path().join("merged")), all_eight());
    let seed = |out: &str| -> serde_json::Value {
        let host: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(lab.path().join(out).join("host.json")).unwrap()).unwrap();
        assert_eq!(host["shards"].as_array().map(Vec::len), Some(4));
        host["seed"].clone()
    };
    assert_eq!(seed("merged"), 5);
    // Again, the file changed: its own shards, never the last run's.
    std::fs::write(&file, EIGHT.replace("seed: 5", "seed: 6")).unwrap();
    let again = parallel("merged");
    assert_eq!(again.status.code(), Some(2), "an existing OUT is refused");
    ok("parallel.sh again", parallel("merged-2"));
    assert_eq!(seed("merged-2"), 6);
}

#[test]
fn a_shard_task_stopped_by_its_scheduler_cleans_up_and_its_retry_finishes_it() {
    let lab = Lab::new();
    // 8 trials of 300 ms, one at a time: long enough to be stopped midway.
    let file = lab.file("long.yaml", &EIGHT.replace("duration: 1s", "duration: 6s"));
    let results = lab.path().join("results");
    let task = || {
        with_leasequake(deploy("shard.sh"), &lab)
            .arg(&file)
            .arg(&results)
            .arg("0/1")
            .args(QUICK)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = task();
    let trials = results.join("shard-0/trials.csv");
    crate::helper::wait_for(std::time::Duration::from_secs(30), "a finished trial", || {
        (std::fs::read_to_string(&trials).ok()?.lines().count() >= 2).then_some(())
    });
    // What a scheduler stopping a pod does: SIGTERM to its first process.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(130), "{}", String::from_utf8_lossy(&stopped.stderr));
    let kept = trials_of(&results.join("shard-0"));
    assert!(!kept.is_empty() && kept.len() < 8, "stopped midway, finished trials kept: {kept:?}");
    assert!(crate::helper::processes_in(lab.path()).is_empty(), "nothing left running");
    // The retry finishes the shard rather than starting it again.
    let retried = task().wait_with_output().unwrap();
    assert!(retried.status.success(), "{}", String::from_utf8_lossy(&retried.stderr));
    assert!(String::from_utf8_lossy(&retried.stderr).contains("finishing the earlier attempt"));
    assert_eq!(trials_of(&results.join("shard-0")), all_eight());
}
