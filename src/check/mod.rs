//! The checker: pure functions from a trial's History to its metrics.
//!
//! No clocks, no processes, no I/O. Everything it knows comes from the
//! history and from `CheckParams` (the scaled lease settings, needed only for
//! the wedge threshold). Metric definitions are those of DESIGN.md.

use crate::history::{History, Micros};

/// Scaled lease settings of the trial, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckParams {
    pub lease_us: Micros,
    pub renew_us: Micros,
    pub watch_us: Micros,
    /// Expiry resolution (1 s × time scale under `unix-seconds`, 0 if exact).
    pub resolution_us: Micros,
    /// Epoch length of the exactly-once job, if the trial runs one.
    pub epoch_us: Option<Micros>,
}

impl CheckParams {
    /// A gap longer than this at trial end, with a live unpaused worker, is a
    /// wedge: `lease + watch + resolution`.
    pub fn wedge_threshold_us(&self) -> Micros {
        self.lease_us + self.watch_us + self.resolution_us
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    pub start_us: Micros,
    /// End of the gap, or the trial end if it never ended.
    pub end_us: Micros,
    pub ended: bool,
    /// The fault action that opened it (kill, term, stop, lock-empty, …), or
    /// the holder's own event (stepped_down, released, exit) if no fault did.
    pub cause: String,
    /// Index of the fault that opened it, if any.
    pub cause_fault: Option<usize>,
    /// Worker whose active leadership ended the gap (acquired or resumed).
    pub ended_by: Option<usize>,
    /// Fault time → nominal expiry of the holder's last write.
    pub lease_remainder_us: Option<Micros>,
    /// Nominal expiry → end of the gap (only for ended gaps).
    pub detection_lag_us: Option<Micros>,
}

impl Gap {
    pub fn duration_us(&self) -> Micros {
        self.end_us - self.start_us
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TrialMetrics {
    /// Max − min of the workers' `start` events.
    pub start_spread_us: Option<Micros>,
    pub first_leader_us: Option<Micros>,
    pub max_leaders: usize,
    pub double_leader_us: Micros,
    pub double_leader_active_us: Micros,
    /// Sum of all gap durations.
    pub leaderless_us: Micros,
    pub gaps: Vec<Gap>,
    pub wedged: bool,
    /// Trial end (the `trial_end` event, else the last event).
    pub end_us: Micros,
    /// The intervals behind the numbers, for timelines.
    pub spans: Spans,
    /// Leader pauses and the false evictions among them.
    pub evictions: Evictions,
    /// Writes to the protected resource, stale ones counted.
    pub writes: Writes,
    /// The exactly-once job per epoch (zero if the trial runs none).
    pub jobs: Jobs,
    /// Substrate operation durations.
    pub latency: Latency,
}

/// A time span of one worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub worker: usize,
    pub start_us: Micros,
    pub end_us: Micros,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spans {
    /// Believes-leader intervals.
    pub tenures: Vec<Span>,
    /// Paused intervals (delivered SIGSTOP to SIGCONT or death).
    pub pauses: Vec<Span>,
    /// Maximal intervals with two or more believers.
    pub double_leader: Vec<(Micros, Micros)>,
}

impl TrialMetrics {
    /// One word for the trials.csv `outcome` column, worst first.
    pub fn outcome(&self) -> &'static str {
        if self.max_leaders >= 2 {
            "double_leader"
        } else if self.wedged {
            "wedged"
        } else if self.first_leader_us.is_none() {
            "no_leader"
        } else {
            "ok"
        }
    }
}

mod evictions;
mod intervals;
mod jobs;
mod latency;
mod writes;
pub use evictions::Evictions;
pub use intervals::check;
pub use jobs::Jobs;
pub use latency::Latency;
pub use writes::Writes;
