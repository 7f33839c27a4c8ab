//! A suite's README: each kind of experiment gets the table that answers its
//! question. The blog's claims beside what was measured; a sweep's dial (gap
//! and false evictions per setting, beside the theory); per substrate, the
//! crash gap against that substrate's own bound; fencing, the stale writes;
//! the rest, what happened. Every duration is in the experiment's own time;
//! the time scale is said once, above the tables.

use std::fmt::Write;

use super::cells::{
    DISTURBED, MdTable, anomalies, beyond_theory, budget, crash_bound, crash_gap, crash_verdict, description,
    disturbed_cell, evictions, name, own_s, predicted, rate,
};
use super::compare::{bound_row, jobs_markdown, substrates_markdown};
use super::summary::{Measured, SummaryRow};
use crate::model::{Experiment, Resource, setting_name};

/// The one column in real time: what it measures (a wake-up, a read, an
/// acquire) does not shrink with the time scale.
pub(super) const BEYOND_THEORY: &str = "gap − theory per cause (median, real time)";
pub(super) const BEYOND_THEORY_NOTE: &str = "how much later than the theory's moment each kind of gap ended, in \
     real time: a resumed pause ends at its resume, a takeover at the predicted watcher tick plus the watcher's own \
     waking, observing and acquiring.";

/// What an experiment asks, for the table it goes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A lock library's program, swept over its faults alone.
    Library,
    /// It carries the blog's claims.
    Blog,
    /// A sweep across substrates.
    Substrates,
    /// A sweep of other settings: the dial.
    Dial,
    /// A protected resource takes the leader's writes.
    Fencing,
    /// An epoch job runs.
    Jobs,
    /// Network faults hit the links to the server.
    Network,
    /// Watchers are told by the server (`watch_by: push`), polling beside.
    Push,
    Other,
}

fn kind(exp: &Experiment) -> Kind {
    let substrates: std::collections::BTreeSet<String> =
        exp.points.iter().map(|p| setting_name(&p.exp.substrate.kind)).collect();
    let faults: Vec<_> = exp.fault_kinds().chain(exp.points.iter().flat_map(|p| p.exp.fault_kinds())).collect();
    if super::libraries::is_library(exp) {
        Kind::Library
    } else if exp.reference.is_some() {
        Kind::Blog
    } else if faults.iter().any(|f| f.action.is_network()) {
        Kind::Network
    } else if super::push::pushes(exp) {
        Kind::Push
    } else if substrates.len() > 1 {
        Kind::Substrates
    } else if !exp.points.is_empty() {
        Kind::Dial
    } else if exp.worker.epoch_job.is_some() {
        Kind::Jobs
    } else if crate::model::summary_metrics::Features::of(exp).writes {
        Kind::Fencing
    } else {
        Kind::Other
    }
}

/// The README of a suite: the preamble, then a section per kind present.
/// `points` holds each experiment's per-point summaries (empty for one
/// without a sweep).
/// What every suite README says under who ran it: the time scale and
/// what each experiment's directory holds.
pub fn about(exps: &[&Experiment]) -> String {
    let scales: std::collections::BTreeSet<String> = exps.iter().map(|e| e.time_scale.to_string()).collect();
    format!(
        "Time scale {}: every duration below is divided by it, in the experiments' own time. \
         Each experiment's directory holds its CSVs, `timeline.svg` (trial 1) and `experiment.yaml`.",
        scales.into_iter().collect::<Vec<_>>().join(", ")
    )
}

