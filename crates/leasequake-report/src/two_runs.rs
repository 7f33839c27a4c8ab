//! Two runs (or two points of one sweep) compared metric by metric, as
//! hyperfine compares two commands: for each metric both measured, the
//! difference B − A with its 95 % interval, a p-value corrected across
//! every metric compared (Holm), and one sentence a person can act on.
//! Pure over the checked trials; `commands/compare.rs` reads them.

use serde::Serialize;

use crate::check::TrialMetrics;
use crate::check::stats::percentile;
use crate::check::twosample::{holm, rate_diff, shift};
use crate::model::summary_metrics::Features;

/// Below this (Holm-adjusted) p, a difference is called significant.
pub const ALPHA: f64 = 0.05;

/// What one side measured of one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sample {
    /// Durations, in seconds of the experiment's own time.
    Seconds(Vec<f64>),
    /// Trials with the property, of the trials.
    Trials { k: usize, n: usize },
}

/// One metric of one side: a stable key, the words for it, its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub key: String,
    pub label: String,
    pub sample: Sample,
}

/// The metrics a side's trials give (each trial once; durations divided
/// by the time scale): the core ones, and those of each feature the
/// experiment runs (its stale writes, duplicate jobs, double grants, …).
pub fn metrics(trials: &[&TrialMetrics], scale: f64, features: Features) -> Vec<Metric> {
    let own = |us: i64| us as f64 / 1e6 / scale;
    let n = trials.len();
    let mut out = Vec::new();
    let mut causes: Vec<&str> = trials.iter().flat_map(|t| t.gaps.iter()).map(|g| g.cause.as_str()).collect();
    causes.sort_unstable();
    causes.dedup();
    for cause in causes {
        let gaps: Vec<f64> = trials
            .iter()
            .flat_map(|t| t.gaps.iter())
            .filter(|g| g.ended && g.cause == cause)
            .map(|g| own(g.end_us - g.start_us))
            .collect();
        if !gaps.is_empty() {
            out.push(seconds(&format!("gap.{cause}"), &format!("{cause} gap"), gaps));
        }
    }
    let per_trial = |f: &dyn Fn(&TrialMetrics) -> Option<i64>| -> Vec<f64> {
        trials.iter().filter_map(|t| f(t)).map(own).collect()
    };
    out.push(seconds("first_leader", "time to the first leader", per_trial(&|t| t.first_leader_us)));
    out.push(seconds("leaderless", "leaderless time a trial", per_trial(&|t| Some(t.leaderless_us))));
    out.push(seconds("double_leader_time", "time with two leaders a trial", per_trial(&|t| Some(t.double_leader_us))));
    let count = |key: &str, label: &str, f: &dyn Fn(&TrialMetrics) -> bool| Metric {
        key: key.into(),
        label: label.into(),
        sample: Sample::Trials { k: trials.iter().filter(|t| f(t)).count(), n },
    };
    out.push(count("double_leader_trials", "trials with two leaders", &|t| t.max_leaders > 1));
    out.push(count("wedged_trials", "wedged trials", &|t| t.wedged));
    out.push(count("disturbed_trials", "trials the machine disturbed", &|t| t.disturbance.disturbed()));
    if features.evictions {
        out.push(count(
            "false_eviction_trials",
            "trials with a paused leader replaced that came back believing",
            &|t| t.evictions.false_evictions > 0,
        ));
    }
    if features.writes {
        out.push(count("stale_write_trials", "trials with a stale write", &|t| t.writes.stale > 0));
        out.push(count("stale_write_accepted_trials", "trials with a stale write accepted", &|t| {
            t.writes.stale_accepted > 0
        }));
    }
    if features.jobs {
        out.push(count("duplicate_trials", "trials with a duplicate execution", &|t| t.jobs.duplicates > 0));
        out.push(count("missed_epoch_trials", "trials with a missed epoch", &|t| t.jobs.missed > 0));
        out.push(count("stale_result_applied_trials", "trials with a stale result applied", &|t| {
            t.jobs.stale_applied > 0
        }));
    }
    if features.network {
        out.push(count("double_grant_trials", "trials with a double grant", &|t| t.network.double_grants.definite > 0));
        out.push(seconds("recovery", "recovery after the last heal", per_trial(&|t| t.network.recovery_us)));
        out.push(count("unrecovered_trials", "trials not recovered after a heal", &|t| t.network.unrecovered > 0));
    }
    if features.service {
        out.push(count("unbacked_trials", "trials with a belief the service did not back", &|t| {
            t.service.unbacked > 0
        }));
    }
    out.retain(|m| match &m.sample {
        Sample::Seconds(v) => !v.is_empty(),
        Sample::Trials { n, .. } => *n > 0,
    });
    out
}

