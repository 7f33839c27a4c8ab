//! The cells of a suite's tables, shared by every kind of table: a
//! Markdown table that drops empty columns, the crash gap against its
//! bound, rates with their intervals, values in the experiment's own time.

pub(super) use super::bounds::{outside_by, own_s};
use super::summary::{Measured, Summary, SummaryRow, crash_bound_ms};
use crate::check::stats::percentile;
use crate::model::Experiment;

/// A Markdown table that leaves out the columns empty in every row, with
/// what its columns mean said under it for the columns it shows: a note
/// for a column left out would explain what the reader cannot see.
pub struct MdTable {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<(String, String)>,
}

impl MdTable {
    pub fn new(headers: &[&str]) -> MdTable {
        MdTable::with_headers(headers.iter().map(|h| h.to_string()).collect())
    }

    pub fn with_headers(headers: Vec<String>) -> MdTable {
        MdTable { headers, rows: Vec::new(), notes: Vec::new() }
    }

    /// What column `header` means, said under the table if it is shown.
    pub fn note(&mut self, header: &str, text: &str) {
        debug_assert!(self.headers.iter().any(|h| h == header), "a note for a column the table has not: {header}");
        self.notes.push((header.to_string(), text.to_string()));
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let cell = |r: &Vec<String>, i: usize| r.get(i).map_or("", |c| c.as_str()).trim().to_string();
        let keep: Vec<usize> =
            (0..self.headers.len()).filter(|&i| self.rows.iter().any(|r| !cell(r, i).is_empty())).collect();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let mut out = line(keep.iter().map(|&i| escape(&self.headers[i])).collect());
        out += &line(keep.iter().map(|_| "---".to_string()).collect());
        for r in &self.rows {
            out += &line(keep.iter().map(|&i| escape(&cell(r, i))).collect());
        }
        let shown = |h: &str| keep.iter().any(|&i| self.headers[i] == h);
        for (header, text) in self.notes.iter().filter(|(h, _)| shown(h)) {
            out += &format!("\n*{header}*: {text}\n");
        }
        out
    }
}

pub(super) fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The experiment's name, linked to its directory, marked ✗ if an `expect:`
/// failed and ⚠ if the machine disturbed any of its trials.
pub(super) fn name(m: &Measured<'_>) -> String {
    let mark = if m.failed.is_empty() { "" } else { "✗ " };
    let warn = if m.summary.undisturbed.is_some() { "⚠ " } else { "" };
    format!("{mark}{warn}[{}]({})", m.exp.name, m.link)
}

/// A row's disturbed trials, where it has any, and its two-leader count
/// over the rest: a point's headline may rest on trials the machine moved.
pub(super) const DISTURBED: &str = "disturbed (two leaders in the rest)";

pub(super) fn disturbed_cell(s: &Summary) -> String {
    disturbed_cell_of(s, |calm| format!("{}/{}", calm.double_leader_trials, calm.n))
}

/// `disturbed_cell` with what the table counts in the rest (`rest` of the
/// undisturbed trials' summary): "⚠ 10/50 (125)".
pub(super) fn disturbed_cell_of(s: &Summary, rest: impl Fn(&Summary) -> String) -> String {
    match s.undisturbed.as_deref() {
        None => String::new(),
        Some(calm) if calm.n == 0 => format!("⚠ {}/{}: none spared", s.disturbed.len(), s.n),
        Some(calm) => format!("⚠ {}/{} ({})", s.disturbed.len(), s.n, rest(calm)),
    }
}

/// The budget of an experiment's trials: `3000 µs`, or where its points'
/// intervals give them different budgets, `its point's budget (1000–5000
/// µs)` (the largest alone would excuse what a small point's budget
/// judged).
pub(super) fn budget(budgets: impl Iterator<Item = i64>) -> String {
    let (lo, hi) = budgets.fold((i64::MAX, i64::MIN), |(lo, hi), b| (lo.min(b), hi.max(b)));
    match (lo, hi) {
        (i64::MAX, _) => "0 µs".to_string(),
        (lo, hi) if lo == hi => format!("{lo} µs"),
        (lo, hi) => format!("its point's budget ({lo}–{hi} µs)"),
    }
}

/// `median [p10–p90] (n)` of the kill gaps, in own seconds.
pub(super) fn crash_gap(s: &Summary, scale: f64) -> String {
    match (s.crash_gap(0.5), s.crash_gap(0.1), s.crash_gap(0.9)) {
        (Some(m), Some(a), Some(b)) => format!(
            "{:.2} s [{:.2}–{:.2}] (n {})",
            own_s(m, scale),
            own_s(a, scale),
            own_s(b, scale),
            s.crash_gaps_ms.len()
        ),
        _ => String::new(),
    }
}

pub(super) fn crash_bound(exp: &Experiment, s: &Summary) -> String {
    if s.crash_gaps_ms.is_empty() {
        return String::new();
    }
    let (lo, hi) = crash_bound_ms(exp);
    format!("[{:.2}, {:.2}] s", own_s(lo, exp.time_scale), own_s(hi, exp.time_scale))
}

/// Whether the kill gaps keep to their bound, with what does not.
pub(super) fn crash_verdict(exp: &Experiment, s: &Summary) -> String {
    let (lo, hi) = crash_bound_ms(exp);
    let mut outside = Vec::new();
    let (min, max) = (s.crash_gaps_ms.first().copied(), s.crash_gaps_ms.last().copied());
    outside.extend(outside_by(min, max, (lo, hi), exp.time_scale).into_iter().map(|w| format!("kill {w}")));
    if s.wedged_trials > 0 {
        outside.push(format!("{}/{} wedged", s.wedged_trials, s.n));
    }
    if s.mid_renewal_kills > 0 {
        outside.push(format!("{} killed mid-renewal", s.mid_renewal_kills));
    }
    match (outside.is_empty(), s.crash_gaps_ms.is_empty()) {
        (true, true) => String::new(),
        (true, false) => "inside".into(),
        (false, _) => format!("✗ outside: {}", outside.join(", ")),
    }
}

