//! What the checker's unit tests write their histories with.

use leasequake_model::history::{Event, EventKind};

use crate::params::CheckParams;

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

/// The blog's lock file, unscaled: a 9 s lease renewed and watched every
/// 3 s, rewritten in place, read to the whole second (threshold 9 + 3 + 1
/// = 13 s), nothing judged of the machine.
pub const BLOG: CheckParams = CheckParams {
    lease_us: 9_000_000,
    renew_us: 3_000_000,
    watch_us: 3_000_000,
    resolution_us: 1_000_000,
    epoch_us: None,
    dropped_at_death: false,
    expires: true,
    rewritten_in_place: true,
    server_slack_us: 0,
    push: leasequake_model::settings::Push::Nothing,
    push_slack_us: 0,
    replicated: false,
    fault_budget_us: 0,
    disturbance_budget_us: 0,
    planned_start_spread_us: None,
    uniform_acquisitions: true,
};