fn seconds(key: &str, label: &str, values: Vec<f64>) -> Metric {
    Metric { key: key.into(), label: label.into(), sample: Sample::Seconds(values) }
}

/// One metric compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub key: String,
    pub label: String,
    /// "median 9.53 s of 10" or "3/30".
    pub a: String,
    pub b: String,
    /// The same as numbers, for a program to read.
    pub a_stat: Stat,
    pub b_stat: Stat,
    /// What `estimate`, `low` and `high` are in: `seconds` (of the
    /// experiment's own time) or `rate` (a difference of two proportions).
    pub unit: &'static str,
    /// B − A (seconds, or a difference of rates in [−1, 1]) and its 95 %
    /// interval (null ends in JSON: too few values for one).
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// Durations: how often a value of B exceeds one of A (0.5: neither
    /// tends larger); the direction where the shift is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_above: Option<f64>,
    pub test: &'static str,
    pub p: f64,
    /// p after Holm's correction across every row.
    pub p_holm: f64,
    pub significant: bool,
    pub verdict: String,
}

/// One side of one metric as numbers: durations' median (seconds of the
/// experiment's own time) and count, or trials with the property of `n`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Stat {
    Seconds { median: f64, n: usize },
    Trials { k: usize, n: usize },
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 0.5).unwrap_or(0.0)
}

fn seconds_stat(v: &[f64]) -> Stat {
    Stat::Seconds { median: median(v), n: v.len() }
}

/// How many p-values Holm's correction was made across: every row but the
/// machine's own.
pub fn family_size(rows: &[Row]) -> usize {
    rows.iter().filter(|r| r.key != MACHINE).count()
}

/// Every metric both sides have, compared; None where they share none.
pub fn compare(a: &[Metric], b: &[Metric]) -> Vec<Row> {
    let mut rows: Vec<Row> = a
        .iter()
        .filter_map(|ma| {
            let mb = b.iter().find(|m| m.key == ma.key)?;
            let (key, label) = (ma.key.clone(), ma.label.clone());
            match (&ma.sample, &mb.sample) {
                (Sample::Seconds(x), Sample::Seconds(y)) => {
                    let s = shift(x, y)?;
                    Some(Row {
                        key,
                        label,
                        a: String::new(),
                        b: String::new(),
                        a_stat: seconds_stat(x),
                        b_stat: seconds_stat(y),
                        unit: "seconds",
                        estimate: s.estimate,
                        low: s.low,
                        high: s.high,
                        b_above: Some(s.b_above),
                        test: if s.exact { "Mann–Whitney U (exact)" } else { "Mann–Whitney U (normal, ties)" },
                        p: s.p,
                        p_holm: s.p,
                        significant: false,
                        verdict: String::new(),
                    })
                }
                (Sample::Trials { k: k1, n: n1 }, Sample::Trials { k: k2, n: n2 }) => {
                    let d = rate_diff(*k1, *n1, *k2, *n2)?;
                    Some(Row {
                        key,
                        label,
                        a: String::new(),
                        b: String::new(),
                        a_stat: Stat::Trials { k: *k1, n: *n1 },
                        b_stat: Stat::Trials { k: *k2, n: *n2 },
                        unit: "rate",
                        estimate: d.estimate,
                        low: d.low,
                        high: d.high,
                        b_above: None,
                        test: "Fisher's exact",
                        p: d.p,
                        p_holm: d.p,
                        significant: false,
                        verdict: String::new(),
                    })
                }
                _ => None,
            }
        })
        .collect();
    // The machine's disturbances are no metric of the system: outside the
    // family Holm corrects, judged on their own.
    let family: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].key != MACHINE).collect();
    let adjusted = holm(&family.iter().map(|&i| rows[i].p).collect::<Vec<_>>());
    for (&i, p) in family.iter().zip(adjusted) {
        rows[i].p_holm = p;
    }
    for row in &mut rows {
        row.significant = row.p_holm < ALPHA;
        // Each side as text, in the unit of every number of its row.
        let unit = row_unit(row);
        (row.a, row.b) = (side_text(&row.a_stat, unit), side_text(&row.b_stat, unit));
        row.verdict = verdict(row);
    }
    rows
}

