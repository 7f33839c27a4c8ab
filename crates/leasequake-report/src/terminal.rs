//! The short summary printed at the end of a run (and by `check`).

use crate::check::adaptive::{self, Headline};
use std::path::Path;

use crate::check::{Gap, TrialMetrics};
use crate::model::history::us_to_ms;
use crate::model::{Experiment, setting_name};

use super::summary::{Summary, SummaryRow};

/// ms as it ran → seconds in the experiment's own time.
fn secs(ms: Option<f64>, scale: f64) -> String {
    ms.map(|v| format!("{:.3} s", v / 1000.0 / scale)).unwrap_or_else(|| "-".into())
}

/// Per-trial decomposition of gaps opened by a holder's death or pause:
/// `gap = paid-for lease remainder + detection lag` (at most 20 lines).
pub fn decomposition(metrics: &[(u32, &TrialMetrics)], scale: f64) -> String {
    let mut rows: Vec<(u32, &Gap)> = metrics
        .iter()
        .flat_map(|(t, m)| m.gaps.iter().map(move |g| (*t, g)))
        .filter(|(_, g)| g.lease_remainder_us.is_some() && g.detection_lag_us.is_some())
        .collect();
    rows.sort_by_key(|(t, g)| (*t, g.start_us));
    let mut out = String::new();
    for (t, g) in rows.iter().take(20) {
        let ms = |us: Option<i64>| us.map_or(0.0, us_to_ms) / 1000.0 / scale;
        out += &format!(
            "    trial {t}: {:.3} s = {:.3} s paid-for lease + {:.3} s detection ({})\n",
            ms(Some(g.duration_us())),
            ms(g.lease_remainder_us),
            ms(g.detection_lag_us),
            g.cause
        );
    }
    if rows.len() > 20 {
        out += &format!("    … {} more in gaps.csv\n", rows.len() - 20);
    }
    out
}

/// The trials the machine disturbed, the first one's cause, and the
/// headlines again over the undisturbed trials.
fn disturbed(s: &Summary, scale: f64) -> String {
    let Some(calm) = &s.undisturbed else { return String::new() };
    let mut out = format!(
        "  ⚠ disturbed:    {}/{} trials: the machine moved them more than {} µs; the first: {}; trials.csv's \
         disturbed_by names each\n",
        s.disturbed.len(),
        s.n,
        s.disturbance_budget_us,
        s.disturbed[0]
    );
    let gaps = match calm.gap_p50_ms {
        Some(_) => format!("gaps median {} (max {}), ", secs(calm.gap_p50_ms, scale), secs(calm.gap_max_ms, scale)),
        None => String::new(),
    };
    out += &format!(
        "  undisturbed:    {} trials: {gaps}two leaders {}/{}, wedged {}/{}\n",
        calm.n, calm.double_leader_trials, calm.n, calm.wedged_trials, calm.n
    );
    out
}

