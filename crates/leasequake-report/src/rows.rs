//! The rows of every CSV file of a results directory, one serde struct per
//! file (docs/results-format.md lists them with units and meanings). Times
//! are milliseconds with microsecond precision unless a column says `_us`;
//! every `_ms` of a trial is as it ran (scaled: `time_scale` converts back).

use serde::{Deserialize, Serialize};

/// The version of this layout, recorded in host.json: a directory written
/// in another layout is refused by `check` and `--resume`.
pub const RESULTS_FORMAT: u32 = 4;

/// µs → ms, exactly representable to the µs when printed.
pub fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}

/// A computed ms value (a percentile, a sum) rounded to the µs.
pub fn round_ms(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// events.csv: the history, one row per event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub trial: u32,
    pub t_ms: f64,
    pub worker: Option<usize>,
    pub pid: Option<i32>,
    pub event: String,
    /// The event's detail as a JSON object.
    pub detail: String,
}

/// faults.csv: one row per delivered (or undeliverable) primitive fault.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultCsvRow {
    pub trial: u32,
    pub fault: usize,
    pub action: String,
    pub target: String,
    pub worker: Option<usize>,
    pub pid: Option<i32>,
    pub scheduled_ms: f64,
    pub actual_ms: f64,
    pub error_us: i64,
    pub error: String,
}

/// gaps.csv: one row per leaderless gap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GapRow {
    pub trial: u32,
    pub gap: usize,
    pub start_ms: f64,
    pub end_ms: f64,
    pub duration_ms: f64,
    pub ended: bool,
    pub cause: String,
    pub ended_by: Option<usize>,
    pub lease_remainder_ms: Option<f64>,
    pub detection_lag_ms: Option<f64>,
    pub cause_fault: Option<usize>,
    /// The worker whose leadership ended when the gap opened.
    pub holder: Option<usize>,
    /// The theory's length of the gap, from the phases before it (empty
    /// where the history lacks one).
    pub predicted_ms: Option<f64>,
    /// How the measured gap disagrees with the prediction (empty: it
    /// agrees, or nothing was predicted).
    pub anomaly: String,
}

/// pauses.csv (experiments that pause or stop workers): one row per leader
/// pause, measured beside the theory's outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PauseRow {
    pub trial: u32,
    pub setting: String,
    pub worker: usize,
    pub start_ms: f64,
    pub end_ms: f64,
    pub resumed: bool,
    pub evicted: bool,
    /// When the paused leader's last lease was visibly expired.
    pub visible_expiry_ms: Option<f64>,
    /// The first watcher tick at or after it.
    pub takeover_tick_ms: Option<f64>,
    /// The theory's outcome (empty: not predictable from the history).
    pub predicted: Option<bool>,
    pub anomaly: bool,
}

/// The settings a row was measured under: trials.csv and summary.csv carry
/// them after their key columns, followed by one column per other setting a
/// sweep varies, then their measurements.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SettingColumns {
    pub time_scale: f64,
    pub workers: usize,
    pub substrate: String,
    pub lease_ms: f64,
    pub renew_ms: f64,
    pub watch_ms: f64,
    pub resolution_ms: f64,
    pub acquire: String,
    pub expiry: String,
    pub unreadable: String,
}

/// trials.csv, first: which trial.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialKey {
    pub trial: u32,
    /// The sweep point's label, or the experiment's name.
    pub setting: String,
    pub seed: u64,
}

/// trials.csv, last: what the checker found in the trial.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialMeasures {
    pub start_spread_us: Option<i64>,
    pub first_leader_ms: Option<f64>,
    pub max_leaders: usize,
    pub double_leader_ms: f64,
    pub double_leader_active_ms: f64,
    pub leaderless_ms: f64,
    pub gaps: usize,
    pub open_gaps: usize,
    pub wedged: bool,
    pub outcome: String,
    pub end_ms: f64,
    pub worker_outcomes: String,
    /// After the rest, so that a run begun by an older leasequake resumes
    /// with these columns empty in its earlier rows.
    pub fault_error_max_us: Option<i64>,
    pub faults_over_budget: usize,
    /// The longest operation stall beyond its kind's median (outside
    /// faults), the machine's CPU pressure and steal over the trial, and
    /// whether that disturbed it, with why.
    pub op_stall_max_us: Option<i64>,
    pub cpu_pressure_ms: Option<f64>,
    pub steal_ms: Option<f64>,
    pub disturbed: bool,
    pub disturbed_by: String,
}