/// The metric of the machine rather than the system.
const MACHINE: &str = "disturbed_trials";

/// "median 9.53 s of 10", "3/30".
fn side_text(stat: &Stat, unit: Unit) -> String {
    match stat {
        Stat::Seconds { median, n } => format!("median {} {} of {n}", number(*median, unit, false), unit.name),
        Stat::Trials { k, n } => format!("{k}/{n}"),
    }
}

/// The unit a group of durations is read in, from the largest of them:
/// seconds from 1 s, milliseconds from 1 ms, else microseconds (a
/// sub-millisecond shift is a number, not "0.000 s").
#[derive(Clone, Copy)]
struct Unit {
    per_second: f64,
    name: &'static str,
}

fn unit_for(values: &[f64]) -> Unit {
    let largest = values.iter().filter(|v| v.is_finite()).fold(0.0_f64, |m, v| m.max(v.abs()));
    match largest {
        // Nothing but zeros: seconds, the unit of the settings.
        x if x >= 1.0 || x == 0.0 => Unit { per_second: 1.0, name: "s" },
        x if x >= 1e-3 => Unit { per_second: 1e3, name: "ms" },
        _ => Unit { per_second: 1e6, name: "µs" },
    }
}

/// The unit of a row of durations: of its medians, shift and interval.
fn row_unit(r: &Row) -> Unit {
    let median = |s: &Stat| match s {
        Stat::Seconds { median, .. } => *median,
        Stat::Trials { .. } => 0.0,
    };
    unit_for(&[median(&r.a_stat), median(&r.b_stat), r.estimate, r.low, r.high])
}

/// A number of the unit, three significant digits (two decimals below
/// 10), a true minus sign, and a `+` on a positive one when `signed`.
fn number(seconds: f64, unit: Unit, signed: bool) -> String {
    let x = seconds * unit.per_second;
    let decimals = match x.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    let text = format!("{:.*}", decimals, x.abs());
    // A value too small for the row's unit is not 0.
    let text = if x != 0.0 && text.chars().all(|c| c == '0' || c == '.') { "<0.01".to_string() } else { text };
    match (x == 0.0, x < 0.0, signed) {
        (true, _, _) => "0".to_string(),
        (false, true, _) => format!("−{text}"),
        (false, false, true) => format!("+{text}"),
        (false, false, false) => text,
    }
}

/// A duration signed, in the unit of the durations read beside it:
/// "+2.00 s", "−310 ms".
fn signed(seconds: f64, unit: Unit) -> String {
    format!("{} {}", number(seconds, unit, true), unit.name)
}

fn pct(x: f64) -> String {
    let v = (x * 100.0).round();
    if v > 0.0 {
        format!("+{v:.0} %")
    } else if v == 0.0 {
        "0 %".to_string()
    } else {
        format!("−{:.0} %", -v)
    }
}

