//! What the trial needs of the operating system once its workers run:
//! clocks, a signal to a worker's process group, whether a signal took
//! effect, a way to wait for the workers' messages. The nemesis and the
//! event loop use nothing else of the machine, so their rules (when a fault
//! is stamped, what a signal to a dead worker records, the order of the
//! clean-up) are unit-tested over a fake (`fake_os.rs`); what only real
//! processes show keeps its real-process test.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::msg::Msg;
use super::spawn::WorkerProc;
use crate::realtime::Threads;

/// What `Os::poll_stopped` saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    Stopped,
    Gone,
    NotYet,
}

pub(super) trait Os {
    /// CLOCK_MONOTONIC, ns.
    fn mono_ns(&self) -> i64;
    /// CLOCK_REALTIME, ns.
    fn wall_ns(&self) -> i64;
    /// Signal a worker's process group: Ok(false) if it has already exited.
    fn signal(&self, worker: &WorkerProc, signal: Signal) -> Result<bool, Errno>;
    /// Raise a worker's threads to real-time priority, or lower them.
    fn set_realtime(&self, worker: &WorkerProc, up: bool, which: Threads);
    /// Whether real-time priority can be had at all.
    fn realtime_available(&self) -> bool;
    /// Wait up to `within_ns` for the kernel to report our child `pid`
    /// stopped.
    fn poll_stopped(&self, pid: Pid, within_ns: i64) -> Stop;
    /// Whether `pid` is stopped now (false once it is gone).
    fn is_stopped(&self, pid: Pid) -> bool;
    fn sleep(&self, d: Duration);
    /// The workers' next message, waiting up to `timeout`.
    fn recv(&self, rx: &Receiver<Msg>, timeout: Duration) -> Result<Msg, RecvTimeoutError>;
    /// The workers' next message if one is waiting.
    fn try_recv(&self, rx: &Receiver<Msg>) -> Result<Msg, TryRecvError>;
}

/// The machine.
pub(super) struct RealOs;

impl Os for RealOs {
    fn mono_ns(&self) -> i64 {
        crate::model::clock::mono_ns()
    }

    fn wall_ns(&self) -> i64 {
        crate::model::clock::wall_ns()
    }

    fn signal(&self, worker: &WorkerProc, signal: Signal) -> Result<bool, Errno> {
        worker.signal(signal)
    }

    fn set_realtime(&self, worker: &WorkerProc, up: bool, which: Threads) {
        worker.set_realtime(up, which);
    }

    fn realtime_available(&self) -> bool {
        crate::realtime::available().is_ok()
    }

    fn poll_stopped(&self, pid: Pid, within_ns: i64) -> Stop {
        poll_stopped(pid, within_ns)
    }

    fn is_stopped(&self, pid: Pid) -> bool {
        procfs::process::Process::new(pid.as_raw()).and_then(|p| p.stat()).is_ok_and(|s| s.state == 'T')
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }

    fn recv(&self, rx: &Receiver<Msg>, timeout: Duration) -> Result<Msg, RecvTimeoutError> {
        rx.recv_timeout(timeout)
    }

    fn try_recv(&self, rx: &Receiver<Msg>) -> Result<Msg, TryRecvError> {
        rx.try_recv()
    }
}

/// Poll for up to `within_ns` until the kernel reports our child `pid`
/// stopped. `waitid(WSTOPPED | WNOWAIT | WNOHANG)` is a cheap syscall that
/// neither blocks nor consumes the report (the waiter thread only waits for
/// exits), so it can be polled tightly; return, then read the clock.
pub fn poll_stopped(pid: Pid, within_ns: i64) -> Stop {
    use crate::model::clock::mono_ns;
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let start = mono_ns();
    let deadline = start + within_ns;
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WSTOPPED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(..)) => return Stop::Stopped,
            Err(Errno::EINTR) => continue,
            Err(_) => return Stop::Gone,
            Ok(_) => {}
        }
        let now = mono_ns();
        if now >= deadline {
            return Stop::NotYet;
        }
        // A stop takes effect within microseconds once the target runs.
        // Past that, a real-time poller must not hold a core the target may
        // need: short sleeps, which wake on time at that priority.
        if now - start < 100_000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}