/// evictions.csv, writes.csv, jobs.csv, first: which trial.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialRef {
    pub trial: u32,
    pub setting: String,
}

/// evictions.csv (experiments that pause or stop workers), after the
/// trial; summary-evictions.csv sums them per setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvictionCounts {
    pub leader_pauses: usize,
    pub false_evictions: usize,
    /// Leader pauses the theory says evict (empty when none could be
    /// predicted: the history lacks the phases).
    pub predicted_evictions: Option<usize>,
    pub unpredicted_pauses: usize,
    /// Leader pauses whose outcome is not the predicted one.
    pub eviction_anomalies: usize,
    pub stale_believers: usize,
    pub stale_belief_ms: f64,
    /// The longest (empty without a stale believer).
    pub stale_belief_max_ms: Option<f64>,
}

/// network.csv (experiments with network faults), after the trial;
/// summary-network.csv sums them per setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkCounts {
    pub renew_failures: usize,
    /// Replies the proxy dropped: requests that took effect unknown to
    /// their sender.
    pub replies_lost: usize,
    /// Grants the server held for a live worker that did not believe it
    /// led: their number, total and longest time (at least).
    pub orphaned_grants: usize,
    pub orphaned_grant_ms: f64,
    pub orphaned_grant_max_ms: Option<f64>,
    /// Lost-reply requests the history cannot settle.
    pub possible_grants: usize,
    /// Holders that kept believing after the lease was granted to another.
    pub stale_believers: usize,
    pub stale_belief_ms: f64,
    pub stale_belief_max_ms: Option<f64>,
    /// The renewal storm (docs/metrics.md): heals of a network fault, the
    /// operations begun within a lease after one, how many failed, and
    /// their latency; beside them the operations of the steady state
    /// before the first network fault. Absent from files written before
    /// it was measured.
    #[serde(default)]
    pub heals: usize,
    #[serde(default)]
    pub storm_ops: usize,
    #[serde(default)]
    pub storm_failed: usize,
    #[serde(default)]
    pub storm_p50_ms: Option<f64>,
    #[serde(default)]
    pub storm_p99_ms: Option<f64>,
    #[serde(default)]
    pub storm_max_ms: Option<f64>,
    #[serde(default)]
    pub steady_ops: usize,
    #[serde(default)]
    pub steady_p50_ms: Option<f64>,
    #[serde(default)]
    pub steady_p99_ms: Option<f64>,
    /// Grants of the lease to two workers at once (docs/metrics.md, "Double
    /// grants"): definite ones (maximal intervals), their total and longest
    /// time, how many came from two members of a replicated service, and
    /// those a lost reply may have made. Absent from files written before
    /// they were measured.
    #[serde(default)]
    pub double_grants: usize,
    #[serde(default)]
    pub double_grant_ms: f64,
    #[serde(default)]
    pub double_grant_max_ms: Option<f64>,
    #[serde(default)]
    pub double_grants_across_members: usize,
    #[serde(default)]
    pub possible_double_grants: usize,
    /// From the last heal to one leader and one grant for good (summed
    /// over trials: the longest), and the healed trials that never got
    /// there. Absent from files written before they were measured.
    #[serde(default)]
    pub recovery_ms: Option<f64>,
    #[serde(default)]
    pub unrecovered: usize,
    /// Acquisitions whose fencing token is not above every earlier one's,
    /// and those without a token.
    #[serde(default)]
    pub token_inversions: usize,
    #[serde(default)]
    pub untokened: usize,
}

/// writes.csv (experiments with a protected resource), after the trial;
/// summary-writes.csv sums them per setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteCounts {
    pub writes: usize,
    pub stale_writes: usize,
    pub stale_writes_accepted: usize,
    pub stale_writes_rejected: usize,
    pub stale_writes_superseded: usize,
}

