//! One summary row per setting, computed from the trials' metrics.

use crate::check::TrialMetrics;
use crate::check::samples::Samples;
use crate::model::Experiment;
use crate::model::history::us_to_ms;

use crate::check::stats::{percentile, wilson95};

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    /// Ended gaps, whose durations the statistics describe.
    pub gaps: usize,
    /// Gaps still open at trial end (not in the statistics).
    pub open_gaps: usize,
    pub gap_min_ms: Option<f64>,
    pub gap_p50_ms: Option<f64>,
    pub gap_p90_ms: Option<f64>,
    pub gap_p99_ms: Option<f64>,
    pub gap_max_ms: Option<f64>,
    pub double_leader_trials: usize,
    pub double_leader_ci: (f64, f64),
    pub wedged_trials: usize,
    /// Trials in which a kill landed inside the leader's renewal.
    pub mid_renewal_kills: usize,
    pub no_leader_trials: usize,
    /// Pauses of a believing leader, and the false evictions among them.
    pub leader_pauses: usize,
    pub false_evictions: usize,
    pub false_eviction_ci: (f64, f64),
    /// Leader pauses the theory says evict, those it could not predict,
    /// and those whose outcome disagrees with the prediction.
    pub predicted_evictions: usize,
    pub unpredicted_pauses: usize,
    pub eviction_anomalies: usize,
    /// Ended gaps with a prediction; measured − predicted over them per
    /// gap cause and how the gap ended (a resumed pause ends exactly where
    /// it is predicted to, a takeover after the watcher's wake-up, read
    /// and acquire: one median over both hides the second); gaps that
    /// disagree with their prediction.
    pub predicted_gaps: usize,
    pub gap_beyond_theory: Vec<BeyondTheory>,
    /// Over ended gaps another worker's acquire ended: the longest gap up
    /// to the start of that takeover's look (what the theory's tick
    /// bounds), and the longest takeover (look and acquire), ms.
    pub gap_before_takeover_max_ms: Option<f64>,
    pub takeover_max_ms: Option<f64>,
    pub gap_anomalies: usize,
    /// Ended gaps opened by a SIGKILL (the failover side of the dial), ms,
    /// sorted.
    pub crash_gaps_ms: Vec<f64>,
    /// Writes to the protected resource, summed over trials.
    pub writes: crate::check::Writes,
    /// The lease as the service held it, summed (where observed).
    pub service: crate::check::ServiceView,
    /// Trials with a belief the service did not back.
    pub unbacked_trials: usize,
    /// The exactly-once job, summed over trials.
    pub jobs: crate::check::Jobs,
    /// Trials with a duplicate execution, and with a missed epoch.
    pub duplicate_trials: usize,
    pub missed_trials: usize,
    /// Stale holders (believing after a newer grant), their total and
    /// longest belief.
    pub stale_believers: usize,
    pub stale_belief_ms: f64,
    pub stale_belief_max_ms: Option<f64>,
    /// What the links to the server did, summed over trials.
    pub network: crate::check::Network,
    /// Takeovers a push set off (`watch_by: push`).
    pub pushes: crate::check::Pushes,
    /// Kill gaps from the nominal end of the holder's lease to the
    /// takeover (the detection lag), sorted, ms.
    pub detection_ms: Vec<f64>,
    /// Substrate operation durations over all trials, µs, sorted.
    pub latency: crate::check::Latency,
    /// The median start spread (latest − earliest worker start), µs.
    pub start_spread_p50_us: Option<f64>,
    /// The latest any fault took effect after its moment, µs; the trials
    /// with a fault later than the budget, and the budget (µs, 0: none).
    pub fault_error_max_us: Option<i64>,
    pub over_budget_trials: usize,
    /// Trials with a fault that could not be delivered.
    pub fault_error_trials: usize,
    pub fault_budget_us: i64,
    /// Each disturbed trial's causes (`Disturbance::text`), in the order
    /// of the trials given; the budget they were judged by (µs, 0: none).
    pub disturbed: Vec<String>,
    pub disturbance_budget_us: i64,
    /// The same summary over the undisturbed trials alone, where any trial
    /// was disturbed: every headline is given both ways.
    pub undisturbed: Option<Box<Summary>>,
}

impl Summary {
    pub fn crash_gap(&self, q: f64) -> Option<f64> {
        percentile(&self.crash_gaps_ms, q)
    }

    /// What an adaptive run's stopping rule counts (`check::adaptive`).
    pub fn counts(&self) -> crate::check::adaptive::Counts {
        crate::check::adaptive::Counts {
            trials: self.n,
            double_leader_trials: self.double_leader_trials,
            false_evictions: self.false_evictions,
            leader_pauses: self.leader_pauses,
        }
    }

