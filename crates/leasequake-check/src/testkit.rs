//! What the checker's unit tests write their histories with.

use leasequake_model::history::{Event, EventKind};

pub(crate) use crate::params::BLOG;

/// The blog's lease, in seconds.
pub const LEASE: f64 = 9.0;

/// Seconds as the history's µs.
pub fn s(x: f64) -> i64 {
    (x * 1e6).round() as i64
}

/// Worker `w`'s event of `kind` at `t` seconds.
pub fn ev(t: f64, w: usize, kind: EventKind) -> Event {
    Event::new(s(t), Some(w), kind)
}
