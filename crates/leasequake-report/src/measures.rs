//! The checker's measures as the CSV rows carry them: ms to the µs, rates
//! to four places, per-setting sums (`csv.rs` writes them).

use super::rows::{
    EventRow, EvictionCounts, EvictionRate, JobCounts, LatencyRow, NetworkCounts, ServiceCounts, SummaryStats,
    WriteCounts, ms, round_ms,
};
use super::summary::{SummaryRow, crash_bound_ms, pct_us};
use crate::check::stats::percentile;
use crate::model::history::Event;

pub(super) fn event_row(trial: u32, e: &Event) -> EventRow {
    EventRow {
        trial,
        t_ms: ms(e.t_us),
        worker: e.worker,
        pid: e.pid,
        event: e.kind.name().to_string(),
        detail: e.detail.to_json(),
    }
}

pub(super) fn stats(r: &SummaryRow<'_>) -> SummaryStats {
    let s = &r.summary;
    let (lo, hi) = crash_bound_ms(r.exp);
    let round = |v: Option<f64>| v.map(round_ms);
    SummaryStats {
        n: s.n,
        gaps: s.gaps,
        open_gaps: s.open_gaps,
        gap_min_ms: round(s.gap_min_ms),
        gap_p50_ms: round(s.gap_p50_ms),
        gap_p90_ms: round(s.gap_p90_ms),
        gap_p99_ms: round(s.gap_p99_ms),
        gap_max_ms: round(s.gap_max_ms),
        double_leader_trials: s.double_leader_trials,
        double_leader_ci_low: round4(s.double_leader_ci.0),
        double_leader_ci_high: round4(s.double_leader_ci.1),
        wedged_trials: s.wedged_trials,
        no_leader_trials: s.no_leader_trials,
        crash_gap_bound_min_ms: round_ms(lo),
        crash_gap_bound_max_ms: round_ms(hi),
        crash_gaps: s.crash_gaps_ms.len(),
        crash_gap_p10_ms: round(s.crash_gap(0.1)),
        crash_gap_p50_ms: round(s.crash_gap(0.5)),
        crash_gap_p90_ms: round(s.crash_gap(0.9)),
        crash_gap_max_ms: round(s.crash_gap(1.0)),
        predicted_gaps: s.predicted_gaps,
        gap_anomalies: s.gap_anomalies,
        fault_error_max_us: s.fault_error_max_us,
        fault_budget_us: s.fault_budget_us,
        over_budget_trials: s.over_budget_trials,
        disturbed_trials: s.disturbed.len(),
        disturbance_budget_us: s.disturbance_budget_us,
        undisturbed_gap_p50_ms: s.undisturbed.as_ref().and_then(|u| round(u.gap_p50_ms)),
        undisturbed_gap_max_ms: s.undisturbed.as_ref().and_then(|u| round(u.gap_max_ms)),
        undisturbed_double_leader_trials: s.undisturbed.as_ref().map(|u| u.double_leader_trials),
    }
}

/// summary-gaps.csv's rows of one setting.
pub(super) fn gap_kinds(r: &SummaryRow<'_>) -> Vec<super::rows::GapKindRow> {
    let round = |v: Option<f64>| v.map(round_ms);
    r.summary
        .gap_beyond_theory
        .iter()
        .map(|b| super::rows::GapKindRow {
            setting: r.setting.clone(),
            cause: b.cause.clone(),
            ended: b.ended.to_string(),
            gaps: b.beyond_ms.len(),
            beyond_theory_p50_ms: round(percentile(&b.beyond_ms, 0.5)),
            beyond_theory_max_ms: round(b.beyond_ms.last().copied()),
            takeover_p50_ms: round(percentile(&b.takeover_ms, 0.5)),
            takeover_max_ms: round(b.takeover_ms.last().copied()),
        })
        .collect()
}

/// A proportion to four decimals.
pub(super) fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