    /// The false evictions the theory predicts: unknown when no leader
    /// pause could be predicted.
    pub fn predicted_evictions(&self) -> Option<usize> {
        (self.leader_pauses == 0 || self.unpredicted_pauses < self.leader_pauses).then_some(self.predicted_evictions)
    }
}

/// One summary.csv row: a setting (the experiment, or a sweep point).
pub struct SummaryRow<'a> {
    pub setting: String,
    pub exp: &'a Experiment,
    pub summary: Summary,
}

/// One experiment's run, for a suite's tables: its summary beside the
/// trials it came from.
#[derive(Clone)]
pub struct Measured<'a> {
    pub exp: &'a Experiment,
    pub summary: &'a Summary,
    pub metrics: Vec<&'a TrialMetrics>,
    /// Where its files are, relative to the table.
    pub link: String,
    /// How its `expect:` failed (empty: it held, or there was none).
    pub failed: &'a [String],
}

/// A percentile of µs samples, rounded to whole µs.
pub fn pct_us(samples: &Samples, q: f64) -> Option<u64> {
    samples.percentile(q).map(|p| p.round() as u64)
}

/// The theory's bound on the gap after a SIGKILL at a uniform moment, for
/// this experiment's substrate and settings (`CheckParams::crash_bound_us`).
pub fn crash_bound_ms(exp: &Experiment) -> (f64, f64) {
    let (lo, hi) = crate::check::CheckParams::of(exp).crash_bound_us();
    (lo as f64 / 1000.0, hi as f64 / 1000.0)
}

/// One summary per unit that has finished trials; `metrics` holds
/// (trial, unit index, metrics).
pub fn per_unit<'a>(units: &[(&'a Experiment, String)], metrics: &[(u32, usize, TrialMetrics)]) -> Vec<SummaryRow<'a>> {
    units
        .iter()
        .enumerate()
        .filter_map(|(i, (exp, label))| {
            let mine: Vec<&TrialMetrics> = metrics.iter().filter(|(_, u, _)| *u == i).map(|(_, _, m)| m).collect();
            (!mine.is_empty()).then(|| SummaryRow { setting: exp.setting_label(label), exp, summary: summarize(&mine) })
        })
        .collect()
}

pub fn summarize(trials: &[&TrialMetrics]) -> Summary {
    let mut s = summarize_all(trials);
    if !s.disturbed.is_empty() {
        let calm: Vec<&TrialMetrics> = trials.iter().copied().filter(|t| !t.disturbance.disturbed()).collect();
        s.undisturbed = Some(Box::new(summarize_all(&calm)));
    }
    s
}