/// A p-value as a table cell: "< 0.001", "0.24".
pub fn p_value(p: f64) -> String {
    if p < 0.001 { "< 0.001".to_string() } else { round2(p) }
}

/// The same in a sentence: "p < 0.001", "p = 0.24".
pub fn p_text(p: f64) -> String {
    if p < 0.001 { format!("p {}", p_value(p)) } else { format!("p = {}", p_value(p)) }
}

/// Two significant digits.
fn round2(p: f64) -> String {
    let digits = (-p.log10().floor()) as usize + 1;
    format!("{p:.*}", digits.clamp(2, 6))
}

/// The difference as a table cell: "+2.00 s (+1.98 s…+2.03 s)", "−10 %
/// (−26 %…+3 %)"; an unbounded end is ∞.
pub fn diff_text(r: &Row) -> String {
    let seconds = r.b_above.is_some();
    let unit = row_unit(r);
    let value = |v: f64| match (v.is_finite(), seconds) {
        (false, _) if v < 0.0 => "−∞".to_string(),
        (false, _) => "+∞".to_string(),
        (true, true) => signed(v, unit),
        (true, false) => pct(v),
    };
    format!("{} ({}…{})", value(r.estimate), value(r.low), value(r.high))
}

/// "B's kill gap is 2.00 s longer (1.93–2.05 s, p < 0.001)"; "trials with
/// two leaders 3/30 vs 0/30: not significant (−10 %, −24 %…+3 %, p =
/// 0.24)".
fn verdict(r: &Row) -> String {
    let p = p_text(r.p_holm);
    let seconds = r.b_above.is_some();
    let bounded = r.low.is_finite() && r.high.is_finite();
    let unit = row_unit(r);
    match (seconds, r.significant) {
        // Most values 0 on both sides (time with two leaders): the median
        // shift is 0 and only the U test's direction says anything.
        (true, true) if r.estimate == 0.0 => {
            let word = if r.b_above.unwrap_or(0.5) > 0.5 { "longer" } else { "shorter" };
            format!(
                "B's {} tends to be {word} (a value of B above one of A {:.0} % of the time, {p}); the median shift is 0",
                r.label,
                r.b_above.unwrap_or(0.5) * 100.0
            )
        }
        (true, true) => {
            let (word, lo, hi) =
                if r.estimate < 0.0 { ("shorter", -r.high, -r.low) } else { ("longer", r.low, r.high) };
            format!(
                "B's {} is {} {u} {word} ({}–{} {u}, {p})",
                r.label,
                number(r.estimate.abs(), unit, false),
                number(lo, unit, false),
                number(hi, unit, false),
                u = unit.name,
            )
        }
        (true, false) if !bounded => format!(
            "{}: no significant difference (B − A {}; too few values for a 95 % interval, {p})",
            r.label,
            signed(r.estimate, unit)
        ),
        (true, false) => {
            let [estimate, low, high] = [r.estimate, r.low, r.high].map(|v| signed(v, unit));
            format!("{}: no significant difference (B − A {estimate}, {low}…{high}, {p})", r.label)
        }
        (false, sig) => format!(
            "{} {} vs {}: {} ({}, {}…{}, {p})",
            r.label,
            r.a,
            r.b,
            match (sig, r.estimate > 0.0) {
                (false, _) => "not significant",
                (true, true) => "B has more",
                (true, false) => "B has fewer",
            },
            pct(r.estimate),
            pct(r.low),
            pct(r.high)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs_metric(key: &str, v: &[f64]) -> Metric {
        Metric { key: key.into(), label: key.replace('.', " "), sample: Sample::Seconds(v.to_vec()) }
    }

    fn trials(key: &str, k: usize, n: usize) -> Metric {
        Metric { key: key.into(), label: key.replace('_', " "), sample: Sample::Trials { k, n } }
    }

    #[test]
    fn a_known_shift_is_significant_and_said_in_words() {
        let a: Vec<f64> = (0..10).map(|i| 9.0 + f64::from(i) * 0.1).collect();
        let b: Vec<f64> = a.iter().map(|x| x - 2.0).collect();
        let rows = compare(
            &[secs_metric("gap.kill", &a), trials("double_leader_trials", 3, 30)],
            &[secs_metric("gap.kill", &b), trials("double_leader_trials", 0, 30), trials("wedged", 0, 30)],
        );
        assert_eq!(rows.len(), 2, "only what both have");
        let kill = &rows[0];
        assert!(kill.significant && (kill.estimate + 2.0).abs() < 1e-9, "{kill:?}");
        assert!(kill.verdict.starts_with("B's gap kill is 2.00 s shorter ("), "{}", kill.verdict);
        assert!(kill.verdict.ends_with("p < 0.001)"), "{}", kill.verdict);
        let two = &rows[1];
        assert!(!two.significant);
        assert_eq!(two.verdict, "double leader trials 3/30 vs 0/30: not significant (−10 %, −26 %…+3 %, p = 0.24)");
        // Holm over two: the smaller p is doubled, the larger kept.
        assert!((kill.p_holm - 2.0 * kill.p).abs() < 1e-15 && two.p_holm == two.p);
    }

    #[test]
    fn the_same_distribution_is_rarely_called_different() {
        // 2000 pairs of samples of 10 from one distribution (a seeded
        // generator): the test calls at most about ALPHA of them different.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut called = 0;
        let runs = 2000;
        for _ in 0..runs {
            let a: Vec<f64> = (0..10).map(|_| 6.0 + 3.0 * next()).collect();
            let b: Vec<f64> = (0..10).map(|_| 6.0 + 3.0 * next()).collect();
            let rows = compare(&[secs_metric("gap.kill", &a)], &[secs_metric("gap.kill", &b)]);
            called += usize::from(rows[0].significant);
        }
        let rate = called as f64 / runs as f64;
        assert!(rate <= ALPHA + 0.01 && rate > 0.01, "called different in {rate}");
    }

    /// A duration alone, in its own unit.
    fn secs(s: f64) -> String {
        let unit = unit_for(&[s]);
        format!("{} {}", number(s, unit, false), unit.name)
    }

    #[test]
    fn numbers_read_as_a_person_writes_them() {
        assert_eq!(p_text(0.0004), "p < 0.001");
        assert_eq!(p_text(0.2373), "p = 0.24");
        assert_eq!(p_text(0.0123), "p = 0.012");
        assert_eq!(secs(9.531), "9.53 s");
        assert_eq!(secs(12.84), "12.8 s");
        assert_eq!(secs(0.31), "310 ms");
        assert_eq!(secs(0.000_045), "45.0 µs");
        assert_eq!(secs(0.0), "0 s");
        assert_eq!(number(0.004, unit_for(&[12.0]), true), "+<0.01");
        let ms = unit_for(&[0.1, -0.0004]);
        assert_eq!(
            (signed(-0.1, ms), signed(0.0004, ms), signed(0.000_001, ms)),
            ("−100 ms".into(), "+0.40 ms".into(), "+<0.01 ms".into())
        );
    }

    #[test]
    fn a_sub_millisecond_shift_is_said_in_its_unit() {
        // Times to the first leader of a few hundred µs, B's 150 µs later.
        let a: Vec<f64> = (0..10).map(|i| 300e-6 + f64::from(i) * 5e-6).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 150e-6).collect();
        let rows = compare(&[secs_metric("first_leader", &a)], &[secs_metric("first_leader", &b)]);
        assert_eq!(rows[0].a, "median 322 µs of 10");
        assert!(rows[0].verdict.starts_with("B's first_leader is 150 µs longer ("), "{}", rows[0].verdict);
        assert!(diff_text(&rows[0]).starts_with("+150 µs ("), "{}", diff_text(&rows[0]));
    }
}