pub fn render(exp: &Experiment, s: &Summary, dir: &Path) -> String {
    let (lo, hi) = s.double_leader_ci;
    let mut out = format!("{}: {} trials ({}), seed {}\n", exp.name, s.n, describe(exp), exp.seed);
    let scale = exp.time_scale;
    if scale != 1.0 {
        out += &format!("  time scale:     {scale} (every duration here is in the experiment's own time)\n");
    }
    if s.gaps > 0 {
        out += &format!(
            "  leaderless gaps: {}  min {}  median {}  max {}\n",
            s.gaps,
            secs(s.gap_min_ms, scale),
            secs(s.gap_p50_ms, scale),
            secs(s.gap_max_ms, scale)
        );
        out += &format!("                   p90 {}  p99 {}\n", secs(s.gap_p90_ms, scale), secs(s.gap_p99_ms, scale));
    } else {
        out += "  leaderless gaps: none ended\n";
    }
    if s.open_gaps > 0 {
        out += &format!("  open at the end: {} gaps never ended\n", s.open_gaps);
    }
    out += &format!(
        "  two leaders:    {}/{} trials (95% CI {:.1}–{:.1} %)\n",
        s.double_leader_trials,
        s.n,
        lo * 100.0,
        hi * 100.0
    );
    out += &format!("  wedged:         {}/{} trials\n", s.wedged_trials, s.n);
    if let Some(max) = s.fault_error_max_us {
        out += &format!("  fault error:    at most {} µs late (budget {} µs)\n", max, s.fault_budget_us);
    }
    if s.over_budget_trials > 0 {
        out += &format!(
            "  ⚠ precision:    {}/{} trials had a fault more than {} µs late: the machine was too busy for time \
             scale {scale}; faults.csv has each error\n",
            s.over_budget_trials, s.n, s.fault_budget_us
        );
    }
    out += &disturbed(s, scale);
    if s.mid_renewal_kills > 0 {
        out += &format!(
            "  killed mid-renewal: {}/{} trials (the kill landed inside the leader's renewal: a lock file left empty)\n",
            s.mid_renewal_kills, s.n
        );
    }
    if s.writes.attempted > 0 {
        let w = &s.writes;
        out += &format!(
            "  stale writes:   {} of {} writes: {} overwrote a newer result, {} rejected, {} superseded\n",
            w.stale, w.attempted, w.stale_accepted, w.stale_rejected, w.stale_superseded
        );
    }
    if s.jobs.runs > 0 || s.jobs.expected > 0 {
        let j = &s.jobs;
        out += &format!(
            "  epoch job:      {} runs for {} epochs: {} duplicate executions ({}/{} trials), {} missed ({}/{} trials)\n",
            j.runs, j.expected, j.duplicates, s.duplicate_trials, s.n, j.missed, s.missed_trials, s.n
        );
        out += &format!(
            "                  {} stale results: {} applied, {} refused or absorbed\n",
            j.stale_results,
            j.stale_applied,
            j.stale_results - j.stale_applied
        );
    }
    if exp.fault_kinds().chain(exp.points.iter().flat_map(|p| p.exp.fault_kinds())).any(|f| f.action.is_network()) {
        let n = &s.network;
        let ms = |us: i64| secs(Some(us as f64 / 1000.0), scale);
        out += &format!(
            "  network:        {} renewals failed, {} replies lost; stale belief {} in {} holders (longest {})\n",
            n.renew_failures,
            n.replies_lost,
            secs(Some(s.stale_belief_ms), scale),
            s.stale_believers,
            secs(s.stale_belief_max_ms, scale)
        );
        out += &format!(
            "                  orphaned grants: {} (at least {} in all, longest {}), {} possible\n",
            n.orphaned_grants,
            ms(n.orphaned_grant_us),
            ms(n.orphaned_grant_max_us),
            n.possible_grants
        );
        match (n.recovery_us, n.unrecovered) {
            (r, u) if u > 0 => {
                let longest = r.map(|r| format!(" (the others within {})", ms(r))).unwrap_or_default();
                out += &format!(
                    "  recovery:       {u}/{} healed trials never back to one leader and one grant{longest}\n",
                    s.n
                );
            }
            (Some(r), _) => {
                out += &format!(
                    "  recovery:       {} after the last heal at the longest (one leader, one grant)\n",
                    ms(r)
                );
            }
            (None, _) => {}
        }
        let d = &n.double_grants;
        if d.definite + d.possible > 0 {
            out += &format!(
                "  double grants:  {} in {}/{} trials ({} in all, longest {}; {} across members), {} more possible\n",
                d.definite,
                d.trials,
                s.n,
                ms(d.definite_us),
                ms(d.definite_max_us),
                d.across_members,
                d.possible
            );
        }
    }
    if s.no_leader_trials > 0 {
        out += &format!("  never led:      {}/{} trials\n", s.no_leader_trials, s.n);
    }
    let one_renew = exp.points.iter().all(|p| p.exp.lease.renew == exp.lease.renew);
    if let (None, true, Some(p50)) = (&exp.program, one_renew, super::summary::pct_us(&s.latency.renew_us, 0.5)) {
        // Time scaling shrinks the intervals, not the syscalls.
        out += &format!(
            "  renewals:       median {p50} µs, {:.2} % of the renew interval: a kill at a uniform moment lands inside one that often\n",
            p50 as f64 / exp.lease.renew.as_us() as f64 * 100.0
        );
    }
    out += &format!("  results:        {}\n", dir.display());
    out
}

