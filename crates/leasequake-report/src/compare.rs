//! The side-by-side table: what a source (the blog) reported, what we
//! measured, the theoretical bound, and a verdict for each difference.
//! Written as README.md when a directory of experiments runs into `--out`.

use std::fmt::Write;

use crate::check::TrialMetrics;
use crate::check::samples::Samples;
use crate::model::history::us_to_ms;
use crate::model::{Dur, Experiment};

use super::cells::{MdTable, disturbed_cell_of, name};
use super::summary::{Measured, Summary};
use crate::check::stats::{percentile, wilson95};

/// Seconds in the source's time: measured ms divided by the time scale.
fn unscaled_s(ms: f64, scale: f64) -> f64 {
    ms / 1000.0 / scale
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

fn ended_gaps<'a>(m: &'a Measured<'_>) -> impl Iterator<Item = &'a crate::check::Gap> + 'a {
    m.metrics.iter().flat_map(|t| t.gaps.iter()).filter(|g| g.ended)
}

/// "median 9.530 s (9.528–9.531 s, 10 gaps) = 6.530 s paid-for lease + 3.000 s detection"
fn gap_text(m: &Measured<'_>) -> String {
    let s = m.summary;
    let scale = m.exp.time_scale;
    let (Some(p50), Some(min), Some(max)) = (s.gap_p50_ms, s.gap_min_ms, s.gap_max_ms) else {
        return "no gap ended".into();
    };
    let mut text = format!(
        "median {:.3} s ({:.3}–{:.3} s, {} gaps)",
        unscaled_s(p50, scale),
        unscaled_s(min, scale),
        unscaled_s(max, scale),
        s.gaps
    );
    let remainder = median(ended_gaps(m).filter_map(|g| g.lease_remainder_us).map(us_to_ms).collect());
    let lag = median(ended_gaps(m).filter_map(|g| g.detection_lag_us).map(us_to_ms).collect());
    if let (Some(r), Some(l)) = (remainder, lag) {
        let _ = write!(
            text,
            " = {:.3} s paid-for lease + {:.3} s detection (medians)",
            unscaled_s(r, scale),
            unscaled_s(l, scale)
        );
    }
    text
}