fn summarize_all(trials: &[&TrialMetrics]) -> Summary {
    let mut gaps: Vec<f64> =
        trials.iter().flat_map(|t| t.gaps.iter()).filter(|g| g.ended).map(|g| us_to_ms(g.duration_us())).collect();
    gaps.sort_by(f64::total_cmp);
    let open_gaps = trials.iter().flat_map(|t| t.gaps.iter()).filter(|g| !g.ended).count();
    let double = trials.iter().filter(|t| t.max_leaders >= 2).count();
    let pauses = trials.iter().map(|t| t.evictions.leader_pauses).sum();
    let evicted = trials.iter().map(|t| t.evictions.false_evictions).sum();
    Summary {
        n: trials.len(),
        gaps: gaps.len(),
        open_gaps,
        gap_min_ms: gaps.first().copied(),
        gap_p50_ms: percentile(&gaps, 0.5),
        gap_p90_ms: percentile(&gaps, 0.9),
        gap_p99_ms: percentile(&gaps, 0.99),
        gap_max_ms: gaps.last().copied(),
        double_leader_trials: double,
        double_leader_ci: wilson95(double, trials.len()),
        wedged_trials: trials.iter().filter(|t| t.wedged).count(),
        mid_renewal_kills: trials
            .iter()
            .filter(|t| t.gaps.iter().any(|g| g.cause == crate::check::KILL_MID_RENEWAL))
            .count(),
        no_leader_trials: trials.iter().filter(|t| t.first_leader_us.is_none()).count(),
        leader_pauses: pauses,
        false_evictions: evicted,
        false_eviction_ci: wilson95(evicted, pauses),
        predicted_evictions: trials.iter().map(|t| t.evictions.predicted).sum(),
        unpredicted_pauses: trials.iter().map(|t| t.evictions.unpredicted).sum(),
        eviction_anomalies: trials.iter().map(|t| t.evictions.anomalies).sum(),
        predicted_gaps: trials.iter().flat_map(|t| &t.gaps).filter(|g| g.ended && g.predicted_end_us.is_some()).count(),
        gap_beyond_theory: beyond_theory(trials),
        gap_before_takeover_max_ms: trials
            .iter()
            .flat_map(|t| &t.gaps)
            .filter_map(|g| Some(us_to_ms(g.duration_us() - g.takeover_us?)))
            .max_by(f64::total_cmp),
        takeover_max_ms: trials
            .iter()
            .flat_map(|t| &t.gaps)
            .filter_map(|g| Some(us_to_ms(g.takeover_us?)))
            .max_by(f64::total_cmp),
        gap_anomalies: trials.iter().flat_map(|t| &t.gaps).filter(|g| g.anomaly.is_some()).count(),
        writes: trials.iter().fold(crate::check::Writes::default(), |acc, t| crate::check::Writes {
            attempted: acc.attempted + t.writes.attempted,
            stale: acc.stale + t.writes.stale,
            stale_accepted: acc.stale_accepted + t.writes.stale_accepted,
            stale_rejected: acc.stale_rejected + t.writes.stale_rejected,
            stale_superseded: acc.stale_superseded + t.writes.stale_superseded,
        }),
        jobs: trials.iter().fold(crate::check::Jobs::default(), |acc, t| acc + t.jobs),
        service: trials.iter().fold(crate::check::ServiceView::default(), |acc, t| acc + t.service.clone()),
        unbacked_trials: trials.iter().filter(|t| t.service.unbacked > 0).count(),
        duplicate_trials: trials.iter().filter(|t| t.jobs.duplicates > 0).count(),
        missed_trials: trials.iter().filter(|t| t.jobs.missed > 0).count(),
        stale_believers: trials.iter().map(|t| t.evictions.stale_believers).sum(),
        stale_belief_ms: trials.iter().map(|t| us_to_ms(t.evictions.stale_belief_us)).sum(),
        stale_belief_max_ms: trials
            .iter()
            .filter(|t| t.evictions.stale_believers > 0)
            .map(|t| us_to_ms(t.evictions.stale_belief_max_us))
            .max_by(f64::total_cmp),
        network: trials.iter().fold(crate::check::Network::default(), |acc, t| acc + t.network.clone()),
        pushes: trials.iter().fold(crate::check::Pushes::default(), |acc, t| acc + t.pushes),
        detection_ms: {
            let mut v: Vec<f64> = trials
                .iter()
                .flat_map(|t| t.gaps.iter())
                .filter(|g| g.ended && g.cause == "kill")
                .filter_map(|g| g.detection_lag_us.map(us_to_ms))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        },
        latency: {
            let mut all = crate::check::Latency::default();
            for t in trials {
                all.acquire_us.extend(&t.latency.acquire_us);
                all.renew_us.extend(&t.latency.renew_us);
                all.observe_us.extend(&t.latency.observe_us);
            }
            all
        },
        start_spread_p50_us: {
            let mut v: Vec<f64> = trials.iter().filter_map(|t| t.start_spread_us).map(|us| us as f64).collect();
            v.sort_by(f64::total_cmp);
            percentile(&v, 0.5)
        },
        fault_error_max_us: trials.iter().filter_map(|t| t.precision.fault_error_max_us).max(),
        over_budget_trials: trials.iter().filter(|t| t.precision.faults_over_budget > 0).count(),
        fault_error_trials: trials.iter().filter(|t| t.precision.undelivered > 0).count(),
        fault_budget_us: trials.iter().map(|t| t.precision.budget_us).max().unwrap_or(0),
        disturbed: trials.iter().filter(|t| t.disturbance.disturbed()).map(|t| t.disturbance.text()).collect(),
        disturbance_budget_us: trials.iter().map(|t| t.disturbance.budget_us).max().unwrap_or(0),
        undisturbed: None,
        crash_gaps_ms: {
            let mut v: Vec<f64> = trials
                .iter()
                .flat_map(|t| t.gaps.iter())
                .filter(|g| g.ended && g.cause == "kill")
                .map(|g| us_to_ms(g.duration_us()))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        },
    }
}

/// One `expect:` key and how it fared over the trials.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectCheck {
    /// The key as the file wrote it, e.g. `gap_max: 1s`.
    pub expect: String,
    /// How it failed, as sentences (empty: it held).
    pub failures: Vec<String>,
}

