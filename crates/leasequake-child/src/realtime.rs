//! Real-time scheduling (SCHED_FIFO) for the moments the harness times.
//!
//! A busy machine is where leases are tested, and there an ordinary thread
//! that wakes at a fault's moment waits behind whatever holds the CPU: a
//! fault fires, or a death is seen, milliseconds late. A SCHED_FIFO thread
//! preempts every ordinary one the moment it wakes. So the harness's trial
//! thread (the barrier, the nemesis) and its death watchers run at real-time
//! priority, and so does a target while a signal takes effect on it, no
//! longer (a stop is reset once the kernel reports it).
//!
//! Only where the process may (root, CAP_SYS_NICE or an RLIMIT_RTPRIO): where
//! it may not, everything runs as before, and host.json says so.
//! `LEASEQUAKE_REALTIME=off` turns it off, to measure what it buys.
//!
//! Every raise carries SCHED_RESET_ON_FORK: no worker, program or thread
//! started from a real-time thread inherits the priority.

use std::sync::OnceLock;

use nix::errno::Errno;

/// Above every ordinary thread, below the kernel's own real-time threads
/// (watchdogs and migration run at 99).
pub const PRIORITY: i32 = 10;

fn set(tid: i32, policy: libc::c_int, priority: i32) -> Result<(), Errno> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: a valid sched_param; a thread id (0: the calling thread).
    Errno::result(unsafe { libc::sched_setscheduler(tid, policy, &param) }).map(drop)
}

/// Thread `tid` (0: the calling one) to SCHED_FIFO at `PRIORITY`.
pub fn raise(tid: i32) -> Result<(), Errno> {
    set(tid, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, PRIORITY)
}

/// Thread `tid` (0: the calling one) back to the ordinary policy. Reset on
/// fork stays set: only CAP_SYS_NICE may clear it, and a process allowed
/// real-time priority by RLIMIT_RTPRIO alone could otherwise never lower.
pub fn lower(tid: i32) -> Result<(), Errno> {
    set(tid, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, 0)
}

/// Which threads of a process.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Its first thread (its pid): one call, for the moment a signal is due.
    Main,
    /// The others, listed from /proc: after the signal, while it takes effect.
    Others,
    All,
}

/// Threads of process `pid` raised or lowered (a signal takes effect on a
/// process once each of its threads has run).
pub fn process(pid: i32, up: bool, which: Threads) {
    let one = |tid: i32| {
        let _ = if up { raise(tid) } else { lower(tid) };
    };
    if which != Threads::Others {
        one(pid);
    }
    if which == Threads::Main {
        return;
    }
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        tasks.flatten().filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()).filter(|&t| t != pid).for_each(one);
    }
}

/// Whether this process may run threads at real-time priority, found once
/// by raising a scratch thread: `Err` says why not, for host.json.
pub fn available() -> &'static Result<(), String> {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        if turned_off() {
            return Err("off (LEASEQUAKE_REALTIME=off)".into());
        }
        // Raised and lowered again: a priority that could not be dropped
        // would leave a worker real-time for its whole trial.
        let tried = std::thread::Builder::new()
            .name("realtime-probe".into())
            .spawn(|| raise(0).and_then(|()| lower(0)))
            .map_or(Err(Errno::EAGAIN), |t| t.join().unwrap_or(Err(Errno::EINVAL)));
        tried.map_err(|e| match e {
            Errno::EPERM => "not permitted (EPERM): run as root, with CAP_SYS_NICE, or with an RLIMIT_RTPRIO".into(),
            e => format!("not available ({e})"),
        })
    })
}

/// Raise the calling thread if real-time scheduling is available; whether
/// it was.
pub fn raise_this_thread() -> bool {
    available().is_ok() && raise(0).is_ok()
}

/// Raise the calling thread unless turned off, without the probe: for a
/// worker, which has one thread to raise and no record to write.
pub fn try_raise_this_thread() -> bool {
    !turned_off() && raise(0).is_ok()
}

fn turned_off() -> bool {
    std::env::var("LEASEQUAKE_REALTIME").is_ok_and(|v| v == "off" || v == "0")
}

/// The calling thread at real-time priority (where available) until
/// dropped: the thread goes back to its ordinary work as it was.
pub struct Raised(bool);

impl Raised {
    pub fn this_thread() -> Raised {
        Raised(raise_this_thread())
    }

    /// Back to ordinary priority now, rather than when dropped.
    pub fn lower(&mut self) {
        if self.0 {
            self.0 = lower(0).is_err();
        }
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        self.lower();
    }
}

/// What host.json records: the policy the harness's timing threads run at.
pub fn describe() -> String {
    match available() {
        Ok(()) => format!("SCHED_FIFO priority {PRIORITY} (reset on fork)"),
        Err(why) => format!("ordinary scheduling: real-time {why}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_raised_thread_starts_nothing_real_time() {
        if super::available().is_err() {
            return; // not root: nothing to raise, nothing to leak
        }
        let (mine, childs) = std::thread::spawn(|| {
            assert!(super::raise_this_thread());
            // SAFETY: plain queries of the calling thread's policy.
            let mine = unsafe { libc::sched_getscheduler(0) };
            let childs = std::thread::spawn(|| unsafe { libc::sched_getscheduler(0) }).join().unwrap();
            (mine, childs)
        })
        .join()
        .unwrap();
        assert_eq!(mine & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
        assert_eq!(childs, libc::SCHED_OTHER, "reset on fork: a thread it starts is ordinary");
    }

    #[test]
    fn a_raised_thread_can_be_lowered_again() {
        if super::available().is_err() {
            return;
        }
        let policy = std::thread::spawn(|| {
            assert!(super::raise_this_thread());
            super::lower(0).unwrap();
            // SAFETY: a plain query of the calling thread's policy.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
    }
}
