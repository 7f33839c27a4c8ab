//! The metrics a run summarises per setting, as its summary files name
//! them: the one table `expect: {metrics: …}` is checked against, the
//! reference and the schema list, and the report's row types are tested
//! against (a column added to a file without a line here fails a test).

use serde::{Deserialize, Serialize};

use crate::{Action, Experiment, Resource};

/// What a number is, for a bound on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Trials of the setting's `n` with a property: a bound may be on the
    /// count, or on the rate's 95 % interval (`rate_max`, `rate_min`).
    Trials,
    /// A count of things (gaps, grants, writes).
    Count,
    /// Milliseconds of the experiment's time: compared in its own time
    /// (the run's value divided by the time scale), as the file's other
    /// durations are written.
    OwnMs,
    /// The same in microseconds (a budget made from the scaled settings).
    OwnUs,
    /// Real time (an operation's latency, a fault's lateness), which no
    /// time scale shortens: compared as run, in the unit its name says.
    Real,
    /// A fraction in [0, 1].
    Fraction,
}

/// One metric: its key in `expect: {metrics: …}` (`file.column`), what it
/// is, and a line about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryMetric {
    /// The summary file without `summary-` and `.csv` (`summary` for
    /// summary.csv itself, `latency` for latency.csv).
    pub file: &'static str,
    pub column: &'static str,
    pub measure: Measure,
    pub doc: &'static str,
}

impl SummaryMetric {
    pub fn key(&self) -> String {
        format!("{}.{}", self.file, self.column)
    }

    /// The file a run writes the metric to: summary.csv, latency.csv,
    /// summary-writes.csv, ….
    pub fn file_name(&self) -> String {
        match self.file {
            "summary" | "latency" => format!("{}.csv", self.file),
            other => format!("summary-{other}.csv"),
        }
    }
}

const fn m(file: &'static str, column: &'static str, measure: Measure, doc: &'static str) -> SummaryMetric {
    SummaryMetric { file, column, measure, doc }
}

use Measure::{Count, Fraction, OwnMs, OwnUs, Real, Trials};