fn percent(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// The blog's claims beside the measurement: experiment, the blog,
/// measured here, the bound, the verdict.
pub fn bound_row(m: &Measured<'_>) -> [String; 5] {
    let exp = m.exp;
    let s = m.summary;
    let r = exp.reference.clone().unwrap_or_default();
    let scale = exp.time_scale;
    let mut measured = Vec::new();
    let mut verdicts = Vec::new();

    let about_gaps = r.gap.is_some() || r.worst_gap.is_some() || r.bound.is_some();
    if about_gaps {
        measured.push(gap_text(m));
        if let (Some(claim), Some(p50)) = (r.gap, s.gap_p50_ms) {
            let delta = unscaled_s(p50, scale) - claim.as_ms_f64() / 1000.0;
            // Round first so that a tiny negative difference is not "-0.000".
            let delta = (delta * 1000.0).round() / 1000.0 + 0.0;
            verdicts.push(format!("median − blog = {delta:+.3} s"));
        }
        if let (Some(worst), Some(max)) = (r.worst_gap, s.gap_max_ms) {
            let max = unscaled_s(max, scale);
            let claim = worst.as_ms_f64() / 1000.0;
            verdicts.push(format!("largest gap {max:.3} s vs claimed worst case {claim:.3} s"));
        }
        if let Some([lo, hi]) = r.bound {
            verdicts.push(bound_verdict(s, scale, lo, hi));
        }
    }
    let (k, n) = (s.double_leader_trials, s.n);
    let (lo, hi) = s.double_leader_ci;
    if let Some([bk, bn]) = r.double_leader_trials {
        measured.push(format!("{k}/{n} trials with two leaders (95 % CI {}–{})", percent(lo), percent(hi)));
        let blog = bk as f64 / bn.max(1) as f64;
        let (blo, bhi) = wilson95(bk, bn);
        let inside = blog >= lo && blog <= hi;
        let overlap = blo <= hi && lo <= bhi;
        verdicts.push(format!(
            "blog's {bk}/{bn} ({}) is {} our interval; the two intervals {}",
            percent(blog),
            if inside { "inside" } else { "outside" },
            if overlap { "overlap" } else { "do not overlap: a real difference" }
        ));
    } else if k > 0 || r.max_leaders.is_some() {
        measured.push(format!("{k}/{n} trials with two leaders (95 % CI {}–{})", percent(lo), percent(hi)));
    }
    if let Some(claimed) = r.max_leaders {
        let seen = m.metrics.iter().map(|t| t.max_leaders).max().unwrap_or(0);
        verdicts.push(if seen <= claimed {
            format!("never more than {claimed} leader(s), as claimed")
        } else {
            format!("CONTRADICTS the claim: up to {seen} leaders at once in {k}/{n} trials")
        });
    }
    if s.writes.attempted > 0 {
        let w = &s.writes;
        measured.push(format!(
            "{} stale writes of {}: {} overwrote a newer result (lost work), {} rejected, {} accepted before the newer holder wrote",
            w.stale, w.attempted, w.stale_accepted, w.stale_rejected, w.stale_superseded
        ));
    }
    if let Some(job) = &exp.worker.epoch_job {
        let j = &s.jobs;
        measured.push(format!(
            "epoch job ({}): {} duplicate executions in {}/{n} trials, {} of {} epochs missed in {}/{n} trials",
            crate::model::setting_name(&job.strategy),
            j.duplicates,
            s.duplicate_trials,
            j.missed,
            j.expected,
            s.missed_trials
        ));
    }
    if let Some(w) = r.wedged {
        let (lo, hi) = crate::check::stats::wilson95(s.wedged_trials, n);
        measured.push(format!(
            "{}/{n} trials wedged (95 % CI {:.1} %–{:.1} %)",
            s.wedged_trials,
            lo * 100.0,
            hi * 100.0
        ));
        let all = s.wedged_trials == n;
        let none = s.wedged_trials == 0;
        // The bound a count of none gives is said from the count, so that
        // no note beside it can claim a count the cell contradicts.
        verdicts.push(match (w, all, none) {
            (true, true, _) => "wedged in every trial, as claimed".to_string(),
            (false, _, true) => {
                format!("never wedged, as claimed: the per-trial risk is below {:.1} % (95 % upper limit)", hi * 100.0)
            }
            _ => "DIFFERS from the claim".to_string(),
        });
    }
    if measured.is_empty() {
        let max = m.metrics.iter().map(|t| t.max_leaders).max().unwrap_or(0);
        measured.push(format!(
            "max {max} leader(s) at once, {} gaps, {}/{n} wedged over {n} trials",
            s.gaps + s.open_gaps,
            s.wedged_trials
        ));
    }
    if !m.failed.is_empty() {
        let shown: Vec<&str> = m.failed.iter().take(3).map(String::as_str).collect();
        let more = if m.failed.len() > 3 { format!(" (and {} more)", m.failed.len() - 3) } else { String::new() };
        verdicts.insert(0, format!("✗ expect: failed: {}{more}", shown.join("; ")));
    }
    if !r.note.is_empty() {
        verdicts.push(r.note.trim().to_string());
    }
    let bound = match r.bound {
        Some([lo, hi]) => format!("gap ∈ [{lo}, {hi}]"),
        None => String::new(),
    };
    if let Some(calm) = &s.undisturbed {
        // The same cells over the undisturbed trials, beside all of them.
        let metrics: Vec<&TrialMetrics> = m.metrics.iter().copied().filter(|t| !t.disturbance.disturbed()).collect();
        let quiet = Measured { summary: calm, metrics, failed: &[], ..m.clone() };
        let [_, _, quiet_measured, _, quiet_verdict] = bound_row(&quiet);
        measured.push(format!("⚠ over the {} undisturbed trials: {quiet_measured}", calm.n));
        // Its verdicts without the note, which follows once for both.
        let quiet_verdict = quiet_verdict.strip_suffix(r.note.trim()).unwrap_or(&quiet_verdict);
        let quiet_verdict = quiet_verdict.trim_end_matches([' ', '.']);
        verdicts.insert(
            0,
            format!(
                "⚠ {}/{n} trials disturbed by the machine (see Disturbed trials); over the rest: {quiet_verdict}; \
                 over all",
                s.disturbed.len()
            ),
        );
    }
    [name(m), r.claim, measured.join("; "), bound, verdicts.join(". ")]
}

/// Whether the gaps keep to the bound. A gap that never ended is in no
/// bound, and a wedged trial is named too: neither may hide behind the
/// gaps that did end.
fn bound_verdict(s: &Summary, scale: f64, lo: Dur, hi: Dur) -> String {
    let as_run = (lo.as_ms_f64() * scale, hi.as_ms_f64() * scale);
    let (lo, hi) = (lo.as_ms_f64() / 1000.0, hi.as_ms_f64() / 1000.0);
    let mut outside: Vec<String> = super::bounds::outside_by(s.gap_min_ms, s.gap_max_ms, as_run, scale)
        .into_iter()
        .map(|w| format!("ended {w}"))
        .collect();
    if s.open_gaps > 0 {
        outside.push(format!("{} gap(s) never ended", s.open_gaps));
    }
    if s.wedged_trials > 0 {
        outside.push(format!("{}/{} trials wedged", s.wedged_trials, s.n));
    }
    if s.mid_renewal_kills > 0 {
        outside.push(format!("{}/{} trials killed mid-renewal (the lock file left empty)", s.mid_renewal_kills, s.n));
    }
    match (outside.is_empty(), s.gaps) {
        (true, 0) => "no gap to compare with the bound".into(),
        (true, _) => format!("all gaps inside the bound [{lo}, {hi}] s"),
        (false, _) => format!("✗ OUTSIDE the bound [{lo}, {hi}] s: {}", outside.join("; ")),
    }
}

/// The exactly-once job, strategy by strategy, and the seed's claim checked
/// against it: only fencing, idempotency, uniqueness at the resource or
/// partitioning bring duplicate executions to zero. Empty if no experiment
/// runs an epoch job.
pub fn jobs_markdown(runs: &[Measured<'_>]) -> String {
    let with_job: Vec<_> = runs.iter().filter_map(|m| m.exp.worker.epoch_job.map(|j| (m, j))).collect();
    if with_job.is_empty() {
        return String::new();
    }
    let mut t = MdTable::new(&[
        "experiment",
        "strategy",
        "trials",
        "duplicate executions (trials)",
        "missed epochs (trials)",
        "stale results applied / refused or absorbed",
        "stale belief median / max",
        "disturbed (duplicates in the rest)",
    ]);
    for (m, job) in &with_job {
        let s = m.summary;
        let j = &s.jobs;
        let scale = m.exp.time_scale;
        let beliefs: Vec<f64> = m
            .metrics
            .iter()
            .filter(|t| t.evictions.stale_believers > 0)
            .map(|t| us_to_ms(t.evictions.stale_belief_max_us))
            .collect();
        let belief = match (median(beliefs), s.stale_belief_max_ms) {
            (Some(p50), Some(max)) => format!("{:.2} s / {:.2} s", unscaled_s(p50, scale), unscaled_s(max, scale)),
            _ => "-".into(),
        };
        t.row(vec![
            name(m),
            crate::model::setting_name(&job.strategy),
            s.n.to_string(),
            format!("{} ({})", j.duplicates, s.duplicate_trials),
            format!("{} of {} ({})", j.missed, j.expected, s.missed_trials),
            format!("{} / {}", j.stale_applied, j.stale_results - j.stale_applied),
            belief,
            disturbed_cell_of(s, |calm| calm.jobs.duplicates.to_string()),
        ]);
    }
    let mut out = format!(
        "\n## The exactly-once job, by strategy\n\n\
         Per experiment, summed over its trials. A *duplicate execution* is a second result of one epoch's job \
         that took effect; a *missed epoch* had a whole epoch left in the trial and no result. A *stale result* \
         carries a fencing token lower than one already granted: a holder that kept believing after its lease \
         was taken.\n\n{}",
        t.render()
    );
    use crate::model::JobStrategy;
    // Over every trial, and over the undisturbed ones alone: a verdict
    // that rests on trials the machine moved must say so.
    let dup = |pick: &dyn Fn(JobStrategy) -> bool, calm: bool| -> usize {
        with_job
            .iter()
            .filter(|(_, j)| pick(j.strategy))
            .map(|(m, _)| match m.summary.undisturbed.as_deref() {
                Some(u) if calm => u.jobs.duplicates,
                _ => m.summary.jobs.duplicates,
            })
            .sum()
    };
    let lease_only = dup(&|s| s == JobStrategy::LeaseOnly, false);
    let others = dup(&|s| s != JobStrategy::LeaseOnly, false);
    let has = |st: JobStrategy| with_job.iter().any(|(_, j)| j.strategy == st);
    if has(JobStrategy::LeaseOnly) && with_job.len() > 1 {
        let verdict = |lease_only: usize, others: usize| match (lease_only > 0, others == 0) {
            (true, true) => "holds here: lease only executed duplicates, every other strategy none",
            (false, true) => "not exercised: no strategy executed a duplicate, not even lease only",
            (_, false) => "CONTRADICTED here: a strategy other than lease only executed a duplicate",
        };
        let _ = writeln!(
            out,
            "\nThe seed's claim (only fencing, idempotency, uniqueness or partitioning bring duplicates to zero) \
             {} ({lease_only} duplicates with lease only, {others} with the others).",
            verdict(lease_only, others)
        );
        let spoiled: usize = with_job.iter().map(|(m, _)| m.summary.disturbed.len()).sum();
        if spoiled > 0 {
            let (calm_lease, calm_others) =
                (dup(&|s| s == JobStrategy::LeaseOnly, true), dup(&|s| s != JobStrategy::LeaseOnly, true));
            let _ = writeln!(
                out,
                "⚠ {spoiled} of these trials the machine disturbed; without them the claim {} ({calm_lease} \
                 duplicates with lease only, {calm_others} with the others).",
                verdict(calm_lease, calm_others)
            );
        }
    }
    out
}

/// A substrate as the comparison names it, with how its watchers learn of
/// a free lease where they are told (the same server, polled and pushed,
/// is two rows).
fn substrate_label(exp: &Experiment) -> String {
    let s = &exp.substrate;
    let kind = crate::model::setting_name(&s.kind);
    let mut how: Vec<&str> = Vec::new();
    if s.managed_server().is_some() {
        how.push("managed");
    }
    if exp.worker.watch_by == crate::model::WatchBy::Push {
        how.push("push");
    }
    if how.is_empty() { kind } else { format!("{kind} ({})", how.join(", ")) }
}

/// The substrate × fault table: every experiment (fault) a column, every
/// substrate a row, each cell the gap median/max, double-leader and wedged
/// trials; then each substrate's operation latencies over all its runs.
/// Empty unless the runs cover two substrates or more.
pub fn substrates_markdown(rows: &[&super::summary::SummaryRow<'_>]) -> String {
    let mut substrates: Vec<String> = Vec::new();
    let mut faults: Vec<String> = Vec::new();
    for r in rows {
        let (s, f) = (substrate_label(r.exp), r.exp.name.clone());
        if !substrates.contains(&s) {
            substrates.push(s);
        }
        if !faults.contains(&f) {
            faults.push(f);
        }
    }
    if substrates.len() < 2 {
        return String::new();
    }
    let scale = rows.first().map_or(1.0, |r| r.exp.time_scale);
    let secs = |ms: Option<f64>| ms.map_or("-".to_string(), |v| format!("{:.2}", unscaled_s(v, scale)));
    let mut out = String::new();
    // One fault's table is already the per-substrate one.
    if faults.len() >= 2 {
        out += &format!(
            "\n## Substrate × fault\n\n\
             Each cell: leaderless gap median / max in seconds (open: gaps that never ended), trials with two \
             leaders, wedged trials.\n\n| substrate | {} |\n|---|{}\n",
            faults.join(" | "),
            "---|".repeat(faults.len())
        );
    }
    for s in substrates.iter().filter(|_| faults.len() >= 2) {
        let cells: Vec<String> = faults
            .iter()
            .map(|f| {
                let Some(r) = rows.iter().find(|r| &r.exp.name == f && &substrate_label(r.exp) == s) else {
                    return "n/a".to_string();
                };
                let m = &r.summary;
                let open = if m.open_gaps > 0 { format!(" (open {})", m.open_gaps) } else { String::new() };
                format!(
                    "{} / {} s{open}; 2L {}/{}; W {}/{}",
                    secs(m.gap_p50_ms),
                    secs(m.gap_max_ms),
                    m.double_leader_trials,
                    m.n,
                    m.wedged_trials,
                    m.n
                )
            })
            .collect();
        let _ = writeln!(out, "| {s} | {} |", cells.join(" | "));
    }
    out += "\n## Operation latency per substrate\n\nAs the workers timed each substrate call, over all runs of the substrate: \
            median / p99 in µs (real time: latencies are not scaled).\n\n\
            | substrate | acquire | renew | observe |\n|---|---|---|---|\n";
    for s in &substrates {
        let mut all = crate::check::Latency::default();
        for r in rows.iter().filter(|r| &substrate_label(r.exp) == s) {
            all.acquire_us.extend(&r.summary.latency.acquire_us);
            all.renew_us.extend(&r.summary.latency.renew_us);
            all.observe_us.extend(&r.summary.latency.observe_us);
        }
        let cell = |v: &Samples| match (super::summary::pct_us(v, 0.5), super::summary::pct_us(v, 0.99)) {
            (Some(a), Some(b)) => format!("{a} / {b} (n {})", v.len()),
            _ => "-".into(),
        };
        let _ =
            writeln!(out, "| {s} | {} | {} | {} |", cell(&all.acquire_us), cell(&all.renew_us), cell(&all.observe_us));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::check::{Gap, Spans};
    use crate::experiment::{Overrides, load_str};
    use crate::summary::summarize;

    fn trial(gap_ms: Option<i64>, max_leaders: usize) -> TrialMetrics {
        TrialMetrics {
            start_spread_us: Some(0),
            first_leader_us: Some(0),
            max_leaders,
            double_leader_us: 0,
            double_leader_active_us: 0,
            leaderless_us: 0,
            gaps: gap_ms
                .map(|ms| Gap {
                    start_us: 0,
                    end_us: ms * 1000,
                    ended: true,
                    cause: "kill".into(),
                    cause_fault: Some(0),
                    ended_by: Some(1),
                    lease_remainder_us: Some(ms * 1000 - 300_000),
                    detection_lag_us: Some(300_000),
                    holder: Some(0),
                    predicted_end_us: Some(ms * 1000 - 1000),
                    anomaly: None,
                    takeover_us: None,
                })
                .into_iter()
                .collect(),
            wedged: false,
            end_us: 3_000_000,
            cut: false,
            spans: Spans::default(),
            evictions: Default::default(),
            network: Default::default(),
            pushes: Default::default(),
            writes: Default::default(),
            jobs: Default::default(),
            latency: Default::default(),
            precision: Default::default(),
            disturbance: Default::default(),
            service: Default::default(),
        }
    }

    fn table(yaml: &str, scale: f64, trials: &[TrialMetrics]) -> String {
        let o = Overrides { time_scale: Some(scale), ..Overrides::default() };
        let exp = load_str(Path::new("x.yaml"), yaml, &o).unwrap();
        let metrics: Vec<&TrialMetrics> = trials.iter().collect();
        let summary = summarize(&metrics);
        bound_row(&Measured { exp: &exp, summary: &summary, metrics, link: "x".into(), failed: &[] }).join(" | ")
    }

    #[test]
    fn the_job_table_counts_disturbed_trials_and_the_claim_is_given_without_them() {
        let job = |strategy: &str, dups: &[(usize, bool)]| {
            let yaml = format!(
                "name: {strategy}\nworkers: 3\nworker:\n  fencing_tokens: true\n  resource: fenced\n  epoch_job: {{epoch: 20s, duration: 2s, strategy: {strategy}}}\n"
            );
            let exp = load_str(Path::new("x.yaml"), &yaml, &Overrides::default()).unwrap();
            let trials: Vec<TrialMetrics> = dups
                .iter()
                .map(|&(duplicates, disturbed)| {
                    let mut t = trial(None, 1);
                    t.jobs.duplicates = duplicates;
                    if disturbed {
                        t.disturbance.causes.push("worker 0 woke 9 ms late for its tick at 1 s".into());
                    }
                    t
                })
                .collect();
            (exp, trials)
        };
        let runs = [job("lease-only", &[(2, false), (1, true)]), job("fencing", &[(0, false), (1, true)])];
        let sums: Vec<Summary> = runs.iter().map(|(_, t)| summarize(&t.iter().collect::<Vec<_>>())).collect();
        let measured: Vec<Measured<'_>> = runs
            .iter()
            .zip(&sums)
            .map(|((exp, t), summary)| Measured {
                exp,
                summary,
                metrics: t.iter().collect(),
                link: "x".into(),
                failed: &[],
            })
            .collect();
        let md = jobs_markdown(&measured);
        assert!(md.contains("| disturbed (duplicates in the rest) |"), "{md}");
        assert!(md.contains("| ⚠ [fencing](x) | fencing | 2 | 1 (1) |"), "{md}");
        assert!(md.contains(" ⚠ 1/2 (0) |"), "{md}");
        assert!(md.contains("CONTRADICTED here"), "over every trial: {md}");
        assert!(
            md.contains(
                "⚠ 2 of these trials the machine disturbed; without them the claim holds here: lease only executed \
             duplicates, every other strategy none (2 duplicates with lease only, 0 with the others)."
            ),
            "{md}"
        );
        let calm = jobs_markdown(&measured[..0]);
        assert!(calm.is_empty());
    }

    #[test]
    fn gaps_are_shown_in_the_sources_time_and_checked_against_the_bound() {
        let yaml = "name: k\nworkers: 3\nreference:\n  claim: c\n  gap: 9.53s\n  bound: [6s, 13s]\n";
        let t = table(yaml, 0.1, &[trial(Some(953), 1), trial(Some(955), 1)]);
        assert!(t.contains("median 9.540 s (9.530–9.550 s, 2 gaps)"), "{t}");
        assert!(t.contains("median − blog = +0.010 s"), "{t}");
        assert!(t.contains("all gaps inside the bound [6, 13] s"), "{t}");
        let t = table(yaml, 0.1, &[trial(Some(1400), 1)]);
        assert!(t.contains("OUTSIDE the bound"), "{t}");
    }

    #[test]
    fn a_gap_that_never_ended_is_not_inside_the_bound() {
        let yaml = "name: k\nworkers: 3\nreference:\n  claim: c\n  bound: [6s, 13s]\n";
        let mut wedged = trial(Some(617), 1);
        let gap = &mut wedged.gaps[0];
        (gap.ended, gap.cause, gap.end_us) = (false, crate::check::KILL_MID_RENEWAL.into(), 3_000_000);
        wedged.wedged = true;
        let t = table(yaml, 0.1, &[trial(Some(617), 1), trial(Some(700), 1), wedged]);
        assert!(!t.contains("all gaps inside"), "{t}");
        assert!(
            t.contains(
                "✗ OUTSIDE the bound [6, 13] s: 1 gap(s) never ended; 1/3 trials wedged; 1/3 trials killed mid-renewal"
            ),
            "{t}"
        );
    }

    #[test]
    fn double_leader_counts_are_compared_by_interval() {
        let yaml = "name: r\nworkers: 3\nreference:\n  claim: c\n  double_leader_trials: [3, 30]\n";
        let mut trials: Vec<TrialMetrics> = (0..30).map(|_| trial(None, 1)).collect();
        trials[0].max_leaders = 2;
        let t = table(yaml, 1.0, &trials);
        assert!(t.contains("1/30 trials with two leaders"), "{t}");
        assert!(t.contains("blog's 3/30 (10.0 %) is inside our interval"), "{t}");
        let claim = "name: s\nworkers: 3\nreference:\n  claim: safe\n  max_leaders: 1\n";
        assert!(table(claim, 1.0, &trials).contains("CONTRADICTS the claim: up to 2 leaders at once in 1/30 trials"));
    }
}
