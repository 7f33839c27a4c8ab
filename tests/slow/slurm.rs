//! deploy/slurm/ on a real Slurm: a one-node cluster on this machine
//! (scripts/slurm-cluster.sh: munged, slurmctld and slurmd of its own), the
//! array submitted with sbatch as a user would, one of its tasks requeued
//! mid-run, the merge job after it (afterok); the merged run is the
//! unsharded one, and the cluster leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::helper::{Lab, bin, processes_in, repo, undisturbed_verdicts, units_of, wait_for};

/// 24 units, three per shard of the array's 8; each trial 3 s at the scale
/// below, so that a shard runs long enough to be requeued inside. The
/// leader is killed late enough that its gap is still open when the trial
/// ends, wherever the kill lands: every trial's checker result is then the
/// same from run to run. (An earlier kill left the gap to the blog's
/// worker, which a kill inside a renewal wedges on an empty lock file: one
/// trial of 24 in a fresh-clone run.)
const TWENTY_FOUR: &str = "name: on-slurm\nworkers: 2\nduration: 60s\nseed: 11\ntrials: 24\n\
    faults:\n  - {at: 57s, jitter: 1s, target: leader, action: kill}\n";

const RUN_OPTIONS: &str = "--time-scale 0.05 --no-calibrate --quiet";

/// A cluster of the test's own; stopped (and its directory removed) when
/// dropped, whatever happened.
struct Cluster {
    dir: PathBuf,
    conf: String,
    stopped: bool,
}

impl Cluster {
    fn start(lab: &Lab) -> Cluster {
        let dir = lab.path().join("cluster");
        let out = Command::new(repo().join("scripts/slurm-cluster.sh")).arg("start").arg(&dir).output().unwrap();
        assert!(out.status.success(), "the cluster did not start: {}", String::from_utf8_lossy(&out.stderr));
        // Stopped when dropped from here on, whatever follows.
        let mut cluster = Cluster { dir, conf: String::new(), stopped: false };
        let stdout = String::from_utf8_lossy(&out.stdout);
        cluster.conf = stdout.lines().find_map(|l| l.strip_prefix("SLURM_CONF=")).expect("SLURM_CONF=…").to_string();
        cluster
    }

    /// A Slurm client command for this cluster, leasequake first on PATH
    /// (what `--export=ALL` hands each job).
    fn client(&self, program: &str, lab: &Lab) -> Command {
        let path = format!("{}:{}", bin().parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf).env("PATH", path).env("TMPDIR", lab.path());
        cmd
    }

