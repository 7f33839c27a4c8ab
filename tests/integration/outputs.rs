//! Output faults: the disk fills, a directory turns read-only, mid-run.
//! Finished trials stay whole, the error is clear, and `--resume` completes
//! the run once the fault is gone.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::helper::{Lab, bin, read_table, wait_for};

const SHORT: &str = "name: x\nworkers: 2\nduration: 6s\nfaults:\n  - at: 2s\n    target: leader\n    action: kill\n";

/// Unmounts on drop, so that a failing test leaves no mount behind.
struct Mounted(Option<String>);

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            sh(&format!("umount -l '{path}'"));
        }
    }
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { nix::libc::geteuid() == 0 }
}

fn sh(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).status().is_ok_and(|s| s.success())
}

/// Every trial in trials.csv has its whole history (through `trial_end`),
/// and no temp file is left.
fn finished_trials_are_whole(out: &Path) -> usize {
    let trials = read_table(&out.join("trials.csv"));
    // The history may end in a row torn by the fault (a resume drops it):
    // read it to its last whole line.
    let text = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    let ended: std::collections::BTreeSet<&str> = whole
        .lines()
        .filter(|l| l.split(',').nth(4) == Some("trial_end"))
        .filter_map(|l| l.split(',').next())
        .collect();
    for t in &trials {
        let trial = t.get("trial");
        assert!(ended.contains(trial), "trial {trial} is listed but its history is cut short");
    }
    let tmp: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "left behind: {tmp:?}");
    trials.len()
}

/// 30 short trials into `out`; with `small_files`, under `ulimit -f 8`
/// (8 KiB), which fails a write the way a full disk does.
fn thirty_trials(file: &Path, out: &Path, small_files: bool) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("run").arg(file).args(["--quiet", "--no-calibrate", "--time-scale", "0.05", "--trials", "30", "--out"]);
    cmd.arg(out);
    if small_files {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, 8192, 8192)
                    .map_err(std::io::Error::from)
            });
        }
    }
    cmd
}

fn resume(out: &Path) -> std::process::Output {
    Command::new(bin()).args(["run", "--quiet", "--resume"]).arg(out).output().unwrap()
}

#[test]
fn a_full_disk_keeps_finished_trials_and_the_run_resumes_once_space_returns() {
    let lab = Lab::new();
    let file = lab.file("x.yaml", SHORT);
    let disk = lab.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    // A tmpfs of a few pages where we may mount one; else `ulimit -f`,
    // which fails a write the same way, one file at a time.
    let mounted = root() && sh(&format!("mount -t tmpfs -o size=160k tmpfs '{}'", disk.display()));
    let _unmount = Mounted(mounted.then(|| disk.display().to_string()));
    let out = disk.join("out");
    let run = thirty_trials(&file, &out, !mounted).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    let said = if mounted { "No space left on device" } else { "File too large" };
    assert!(stderr.contains(said), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let kept = finished_trials_are_whole(&out);
    assert!(kept < 30, "the disk never filled ({kept} trials)");
    if mounted {
        assert!(sh(&format!("mount -o remount,size=64m '{}'", disk.display())));
    }
    let resumed = resume(&out);
    let done = finished_trials_are_whole(&out);
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(done, 30);
}

#[test]
fn a_directory_turned_read_only_mid_run_stops_it_cleanly_and_resume_completes() {
    let lab = Lab::new();
    let file = lab.file("x.yaml", SHORT);
    let run = lab.run(&file).scale(0.05).trials(40);
    let (child, out) = run.spawn();
    let trials = out.join("trials");
    wait_for(Duration::from_secs(30), "two finished trials", || {
        (out.join("trials.csv").exists() && read_table(&out.join("trials.csv")).len() >= 2).then_some(())
    });
    // Read-only for everyone, root too: a read-only bind mount over the
    // trial directories. Without root, taking the write bit does it.
    // It is made read-only aside and moved into place in one step: a bind
    // made read-only where it stands is "busy" once a worker has opened its
    // log through it.
    let t = trials.display();
    let aside = lab.path().join("aside");
    std::fs::create_dir(&aside).unwrap();
    let a = aside.display();
    let bound = root()
        && sh(&format!("mount --bind '{t}' '{a}' && mount -o remount,bind,ro '{a}' && mount --move '{a}' '{t}'"));
    let unmount = Mounted(bound.then(|| t.to_string()));
    if !bound {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&trials, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    drop(unmount);
    if !bound {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&trials, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "bound {bound}: {stderr}");
    // The trial that met the read-only directory names it: it could not
    // make its own directory, or made it but could not create its workers'
    // logs or its events file in it, or its workers could not start in it.
    let named =
        ["trial directory", "cannot create worker log", "cannot keep the trial's events", "exited before the barrier"]
            .iter()
            .any(|place| stderr.contains(place));
    assert!(named && stderr.contains(&t.to_string()), "{stderr}");
    let kept = finished_trials_are_whole(&out);
    assert!((2..40).contains(&kept), "kept {kept}");
    let resumed = resume(&out);
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(finished_trials_are_whole(&out), 40);
}

#[test]
fn a_file_size_limit_is_an_error_not_a_silent_death() {
    // SIGXFSZ would kill the harness mid-row without a word.
    let lab = Lab::new();
    let file = lab.file("x.yaml", SHORT);
    let out = lab.path().join("out");
    let run = thirty_trials(&file, &out, true).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    let kept = finished_trials_are_whole(&out);
    assert!(kept < 30);
    assert_eq!(resume(&out).status.code(), Some(0));
    assert_eq!(finished_trials_are_whole(&out), 30);
}
