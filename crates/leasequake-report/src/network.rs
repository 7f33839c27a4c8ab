//! A suite's table for network faults (partitions, lost replies, latency
//! on the links to the server): per setting, two leaders and double grants,
//! how long a cut-off holder believed on, the renewal storm after a heal and
//! the way back to one grant, each gap against the theory of its fault.

use super::cells::{
    DISTURBED, description, disturbed_cell, double_grant_rate, name, outside_by, own_s, points_table, rate, recovery,
    swept_cells, swept_keys, whole_row,
};
use super::summary::{Measured, Summary, SummaryRow};
use crate::model::{Action, Experiment};

/// What the network faults did, per setting: believers, orphaned grants,
/// gaps; with `belief: local-deadline`, the theory's promise beside it.
pub(crate) fn table(m: &Measured<'_>, rows: &[SummaryRow<'_>]) -> String {
    let keys = swept_keys(m.exp);
    let mut t = points_table(
        &keys,
        &[
            "two leaders (95 % CI)",
            "double grants (95 % CI) [longest]",
            "stale belief, longest",
            "renewals failed",
            "replies lost",
            "orphaned grants: total [longest]",
            "recovery after heal, longest",
            "ops in a lease after heal: p50 / p99 [steady p50], real ms",
            "gaps: median [min–max]",
            "theory",
            "verdict",
            DISTURBED,
        ],
    );
    let plain = [whole_row(m)];
    let rows = if rows.is_empty() { &plain[..] } else { rows };
    for r in rows {
        let (s, exp) = (&r.summary, r.exp);
        let scale = exp.time_scale;
        let mut cells = swept_cells(m.exp, &r.setting, &keys, scale);
        let n = &s.network;
        let secs = |ms: f64| format!("{:.2} s", own_s(ms, scale));
        let gaps = match (s.gap_p50_ms, s.gap_min_ms, s.gap_max_ms) {
            (Some(p), Some(a), Some(b)) => {
                format!("{} [{:.2}–{:.2}] (n {})", secs(p), own_s(a, scale), own_s(b, scale), s.gaps)
            }
            _ => String::new(),
        };
        let (theory, verdict) =
            if exp.substrate.replicated() { super::replicated::theory(exp, s) } else { network_theory(exp, s) };
        let d = &n.double_grants;
        cells.extend([
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            if d.definite + d.possible > 0 {
                let more = if d.possible > 0 { format!(", {} more possible", d.possible) } else { String::new() };
                format!("{} [{}]{more}", double_grant_rate(s), secs(d.definite_max_us as f64 / 1000.0))
            } else {
                double_grant_rate(s)
            },
            s.stale_belief_max_ms.map(secs).unwrap_or_default(),
            n.renew_failures.to_string(),
            n.replies_lost.to_string(),
            if n.orphaned_grants > 0 {
                format!(
                    "{} [{}]",
                    secs(n.orphaned_grant_us as f64 / 1000.0),
                    secs(n.orphaned_grant_max_us as f64 / 1000.0)
                )
            } else {
                String::new()
            },
            recovery(s, scale),
            storm_cell(n.storm.as_ref()),
            gaps,
            theory,
            verdict,
            disturbed_cell(s),
        ]);
        t.row(cells);
    }
    format!(
        "\n## {}: the network\n\n{}Stale belief: a holder believing after the lease was granted to another. \
         Double grant: the service granting the lease to two workers at once (each grant counted for the least it can have lasted). \
         Recovery: from the last heal to one leader and one grant, for good. \
         Orphaned grant: the server holding a grant for a live worker that does not believe in it (a lower bound). \
         Times in the experiment's own time.\n\n{}",
        name(m),
        description(m.exp),
        t.render()
    )
}

/// The renewal storm: how long the operations begun after a heal took,
/// beside the steady state's, in real time (a server's work is not scaled).
fn storm_cell(storm: Option<&crate::check::Storm>) -> String {
    let Some(st) = storm.filter(|s| s.after_heal.count() > 0) else { return String::new() };
    let ms = |us: Option<f64>| us.map_or("–".to_string(), |us| format!("{:.2}", us / 1000.0));
    let failed = match st.after_heal.failed {
        0 => String::new(),
        f => format!(", {f} failed"),
    };
    format!(
        "{} / {} [{}] (n {}{failed})",
        ms(st.after_heal.p50()),
        ms(st.after_heal.p99()),
        ms(st.baseline.p50()),
        st.after_heal.count()
    )
}