pub(super) fn rate(k: usize, n: usize, ci: (f64, f64)) -> String {
    format!("{k}/{n} ({:.0}–{:.0} %)", ci.0 * 100.0, ci.1 * 100.0)
}

/// Trials with a definite double grant, with their interval.
pub(super) fn double_grant_rate(s: &Summary) -> String {
    let k = s.network.double_grants.trials;
    rate(k, s.n, crate::check::stats::wilson95(k, s.n))
}

/// The longest recovery after a heal, and the trials that never recovered.
pub(super) fn recovery(s: &Summary, scale: f64) -> String {
    let secs = |us: i64| format!("{:.2} s", own_s(us as f64 / 1000.0, scale));
    match (s.network.recovery_us, s.network.unrecovered) {
        (r, u) if u > 0 => format!("{u}/{} never", s.n) + &r.map(|r| format!("; {}", secs(r))).unwrap_or_default(),
        (Some(r), _) => secs(r),
        (None, _) => String::new(),
    }
}

pub(super) fn evictions(s: &Summary) -> String {
    if s.leader_pauses == 0 { String::new() } else { rate(s.false_evictions, s.leader_pauses, s.false_eviction_ci) }
}

pub(super) fn predicted(s: &Summary) -> String {
    if s.leader_pauses == 0 {
        return String::new();
    }
    match s.predicted_evictions() {
        None => "unknown".into(),
        Some(p) if s.unpredicted_pauses > 0 => format!("{p} ({} too close to call)", s.unpredicted_pauses),
        Some(p) => p.to_string(),
    }
}

/// Measured − predicted gap, median, in own ms.
/// The median excess per gap cause, in real time: what it measures (a
/// wake-up, a read, an acquire) does not shrink with the time scale.
pub(super) fn beyond_theory(s: &Summary) -> String {
    s.gap_beyond_theory
        .iter()
        .filter_map(|b| {
            Some(format!(
                "{}, {}: {:+.2} ms (n {})",
                b.cause,
                b.ended,
                percentile(&b.beyond_ms, 0.5)?,
                b.beyond_ms.len()
            ))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Gap and pause predictions the measurement disagrees with.
pub(super) fn anomalies(s: &Summary) -> String {
    if s.predicted_gaps == 0 && s.leader_pauses == s.unpredicted_pauses {
        return String::new();
    }
    let n = s.gap_anomalies + s.eviction_anomalies;
    if n == 0 { "0".into() } else { format!("✗ {n} ({} gaps, {} pauses)", s.gap_anomalies, s.eviction_anomalies) }
}

pub(super) fn description(exp: &Experiment) -> String {
    let d = exp.description.trim();
    if d.is_empty() { String::new() } else { format!("{}\n\n", d.split_whitespace().collect::<Vec<_>>().join(" ")) }
}

/// Every swept setting of `exp`, in order of first appearance: `points:`
/// may set some settings at some points only.
pub(super) fn swept_keys(exp: &Experiment) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in exp.points.iter().flat_map(|p| &p.settings) {
        if !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    keys
}

/// The values of `keys` at the point labelled `setting`, in own time
/// (empty where the point does not set one).
pub(super) fn swept_cells(exp: &Experiment, setting: &str, keys: &[String], scale: f64) -> Vec<String> {
    let point = exp.points.iter().find(|p| p.label() == setting);
    keys.iter()
        .map(|k| {
            point
                .and_then(|p| p.settings.iter().find(|(key, _)| key == k))
                .map(|(k, v)| crate::experiment::own_value(k, v, scale))
                .unwrap_or_default()
        })
        .collect()
}

/// A table of points: a column per swept setting, then `headers`.
pub(super) fn points_table(keys: &[String], headers: &[&str]) -> MdTable {
    MdTable::with_headers(keys.iter().cloned().chain(headers.iter().map(|h| h.to_string())).collect())
}

/// The one row of an experiment without points.
pub(super) fn whole_row<'a>(m: &Measured<'a>) -> SummaryRow<'a> {
    SummaryRow { setting: m.exp.name.clone(), exp: m.exp, summary: m.summary.clone() }
}

#[cfg(test)]
mod tests {
    use super::super::summary::summarize;
    use super::*;

    #[test]
    fn a_budget_is_one_figure_or_its_points_range() {
        assert_eq!(budget([3000, 3000].into_iter()), "3000 µs");
        assert_eq!(budget([5000, 1000, 2000].into_iter()), "its point's budget (1000–5000 µs)");
        assert_eq!(budget(std::iter::empty()), "0 µs");
    }

    #[test]
    fn a_row_says_how_many_trials_were_disturbed_and_what_the_rest_showed() {
        let mut s = summarize(&[]);
        assert_eq!(disturbed_cell(&s), "", "none disturbed: no cell, so no column");
        let mut calm = summarize(&[]);
        (calm.n, calm.double_leader_trials) = (7, 1);
        (s.n, s.disturbed, s.undisturbed) = (10, vec!["a renewal took 9 ms".into(); 3], Some(Box::new(calm)));
        assert_eq!(disturbed_cell(&s), "⚠ 3/10 (1/7)");
        s.undisturbed.as_mut().unwrap().n = 0;
        s.disturbed = vec!["late".into(); 10];
        assert_eq!(disturbed_cell(&s), "⚠ 10/10: none spared");
    }
}
