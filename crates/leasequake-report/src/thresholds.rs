//! Every expectation of an experiment judged: the `expect:` keys over the
//! trials (summary.rs), then each bound of `expect: {metrics: …}` over each
//! setting's summary, read from the rows its summary files are written
//! from. A metric of a file the run did not write fails its bound (a gate
//! that passes on no data is no gate; loading refuses a file the
//! experiment never writes); an empty cell (no stale
//! belief, so no longest one) passes a ceiling and fails a floor.

use crate::check::TrialMetrics;
use crate::check::stats::wilson95;
use crate::model::Experiment;
use crate::model::summary_metrics::{Bound, Measure, MetricBound};

use super::measures::unit_values;
use super::summary::{ExpectCheck, SummaryRow, expectation_checks, summarize};
use crate::model::summary_metrics::Features;

/// Every expectation's failures, as sentences (empty: all held).
pub fn failures(exp: &Experiment, trials: &[(u32, &TrialMetrics)]) -> Vec<String> {
    checks(exp, trials).into_iter().flat_map(|c| c.failures).collect()
}

/// Each expectation of the experiment, checked over these trials.
pub fn checks(exp: &Experiment, trials: &[(u32, &TrialMetrics)]) -> Vec<ExpectCheck> {
    let mut checks = expectation_checks(exp, trials);
    if exp.expect.metrics.is_empty() {
        return checks;
    }
    let features = Features::of(exp);
    let all = exp.units();
    let settings: Vec<(String, f64, std::collections::BTreeMap<String, Option<f64>>)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, (unit, label))| {
            let mine: Vec<&TrialMetrics> =
                trials.iter().filter(|(t, _)| exp.unit_of(all.len(), *t) == i).map(|(_, m)| *m).collect();
            (!mine.is_empty()).then(|| {
                let row = SummaryRow { setting: unit.setting_label(label), exp: unit, summary: summarize(&mine) };
                // A sweep's point is named, in the experiment's own time as
                // the terminal's table names it; a single setting needs no name.
                let name = if label.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", crate::experiment::own_label(label, unit.time_scale))
                };
                (name, unit.time_scale, unit_values(&row, features))
            })
        })
        .collect();
    for b in &exp.expect.metrics {
        let key = b.metric.key();
        let failures = settings.iter().filter_map(|(name, scale, values)| judge(b, values, *scale, name)).collect();
        checks.push(ExpectCheck { expect: format!("metrics.{key}: {}", b.bound.words()), failures });
    }
    checks
}

