//! `expect: {metrics: …}`: bounds on any summarised metric, validated
//! against the model's table of them (what summary files name, by
//! `file.column`).

use serde::Deserialize;

use crate::model::summary_metrics::{Bound, Measure, MetricBound, SUMMARY_METRICS, SummaryMetric, summary_metric};

/// A rate's bound as a person writes it: `0.05` or `5%`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fraction(pub f64);

/// A bound's value as written: a number, text that may say more, or
/// something else (a mapping, `true`) that is neither.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Number(f64),
    Text(String),
    Other(serde::de::IgnoredAny),
}

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = match Written::deserialize(d)? {
            Written::Number(v) => v,
            Written::Other(_) => return Err(serde::de::Error::custom("a rate is a number: write 0.05 or 5%")),
            Written::Text(t) => {
                let digits = t
                    .trim()
                    .strip_suffix('%')
                    .ok_or_else(|| serde::de::Error::custom(format!("{t:?} is not a rate: write 0.05 or 5%")))?;
                digits.trim().parse::<f64>().map_err(|_| serde::de::Error::custom(format!("{t:?} is not a rate")))?
                    / 100.0
            }
        };
        if !(0.0..=1.0).contains(&value) {
            let hint = if (1.0..=100.0).contains(&value) {
                format!(": write {value}% or {}", value / 100.0)
            } else {
                String::new()
            };
            return Err(serde::de::Error::custom(format!("a rate lies in [0, 1] (0 % to 100 %), not {value}{hint}")));
        }
        Ok(Fraction(value))
    }
}

/// `disturbed:`, a count of trials; its rate is a metric's bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrialCount(pub usize);

impl<'de> Deserialize<'de> for TrialCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(u64),
            Other(serde::de::IgnoredAny),
        }
        match Raw::deserialize(d)? {
            Raw::Count(n) => Ok(TrialCount(usize::try_from(n).unwrap_or(usize::MAX))),
            Raw::Other(_) => Err(serde::de::Error::custom(
                "disturbed is a count of trials (`disturbed: 0`); a bound on their rate is \
                 `metrics: {summary.disturbed_trials: {rate_max: 5%}}`",
            )),
        }
    }
}

/// `max` or `min` of a metric: a plain number in the metric's own unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Number(pub f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const PLAIN: &str = "a plain number in the unit the metric's name says (`_ms` milliseconds, `_us` \
                             microseconds; otherwise a count or a fraction), e.g. `gap_p99_ms: {max: 10000}`";
        match Written::deserialize(d)? {
            Written::Number(v) => Ok(Number(v)),
            // Quoted, but a number all the same.
            Written::Text(t) if t.trim().parse::<f64>().is_ok() => Ok(Number(t.trim().parse().unwrap_or_default())),
            Written::Text(t) if t.trim().ends_with('%') => Err(serde::de::Error::custom(format!(
                "{t:?} is not a number: a rate of trials is bounded by rate_max or rate_min (`rate_max: {t}`); a \
                 fraction column by a number (0.05)"
            ))),
            Written::Text(t) => Err(serde::de::Error::custom(format!("{t:?} is not a number: {PLAIN}"))),
            Written::Other(_) => Err(serde::de::Error::custom(format!("max and min are numbers: {PLAIN}"))),
        }
    }
}

/// Each metric's bounds, checked: a known key, at least one bound, finite
/// numbers, rates only where the metric counts trials.
pub(super) fn bounds<'a>(
    entries: impl Iterator<Item = (&'a str, [Option<f64>; 2], [Option<Fraction>; 2])>,
) -> Result<Vec<MetricBound>, String> {
    let mut out = Vec::new();
    for (key, [max, min], [rate_max, rate_min]) in entries {
        let metric = summary_metric(key).ok_or_else(|| unknown(key))?;
        let before = out.len();
        for (value, make) in [(max, Bound::Max as fn(f64) -> Bound), (min, Bound::Min)] {
            if let Some(v) = value {
                if !v.is_finite() {
                    return Err(format!("expect.metrics.{key}: {v} is not a number a metric can have"));
                }
                out.push(MetricBound { metric, bound: make(v) });
            }
        }
        for (value, make) in [(rate_max, Bound::RateMax as fn(f64) -> Bound), (rate_min, Bound::RateMin)] {
            if let Some(Fraction(f)) = value {
                if metric.measure != Measure::Trials {
                    let trials: Vec<String> =
                        SUMMARY_METRICS.iter().filter(|m| m.measure == Measure::Trials).map(|m| m.key()).collect();
                    return Err(format!(
                        "expect.metrics.{key}: rate_max and rate_min bound a count of the setting's trials ({}); give \
                         max or min",
                        trials.join(", ")
                    ));
                }
                out.push(MetricBound { metric, bound: make(f) });
            }
        }
        if out.len() == before {
            return Err(format!("expect.metrics.{key}: give max, min, rate_max or rate_min"));
        }
        passable(key, [max, min], [rate_max, rate_min].map(|f| f.map(|Fraction(f)| f)))?;
    }
    Ok(out)
}