    /// Run a client; its stdout, trimmed.
    fn ask(&self, lab: &Lab, program: &str, args: &[&str]) -> String {
        let out = self.client(program, lab).args(args).output().unwrap();
        assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Every job's state, `JOBID STATE` a line (array tasks as `J_K`).
    fn queue(&self, lab: &Lab) -> String {
        self.ask(lab, "squeue", &["-h", "-r", "-o", "%i %T"])
    }

    fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            let out = Command::new(repo().join("scripts/slurm-cluster.sh")).arg("stop").arg(&self.dir).output();
            let out = out.unwrap();
            assert!(out.status.success() || std::thread::panicking(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Alone: the trials inside the tasks are compared with an unsharded run's,
/// trial by trial, which another test's load could make differ.
mod alone {
    use super::*;

    #[test]
    fn the_array_runs_on_a_real_slurm_survives_a_requeue_and_its_merge_job_merges_it() {
        let script = repo().join("scripts/slurm-cluster.sh");
        let lint = Command::new("shellcheck")
            .arg("-x")
            .arg(&script)
            .output()
            .expect("shellcheck (scripts/test.sh installs it)");
        assert!(lint.status.success(), "{}", String::from_utf8_lossy(&lint.stdout));
        let lab = Lab::alone();
        let file = lab.file("on-slurm.yaml", TWENTY_FOUR);
        let results = lab.path().join("results");
        let logs = lab.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut cluster = Cluster::start(&lab);
        let log = |name: &str| format!("--output={}/{name}", logs.display());

        // As deploy/slurm/leasequake.sbatch says: from the repository's root,
        // the merge to follow once every task has succeeded. One CPU a task
        // here, so that two run at once on this machine's two.
        let export = format!(
            "--export=ALL,EXPERIMENTS={},RESULTS={},RUN_OPTIONS={RUN_OPTIONS}",
            file.display(),
            results.display()
        );
        let submit = |args: &[&str]| -> String {
            let out = cluster.client("sbatch", &lab).current_dir(repo()).args(args).output().unwrap();
            assert!(out.status.success(), "sbatch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let array = submit(&[
            "--parsable",
            "--cpus-per-task=1",
            &log("task-%A_%a.log"),
            &export,
            "deploy/slurm/leasequake.sbatch",
        ]);
        let merge = submit(&[
            "--parsable",
            &format!("--dependency=afterok:{array}"),
            &log("merge-%j.log"),
            &format!("--export=ALL,RESULTS={}", results.display()),
            "deploy/slurm/merge.sbatch",
        ]);

        // Task 5, requeued once it has finished a trial and is running the next.
        let task = format!("{array}_5");
        let shard = results.join("shard-5");
        // Whole rows only: the task may be writing the next one.
        let rows = |dir: &Path| {
            let text = std::fs::read_to_string(dir.join("trials.csv")).unwrap_or_default();
            text.matches('\n').count().saturating_sub(1)
        };
        wait_for(Duration::from_secs(120), "task 5 to finish a trial", || (rows(&shard) >= 1).then_some(()));
        let state = cluster.ask(&lab, "squeue", &["-h", "-j", &task, "-o", "%T"]);
        assert_eq!((state.as_str(), rows(&shard) < 3), ("RUNNING", true), "task 5 still running its shard");
        cluster.ask(&lab, "scontrol", &["requeue", &task]);
        // A requeued job is eligible two minutes later: now, here.
        wait_for(Duration::from_secs(30), "task 5 to be pending again", || {
            let state = cluster.ask(&lab, "squeue", &["-h", "-j", &task, "-o", "%T"]);
            (state != "RUNNING" && state != "COMPLETING").then_some(())
        });
        cluster.ask(&lab, "scontrol", &["update", &format!("JobId={task}"), "StartTime=now"]);

        wait_for(Duration::from_secs(300), "the array and the merge job to leave the queue", || {
            cluster.queue(&lab).is_empty().then_some(())
        });
        let merged = results.join("merged");
        let read_log = |name: &str| std::fs::read_to_string(logs.join(name)).unwrap_or_default();
        assert!(
            merged.join("trials.csv").exists(),
            "the merge job ran after the array: {}",
            read_log(&format!("merge-{merge}.log"))
        );
        let task_log = read_log(&format!("task-{array}_5.log"));
        assert!(task_log.contains("finishing the earlier attempt"), "task 5 resumed its shard: {task_log}");
        assert_eq!(rows(&shard), 3, "task 5's shard whole after the requeue");
        assert!(!results.join("interrupted").exists(), "nothing set aside: the cut shard was resumed, not rerun");

        // The merged run is the unsharded one: units, seeds, schedules, and
        // what the checker made of each trial (a kill 57–58 s in, renewed
        // every 3 s on a 9 s lease: one gap, still open at 60 s, no wedge).
        let whole = lab.path().join("whole");
        let run = Command::new(bin())
            .arg("run")
            .arg(&file)
            .args(RUN_OPTIONS.split(' '))
            .arg("--out")
            .arg(&whole)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
        let (trials, faults) = units_of(&merged);
        assert_eq!(trials.len(), 24);
        assert_eq!((trials, faults), units_of(&whole), "the same trials, seeds and fault schedules");
        let (merged_verdicts, whole_verdicts, disturbed) = undisturbed_verdicts(&merged, &whole);
        assert_eq!(merged_verdicts, whole_verdicts, "the same per-trial checker results (disturbed: {disturbed:?})");
        assert!(merged_verdicts.values().all(|v| v == &["1", "1", "1", "false", "ok"]), "{merged_verdicts:?}");

        // Stopped, the cluster leaves no daemon, job or file behind.
        cluster.stop();
        assert!(!cluster.dir.exists(), "the cluster's directory is removed");
        wait_for(Duration::from_secs(10), "every daemon and job of the cluster to be gone", || {
            processes_in(lab.path()).is_empty().then_some(())
        });
        let daemons = Command::new("pgrep").args(["-f", &cluster.conf]).output().unwrap();
        assert!(daemons.stdout.is_empty(), "{}", String::from_utf8_lossy(&daemons.stdout));
    }
}
