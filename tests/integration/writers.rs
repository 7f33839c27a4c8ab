//! One writer per results directory: a command that would write into a
//! directory another is writing is refused, naming the first; runs at
//! once into one results root each keep a directory of their own.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::helper::{Lab, bin, wait_for};

#[test]
fn a_second_command_is_refused_a_directory_a_run_is_writing_naming_it() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", "name: k\nworkers: 2\nduration: 4s\n");
    let (child, out) = lab.run(&file).scale(0.1).trials(2).spawn();
    // Held from before trials.csv exists; stopped, the run cannot finish
    // while the others try, so the refusals cannot race its end.
    wait_for(Duration::from_secs(30), "the run's first table", || out.join("trials.csv").exists().then_some(()));
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let elsewhere = lab.path().join("elsewhere");
    let tries: [&[&str]; 5] = [&["run", "--resume"], &["check", "--in-place"], &["check"], &["report"], &["plot"]];
    let mut refusals = Vec::new();
    for args in tries.iter().copied().chain([&["check", "--out", elsewhere.to_str().unwrap()][..]]) {
        let done = Command::new(bin()).args(args).arg(&out).output().unwrap();
        refusals.push((args.to_vec(), done));
    }
    kill(pid, Signal::SIGCONT).unwrap();
    for (args, done) in &refusals {
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {stderr}");
        let named = format!("process {pid} (") + bin().to_str().unwrap();
        assert!(stderr.contains(&named) && stderr.contains("is writing into it"), "{args:?}: {stderr}");
    }
    assert!(!elsewhere.exists(), "a refused check wrote nothing");
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success(), "the first run finishes untouched: {}", String::from_utf8_lossy(&done.stderr));
    assert_eq!(crate::helper::read_table(&out.join("trials.csv")).len(), 2);
    // Free once it ended.
    let again = Command::new(bin()).arg("check").arg("--in-place").arg(&out).output().unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}

#[test]
fn runs_at_once_into_one_results_root_each_keep_a_directory_of_their_own() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", "name: k\nworkers: 2\nduration: 2s\n");
    let root = lab.path().join("results");
    let spawn = || {
        Command::new(bin())
            .arg("run")
            .arg(&file)
            .args(["--quiet", "--no-calibrate", "--time-scale", "0.05", "--trials", "1", "--results-root"])
            .arg(&root)
            .env("TMPDIR", lab.path().join("tmp"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for _ in 0..5 {
        let pair = [spawn(), spawn()];
        for child in pair {
            let done = child.wait_with_output().unwrap();
            assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
        }
    }
    let parent = root.join("k");
    let mut dirs = 0;
    for entry in std::fs::read_dir(&parent).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".latest"), "a temporary link was left: {name}");
        if name == "latest" {
            assert!(entry.path().join("trials.csv").exists(), "latest points at a run");
            continue;
        }
        dirs += 1;
        assert_eq!(crate::helper::read_table(&entry.path().join("trials.csv")).len(), 1, "{name}");
    }
    assert_eq!(dirs, 10, "ten runs, ten directories");
    assert!(Path::new(&parent).join("latest").exists());
}

#[test]
fn a_page_of_a_running_run_is_written_elsewhere_and_shows_the_trial_so_far() {
    let lab = Lab::new();
    // One trial far longer than the test (which stops it), its leader
    // killed at once: a takeover to see.
    let file = lab
        .file("s.yaml", "name: s\nworkers: 3\nduration: 6000s\nfaults:\n  - {at: 2s, target: leader, action: kill}\n");
    let (child, out) = lab.run(&file).scale(0.1).trials(1).spawn();
    let events = out.join("trials").join("0001").join("events.csv");
    wait_for(Duration::from_secs(60), "the running trial's takeover on disk", || {
        let text = std::fs::read_to_string(&events).ok()?;
        (text.matches(",acquired,").count() >= 2).then_some(())
    });
    let page = lab.path().join("live.html");
    let done = Command::new(bin()).arg("report").arg(&out).arg("--out").arg(&page).output().unwrap();
    let inside = Command::new(bin()).arg("report").arg(&out).arg("--out").arg(out.join("x.html")).output().unwrap();
    // The run writes its own page only as it ends.
    let untouched = !out.join("report.html").exists() && !out.join("x.html").exists();
    let pid = child.id();
    kill(Pid::from_raw(pid as i32), Signal::SIGINT).unwrap();
    child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!("read while process {pid} (")) && html.contains("trial 1 up to"), "{html}");
    assert!(untouched, "the run's directory was written into");
    assert_eq!(inside.status.code(), Some(2), "{}", String::from_utf8_lossy(&inside.stderr));
    assert!(String::from_utf8_lossy(&inside.stderr).contains("--out: inside"));
}