/// The theory of a network point, and whether the measurement keeps to it.
/// A local deadline ends the belief `lease − margin` of the holder's own
/// clock after the request was sent (`(lease − margin) / rate` of true
/// time); the server's grant ends a lease after the request reached it. So
/// one leader at a time, if `lease − margin ≤ lease × rate` for the slowest
/// clock. Under a partition, where nothing the leader sends arrives, the
/// gap after its step-down is the rest of its grant plus at most a watch
/// interval (and a server's millisecond), plus the takeover's own read and
/// acquire: operations of real time, which the trials measured (the
/// longest of each).
fn network_theory(exp: &Experiment, s: &Summary) -> (String, String) {
    if exp.worker.belief != crate::model::Belief::LocalDeadline || exp.program.is_some() {
        return (String::new(), String::new());
    }
    let scale = exp.time_scale;
    let lease = exp.lease.lease.as_ms_f64();
    let rates = exp.worker.clock_rate.all();
    let slowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let believed = lease - exp.worker.belief_margin.least().as_ms_f64();
    if believed > lease * slowest {
        let over = believed / slowest - lease;
        return (
            format!("the belief may outlast the grant by {:.2} s: two leaders possible", own_s(over, scale)),
            String::new(),
        );
    }
    let one_rate = rates.iter().all(|r| *r == slowest);
    let margin = lease - believed / slowest;
    let watch = exp.lease.watch.as_ms_f64() / slowest;
    // A lock held by a session is not the grant's to end: it goes when the
    // partition lets the session's close through.
    let partitions_only = one_rate
        && exp.substrate.kind.expires()
        && exp.fault_kinds().filter(|f| f.action.is_network()).all(|f| f.action == Action::Partition);
    let mut wrong = Vec::new();
    if s.double_leader_trials > 0 {
        wrong.push(format!("two leaders in {}/{} trials", s.double_leader_trials, s.n));
    }
    if s.open_gaps > 0 {
        wrong.push(format!("{} gaps never ended", s.open_gaps));
    }
    let mut theory = "≤ 1 leader".to_string();
    if partitions_only {
        let (lo, hi) = partition_gaps(margin, watch);
        theory += &format!("; gaps in [{:.2}, {:.2}] s", own_s(lo, scale), own_s(hi, scale));
        if let Some(t) = s.takeover_max_ms {
            theory += &format!(", each up to its takeover's own look and acquire (at most {t:.2} ms as run)");
        }
        // Each gap to the start of the look that ended it, where the theory
        // puts the watcher's tick: the round trips after it are real time.
        let upto = s.gap_before_takeover_max_ms.or(s.gap_max_ms);
        wrong.extend(outside_by(s.gap_min_ms, upto, (lo, hi), scale));
    }
    let verdict = if wrong.is_empty() { "✓ inside".to_string() } else { format!("✗ {}", wrong.join(", ")) };
    (theory, verdict)
}

/// The gaps a partitioned leader with a local deadline leaves, ms as run:
/// it steps down `margin` before its grant ends; a watcher's tick sees the
/// grant gone at most a watch interval (and a server's millisecond) after
/// that. The tick is where the watcher's look begins: its read and its
/// acquire come after it, and the gap ends when the acquire returns, so a
/// gap is held to this bound up to that look (`Gap::takeover_us`).
fn partition_gaps(margin: f64, watch: f64) -> (f64, f64) {
    (margin, margin + watch + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitioned_leaders_gap_includes_the_takeovers_own_read_and_acquire() {
        // results/network's partition-leader at 0.1: a 1 s margin and a 3 s
        // watch are 100 ms and 300 ms as run; a gap of 301.489 ms is past
        // the tick and the server's millisecond by the takeover's own read
        // and acquire, which a bound without them calls a violation.
        let (lo, hi) = partition_gaps(100.0, 300.0);
        assert_eq!((lo, hi), (100.0, 401.0));
        let bound = partition_gaps(0.0, 300.0);
        assert_eq!(bound, (0.0, 301.0));
        // Held to the bound whole, the gap is outside; up to the start of
        // the look that ended it (0.56 ms before its end), it is inside.
        assert!(!outside_by(Some(293.0), Some(301.489), bound, 0.1).is_empty());
        assert!(outside_by(Some(293.0), Some(301.489 - 0.56), bound, 0.1).is_empty());
        // A gap whose tick itself came late is still outside.
        assert!(!outside_by(Some(293.0), Some(302.0 - 0.56), bound, 0.1).is_empty());
    }

    #[test]
    fn a_gap_outside_its_bound_says_by_how_much_in_digits_that_show_it() {
        // results/network's partition-leader: 301.489 ms as run against a
        // bound of 301.0 ms, at time scale 0.1, once read "2.93–3.01 s".
        assert_eq!(
            outside_by(Some(293.0), Some(301.489), (0.0, 301.0), 0.1),
            ["gaps up to 3.0149 s > 3.0100 s, by 4.9 ms of own time"]
        );
        assert_eq!(
            outside_by(Some(99.0), Some(150.0), (100.0, 200.0), 1.0),
            ["gaps from 0.0990 s < 0.1000 s, by 1.0 ms of own time"]
        );
        assert!(outside_by(Some(100.0), Some(200.0), (100.0, 200.0), 1.0).is_empty(), "the bound is closed");
        // An overshoot of 30 µs at time scale 1 still shows.
        assert_eq!(
            outside_by(None, Some(13_000.03), (6_000.0, 13_000.0), 1.0),
            ["gaps up to 13.000030 s > 13.000000 s, by 0.030 ms of own time"]
        );
        assert!(outside_by(None, None, (100.0, 200.0), 1.0).is_empty());
    }
}
