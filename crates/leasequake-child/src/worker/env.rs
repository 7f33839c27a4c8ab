//! What the lease state machine needs of the world: clocks, a way to wait,
//! and somewhere to report. A process provides the real ones
//! (`process.rs`); the unit tests provide a fake clock that jumps to each
//! deadline and a recorder.

use std::os::fd::RawFd;

use nix::sys::signal::Signal;

use crate::model::history::{Detail, EventKind};

pub trait Env {
    /// CLOCK_MONOTONIC, ns: event times, ticks, deadlines.
    fn mono_ns(&self) -> i64;
    /// The wall clock as this worker reads it (with its configured offset),
    /// ns: what `leaseUntil` is computed from.
    fn wall_ns(&self) -> i64;
    /// Sleep until the monotonic `deadline_ns`, or until a shutdown signal
    /// (returned) arrives first.
    fn wait_until(&mut self, deadline_ns: i64) -> Option<Signal>;
    /// Like `wait_until`, but wake as well when `fd` becomes readable (a
    /// lease server pushed something).
    fn wait_or_readable(&mut self, deadline_ns: i64, fd: RawFd) -> Wake {
        let _ = fd;
        self.wait_until(deadline_ns).into()
    }
    /// Report an event that happened at `t_ns` (monotonic).
    fn emit_at(&mut self, t_ns: i64, event: EventKind, detail: Detail);
    /// One line of the blog-format human log.
    fn log(&mut self, line: &str);
}

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A shutdown signal.
    Signal(Signal),
    Deadline,
    /// The descriptor waited on became readable.
    Readable,
}

impl From<Option<Signal>> for Wake {
    /// What `Env::wait_until` returned.
    fn from(woke: Option<Signal>) -> Wake {
        woke.map_or(Wake::Deadline, Wake::Signal)
    }
}
