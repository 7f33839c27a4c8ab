//! What the lease state machine needs of the world: clocks, a way to wait,
//! and somewhere to report. A process provides the real ones
//! (`process.rs`); the unit tests provide a fake clock that jumps to each
//! deadline and a recorder.

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
    /// Report an event that happened at `t_ns` (monotonic).
    fn emit_at(&mut self, t_ns: i64, event: EventKind, detail: Detail);
    /// One line of the blog-format human log.
    fn log(&mut self, line: &str);
}