/// A bound no run could pass: refused rather than failed after every trial.
fn passable(key: &str, [max, min]: [Option<f64>; 2], [rate_max, rate_min]: [Option<f64>; 2]) -> Result<(), String> {
    let never = |why: String| Err(format!("expect.metrics.{key}: {why}; no run could pass"));
    match (max, min, rate_max, rate_min) {
        (Some(max), ..) if max < 0.0 => never(format!("max {max} is below 0, and no metric is")),
        (Some(max), Some(min), ..) if min > max => never(format!("min {min} is above max {max}")),
        // A 95 % interval of a rate never reaches 0 or 1 at its far end.
        (_, _, Some(0.0), _) => never(
            "rate_max 0 %: the upper end of a rate's 95 % interval is above 0 even at 0 trials of n (for none at \
             all, give max: 0)"
                .to_string(),
        ),
        (_, _, _, Some(1.0)) => never(
            "rate_min 100 %: the lower end of a rate's 95 % interval is below 1 even at n of n (for every trial, \
             give min equal to the trials)"
                .to_string(),
        ),
        (_, _, Some(hi), Some(lo)) if lo > hi => never(format!("rate_min {lo} is above rate_max {hi}")),
        _ => Ok(()),
    }
}

/// "no metric `summary.gap_p999_ms` (did you mean `summary.gap_p99_ms`?)";
/// a column without its file is found by the column.
fn unknown(key: &str) -> String {
    let column = key.rsplit('.').next().unwrap_or(key);
    let by_column = SUMMARY_METRICS.iter().filter(|m| m.column == column).map(SummaryMetric::key).collect::<Vec<_>>();
    let nearest = SUMMARY_METRICS
        .iter()
        .map(|m| (m.key(), super::yaml_error::edit_distance(key, &m.key())))
        .min_by_key(|(_, d)| *d)
        .filter(|(_, d)| *d <= (key.len() / 3).max(2))
        .map(|(k, _)| format!(" (did you mean `{k}`?)"))
        .or_else(|| match by_column.as_slice() {
            [] => None,
            [one] => Some(format!(" (did you mean `{one}`?)")),
            many => Some(format!(" (did you mean one of `{}`?)", many.join("`, `"))),
        })
        .unwrap_or_default();
    let files: Vec<&str> = {
        let mut f: Vec<&str> = SUMMARY_METRICS.iter().map(|m: &SummaryMetric| m.file).collect();
        f.dedup();
        f
    };
    format!(
        "expect.metrics: no metric `{key}`{nearest}; a metric is FILE.COLUMN of a summary file, FILE one of {} \
         (docs/experiment-reference.md lists them)",
        files.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(key: &str, max: Option<f64>, rate_max: Option<f64>) -> Result<Vec<MetricBound>, String> {
        bounds(std::iter::once((key, [max, None], [rate_max.map(Fraction), None])))
    }

    #[test]
    fn a_bound_names_a_known_metric_and_a_rate_only_counts_trials() {
        let b = one("summary.gap_p99_ms", Some(10_000.0), None).unwrap();
        assert_eq!(b[0].bound, Bound::Max(10_000.0));
        assert!(one("summary.double_leader_trials", None, Some(0.05)).is_ok());
        let e = one("summary.gap_p999_ms", Some(1.0), None).unwrap_err();
        assert!(e.contains("no metric `summary.gap_p999_ms` (did you mean `summary.gap_p99_ms`?)"), "{e}");
        let e = one("summary.gap_p99_ms", None, Some(0.05)).unwrap_err();
        assert!(
            e.contains("rate_max and rate_min bound a count of the setting's trials (summary.double_leader_trials, "),
            "{e}"
        );
        let e = one("double_leader_trials", Some(0.0), None).unwrap_err();
        assert!(e.contains("(did you mean `summary.double_leader_trials`?)"), "{e}");
        let e = one("stale_believers", Some(0.0), None).unwrap_err();
        assert!(e.contains("(did you mean one of `evictions.stale_believers`, `network.stale_believers`?)"), "{e}");
        assert!(one("network.double_grants", None, None).unwrap_err().contains("give max, min"));
        assert!(one("summary.gaps", Some(f64::NAN), None).is_err());
    }

    #[test]
    fn a_bound_no_run_could_pass_is_refused() {
        let e = one("summary.gaps", Some(-1.0), None).unwrap_err();
        assert!(e.contains("max -1 is below 0, and no metric is; no run could pass"), "{e}");
        let e = bounds(std::iter::once(("summary.gaps", [Some(1.0), Some(5.0)], [None, None]))).unwrap_err();
        assert!(e.contains("min 5 is above max 1"), "{e}");
        assert!(one("summary.double_leader_trials", None, Some(0.0)).unwrap_err().contains("give max: 0"));
        let all = bounds(std::iter::once(("summary.wedged_trials", [None, None], [None, Some(Fraction(1.0))])));
        assert!(all.unwrap_err().contains("rate_min 100 %"));
        assert!(one("summary.double_leader_trials", Some(0.0), Some(0.05)).is_ok());
    }
}
