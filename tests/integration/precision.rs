//! Precision when the machine is busy: the loaded calibration's CPU hogs
//! die with the harness, however it dies.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::helper::{Lab, bin, wait_for};

/// Processes whose parent is `ppid` and whose command line holds `needle`.
fn children_mentioning(ppid: u32, needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.first() == Some(&"Z") || fields.get(1) != Some(&ppid.to_string().as_str()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_run_killed_in_its_loaded_calibration_leaves_no_cpu_hog() {
    let lab = Lab::new();
    let file = lab.file("x.yaml", "name: x\nworkers: 2\nduration: 1s\n");
    // A run calibrates first: as the machine is (about 2 s), then with a
    // CPU hog per core.
    let mut run = Command::new(bin())
        .args(["run", "--quiet", "--time-scale", "0.05"])
        .arg(&file)
        .arg("--out")
        .arg(lab.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let hogs = wait_for(Duration::from_secs(60), "the CPU hogs", || {
        let hogs = children_mentioning(pid, "calibrate-hog");
        (hogs.len() == cores).then_some(hogs)
    });
    run.kill().unwrap();
    run.wait().unwrap();
    wait_for(Duration::from_secs(5), "the hogs to die with the harness", || {
        hogs.iter().all(|h| zombie(*h)).then_some(())
    });
}

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}