/// service.csv (experiments that observe the lease), after the trial;
/// summary-service.csv sums them per setting (the longest gap: the
/// longest of any trial).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceCounts {
    /// Grants the service gave; acquisitions the workers reported.
    pub grants: usize,
    pub acquisitions: usize,
    /// Grants no worker's `acquired` claimed.
    pub unclaimed_grants: usize,
    /// The longest time the service held no grant after its first.
    pub service_gap_max_ms: f64,
    /// Beliefs the service did not back: number, total and longest time.
    pub unbacked_beliefs: usize,
    pub unbacked_belief_ms: f64,
    pub unbacked_belief_max_ms: Option<f64>,
    /// Time the service could not be read.
    pub unseen_ms: f64,
}

/// jobs.csv (experiments with an epoch job), after the trial;
/// summary-jobs.csv sums them per setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobCounts {
    pub epochs: u64,
    pub job_runs: usize,
    pub jobs_applied: usize,
    pub jobs_repeated: usize,
    pub jobs_rejected: usize,
    pub missed_epochs: u64,
    pub duplicate_executions: usize,
    pub stale_results: usize,
    pub stale_results_applied: usize,
}

/// summary.csv, first: which setting (the experiment, or a sweep point).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryKey {
    pub setting: String,
}

/// summary.csv, last: the statistics over the setting's trials.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryStats {
    pub n: usize,
    pub gaps: usize,
    pub open_gaps: usize,
    pub gap_min_ms: Option<f64>,
    pub gap_p50_ms: Option<f64>,
    pub gap_p90_ms: Option<f64>,
    pub gap_p99_ms: Option<f64>,
    pub gap_max_ms: Option<f64>,
    pub double_leader_trials: usize,
    pub double_leader_ci_low: f64,
    pub double_leader_ci_high: f64,
    pub wedged_trials: usize,
    pub no_leader_trials: usize,
    pub crash_gap_bound_min_ms: f64,
    pub crash_gap_bound_max_ms: f64,
    pub crash_gaps: usize,
    pub crash_gap_p10_ms: Option<f64>,
    pub crash_gap_p50_ms: Option<f64>,
    pub crash_gap_p90_ms: Option<f64>,
    pub crash_gap_max_ms: Option<f64>,
    /// Ended gaps with a prediction (summary-gaps.csv has measured −
    /// predicted per kind of gap), and those that disagree with it.
    pub predicted_gaps: usize,
    pub gap_anomalies: usize,
    pub fault_error_max_us: Option<i64>,
    pub fault_budget_us: i64,
    pub over_budget_trials: usize,
    /// Trials the machine disturbed, the budget, and the headlines over
    /// the undisturbed trials alone (empty where none was disturbed).
    pub disturbed_trials: usize,
    pub disturbance_budget_us: i64,
    pub undisturbed_gap_p50_ms: Option<f64>,
    pub undisturbed_gap_max_ms: Option<f64>,
    pub undisturbed_double_leader_trials: Option<usize>,
}

/// summary-gaps.csv: a row per setting and kind of gap with a prediction
/// (its cause, and whether its holder or another worker ended it):
/// measured − predicted and the takeover's own look and acquire, ms as run
/// (real time, which no time scale shrinks).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GapKindRow {
    pub setting: String,
    pub cause: String,
    pub ended: String,
    pub gaps: usize,
    pub beyond_theory_p50_ms: Option<f64>,
    pub beyond_theory_max_ms: Option<f64>,
    pub takeover_p50_ms: Option<f64>,
    pub takeover_max_ms: Option<f64>,
}

/// summary-evictions.csv, after the summed counts: how often a leader
/// pause was a false eviction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvictionRate {
    pub false_eviction_rate: Option<f64>,
    pub false_eviction_ci_low: f64,
    pub false_eviction_ci_high: f64,
}

/// summary-jobs.csv, after the summed counts: trials with at least one
/// missed epoch, and with at least one duplicate execution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobTrials {
    pub missed_epoch_trials: usize,
    pub duplicate_trials: usize,
}

/// latency.csv, after the setting: substrate operation durations, where
/// the workers timed them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    pub acquire_p50_us: Option<u64>,
    pub acquire_p99_us: Option<u64>,
    pub renew_p50_us: Option<u64>,
    pub renew_p99_us: Option<u64>,
    pub observe_p50_us: Option<u64>,
    pub observe_p99_us: Option<u64>,
}