pub fn readme(title: &str, preamble: &str, runs: &[Measured<'_>], points: &[Vec<SummaryRow<'_>>]) -> String {
    let mut out = format!("# {title}\n\n{preamble}\n");
    out += &precision(runs);
    out += &disturbed(runs);
    let of = |k: Kind| runs.iter().zip(points).filter(move |(m, _)| kind(m.exp) == k);

    if of(Kind::Blog).next().is_some() {
        out += "\n## The blog's claims\n\n";
        let mut t = MdTable::new(&["experiment", "the blog", "measured here", "theoretical bound", "verdict"]);
        for (m, rows) in of(Kind::Blog) {
            t.row(if m.exp.points.is_empty() { bound_row(m).to_vec() } else { blog_sweep_row(m, rows) });
        }
        out += &t.render();
    }
    // A sweep of the blog's claims gets its dial too.
    for (m, rows) in of(Kind::Dial).chain(of(Kind::Blog).filter(|(m, _)| !m.exp.points.is_empty())) {
        out += &dial(m, rows);
    }
    out += &super::libraries::table(&of(Kind::Library).collect::<Vec<_>>());
    let services: Vec<&Measured<'_>> =
        runs.iter().filter(|m| m.exp.substrate.replicated() && kind(m.exp) != Kind::Library).collect();
    out += &super::replicated::table(&services);
    for (m, rows) in of(Kind::Network) {
        out += &super::network::table(m, rows);
    }
    for (m, rows) in of(Kind::Push) {
        out += &super::push::table(m, rows);
    }
    for (m, rows) in of(Kind::Substrates) {
        out += &per_substrate(m, rows);
    }
    if of(Kind::Fencing).next().is_some() {
        out += &fencing(&of(Kind::Fencing).map(|(m, _)| m).collect::<Vec<_>>());
    }
    let jobs: Vec<Measured<'_>> = of(Kind::Jobs).map(|(m, _)| m.clone()).collect();
    out += &jobs_markdown(&jobs);
    if of(Kind::Other).next().is_some() {
        out += &others(&of(Kind::Other).map(|(m, _)| m).collect::<Vec<_>>());
    }
    let all: Vec<&SummaryRow<'_>> = runs
        .iter()
        .zip(points)
        .filter(|(m, _)| matches!(kind(m.exp), Kind::Substrates | Kind::Push))
        .flat_map(|(_, p)| p)
        .collect();
    out += &substrates_markdown(&all);
    out += &expectations(runs);
    out
}

/// First, before any number: the experiments whose faults were placed
/// later than their budget, so that a result taken on a busy machine says
/// so where it is read.
fn precision(runs: &[Measured<'_>]) -> String {
    let busy: Vec<&Measured<'_>> = runs.iter().filter(|m| m.summary.over_budget_trials > 0).collect();
    if busy.is_empty() {
        return String::new();
    }
    let mut out = "\n## ⚠ Precision\n\n".to_string();
    for m in busy {
        let s = &m.summary;
        out += &format!(
            "- **{}**: {}/{} trials had a fault more than {} late (at most {} µs): the machine was too busy for \
             time scale {}; `faults.csv` has each fault's error.\n",
            m.exp.name,
            s.over_budget_trials,
            s.n,
            budget(m.metrics.iter().map(|t| t.precision.budget_us)),
            s.fault_error_max_us.unwrap_or(0),
            m.exp.time_scale
        );
    }
    out
}

/// Next, before any number: the trials the machine disturbed, each
/// experiment's first cause, and its headlines over the rest.
fn disturbed(runs: &[Measured<'_>]) -> String {
    let hit: Vec<&Measured<'_>> = runs.iter().filter(|m| m.summary.undisturbed.is_some()).collect();
    if hit.is_empty() {
        return String::new();
    }
    let mut out = "\n## ⚠ Disturbed trials\n\n\
        In these trials the machine moved the experiment further than its budget: an operation outside every \
        fault took that much longer than its kind's median, workers released together started that far apart, a \
        fault took effect that late, a worker woke that late for its tick, or the hypervisor took the machine (docs/metrics.md of \
        leasequake, 'Disturbed trials'). Their numbers measure the machine as much as the system: each table \
        below marks an experiment that has any with ⚠, and here are its headlines without them. Times as run; \
        `disturbed_by` in trials.csv names every trial's cause.\n\n"
        .to_string();
    for m in hit {
        let (s, calm) = (m.summary, m.summary.undisturbed.as_deref().expect("filtered"));
        let scale = m.exp.time_scale;
        let gaps = match (calm.gap_p50_ms, calm.gap_max_ms) {
            (Some(p50), Some(max)) => {
                format!("gaps median {:.3} s (max {:.3} s), ", own_s(p50, scale), own_s(max, scale))
            }
            _ => String::new(),
        };
        out += &format!(
            "- **{}**: {}/{} trials disturbed (over {}), the first: {}. Over the {} undisturbed: {gaps}two \
             leaders in {}/{}, wedged {}/{}.\n",
            m.exp.name,
            s.disturbed.len(),
            s.n,
            budget(m.metrics.iter().map(|t| t.disturbance.budget_us)),
            s.disturbed[0],
            calm.n,
            calm.double_leader_trials,
            calm.n,
            calm.wedged_trials,
            calm.n
        );
    }
    out
}

/// A sweep that carries the blog's claim: where across the points the
/// blog's number falls.
fn blog_sweep_row(m: &Measured<'_>, rows: &[SummaryRow<'_>]) -> Vec<String> {
    let r = m.exp.reference.clone().unwrap_or_default();
    let scale = m.exp.time_scale;
    let mut verdict = Vec::new();
    if let Some([k, n]) = r.double_leader_trials {
        let blog = k as f64 / n.max(1) as f64;
        let inside: Vec<String> = rows
            .iter()
            .filter(|p| p.summary.double_leader_ci.0 <= blog && blog <= p.summary.double_leader_ci.1)
            .map(|p| crate::experiment::own_label(&p.setting, scale))
            .collect();
        verdict.push(if inside.is_empty() {
            format!("the blog's {k}/{n} is outside every point's interval")
        } else {
            format!("the blog's {k}/{n} is inside the interval at {}", inside.join("; "))
        });
    }
    if !r.note.is_empty() {
        verdict.push(r.note.trim().to_string());
    }
    vec![name(m), r.claim, format!("{} points, per point below", rows.len()), String::new(), verdict.join(". ")]
}

/// A sweep's dial: a row per point, a column per swept setting, measured
/// beside the theory.
fn dial(m: &Measured<'_>, rows: &[SummaryRow<'_>]) -> String {
    let exp = m.exp;
    let scale = exp.time_scale;
    let keys: Vec<String> =
        exp.points.first().map(|p| p.settings.iter().map(|(k, _)| k.clone()).collect()).unwrap_or_default();
    let mut headers = keys.clone();
    headers.extend(
        [
            "kill gap median [p10–p90]",
            "theory bound",
            BEYOND_THEORY,
            "false evictions / leader pauses (95 % CI)",
            "evictions the theory predicts",
            "anomalies",
            "two leaders",
            DISTURBED,
            "start spread (median)",
            "the blog's",
        ]
        .map(String::from),
    );
    let starts_vary = keys.iter().any(|k| k == "stagger" || k == "workers");
    let blog = exp.reference.as_ref().and_then(|r| r.double_leader_trials);
    let mut t = MdTable::with_headers(headers);
    for r in rows {
        let s = &r.summary;
        let Some(p) = exp.points.iter().find(|p| p.label() == r.setting) else { continue };
        let mut cells: Vec<String> =
            p.settings.iter().map(|(k, v)| crate::experiment::own_value(k, v, scale)).collect();
        cells.extend([
            crash_gap(s, scale),
            crash_bound(r.exp, s),
            beyond_theory(s),
            evictions(s),
            predicted(s),
            anomalies(s),
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            disturbed_cell(s),
            match s.start_spread_p50_us {
                Some(us) if starts_vary => format!("{:.2} ms", us / 1000.0 / scale),
                _ => String::new(),
            },
            match blog {
                Some([k, n]) => {
                    let b = k as f64 / n.max(1) as f64;
                    let (lo, hi) = s.double_leader_ci;
                    if lo <= b && b <= hi { format!("{k}/{n}: inside") } else { format!("{k}/{n}: outside") }
                }
                None => String::new(),
            },
        ]);
        t.row(cells);
    }
    t.note(BEYOND_THEORY, BEYOND_THEORY_NOTE);
    format!("\n## {}: the dial\n\n{}A row per setting.\n\n{}", name(m), description(exp), t.render())
}