/// Each `expect:` key of the experiment (its metric bounds aside:
/// thresholds.rs), checked over these trials.
pub fn expectation_checks(exp: &Experiment, trials: &[(u32, &TrialMetrics)]) -> Vec<ExpectCheck> {
    let x = &exp.expect;
    // In the experiment's own time, as its file wrote the bounds.
    let own_s = |us: i64| us_to_ms(us) / 1000.0 / exp.time_scale;
    let own = |d: crate::model::Dur| d.scaled(1.0 / exp.time_scale);
    let mut checks = Vec::new();
    let mut check = |expect: String, failures: Vec<String>| checks.push(ExpectCheck { expect, failures });
    if let Some(max) = x.max_leaders {
        let failures = trials
            .iter()
            .filter(|(_, m)| m.max_leaders > max)
            .map(|(trial, m)| format!("trial {trial}: {} leaders at once (expected at most {max})", m.max_leaders))
            .collect();
        check(format!("max_leaders: {max}"), failures);
    }
    let gaps = || trials.iter().flat_map(|(t, m)| m.gaps.iter().enumerate().map(move |(i, g)| (*t, i + 1, g)));
    if let Some(min) = x.gap_min {
        let failures = gaps()
            .filter(|(_, _, g)| g.ended && g.duration_us() < min.as_us() as i64)
            .map(|(trial, i, g)| {
                format!("trial {trial} gap {i}: {:.3} s (expected at least {})", own_s(g.duration_us()), own(min))
            })
            .collect();
        check(format!("gap_min: {}", own(min)), failures);
    }
    if let Some(max) = x.gap_max {
        let failures = gaps()
            .filter(|(_, _, g)| g.duration_us() > max.as_us() as i64)
            .map(|(trial, i, g)| {
                let open = if g.ended { "" } else { ", never ended" };
                format!("trial {trial} gap {i}: {:.3} s{open} (expected at most {})", own_s(g.duration_us()), own(max))
            })
            .collect();
        check(format!("gap_max: {}", own(max)), failures);
    }
    if let Some(w) = x.wedged {
        let failures = trials
            .iter()
            .filter(|(_, m)| m.wedged != w)
            .map(|(trial, m)| {
                let what = if m.wedged { "wedged" } else { "did not wedge" };
                format!("trial {trial}: {what} (expected wedged: {w})")
            })
            .collect();
        check(format!("wedged: {w}"), failures);
    }
    if let Some(k) = x.disturbed {
        let bad: Vec<String> = trials
            .iter()
            .filter(|(_, m)| m.disturbance.disturbed())
            .map(|(trial, m)| format!("trial {trial}: {}", m.disturbance.text()))
            .collect();
        let failures = if bad.len() > k {
            let mut f = vec![format!(
                "{} trials were disturbed by the machine (expected at most {k}): their numbers measure the \
                 machine, not the system",
                bad.len()
            )];
            f.extend(bad);
            f
        } else {
            Vec::new()
        };
        check(format!("disturbed: {k}"), failures);
    }
    if let Some(k) = x.double_leader_trials {
        let got = trials.iter().filter(|(_, m)| m.max_leaders >= 2).count();
        let failures =
            if got > k { vec![format!("{got} trials had two leaders (expected at most {k})")] } else { Vec::new() };
        check(format!("double_leader_trials: {k}"), failures);
    }
    checks
}

/// Measured − predicted for one kind of gap: its cause, and whether its
/// holder (resumed, or acquiring again) or another worker ended it; ms as run
/// (real time: a wake-up or a round trip does not shrink with the time
/// scale), sorted, with the takeovers' own look and acquire beside them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeyondTheory {
    pub cause: String,
    pub ended: &'static str,
    pub beyond_ms: Vec<f64>,
    pub takeover_ms: Vec<f64>,
}

fn beyond_theory(trials: &[&TrialMetrics]) -> Vec<BeyondTheory> {
    let mut by: std::collections::BTreeMap<(String, &'static str), BeyondTheory> = Default::default();
    for g in trials.iter().flat_map(|t| &t.gaps).filter(|g| g.ended) {
        let Some(p) = g.predicted_end_us else { continue };
        let ended = if g.ended_by.is_some() && g.ended_by == g.holder { "by its holder" } else { "taken over" };
        let b = by.entry((g.cause.clone(), ended)).or_insert_with(|| BeyondTheory {
            cause: g.cause.clone(),
            ended,
            ..BeyondTheory::default()
        });
        b.beyond_ms.push(us_to_ms(g.end_us - p));
        b.takeover_ms.extend(g.takeover_us.map(us_to_ms));
    }
    let mut out: Vec<BeyondTheory> = by.into_values().collect();
    for b in &mut out {
        b.beyond_ms.sort_by(f64::total_cmp);
        b.takeover_ms.sort_by(f64::total_cmp);
    }
    out
}