/// One line per sweep point: measured figures beside the theory's, in the
/// experiment's own time.
pub fn points(rows: &[SummaryRow<'_>]) -> String {
    let label = |r: &SummaryRow<'_>| crate::experiment::own_label(&r.setting, r.exp.time_scale);
    let width = rows.iter().map(|r| label(r).len()).max().unwrap_or(0);
    let mut out = format!(
        "  per point:{:w$}  kill gap p50 [p10–p90]      theory bound       false evictions   predicted (anomalies)\n",
        "",
        w = width.saturating_sub(8)
    );
    for r in rows {
        let s = &r.summary;
        let scale = r.exp.time_scale;
        let (lo, hi) = super::summary::crash_bound_ms(r.exp);
        let own = |ms: f64| ms / 1e3 / scale;
        let gap = match (s.crash_gap(0.5), s.crash_gap(0.1), s.crash_gap(0.9)) {
            (Some(m), Some(a), Some(b)) => format!("{:.3} s [{:.3}–{:.3}]", own(m), own(a), own(b)),
            _ => "-".to_string(),
        };
        let (elo, ehi) = s.false_eviction_ci;
        out += &format!(
            "    {:width$}  {gap:<27} [{:.3}, {:.3}] s  {:>3}/{:<3} ({:.0}–{:.0} %)  {}\n",
            label(r),
            own(lo),
            own(hi),
            s.false_evictions,
            s.leader_pauses,
            elo * 100.0,
            ehi * 100.0,
            predicted(s),
        );
    }
    out
}

/// Why an adaptive run stopped where it did, for one unit.
pub fn adaptive(row: &SummaryRow<'_>, until: &crate::model::Until, max: u32) -> String {
    let counts = row.summary.counts();
    let headline = Headline::of(row.exp, &counts);
    let (width, settled) = adaptive::settled(until, counts.trials, &headline);
    let Headline { what, k, n } = headline;
    let why = if settled {
        format!("its 95 % interval is {:.1} points wide, at most {:.1} asked", width * 100.0, until.ci_width * 100.0)
    } else {
        format!(
            "the cap of {max} trials came first; its 95 % interval is {:.1} points wide, {:.1} asked",
            width * 100.0,
            until.ci_width * 100.0
        )
    };
    format!("  {}: {} trials: {what} {k}/{n}: {why}\n", row.setting, row.summary.n)
}

/// The theory's false evictions beside the pauses that disagree with it.
pub fn predicted(s: &super::summary::Summary) -> String {
    match s.predicted_evictions() {
        None => "unknown".to_string(),
        Some(p) if s.unpredicted_pauses > 0 => {
            format!("{p} ({}, {} unpredictable)", s.eviction_anomalies, s.unpredicted_pauses)
        }
        Some(p) => format!("{p} ({})", s.eviction_anomalies),
    }
}

/// What runs, for reports: the built-in worker's mode, or the program;
/// the lease timing in the experiment's own time.
pub fn describe(exp: &Experiment) -> String {
    let own = |d: crate::model::Dur| d.scaled(1.0 / exp.time_scale);
    let timing =
        format!("lease {} / renew {} / watch {}", own(exp.lease.lease), own(exp.lease.renew), own(exp.lease.watch));
    match &exp.program {
        Some(p) => {
            format!("{} workers, program {}, expiry {}, {timing}", exp.workers, p.command[0], setting_name(&p.expiry))
        }
        None => format!(
            "{} workers, {} mode, acquire {}, {timing}",
            exp.workers,
            setting_name(&exp.worker.mode),
            setting_name(&exp.worker.acquire),
        ),
    }
}