/// Every summarised metric (the settings columns and the key aside).
pub const SUMMARY_METRICS: &[SummaryMetric] = &[
    m("summary", "n", Count, "trials of the setting"),
    m("summary", "gaps", Count, "leaderless gaps"),
    m("summary", "open_gaps", Count, "gaps still open when their trial ended"),
    m("summary", "gap_min_ms", OwnMs, "the shortest gap"),
    m("summary", "gap_p50_ms", OwnMs, "the median gap"),
    m("summary", "gap_p90_ms", OwnMs, "the 90th percentile gap"),
    m("summary", "gap_p99_ms", OwnMs, "the 99th percentile gap"),
    m("summary", "gap_max_ms", OwnMs, "the longest gap"),
    m("summary", "double_leader_trials", Trials, "trials in which two workers believed they led at once"),
    m("summary", "double_leader_ci_low", Fraction, "the two-leader rate's 95 % interval, low end"),
    m("summary", "double_leader_ci_high", Fraction, "the two-leader rate's 95 % interval, high end"),
    m("summary", "wedged_trials", Trials, "trials left without a leader for good"),
    m("summary", "no_leader_trials", Trials, "trials in which no worker ever led"),
    m("summary", "crash_gap_bound_min_ms", OwnMs, "the theory's least crash gap (lease − renew)"),
    m("summary", "crash_gap_bound_max_ms", OwnMs, "the theory's most crash gap (lease + watch + resolution)"),
    m("summary", "crash_gaps", Count, "gaps opened by a SIGKILL"),
    m("summary", "crash_gap_p10_ms", OwnMs, "the crash gaps' 10th percentile"),
    m("summary", "crash_gap_p50_ms", OwnMs, "the crash gaps' median"),
    m("summary", "crash_gap_p90_ms", OwnMs, "the crash gaps' 90th percentile"),
    m("summary", "crash_gap_max_ms", OwnMs, "the longest crash gap"),
    m("summary", "predicted_gaps", Count, "ended gaps the theory predicted"),
    m("summary", "gap_anomalies", Count, "gaps that disagree with their prediction"),
    m("summary", "fault_error_max_us", Real, "the latest a fault took effect, µs"),
    m("summary", "fault_budget_us", OwnUs, "the faults' lateness budget, µs"),
    m("summary", "over_budget_trials", Trials, "trials with a fault later than its budget"),
    m("summary", "disturbed_trials", Trials, "trials the machine disturbed"),
    m("summary", "disturbance_budget_us", OwnUs, "the disturbance budget, µs"),
    m("summary", "undisturbed_gap_p50_ms", OwnMs, "the median gap of the undisturbed trials"),
    m("summary", "undisturbed_gap_max_ms", OwnMs, "the longest gap of the undisturbed trials"),
    m("summary", "undisturbed_double_leader_trials", Count, "undisturbed trials with two leaders"),
    m("evictions", "leader_pauses", Count, "pauses of a leader"),
    m("evictions", "false_evictions", Count, "paused leaders replaced that came back believing"),
    m("evictions", "predicted_evictions", Count, "leader pauses the theory says evict"),
    m("evictions", "unpredicted_pauses", Count, "leader pauses without a prediction"),
    m("evictions", "eviction_anomalies", Count, "leader pauses whose outcome is not the predicted one"),
    m("evictions", "stale_believers", Count, "leaders that believed on after being replaced"),
    m("evictions", "stale_belief_ms", OwnMs, "their belief after replacement, in total"),
    m("evictions", "stale_belief_max_ms", OwnMs, "the longest such belief"),
    m("evictions", "false_eviction_rate", Fraction, "false evictions per leader pause"),
    m("evictions", "false_eviction_ci_low", Fraction, "its 95 % interval, low end"),
    m("evictions", "false_eviction_ci_high", Fraction, "its 95 % interval, high end"),
    m("network", "renew_failures", Count, "renewals that failed"),
    m("network", "replies_lost", Count, "replies the proxy dropped"),
    m("network", "orphaned_grants", Count, "grants held for a live worker that did not believe it led"),
    m("network", "orphaned_grant_ms", OwnMs, "their time, in total"),
    m("network", "orphaned_grant_max_ms", OwnMs, "the longest"),
    m("network", "possible_grants", Count, "lost-reply requests the history cannot settle"),
    m("network", "stale_believers", Count, "holders that believed on after the lease went to another"),
    m("network", "stale_belief_ms", OwnMs, "their belief after that, in total"),
    m("network", "stale_belief_max_ms", OwnMs, "the longest"),
    m("network", "heals", Count, "heals of a network fault"),
    m("network", "storm_ops", Count, "operations begun within a lease after a heal"),
    m("network", "storm_failed", Count, "of them, those that failed"),
    m("network", "storm_p50_ms", Real, "their median latency, ms"),
    m("network", "storm_p99_ms", Real, "their 99th percentile latency, ms"),
    m("network", "storm_max_ms", Real, "their longest latency, ms"),
    m("network", "steady_ops", Count, "operations before the first network fault"),
    m("network", "steady_p50_ms", Real, "their median latency, ms"),
    m("network", "steady_p99_ms", Real, "their 99th percentile latency, ms"),
    m("network", "double_grants", Count, "grants of the lease to two workers at once"),
    m("network", "double_grant_ms", OwnMs, "their time, in total"),
    m("network", "double_grant_max_ms", OwnMs, "the longest"),
    m("network", "double_grants_across_members", Count, "double grants by two members of a replicated service"),
    m("network", "possible_double_grants", Count, "double grants a lost reply may have made"),
    m("network", "recovery_ms", OwnMs, "the longest way back to one leader and one grant after the last heal"),
    m("network", "unrecovered", Count, "healed trials that never got there"),
    m("network", "token_inversions", Count, "acquisitions whose fencing token is not above every earlier one's"),
    m("network", "untokened", Count, "acquisitions without a fencing token"),
    m("writes", "writes", Count, "writes to the protected resource"),
    m("writes", "stale_writes", Count, "writes by a leader that was no longer one"),
    m("writes", "stale_writes_accepted", Count, "of them, those the resource accepted"),
    m("writes", "stale_writes_rejected", Count, "of them, those it rejected"),
    m("writes", "stale_writes_superseded", Count, "of them, those a newer write replaced"),
    m("service", "grants", Count, "grants the service gave"),
    m("service", "acquisitions", Count, "acquisitions the workers reported"),
    m("service", "unclaimed_grants", Count, "grants no worker's `acquired` claimed"),
    m("service", "service_gap_max_ms", OwnMs, "the longest time the service held no grant"),
    m("service", "unbacked_beliefs", Count, "beliefs the service did not back"),
    m("service", "unbacked_belief_ms", OwnMs, "their time, in total"),
    m("service", "unbacked_belief_max_ms", OwnMs, "the longest"),
    m("service", "unseen_ms", OwnMs, "time the service could not be read"),
    m("jobs", "epochs", Count, "epochs the job was due in"),
    m("jobs", "job_runs", Count, "runs of the job"),
    m("jobs", "jobs_applied", Count, "runs whose result was applied"),
    m("jobs", "jobs_repeated", Count, "runs that repeated an epoch already done"),
    m("jobs", "jobs_rejected", Count, "runs whose result was rejected"),
    m("jobs", "missed_epochs", Count, "epochs nobody ran"),
    m("jobs", "duplicate_executions", Count, "epochs run more than once"),
    m("jobs", "stale_results", Count, "results from a leader that was no longer one"),
    m("jobs", "stale_results_applied", Count, "of them, those applied"),
    m("jobs", "missed_epoch_trials", Trials, "trials with a missed epoch"),
    m("jobs", "duplicate_trials", Trials, "trials with a duplicate execution"),
    m("latency", "acquire_p50_us", Real, "acquisitions' median latency, µs"),
    m("latency", "acquire_p99_us", Real, "acquisitions' 99th percentile latency, µs"),
    m("latency", "renew_p50_us", Real, "renewals' median latency, µs"),
    m("latency", "renew_p99_us", Real, "renewals' 99th percentile latency, µs"),
    m("latency", "observe_p50_us", Real, "observations' median latency, µs"),
    m("latency", "observe_p99_us", Real, "observations' 99th percentile latency, µs"),
];