/// Per substrate: the crash gap against that substrate's own bound, double
/// leaders, wedges, false evictions.
fn per_substrate(m: &Measured<'_>, rows: &[SummaryRow<'_>]) -> String {
    let mut t = MdTable::new(&[
        "substrate",
        "kill gap median [p10–p90]",
        "its bound",
        "verdict",
        BEYOND_THEORY,
        "two leaders (95 % CI)",
        "wedged",
        "false evictions / leader pauses (95 % CI)",
        "evictions the theory predicts",
        "anomalies",
        DISTURBED,
    ]);
    for r in rows {
        let s = &r.summary;
        let scale = r.exp.time_scale;
        let sub = setting_name(&r.exp.substrate.kind);
        t.row(vec![
            sub,
            crash_gap(s, scale),
            crash_bound(r.exp, s),
            crash_verdict(r.exp, s),
            beyond_theory(s),
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            format!("{}/{}", s.wedged_trials, s.n),
            evictions(s),
            predicted(s),
            anomalies(s),
            disturbed_cell(s),
        ]);
    }
    t.note(BEYOND_THEORY, BEYOND_THEORY_NOTE);
    format!("\n## {}: per substrate\n\n{}{}", name(m), description(m.exp), t.render())
}

fn yes_no(yes: bool) -> String {
    if yes { "yes" } else { "no" }.into()
}

