//! `leasequake guard` (hidden): the process that outlives the harness by a
//! moment, to kill whatever the harness's workers left running when the
//! harness itself was killed (`kill -9` included).
//!
//! The harness starts it with a pipe on its stdin and tells it, a line at a
//! time, what to kill should the pipe close without a `done`:
//! `cgroup PATH` (a cgroup v2 directory: everything in it, whatever process
//! group or session it made for itself) and `group PGID` / `ungroup PGID`
//! (the process groups of running workers, where no cgroup could be made).
//! On EOF it kills them, removes the cgroup and exits.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn run() -> u8 {
    let mut cgroups: BTreeSet<PathBuf> = BTreeSet::new();
    let mut groups: BTreeSet<i32> = BTreeSet::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("cgroup", path)) => {
                cgroups.insert(PathBuf::from(path));
            }
            Some(("group", pgid)) => {
                groups.extend(pgid.parse::<i32>().ok());
            }
            Some(("ungroup", pgid)) => {
                if let Ok(pgid) = pgid.parse::<i32>() {
                    groups.remove(&pgid);
                }
            }
            _ if line == "done" => return 0,
            _ => {}
        }
    }
    // The harness is gone without saying `done`: nothing else will stop
    // what it started.
    for cgroup in &cgroups {
        kill_cgroup(cgroup);
    }
    for pgid in groups {
        // SAFETY: a plain kill(2) of a process group the harness named; a
        // group with members left keeps its id from being reused.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    0
}

/// Kill everything in a cgroup v2 subtree, wait until it is empty (a
/// SIGKILLed process leaves the cgroup once it has exited), then remove the
/// directories, deepest first. Best effort: a cgroup already gone is fine.
pub fn kill_cgroup(cgroup: &std::path::Path) {
    if std::fs::write(cgroup.join("cgroup.kill"), "1").is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while populated(cgroup) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    remove_tree(cgroup);
}

/// Whether any process is left in the subtree (`cgroup.events`).
pub fn populated(cgroup: &std::path::Path) -> bool {
    std::fs::read_to_string(cgroup.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// rmdir a cgroup and its child cgroups (their files are not files).
pub fn remove_tree(cgroup: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(cgroup) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(cgroup);
}
