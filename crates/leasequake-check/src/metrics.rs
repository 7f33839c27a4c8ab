//! What the checker computes for one trial.

use super::jobs::Jobs;
use super::latency::Latency;
use super::spans::Spans;
use super::storm::Storm;
use super::writes::Writes;
use leasequake_model::history::Micros;

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
    /// The worker whose loss of active leadership opened it.
    pub holder: Option<usize>,
    /// When the theory says it ends, from the phases before it (the
    /// holder's visible expiry, the watchers' ticks, a scheduled resume).
    pub predicted_end_us: Option<Micros>,
    /// How the measured end disagrees with the predicted one, if it does.
    pub anomaly: Option<String>,
    /// For a gap another worker's acquire ended: from the start of that
    /// worker's look that found the lease free (its last timed observation
    /// before the acquire) to the acquire's return. The takeover's own
    /// round trips, real time no time scale shrinks: the theory's tick is
    /// this much before the gap's end.
    pub takeover_us: Option<Micros>,
}

impl Gap {
    pub fn duration_us(&self) -> Micros {
        self.end_us - self.start_us
    }

    /// The theory's length of the gap.
    pub fn predicted_us(&self) -> Option<Micros> {
        self.predicted_end_us.map(|end| end - self.start_us)
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
    /// A soak's trial kept up to its last whole window when its run was
    /// stopped: it ends there, and the soak goes on in the next trial.
    pub cut: bool,
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
    /// Failed renewals, lost replies and orphaned grants.
    pub network: Network,
    /// Takeovers a push set off, and failed subscriptions.
    pub pushes: super::push::Pushes,
    /// How late the faults took effect, against the budget.
    pub precision: super::precision::Precision,
    /// Whether the machine moved the trial further than its budget, and why.
    pub disturbance: super::disturbance::Disturbance,
    /// The lease as the service held it, where the harness observed it.
    pub service: super::service::ServiceView,
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

/// The cause of a gap opened by a kill (the kill fault's action).
pub const KILL: &str = "kill";

/// The cause of a gap opened by a kill that landed inside the holder's
/// renewal (after its `renewing`, before the outcome): with a lock file, an
/// empty file that no watcher may take over.
pub const KILL_MID_RENEWAL: &str = "kill mid-renewal";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evictions {
    /// Pauses that began while the paused worker believed it led.
    pub leader_pauses: usize,
    /// Of those: another worker acquired during the pause, and the paused
    /// one resumed still believing (a double leader after the resume).
    pub false_evictions: usize,
    /// Of those leader pauses: the theory's outcome was an eviction (a
    /// watcher tick between the lease's visible expiry and the resume).
    pub predicted: usize,
    /// Leader pauses the theory could not predict (no `lease_until`, no
    /// watcher ticks to place the takeover).
    pub unpredicted: usize,
    /// Leader pauses whose measured outcome is not the predicted one.
    pub anomalies: usize,
    /// Each leader pause, measured beside predicted.
    pub pauses: Vec<PauseOutcome>,
    /// Tenures that went on after another worker was granted the lease: the
    /// stale holder still believed it led (paused, or slow to notice).
    pub stale_believers: usize,
    /// Total and longest time from the newer grant to the stale holder's
    /// step-down (or death, or the trial's end).
    pub stale_belief_us: Micros,
    pub stale_belief_max_us: Micros,
}

/// One leader pause beside the theory's prediction of it.
#[derive(Clone, Debug, PartialEq)]
pub struct PauseOutcome {
    pub worker: usize,
    pub start_us: Micros,
    pub end_us: Micros,
    /// Ended by a delivered `cont` (not by death or the trial's end).
    pub resumed: bool,
    /// Another worker acquired during the pause and the paused one resumed
    /// still believing: a false eviction.
    pub evicted: bool,
    /// When the paused leader's last lease became visibly expired, if it
    /// can expire and its `lease_until` is known.
    pub visible_expiry_us: Option<Micros>,
    /// The first watcher tick at or after the visible expiry.
    pub takeover_tick_us: Option<Micros>,
    /// The theory's outcome: evicted or not; `None` where the history lacks
    /// a phase (no `lease_until`, no watcher ticks, a pause mid-renewal).
    pub predicted: Option<bool>,
}

impl PauseOutcome {
    /// The prediction was made and the measurement disagrees with it.
    pub fn anomaly(&self) -> bool {
        self.predicted.is_some_and(|p| p != self.evicted)
    }
}

/// What the link to the lease server did to the lease (network.rs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Network {
    /// `renew_failed` events: renewals the leader saw fail.
    pub renew_failures: usize,
    /// Replies the harness's proxy dropped (`reply_lost`): requests that
    /// reached the server unknown to the worker.
    pub replies_lost: usize,
    /// Maximal intervals in which the server held a grant for a live worker
    /// that did not believe it led.
    pub orphaned_grants: usize,
    /// Their total and longest time (a lower bound: possible grants are
    /// left out).
    pub orphaned_grant_us: Micros,
    pub orphaned_grant_max_us: Micros,
    /// Lost-reply requests the history cannot settle: sent while a lease
    /// was held, answered after it ran out.
    pub possible_grants: usize,
    /// Grants of the lease to two workers at once (grants.rs).
    pub double_grants: super::grants::DoubleGrants,
    /// From the last heal to one leader and one grant for good
    /// (recovery.rs); summed over trials, the longest.
    pub recovery_us: Option<Micros>,
    /// Trials healed that never got there.
    pub unrecovered: usize,
    /// Operation latencies after each heal beside the steady state before
    /// the first network fault (storm.rs); None without a network fault.
    pub storm: Option<Storm>,
}

/// Trials summed (the longest orphan is the longest of any; the storms'
/// samples pooled).
impl std::ops::Add for Network {
    type Output = Network;

    fn add(self, o: Network) -> Network {
        Network {
            renew_failures: self.renew_failures + o.renew_failures,
            replies_lost: self.replies_lost + o.replies_lost,
            orphaned_grants: self.orphaned_grants + o.orphaned_grants,
            orphaned_grant_us: self.orphaned_grant_us + o.orphaned_grant_us,
            orphaned_grant_max_us: self.orphaned_grant_max_us.max(o.orphaned_grant_max_us),
            possible_grants: self.possible_grants + o.possible_grants,
            double_grants: self.double_grants + o.double_grants,
            recovery_us: self.recovery_us.max(o.recovery_us),
            unrecovered: self.unrecovered + o.unrecovered,
            storm: match (self.storm, o.storm) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            },
        }
    }
}
