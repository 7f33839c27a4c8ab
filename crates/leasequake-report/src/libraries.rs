//! Lock libraries under faults: a program (a library's adapter) whose sweep
//! runs each fault of its schedule alone (`sweep: {fault: […]}`). One table
//! for all of them, a library per row, a fault per column, then what each
//! library is and does, in its own words.

use super::cells::{MdTable, escape, name, own_s};
use super::summary::{Measured, Summary, SummaryRow};
use crate::model::Experiment;

/// Is this a library's experiment: a program, swept over its faults alone?
pub(super) fn is_library(exp: &Experiment) -> bool {
    exp.program.is_some()
        && !exp.points.is_empty()
        && exp.points.iter().all(|p| p.settings.len() == 1 && p.settings[0].0 == "fault")
}

/// One cell: the gaps' median against the library's theory, trials with
/// two leaders, stale writes, and what else went wrong (beliefs the service
/// did not back, wedges, disturbed trials).
fn cell(s: &Summary, scale: f64) -> String {
    let mut parts = Vec::new();
    if let (Some(p50), Some(max)) = (s.gap_p50_ms, s.gap_max_ms) {
        parts.push(format!("gap {:.2} s (max {:.2})", own_s(p50, scale), own_s(max, scale)));
    }
    let mut beyond: Vec<f64> = s.gap_beyond_theory.iter().flat_map(|b| b.beyond_ms.iter().copied()).collect();
    beyond.sort_by(f64::total_cmp);
    if let Some(p50) = crate::check::stats::percentile(&beyond, 0.5) {
        // Rounded first: a median a fraction of a ms early is "+0", not "-0".
        let ms = p50.round() + 0.0;
        parts.push(format!("{ms:+.0} ms past its theory ({} of {} gaps)", beyond.len(), s.gaps));
    }
    if s.gap_anomalies > 0 {
        parts.push(format!("✗ {} gaps against its theory", s.gap_anomalies));
    }
    parts.push(format!("two leaders {}/{}", s.double_leader_trials, s.n));
    let w = &s.writes;
    if w.stale > 0 {
        let fate = [(w.stale_accepted, "over a newer leader's"), (w.stale_rejected, "rejected")]
            .iter()
            .filter(|(k, _)| *k > 0)
            .map(|(k, what)| format!("{k} {what}"))
            .collect::<Vec<_>>();
        let fate = if fate.is_empty() { String::new() } else { format!(" ({})", fate.join(", ")) };
        parts.push(format!("stale writes {}{fate}", w.stale));
    }
    if s.unbacked_trials > 0 {
        parts.push(format!("unbacked {}/{}", s.unbacked_trials, s.n));
    }
    if s.wedged_trials > 0 {
        parts.push(format!("wedged {}/{}", s.wedged_trials, s.n));
    }
    if s.fault_error_trials > 0 {
        parts.push(format!("fault not delivered {}/{}", s.fault_error_trials, s.n));
    }
    if let Some(calm) = s.undisturbed.as_deref() {
        parts.push(format!(
            "⚠ disturbed {}/{} (two leaders in the rest {}/{})",
            s.disturbed.len(),
            s.n,
            calm.double_leader_trials,
            calm.n
        ));
    }
    parts.join(" · ")
}