/// Stale writes to a protected resource, per experiment.
fn fencing(runs: &[&Measured<'_>]) -> String {
    let mut t = MdTable::new(&[
        "experiment",
        "fencing tokens",
        "the resource",
        "trials with two leaders (95 % CI)",
        "writes",
        "stale writes",
        "lost work (a stale write over a newer result)",
        "rejected",
        "accepted before the newer holder wrote",
        DISTURBED,
    ]);
    for m in runs {
        let s = m.summary;
        let w = &s.writes;
        // A program's tokens and store are its own business.
        let (tokens, resource) = match (&m.exp.program, m.exp.worker.resource) {
            (Some(_), _) => ("the program's".into(), "the program's writes to `{resource}`".into()),
            (None, Resource::Fenced) => (yes_no(m.exp.worker.fencing_tokens), "fenced: refuses a lower token".into()),
            (None, Resource::Unfenced) => {
                (yes_no(m.exp.worker.fencing_tokens), "unfenced: the last writer wins".into())
            }
            (None, Resource::None) => (yes_no(m.exp.worker.fencing_tokens), String::new()),
        };
        t.row(vec![
            name(m),
            tokens,
            resource,
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            w.attempted.to_string(),
            w.stale.to_string(),
            w.stale_accepted.to_string(),
            w.stale_rejected.to_string(),
            w.stale_superseded.to_string(),
            disturbed_cell(s),
        ]);
    }
    format!(
        "\n## Fencing: stale writes\n\nA stale write carries a fencing token below one already granted (a write \
         without a token: made after another worker acquired the lease): a holder that kept believing after its \
         lease was taken.\n\n{}",
        t.render()
    )
}

/// Experiments of no other kind: what happened.
fn others(runs: &[&Measured<'_>]) -> String {
    let mut t = MdTable::new(&[
        "experiment",
        "trials",
        "two leaders (95 % CI)",
        "gaps: median [min–max]",
        "never ended",
        "wedged",
        "kill gap vs its bound",
        BEYOND_THEORY,
        "anomalies",
        DISTURBED,
    ]);
    for m in runs {
        let s = m.summary;
        let scale = m.exp.time_scale;
        let gaps = match (s.gap_p50_ms, s.gap_min_ms, s.gap_max_ms) {
            (Some(p), Some(a), Some(b)) => {
                format!("{:.2} s [{:.2}–{:.2}] (n {})", own_s(p, scale), own_s(a, scale), own_s(b, scale), s.gaps)
            }
            _ => String::new(),
        };
        t.row(vec![
            name(m),
            s.n.to_string(),
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            gaps,
            if s.open_gaps > 0 { s.open_gaps.to_string() } else { String::new() },
            format!("{}/{}", s.wedged_trials, s.n),
            crash_verdict(m.exp, s),
            beyond_theory(s),
            anomalies(s),
            disturbed_cell(s),
        ]);
    }
    t.note(BEYOND_THEORY, BEYOND_THEORY_NOTE);
    format!("\n## Other experiments\n\n{}", t.render())
}

/// Every `expect:` of the suite, held or failed.
fn expectations(runs: &[Measured<'_>]) -> String {
    let failed: Vec<&Measured<'_>> = runs.iter().filter(|m| !m.failed.is_empty()).collect();
    let mut out = format!(
        "\n## Expectations\n\n{} of {} experiments kept every `expect:`.\n",
        runs.len() - failed.len(),
        runs.len()
    );
    for m in failed {
        let _ = writeln!(out, "\n* ✗ {}:", name(m));
        for f in m.failed.iter().take(10) {
            let _ = writeln!(out, "  * {f}");
        }
        if m.failed.len() > 10 {
            let _ = writeln!(out, "  * … and {} more", m.failed.len() - 10);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_said_under_its_column_only_if_the_column_is_shown() {
        let mut t = MdTable::new(&["a", "b"]);
        t.note("a", "what a is");
        t.note("b", "what b is");
        t.row(vec!["1".into(), String::new()]);
        let out = t.render();
        assert!(out.contains("*a*: what a is"), "{out}");
        assert!(!out.contains("what b is"), "column b is empty in every row, and so is left out: {out}");
        assert!(!out.contains("| b |"), "{out}");
    }

    #[test]
    fn a_column_empty_in_every_row_is_left_out() {
        let mut t = MdTable::new(&["a", "b", "c"]);
        t.row(vec!["1".into(), String::new(), "x|y".into()]);
        t.row(vec!["2".into(), " ".into()]);
        assert_eq!(t.render(), "| a | c |\n| --- | --- |\n| 1 | x\\|y |\n| 2 |  |\n");
    }
}