/// The metric of a key, if there is one.
pub fn summary_metric(key: &str) -> Option<&'static SummaryMetric> {
    SUMMARY_METRICS.iter().find(|m| m.key() == key)
}

/// What the experiment's trials can measure beyond the core: each
/// feature's rows go to a summary file of its own, written only when the
/// feature runs (a sweep's: when any point runs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Workers are paused or stopped: leader pauses and evictions.
    pub evictions: bool,
    /// A protected resource takes the leader's writes.
    pub writes: bool,
    /// An epoch job runs.
    pub jobs: bool,
    /// Network faults hit the links to the server, or the service is
    /// replicated (its double grants).
    pub network: bool,
    /// The harness observes the lease on the service.
    pub service: bool,
}

impl Features {
    pub fn of(exp: &Experiment) -> Features {
        let units: Vec<&Experiment> = exp.units().into_iter().map(|(e, _)| e).collect();
        Features {
            evictions: units.iter().any(|e| e.fault_kinds().any(|f| matches!(f.action, Action::Pause | Action::Stop))),
            writes: units
                .iter()
                .any(|e| e.worker.resource != Resource::None || e.program.as_ref().is_some_and(|p| p.writes())),
            jobs: units.iter().any(|e| e.worker.epoch_job.is_some()),
            // A replicated service's double grants are there too, whatever
            // its faults.
            network: units.iter().any(|e| e.substrate.replicated() || e.fault_kinds().any(|f| f.action.is_network())),
            service: units.iter().any(|e| e.substrate.observe),
        }
    }

    /// Whether a run writes this summary file (`file` as in the table):
    /// Some(why not) where it never does. summary.csv always is, and
    /// latency.csv whenever an operation was timed.
    pub fn why_not_written(&self, file: &str) -> Option<&'static str> {
        let (on, why) = match file {
            "evictions" => (self.evictions, "no fault pauses or stops a worker (pause, stop)"),
            "writes" => (
                self.writes,
                "its workers write to no protected resource (worker.resource, or `{resource}` in a program's command)",
            ),
            "jobs" => (self.jobs, "no epoch job runs (worker.epoch_job)"),
            "network" => (self.network, "no network fault hits the server's links and the service is not replicated"),
            "service" => (self.service, "the harness does not observe the lease (substrate.observe)"),
            _ => (true, ""),
        };
        (!on).then_some(why)
    }
}

/// A bound on one metric, per setting (each sweep point on its own).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The value is at most this (durations in the metric's own time).
    Max(f64),
    /// The value is at least this.
    Min(f64),
    /// For trials: the upper end of the 95 % interval of the rate is at
    /// most this fraction (so 0/3 does not pass a 5 % ceiling).
    RateMax(f64),
    /// For trials: the lower end of the 95 % interval is at least this.
    RateMin(f64),
}

impl Bound {
    pub fn words(&self) -> String {
        let pct = |f: f64| format!("{} %", (f * 1000.0).round() / 10.0);
        match self {
            Bound::Max(v) => format!("max {v}"),
            Bound::Min(v) => format!("min {v}"),
            Bound::RateMax(f) => format!("rate_max {}", pct(*f)),
            Bound::RateMin(f) => format!("rate_min {}", pct(*f)),
        }
    }
}

/// `expect: {metrics: {KEY: {max: …}}}`: one bound of one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricBound {
    pub metric: &'static SummaryMetric,
    pub bound: Bound,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_unique_and_found() {
        let mut keys: Vec<String> = SUMMARY_METRICS.iter().map(SummaryMetric::key).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "a key twice");
        assert_eq!(summary_metric("summary.gap_p99_ms").map(|m| m.measure), Some(Measure::OwnMs));
        assert_eq!(summary_metric("gap_p99_ms"), None, "keys name their file");
        assert!(SUMMARY_METRICS.iter().filter(|m| m.measure == Measure::Trials).all(|m| m.column.ends_with("_trials")));
    }
}