/// The failure of one bound on one setting, if it fails.
fn judge(
    b: &MetricBound,
    values: &std::collections::BTreeMap<String, Option<f64>>,
    scale: f64,
    name: &str,
) -> Option<String> {
    let key = b.metric.key();
    let value = match values.get(&key) {
        // Loading refuses a bound on a file the experiment never writes;
        // latency.csv is written only when an operation was timed.
        None if b.metric.file == "latency" => {
            return Some(format!("{name}{key} was not measured: no operation was timed"));
        }
        None => return Some(format!("{name}{key} was not measured: no {} was written", b.metric.file_name())),
        // An empty cell: nothing of the kind happened (no stale belief, so
        // no longest one). Nothing exceeds a ceiling; nothing meets a floor.
        // But a gap's length is empty also when every gap is still open at
        // its trial's end, longer than anything measured: that fails.
        Some(None) => {
            let open = values.get("summary.open_gaps").copied().flatten().unwrap_or(0.0);
            // Only the plain gaps: an undisturbed or a crash gap's cell is
            // empty too when no trial was disturbed, nothing was killed.
            let a_gap = b.metric.file == "summary"
                && ["gap_min_ms", "gap_p50_ms", "gap_p90_ms", "gap_p99_ms", "gap_max_ms"].contains(&b.metric.column);
            return match b.bound {
                Bound::Max(_) if a_gap && open > 0.0 => Some(format!(
                    "{name}{key}: no gap ended, {open} still open when their trial ended (longer than any bound)"
                )),
                Bound::Max(_) => None,
                _ => Some(format!("{name}{key} is empty: nothing of the kind was measured")),
            };
        }
        Some(Some(v)) => *v,
    };
    // The file's durations are in the experiment's own time.
    let (value, unit) = match b.metric.measure {
        Measure::OwnMs => (value / scale, " ms (own time)"),
        Measure::OwnUs => (value / scale, " µs (own time)"),
        // Real time, in the unit its name says.
        Measure::Real if b.metric.column.ends_with("_us") => (value, " µs (real time)"),
        Measure::Real => (value, " ms (real time)"),
        _ => (value, ""),
    };
    let shown = |v: f64| format!("{}", (v * 1000.0).round() / 1000.0);
    let pct = |f: f64| format!("{} %", (f * 1000.0).round() / 10.0);
    match b.bound {
        Bound::Max(max) => {
            (value > max).then(|| format!("{name}{key} is {}{unit} (expected at most {max})", shown(value)))
        }
        Bound::Min(min) => {
            (value < min).then(|| format!("{name}{key} is {}{unit} (expected at least {min})", shown(value)))
        }
        Bound::RateMax(f) | Bound::RateMin(f) => {
            let n = values.get("summary.n").copied().flatten().unwrap_or(0.0) as usize;
            let k = value as usize;
            let (low, high) = wilson95(k, n);
            match b.bound {
                Bound::RateMax(_) if high > f => Some(format!(
                    "{name}{key} {k}/{n}: its rate's 95 % interval reaches {} (expected at most {})",
                    pct(high),
                    pct(f)
                )),
                Bound::RateMin(_) if low < f => Some(format!(
                    "{name}{key} {k}/{n}: its rate's 95 % interval starts at {} (expected at least {})",
                    pct(low),
                    pct(f)
                )),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::summary_metrics::summary_metric;

    fn bound(key: &str, bound: Bound) -> MetricBound {
        MetricBound { metric: summary_metric(key).unwrap(), bound }
    }

    #[test]
    fn the_model_s_table_names_every_summary_column_and_no_other() {
        use super::super::columns::header_of;
        use super::super::rows::*;
        use crate::model::summary_metrics::SUMMARY_METRICS;
        let files: [(&str, Vec<String>); 7] = [
            ("summary", header_of::<SummaryStats>()),
            ("evictions", [header_of::<EvictionCounts>(), header_of::<EvictionRate>()].concat()),
            ("network", header_of::<NetworkCounts>()),
            ("writes", header_of::<WriteCounts>()),
            ("service", header_of::<ServiceCounts>()),
            ("jobs", [header_of::<JobCounts>(), header_of::<JobTrials>()].concat()),
            ("latency", header_of::<LatencyRow>()),
        ];
        let written: Vec<String> =
            files.iter().flat_map(|(f, cols)| cols.iter().map(move |c| format!("{f}.{c}"))).collect();
        let table: Vec<String> = SUMMARY_METRICS.iter().map(|m| m.key()).collect();
        let missing: Vec<&String> = written.iter().filter(|k| !table.contains(k)).collect();
        let extra: Vec<&String> = table.iter().filter(|k| !written.contains(k)).collect();
        assert!(missing.is_empty() && extra.is_empty(), "not in the table: {missing:?}; not written: {extra:?}");
    }

    #[test]
    fn a_bound_judges_a_setting_in_its_own_time_and_a_rate_by_its_interval() {
        let values: std::collections::BTreeMap<String, Option<f64>> = [
            ("summary.n".to_string(), Some(3.0)),
            ("summary.gap_p99_ms".to_string(), Some(1_050.0)),
            ("summary.double_leader_trials".to_string(), Some(0.0)),
            ("summary.gap_min_ms".to_string(), None),
        ]
        .into();
        // 1050 ms at time scale 0.1 is 10.5 s of the experiment's own time.
        let over = judge(&bound("summary.gap_p99_ms", Bound::Max(10_000.0)), &values, 0.1, "");
        assert_eq!(over.as_deref(), Some("summary.gap_p99_ms is 10500 ms (own time) (expected at most 10000)"));
        assert_eq!(judge(&bound("summary.gap_p99_ms", Bound::Max(11_000.0)), &values, 0.1, ""), None);
        // 0/3 is no evidence of a rate under 5 %.
        let rate = judge(&bound("summary.double_leader_trials", Bound::RateMax(0.05)), &values, 1.0, "lease=9s: ");
        assert_eq!(
            rate.as_deref(),
            Some(
                "lease=9s: summary.double_leader_trials 0/3: its rate's 95 % interval reaches 56.1 % (expected at most 5 %)"
            )
        );
        let floor = judge(&bound("summary.gap_min_ms", Bound::Min(1.0)), &values, 1.0, "").unwrap();
        assert!(floor.contains("is empty"), "{floor}");
        assert_eq!(judge(&bound("summary.gap_min_ms", Bound::Max(1.0)), &values, 1.0, ""), None, "no gap exceeds");
        // No gap ended because the one gap never did: longer than any bound.
        let mut open = values.clone();
        open.insert("summary.open_gaps".into(), Some(1.0));
        open.insert("summary.gap_max_ms".into(), None);
        let never = judge(&bound("summary.gap_max_ms", Bound::Max(1000.0)), &open, 1.0, "").unwrap();
        assert!(never.contains("no gap ended, 1 still open"), "{never}");
        let latency: std::collections::BTreeMap<String, Option<f64>> =
            [("latency.renew_p99_us".to_string(), Some(650.0))].into();
        let slow = judge(&bound("latency.renew_p99_us", Bound::Max(500.0)), &latency, 0.1, "").unwrap();
        assert_eq!(slow, "latency.renew_p99_us is 650 µs (real time) (expected at most 500)");
        let other = judge(&bound("network.double_grants", Bound::Max(0.0)), &values, 1.0, "").unwrap();
        assert!(other.contains("no summary-network.csv was written"), "{other}");
        // Nothing undisturbed is empty when no trial was disturbed: no failure.
        open.insert("summary.undisturbed_gap_max_ms".into(), None);
        assert_eq!(judge(&bound("summary.undisturbed_gap_max_ms", Bound::Max(1000.0)), &open, 1.0, ""), None);
    }
}