pub(super) fn eviction_counts(e: &crate::check::Evictions) -> EvictionCounts {
    EvictionCounts {
        leader_pauses: e.leader_pauses,
        false_evictions: e.false_evictions,
        predicted_evictions: (e.leader_pauses == 0 || e.unpredicted < e.leader_pauses).then_some(e.predicted),
        unpredicted_pauses: e.unpredicted,
        eviction_anomalies: e.anomalies,
        stale_believers: e.stale_believers,
        stale_belief_ms: ms(e.stale_belief_us),
        stale_belief_max_ms: (e.stale_believers > 0).then(|| ms(e.stale_belief_max_us)),
    }
}

/// The eviction counts of a setting, summed over its trials.
pub(super) fn summed_evictions(r: &SummaryRow<'_>) -> EvictionCounts {
    let s = &r.summary;
    EvictionCounts {
        leader_pauses: s.leader_pauses,
        false_evictions: s.false_evictions,
        predicted_evictions: s.predicted_evictions(),
        unpredicted_pauses: s.unpredicted_pauses,
        eviction_anomalies: s.eviction_anomalies,
        stale_believers: s.stale_believers,
        stale_belief_ms: round_ms(s.stale_belief_ms),
        stale_belief_max_ms: s.stale_belief_max_ms.map(round_ms),
    }
}

pub(super) fn eviction_rate(r: &SummaryRow<'_>) -> EvictionRate {
    let s = &r.summary;
    EvictionRate {
        false_eviction_rate: (s.leader_pauses > 0).then(|| round4(s.false_evictions as f64 / s.leader_pauses as f64)),
        false_eviction_ci_low: round4(s.false_eviction_ci.0),
        false_eviction_ci_high: round4(s.false_eviction_ci.1),
    }
}

/// A network row: the link's counts, and the stale belief (believers,
/// total ms, longest ms) the evictions also report.
pub(super) fn network_counts(n: &crate::check::Network, stale: (usize, f64, Option<f64>)) -> NetworkCounts {
    let storm = n.storm.as_ref();
    let d = &n.double_grants;
    NetworkCounts {
        renew_failures: n.renew_failures,
        replies_lost: n.replies_lost,
        orphaned_grants: n.orphaned_grants,
        orphaned_grant_ms: ms(n.orphaned_grant_us),
        orphaned_grant_max_ms: (n.orphaned_grants > 0).then(|| ms(n.orphaned_grant_max_us)),
        possible_grants: n.possible_grants,
        stale_believers: stale.0,
        stale_belief_ms: stale.1,
        stale_belief_max_ms: stale.2,
        heals: storm.map_or(0, |s| s.heals),
        storm_ops: storm.map_or(0, |s| s.after_heal.count()),
        storm_failed: storm.map_or(0, |s| s.after_heal.failed),
        storm_p50_ms: storm.and_then(|s| s.after_heal.p50()).map(us_to_ms),
        storm_p99_ms: storm.and_then(|s| s.after_heal.p99()).map(us_to_ms),
        storm_max_ms: storm.and_then(|s| s.after_heal.max()).map(|us| us_to_ms(us as f64)),
        steady_ops: storm.map_or(0, |s| s.baseline.count()),
        steady_p50_ms: storm.and_then(|s| s.baseline.p50()).map(us_to_ms),
        steady_p99_ms: storm.and_then(|s| s.baseline.p99()).map(us_to_ms),
        double_grants: d.definite,
        double_grant_ms: ms(d.definite_us),
        double_grant_max_ms: (d.definite > 0).then(|| ms(d.definite_max_us)),
        double_grants_across_members: d.across_members,
        possible_double_grants: d.possible,
        recovery_ms: n.recovery_us.map(ms),
        unrecovered: n.unrecovered,
        token_inversions: d.token_inversions,
        untokened: d.untokened,
    }
}