/// Whether the library handed its holders a fencing token.
fn tokens(m: &Measured<'_>) -> &'static str {
    let acquired: usize = m.metrics.iter().map(|t| t.service.acquisitions).sum();
    let untokened: usize = m.metrics.iter().map(|t| t.network.double_grants.untokened).sum();
    if acquired > untokened { "yes" } else { "no" }
}

/// The table, a row per library, a column per fault any of them ran.
pub(super) fn table(runs: &[(&Measured<'_>, &Vec<SummaryRow<'_>>)]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut faults: Vec<String> = Vec::new();
    for (m, _) in runs {
        for p in &m.exp.points {
            let f = p.settings[0].1.clone();
            if !faults.contains(&f) {
                faults.push(f);
            }
        }
    }
    // The holder's faults, then the lock file's, the network's, the clock's.
    let order = ["kill", "term", "pause", "lock-delete", "lock-stale", "partition", "partition-replies", "skew"];
    faults.sort_by_key(|f| order.iter().position(|o| o == f).unwrap_or(order.len()));
    let mut headers = vec!["library".to_string()];
    headers.extend(faults.iter().cloned());
    headers.extend(["fencing token", "grants the service gave / acquisitions reported"].map(String::from));
    let mut t = MdTable::with_headers(headers);
    for (m, rows) in runs {
        let mut cells = vec![name(m)];
        for f in &faults {
            let row = rows.iter().find(|r| r.setting == format!("fault={f}"));
            cells.push(row.map(|r| cell(&r.summary, r.exp.time_scale)).unwrap_or_default());
        }
        let grants: usize = m.metrics.iter().map(|t| t.service.grants).sum();
        let acquired: usize = m.metrics.iter().map(|t| t.service.acquisitions).sum();
        cells.push(tokens(m).to_string());
        cells.push(format!("{grants} / {acquired}"));
        t.row(cells);
    }
    let mut about = String::new();
    for (m, _) in runs {
        about += &format!(
            "* **{}** (time scale {}): {}\n",
            m.exp.name,
            m.exp.time_scale,
            escape(&m.exp.description.split_whitespace().collect::<Vec<_>>().join(" "))
        );
    }
    format!(
        "\n## Lock libraries under faults\n\nEach library through its adapter (examples/clients/), unchanged, \
         as leader election among three processes; each fault of its schedule alone, {} trials a cell. In a \
         cell: the leaderless gaps' median and longest, in the library's own time (divided by its time scale), \
         and the median of how much later than the library's own lease and ticks say each ended (as run; over \
         the gaps the theory could predict: a library whose lease the adapter cannot see predicts none); \
         the trials in which two workers believed they led at once; the leader's writes to the protected \
         resource made after another worker had acquired the lock (stale), how many landed over a newer \
         leader's write (its work lost) and how many the resource rejected (a lower fencing token, or a store \
         it could not write); \
         the trials in which a worker believed it \
         led while the service held the lease for another or for nobody for longer than a renewal period \
         (unbacked: the harness's own look at the lease, every 5 ms); wedges, faults that could not be \
         delivered, and trials the machine disturbed, where there are any.\n\n{}\n\
         ### The libraries\n\n{about}",
        runs.first().map_or(0, |(m, _)| m.exp.trials),
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::experiment::{Overrides, load_str};

    fn load(text: &str) -> Experiment {
        load_str(Path::new("x.yaml"), text, &Overrides::default()).unwrap()
    }

    const LIBRARY: &str = "name: lib\nworkers: 3\nprogram:\n  command: [sh]\nfaults:\n  - {at: 5s, target: leader, action: kill}\n  - {at: 5s, target: leader, action: term}\nsweep:\n  fault: [kill, term]\n";

    #[test]
    fn a_program_swept_over_its_faults_alone_is_a_library() {
        assert!(is_library(&load(LIBRARY)));
        assert!(!is_library(&load(&LIBRARY.replace("  fault: [kill, term]", "  fault: [kill]\n  lease: [9s]"))));
        assert!(!is_library(&load(&LIBRARY.replace("program:\n  command: [sh]\n", ""))));
    }

    #[test]
    fn a_cell_says_what_went_wrong_beside_the_gap() {
        let mut s = crate::summary::summarize(&[]);
        (s.n, s.gap_p50_ms, s.gap_max_ms) = (5, Some(30.0), Some(90.0));
        (s.double_leader_trials, s.unbacked_trials, s.fault_error_trials) = (2, 1, 5);
        assert_eq!(cell(&s, 0.1), "gap 0.30 s (max 0.90) · two leaders 2/5 · unbacked 1/5 · fault not delivered 5/5");
        s.gaps = 5;
        s.gap_beyond_theory =
            vec![crate::summary::BeyondTheory { beyond_ms: vec![8.0, 12.0, 40.0], ..Default::default() }];
        let mut early = s.clone();
        early.gap_beyond_theory[0].beyond_ms = vec![-0.3];
        assert!(cell(&early, 0.1).contains("+0 ms past its theory (1 of 5 gaps)"), "{}", cell(&early, 0.1));
        s.writes = crate::check::Writes { attempted: 40, stale: 3, stale_accepted: 2, ..Default::default() };
        assert_eq!(
            cell(&s, 0.1),
            "gap 0.30 s (max 0.90) · +12 ms past its theory (3 of 5 gaps) · two leaders 2/5 · stale writes 3 (2 over a \
             newer leader's) · unbacked 1/5 · fault not delivered 5/5"
        );
    }
}
