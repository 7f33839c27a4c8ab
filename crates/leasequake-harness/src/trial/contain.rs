//! No descendant of a worker outlives the harness. The kernel's tie
//! (PR_SET_PDEATHSIG) reaches only the worker itself; a program's own
//! children, and theirs, need a mechanism that covers the whole tree:
//!
//! * a cgroup v2 per trial, below one for the harness, where the harness
//!   may make one: every worker moves itself in before it execs
//!   (`child::join_cgroup`), so everything it starts is in it, whatever
//!   process group or session it makes. At the end of the trial whatever
//!   is still in it is killed (`cgroup.kill`).
//! * otherwise each worker's process group, killed at the end of the trial
//!   (a descendant that made its own session escapes this one).
//!
//! Either way a guard process (`leasequake guard`) holds a pipe from the
//! harness: if the harness dies, even by `kill -9`, the pipe closes and the
//! guard kills what is left. Pids are untouched (no PID namespace): the
//! pid a program writes into a lock file is the pid in the history.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use super::guard::{kill_cgroup, populated, remove_tree};

/// The harness's containment, made on first use.
struct Contain {
    /// This harness's cgroup v2 directory, if one could be made.
    cgroup: Option<PathBuf>,
    /// The guard's stdin and the guard (None if it could not be started).
    guard: Mutex<Option<(std::process::ChildStdin, Child)>>,
}

static CONTAIN: OnceLock<Contain> = OnceLock::new();

fn contain() -> &'static Contain {
    CONTAIN.get_or_init(|| {
        let cgroup = make_harness_cgroup();
        let guard = start_guard();
        let contain = Contain { cgroup, guard: Mutex::new(guard) };
        if let Some(c) = &contain.cgroup {
            contain.tell(&format!("cgroup {}", c.display()));
        }
        contain
    })
}

impl Contain {
    fn tell(&self, line: &str) {
        let mut guard = self.guard.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((stdin, _)) = guard.as_mut()
            && writeln!(stdin, "{line}").is_err()
        {
            *guard = None;
        }
    }
}

/// `<cgroup2 mount><our cgroup>/leasequake-<pid namespace>-<pid>`, made
/// here; None where there is no cgroup v2 we may write to (or no
/// `cgroup.kill`, before Linux 5.14). The cgroups a dead harness of this
/// PID namespace left (its guard killed too) are removed first; a
/// harness's in another namespace, whose pid means nothing here, is not
/// touched.
fn make_harness_cgroup() -> Option<PathBuf> {
    // The fallback on a machine that has a cgroup, for its tests.
    if std::env::var_os("LEASEQUAKE_NO_CGROUP").is_some() {
        return None;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent major:minor root mount-point options … - fstype …
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split(' ').next()? == "cgroup2").then(|| left.split(' ').nth(4).map(PathBuf::from))?
    })?;
    let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = ours.lines().find_map(|l| l.strip_prefix("0::"))?;
    let parent = mount.join(rel.trim_start_matches('/'));
    let ns = pid_namespace();
    remove_dead_harnesses(&parent, &ns);
    let dir = parent.join(format!("leasequake-{ns}-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    if dir.join("cgroup.kill").exists() && can_move_into(&dir) {
        Some(dir)
    } else {
        let _ = std::fs::remove_dir(&dir);
        None
    }
}

/// This process's PID namespace, as its inode number.
fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("pid:[")?.strip_suffix(']')?.to_string())
        })
        .unwrap_or_else(|| "0".into())
}

/// The pid of a harness of namespace `ns` from its cgroup's name.
fn harness_of(name: &str, ns: &str) -> Option<i32> {
    name.strip_prefix("leasequake-")?.strip_prefix(ns)?.strip_prefix('-')?.parse().ok()
}

/// Remove the cgroups under `parent` of harnesses of this namespace that
/// are dead, with whatever is left in them.
fn remove_dead_harnesses(parent: &Path, ns: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let Some(pid) = harness_of(&e.file_name().to_string_lossy(), ns) else { continue };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            kill_cgroup(&e.path());
            remove_tree(&e.path());
        }
    }
}

/// A server's process the harness stopped without a cgroup: the guard
/// kills it should the harness die first (stopped, it would never notice).
pub fn stopped(pid: i32) {
    contain().tell(&format!("stopped {pid}"));
}

/// The process was continued (or killed): the guard forgets it.
pub fn continued(pid: i32) {
    contain().tell(&format!("continued {pid}"));
}

/// A temporary directory of the harness's (a server's data): removed when
/// dropped, and by the guard should the harness die first.
pub struct OwnedDir {
    dir: Option<tempfile::TempDir>,
}

impl OwnedDir {
    pub fn new(dir: tempfile::TempDir) -> OwnedDir {
        let path = dir.path().display().to_string();
        // One line each: a path with a newline is not told (nor ever made
        // by tempfile's names, only by a TMPDIR that holds one).
        if !path.contains('\n') {
            contain().tell(&format!("remove {path}"));
        }
        OwnedDir { dir: Some(dir) }
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("held until dropped").path()
    }
}

impl Drop for OwnedDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let path = dir.path().display().to_string();
            drop(dir);
            if !path.contains('\n') {
                contain().tell(&format!("removed {path}"));
            }
        }
    }
}

