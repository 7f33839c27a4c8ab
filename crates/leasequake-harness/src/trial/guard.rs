//! `leasequake guard` (hidden): the process that outlives the harness by a
//! moment, to kill whatever the harness's workers left running when the
//! harness itself was killed (`kill -9` included).
//!
//! The harness starts it with a pipe on its stdin and tells it, a line at a
//! time, what to kill should the pipe close without a `done`:
//! `cgroup PATH` (a cgroup v2 directory: everything in it, whatever process
//! group or session it made for itself) and `group PGID` / `ungroup PGID`
//! (the process groups of running workers, where no cgroup could be made),
//! `stopped PID` / `continued PID` (a server's process the harness stopped
//! without a cgroup: stopped, it would never notice its parent's death),
//! `remove PATH` / `removed PATH` (a server's data directory).
//! On EOF it kills them, removes the cgroup and the directories, and exits.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the guard is to clean up should the harness die.
#[derive(Debug, Default, PartialEq)]
struct Told {
    cgroups: BTreeSet<PathBuf>,
    groups: BTreeSet<i32>,
    stopped: BTreeSet<i32>,
    dirs: BTreeSet<PathBuf>,
}

impl Told {
    /// Take one line of the harness's; true on `done`.
    fn line(&mut self, line: &str) -> bool {
        let pid = |t: &str| t.parse::<i32>().ok().filter(|p| *p > 0);
        match line.split_once(' ') {
            Some(("cgroup", path)) => {
                self.cgroups.insert(PathBuf::from(path));
            }
            Some(("group", pgid)) => self.groups.extend(pid(pgid)),
            Some(("ungroup", pgid)) => {
                pid(pgid).map(|p| self.groups.remove(&p));
            }
            Some(("stopped", p)) => self.stopped.extend(pid(p)),
            Some(("continued", p)) => {
                pid(p).map(|p| self.stopped.remove(&p));
            }
            Some(("remove", path)) if path.starts_with('/') => {
                self.dirs.insert(PathBuf::from(path));
            }
            Some(("removed", path)) => {
                self.dirs.remove(std::path::Path::new(path));
            }
            _ => return line == "done",
        }
        false
    }
}

pub fn run() -> u8 {
    let mut told = Told::default();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if told.line(&line) {
            return 0;
        }
    }
    // The harness is gone without saying `done`: nothing else will stop
    // what it started.
    for cgroup in &told.cgroups {
        kill_cgroup(cgroup);
    }
    for pgid in &told.groups {
        // SAFETY: a plain kill(2) of a process group the harness named; a
        // group with members left keeps its id from being reused.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    // Only a process still stopped: the pid of one that exited meanwhile
    // may be another's now.
    let stopped: Vec<i32> = told.stopped.iter().copied().filter(|p| state(*p) == Some('T')).collect();
    for pid in &stopped {
        // SAFETY: as above, of a process the harness stopped.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    // The data directories go once their servers are gone (a postmaster's
    // backends exit a moment after it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while stopped.iter().any(|p| state(*p).is_some()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for dir in &told.dirs {
        while std::fs::remove_dir_all(dir).is_err() && dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    0
}

/// A process's state letter (`/proc/PID/stat`), None once it is gone
/// (or a zombie: it holds nothing any more).
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (comm) S …": the name may hold spaces and parentheses.
    let s = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    (s != 'Z' && s != 'X').then_some(s)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_keeps_what_it_was_told_and_forgets_what_was_undone() {
        let mut told = Told::default();
        for line in [
            "cgroup /sys/fs/cgroup/x",
            "group 10",
            "group 11",
            "ungroup 10",
            "stopped 20",
            "stopped 21",
            "continued 20",
            "remove /tmp/leasequake-pg-a",
            "remove /tmp/leasequake-etcd-b",
            "removed /tmp/leasequake-pg-a",
            "remove relative/path",
            "stopped -1",
            "nonsense",
        ] {
            assert!(!told.line(line), "{line}");
        }
        assert_eq!(told.groups, BTreeSet::from([11]));
        assert_eq!(told.stopped, BTreeSet::from([21]));
        assert_eq!(told.dirs, BTreeSet::from([PathBuf::from("/tmp/leasequake-etcd-b")]));
        assert!(told.line("done"));
    }

    #[test]
    fn a_stopped_process_is_known_by_its_state_and_a_dead_one_is_gone() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        // SAFETY: signals to our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while state(pid) != Some('T') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(state(pid), Some('T'));
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = child.wait();
        assert_eq!(state(pid), None);
        assert_eq!(state(i32::MAX), None);
    }
}