/// An operation's µs as ms, to the µs.
pub(super) fn us_to_ms(us: f64) -> f64 {
    round_ms(us / 1000.0)
}

pub(super) fn service_counts(v: &crate::check::ServiceView) -> ServiceCounts {
    ServiceCounts {
        grants: v.grants,
        acquisitions: v.acquisitions,
        unclaimed_grants: v.unclaimed,
        service_gap_max_ms: ms(v.free_max_us),
        unbacked_beliefs: v.unbacked,
        unbacked_belief_ms: ms(v.unbacked_us),
        unbacked_belief_max_ms: (v.unbacked > 0).then(|| ms(v.unbacked_max_us)),
        unseen_ms: ms(v.unseen_us),
    }
}

pub(super) fn write_counts(w: &crate::check::Writes) -> WriteCounts {
    WriteCounts {
        writes: w.attempted,
        stale_writes: w.stale,
        stale_writes_accepted: w.stale_accepted,
        stale_writes_rejected: w.stale_rejected,
        stale_writes_superseded: w.stale_superseded,
    }
}

pub(super) fn job_counts(j: &crate::check::Jobs) -> JobCounts {
    JobCounts {
        epochs: j.expected,
        job_runs: j.runs,
        jobs_applied: j.applied,
        jobs_repeated: j.repeated,
        jobs_rejected: j.rejected,
        missed_epochs: j.missed,
        duplicate_executions: j.duplicates,
        stale_results: j.stale_results,
        stale_results_applied: j.stale_applied,
    }
}

pub(super) fn latency(r: &SummaryRow<'_>) -> LatencyRow {
    let l = &r.summary.latency;
    LatencyRow {
        acquire_p50_us: pct_us(&l.acquire_us, 0.5),
        acquire_p99_us: pct_us(&l.acquire_us, 0.99),
        renew_p50_us: pct_us(&l.renew_us, 0.5),
        renew_p99_us: pct_us(&l.renew_us, 0.99),
        observe_p50_us: pct_us(&l.observe_us, 0.5),
        observe_p99_us: pct_us(&l.observe_us, 0.99),
    }
}

/// One setting's summarised metrics by `file.column`, as its summary files
/// carry them (None: a cell left empty), for the files this experiment
/// writes: what `expect: {metrics: …}` bounds.
pub fn unit_values(
    r: &SummaryRow<'_>,
    features: crate::model::summary_metrics::Features,
) -> std::collections::BTreeMap<String, Option<f64>> {
    let mut out = std::collections::BTreeMap::new();
    let mut add = |file: &str, row: serde_json::Value| {
        for (k, v) in row.as_object().into_iter().flatten() {
            out.insert(format!("{file}.{k}"), v.as_f64());
        }
    };
    fn json<T: serde::Serialize>(row: &T) -> serde_json::Value {
        serde_json::to_value(row).expect("a summary row serialises")
    }
    add("summary", json(&stats(r)));
    let s = &r.summary;
    if features.evictions {
        add("evictions", json(&summed_evictions(r)));
        add("evictions", json(&eviction_rate(r)));
    }
    if features.network {
        let stale = (s.stale_believers, round_ms(s.stale_belief_ms), s.stale_belief_max_ms.map(round_ms));
        add("network", json(&network_counts(&s.network, stale)));
    }
    if features.writes {
        add("writes", json(&write_counts(&s.writes)));
    }
    if features.service {
        add("service", json(&service_counts(&s.service)));
    }
    if features.jobs {
        add("jobs", json(&job_counts(&s.jobs)));
        let trials =
            super::rows::JobTrials { missed_epoch_trials: s.missed_trials, duplicate_trials: s.duplicate_trials };
        add("jobs", json(&trials));
    }
    let l = &s.latency;
    if !(l.acquire_us.is_empty() && l.renew_us.is_empty() && l.observe_us.is_empty()) {
        add("latency", json(&latency(r)));
    }
    out
}
