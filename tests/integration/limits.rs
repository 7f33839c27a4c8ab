//! When the machine runs out of processes: a pids cgroup (which binds root
//! too, unlike RLIMIT_NPROC) too small before the run is refused up front;
//! one that fills during the run ends it with a message and exit 3, never a
//! panic, and nothing left running.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::helper::{Lab, bin, read_table, wait_for};

/// A cgroup v1 `pids` group of our own, removed on drop; None where the
/// machine has none we may make.
struct PidsGroup(PathBuf);

impl PidsGroup {
    fn new(name: &str) -> Option<PidsGroup> {
        let dir = Path::new("/sys/fs/cgroup/pids").join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(PidsGroup(dir))
    }

    fn set_max(&self, max: &str) {
        std::fs::write(self.0.join("pids.max"), max).unwrap();
    }

    fn command(&self, args: &[&str], out: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(args).arg("--out").arg(out);
        let procs = self.0.join("cgroup.procs");
        // SAFETY: open and write are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || std::fs::write(&procs, "0"));
        }
        cmd
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        for _ in 0..500 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

const SLOW: &str = "name: slow\nworkers: 5\nduration: 6s\nfaults:\n  - at: 2s\n    target: leader\n    action: kill\n";

#[test]
fn too_few_processes_is_refused_before_anything_runs_and_running_out_is_exit_3() {
    let Some(group) = PidsGroup::new("leasequake-test-pids") else {
        eprintln!("no cgroup v1 pids hierarchy to write to here: nothing to test");
        return;
    };
    let lab = Lab::new();
    let file = lab.file("slow.yaml", SLOW);
    let args = ["run", file.to_str().unwrap(), "--quiet", "--no-calibrate", "--time-scale", "0.05", "--trials", "30"];

    group.set_max("8");
    let out = lab.path().join("refused");
    let run = group.command(&args, &out).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("pids.max"), "{stderr}");
    assert!(!out.exists(), "nothing may be written");

    group.set_max("max");
    let out = lab.path().join("starved");
    let mut cmd = group.command(&args, &out);
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    wait_for(Duration::from_secs(30), "a finished trial", || {
        (out.join("trials.csv").exists() && !read_table(&out.join("trials.csv")).is_empty()).then_some(())
    });
    // No new process or thread from now on (a limit below the count stops
    // new ones and touches none that run).
    group.set_max("1");
    let run = child.wait_with_output().unwrap();
    group.set_max("max");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("Resource temporarily unavailable"), "{stderr}");
    assert!(!read_table(&out.join("trials.csv")).is_empty(), "finished trials are kept");
}
