//! `expect: {metrics: …}`: bounds on any summarised metric, validated
//! against the model's table of them (what summary files name, by
//! `file.column`).

use serde::Deserialize;

use crate::model::summary_metrics::{Bound, Measure, MetricBound, SUMMARY_METRICS, SummaryMetric, summary_metric};

/// A rate's bound as a person writes it: `0.05` or `5%`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fraction(pub f64);

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        let value = match Raw::deserialize(d)? {
            Raw::Number(v) => v,
            Raw::Text(t) => {
                let digits = t
                    .trim()
                    .strip_suffix('%')
                    .ok_or_else(|| serde::de::Error::custom(format!("{t:?} is not a rate: write 0.05 or 5%")))?;
                digits.trim().parse::<f64>().map_err(|_| serde::de::Error::custom(format!("{t:?} is not a rate")))?
                    / 100.0
            }
        };
        if !(0.0..=1.0).contains(&value) {
            return Err(serde::de::Error::custom(format!("a rate lies in [0, 1] (0 % to 100 %), not {value}")));
        }
        Ok(Fraction(value))
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
                    return Err(format!(
                        "expect.metrics.{key}: rate_max and rate_min bound a count of trials (the metrics ending in \
                         _trials); give max or min"
                    ));
                }
                out.push(MetricBound { metric, bound: make(f) });
            }
        }
        if out.len() == before {
            return Err(format!("expect.metrics.{key}: give max, min, rate_max or rate_min"));
        }
    }
    Ok(out)
}

/// "no metric `summary.gap_p999_ms` (did you mean `summary.gap_p99_ms`?)".
fn unknown(key: &str) -> String {
    let nearest = SUMMARY_METRICS
        .iter()
        .map(|m| (m.key(), super::yaml_error::edit_distance(key, &m.key())))
        .min_by_key(|(_, d)| *d)
        .filter(|(_, d)| *d <= (key.len() / 3).max(2))
        .map(|(k, _)| format!(" (did you mean `{k}`?)"))
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
        assert!(e.contains("rate_max and rate_min bound a count of trials"), "{e}");
        assert!(one("network.double_grants", None, None).unwrap_err().contains("give max, min"));
        assert!(one("summary.gaps", Some(f64::NAN), None).is_err());
    }
}