/// Whether a child of ours can be moved into `cgroup`: making the directory
/// needs less than that (moving also needs the common ancestor's
/// `cgroup.procs`). Tried on a short-lived child: a guard with nothing to
/// guard, which exits at the EOF of its stdin.
fn can_move_into(cgroup: &Path) -> bool {
    let Ok(exe) = std::env::current_exe() else { return false };
    let spawned = Command::new(exe)
        .arg("guard")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut probe) = spawned else { return false };
    let moved = std::fs::write(cgroup.join("cgroup.procs"), probe.id().to_string()).is_ok();
    drop(probe.stdin.take());
    let _ = probe.wait();
    moved
}

/// Start `leasequake guard` in its own process group (a Ctrl-C at the
/// terminal is the harness's to handle), untied: it must outlive us.
fn start_guard() -> Option<(std::process::ChildStdin, Child)> {
    let exe = std::env::current_exe().ok()?;
    let mut child = Command::new(exe)
        .arg("guard")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let stdin = child.stdin.take()?;
    Some((stdin, child))
}

use std::os::unix::process::CommandExt;

/// One trial's containment: its cgroup, or its workers' process groups.
pub struct TrialGroup {
    cgroup: Option<PathBuf>,
    groups: Mutex<Vec<i32>>,
}

impl TrialGroup {
    /// A fresh cgroup for trial `trial` (unique in this harness), if the
    /// harness has one.
    pub fn new(trial: u32) -> TrialGroup {
        TrialGroup::named(&format!("trial-{trial}"))
    }

    /// A fresh cgroup for a lease server the harness runs: the guard kills
    /// it with everything else, and a pause freezes all of its processes
    /// at once.
    pub fn for_server() -> TrialGroup {
        TrialGroup::named("server")
    }

    fn named(prefix: &str) -> TrialGroup {
        let cgroup = contain().cgroup.as_ref().and_then(|root| {
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let dir = root.join(format!("{prefix}-{n}"));
            std::fs::create_dir(&dir).ok().map(|()| dir)
        });
        TrialGroup { cgroup, groups: Mutex::new(Vec::new()) }
    }

    /// Freeze (or thaw) every process in the cgroup and wait until the
    /// kernel says it is done; None without a cgroup.
    pub fn freeze(&self, frozen: bool) -> Option<std::io::Result<()>> {
        let c = self.cgroup.as_ref()?;
        let want = if frozen { "frozen 1" } else { "frozen 0" };
        Some(std::fs::write(c.join("cgroup.freeze"), if frozen { "1" } else { "0" }).and_then(|()| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let events = std::fs::read_to_string(c.join("cgroup.events"))?;
                if events.lines().any(|l| l == want) {
                    return Ok(());
                }
                if std::time::Instant::now() > deadline {
                    return Err(std::io::Error::other(format!("cgroup not {want} after 5 s")));
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }))
    }

    /// Kill every process in the cgroup and wait until it is empty, keeping
    /// the cgroup for the next start; None without a cgroup.
    pub fn kill_and_wait(&self) -> Option<()> {
        let c = self.cgroup.as_ref()?;
        let _ = std::fs::write(c.join("cgroup.kill"), "1");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while populated(c) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Some(())
    }

    /// The cgroup a worker of this trial joins (`LEASEQUAKE_CGROUP`).
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// A worker was spawned in its own process group `pgid`.
    pub fn spawned(&self, pgid: i32) {
        if self.cgroup.is_none() {
            self.groups.lock().unwrap_or_else(|p| p.into_inner()).push(pgid);
            contain().tell(&format!("group {pgid}"));
        }
    }

    /// Kill every process of the trial now, workers included (a trial past
    /// its time limit). What is killed is reaped by those who wait for it.
    pub fn kill_all(&self) {
        match &self.cgroup {
            Some(c) => {
                let _ = std::fs::write(c.join("cgroup.kill"), "1");
            }
            None => {
                for pgid in self.groups.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                    // SAFETY: kill(2) of a group we made and have not
                    // released to the guard as gone.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
            }
        }
    }

    /// After every worker was reaped: kill what they left behind. Returns
    /// whether anything was left.
    pub fn kill_rest(&self) -> bool {
        match &self.cgroup {
            Some(c) => {
                let left = populated(c);
                if left {
                    kill_cgroup(c);
                } else {
                    remove_tree(c);
                }
                left
            }
            None => {
                let mut left = false;
                for pgid in self.groups.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
                    // SAFETY: kill(2) of a group we made; while it has
                    // members its id cannot be reused.
                    left |= unsafe { libc::kill(-pgid, libc::SIGKILL) } == 0;
                    contain().tell(&format!("ungroup {pgid}"));
                }
                left
            }
        }
    }
}

impl Drop for TrialGroup {
    fn drop(&mut self) {
        self.kill_rest();
    }
}

/// At the end of a run: remove the harness's cgroup and let the guard go.
pub fn finish() {
    let Some(contain) = CONTAIN.get() else { return };
    if let Some(c) = &contain.cgroup {
        kill_cgroup(c);
        remove_tree(c);
    }
    contain.tell("done");
    let mut guard = contain.guard.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((stdin, mut child)) = guard.take() {
        drop(stdin);
        let _ = child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_cgroup_is_known_by_its_namespace_and_pid() {
        assert_eq!(harness_of("leasequake-4026531836-812", "4026531836"), Some(812));
        assert_eq!(harness_of("leasequake-4026531837-812", "4026531836"), None, "another namespace's");
        assert_eq!(harness_of("leasequake-812", "4026531836"), None);
        assert_eq!(harness_of("trial-3", "4026531836"), None);
        assert!(pid_namespace().parse::<u64>().is_ok(), "{}", pid_namespace());
    }
}
