//! Replicated lease services in a suite's README: one row per experiment
//! (service × scenario) with its double grants, double believers, gaps,
//! recovery and fencing tokens, and the theory of each beside it.

use super::cells::{MdTable, double_grant_rate, escape, name, own_s, rate, recovery};
use super::summary::Measured;
use super::summary::Summary;
use crate::model::{Action, Experiment, Kind};

/// The service as a reader names it.
fn service(exp: &Experiment) -> String {
    let s = &exp.substrate;
    match s.kind {
        Kind::Etcd => format!("etcd, {} members", s.members),
        Kind::Redlock => format!("Redlock, {} Redis servers", s.members),
        _ if s.sync_replicas > 0 => {
            format!("Redis, {} replica(s), 3 Sentinels, WAIT {}", s.members - 1, s.sync_replicas)
        }
        _ => format!("Redis, {} replica(s), 3 Sentinels", s.members - 1),
    }
}

/// Whether the fencing tokens told the grants apart.
fn tokens(s: &Summary) -> String {
    let d = &s.network.double_grants;
    if d.untokened > 0 {
        "none: no token to refuse the stale holder's writes".to_string()
    } else if d.token_inversions == 0 {
        "every grant's token above all before it: a store that checks them refuses the stale holder".to_string()
    } else {
        format!("{} grants not above an earlier token", d.token_inversions)
    }
}

/// The roll-up: a row per replicated experiment. Empty without one.
pub fn table(runs: &[&Measured<'_>]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut t = MdTable::new(&[
        "experiment",
        "service",
        "double grants (95 % CI) [longest]",
        "two believers (95 % CI)",
        "gaps: median [min–max]",
        "recovery after heal, longest",
        "fencing tokens",
        "theory",
        "verdict",
    ]);
    for m in runs {
        let (exp, s) = (m.exp, &m.summary);
        let scale = exp.time_scale;
        let secs = |ms: f64| format!("{:.2} s", own_s(ms, scale));
        let d = &s.network.double_grants;
        let grants = format!(
            "{}{}",
            double_grant_rate(s),
            if d.trials > 0 { format!(" [{}]", secs(d.definite_max_us as f64 / 1000.0)) } else { String::new() }
        );
        let gaps = match (s.gap_p50_ms, s.gap_min_ms, s.gap_max_ms) {
            (Some(p), Some(a), Some(b)) => format!("{} [{:.2}–{:.2}]", secs(p), own_s(a, scale), own_s(b, scale)),
            _ => "none".to_string(),
        };
        let (theory, verdict) = theory(exp, s);
        t.row(vec![
            name(m),
            service(exp),
            grants,
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            gaps,
            recovery(s, scale),
            tokens(s),
            escape(&theory),
            escape(&verdict),
        ]);
    }
    format!(
        "\n## Lease services that split\n\nEach service run by the harness per trial, every link through its proxy. \
         Double grant: the service granting the lease to two workers at once, each grant counted for the least it \
         can have lasted (definite; a lost reply's possible ones are in network.csv). Two believers: two workers \
         that believed they led at once. Recovery: from the last heal to one leader and one grant, for good. \
         Times in the experiments' own time.\n\n{}",
        t.render()
    )
}

/// A replicated service cut in two: the theory of the double grant.
/// Redis: the side without the primary has it failed over after
/// `failover_after` and Sentinel's election, then waits out the lease the
/// promoted replica was last told of; the cut-off primary goes on granting
/// until it hears of the failover, after the heal. etcd: a side without a
/// quorum grants nothing, so never twice; a cut-off Raft leader costs an
/// election and a whole lease (leases are reset on a leader change).
/// Redlock: a server whose clock jumps lets a majority go free under a
/// holder's validity; a paused holder is a double believer, not a double
/// grant.
pub(super) fn theory(exp: &Experiment, s: &Summary) -> (String, String) {
    let scale = exp.time_scale;
    let lease = exp.lease.lease.as_ms_f64();
    let twice = s.network.double_grants.trials;
    if exp.substrate.kind == crate::model::Kind::Redlock {
        let measured =
            format!("double grants in {twice}/{} trials, two believers in {}/{}", s.n, s.double_leader_trials, s.n);
        return if exp.fault_kinds().any(|f| f.action == Action::Skew) {
            ("a double grant whenever a watcher looks between the jump and the leader's next renewal; no token tells the grants apart".to_string(), measured)
        } else {
            ("no double grant (the servers' keys ran out), two believers after a pause longer than the lease; no token to refuse the stale one".to_string(), measured)
        };
    }
    let Some(cut) = exp.fault_kinds().find(|f| f.action == Action::Partition) else {
        return (String::new(), String::new());
    };
    if exp.substrate.kind == crate::model::Kind::Etcd {
        let mut wrong = Vec::new();
        if twice > 0 {
            wrong.push(format!("double grants in {twice}/{}", s.n));
        }
        let mut theory = "no double grant (a side without a quorum grants nothing)".to_string();
        if exp.worker.belief == crate::model::Belief::LocalDeadline {
            // From the holder's deadline (a margin before its last grant
            // ends) to the others' grant: the lessor's loop and a watch tick
            // later; where the Raft leader was cut off, the lease began
            // again at the election, up to a renew interval after the last
            // keep-alive, and the election itself (1 s allowed).
            let margin = exp.worker.belief_margin.least().as_ms_f64();
            let widest = exp.worker.belief_margin.most().as_ms_f64();
            let slack = crate::check::ETCD_EXPIRY_SLACK_US as f64 / 1000.0;
            let watch = exp.lease.watch.as_ms_f64();
            let elected = if cut.target == crate::model::Target::PrimarySide {
                exp.lease.renew.as_ms_f64() + 1000.0
            } else {
                0.0
            };
            let (lo, hi) = (margin, widest + elected + slack + watch);
            theory += &format!("; gaps in [{:.2}, {:.2}] s", own_s(lo, scale), own_s(hi, scale));
            if let (Some(min), Some(max)) = (s.gap_min_ms, s.gap_max_ms)
                && (min < lo || max > hi)
            {
                wrong.push(format!("gaps {:.2}–{:.2} s", own_s(min, scale), own_s(max, scale)));
            }
        }
        let verdict = if wrong.is_empty() {
            "as the theory says: a consistent service grants once".to_string()
        } else {
            wrong.join("; ")
        };
        return (theory, verdict);
    }
    let after = exp.substrate.failover_after_of(exp.lease.lease).as_ms_f64();
    let Some(len) = cut.duration.as_ref().and_then(|p| match p {
        crate::model::PauseLen::Fixed(d) => Some(d.as_ms_f64()),
        _ => None,
    }) else {
        return (String::new(), String::new());
    };
    let needed = after + lease;
    if exp.substrate.sync_replicas > 0 {
        let verdict =
            if twice == 0 { "no double grant".to_string() } else { format!("double grants in {twice}/{} trials", s.n) };
        return (
            "no double grant the workers were told of: a renewal the replica never had fails; the promoted primary has no replica to acknowledge an acquire until the old one rejoins".to_string(),
            verdict,
        );
    }
    if cut.target == crate::model::Target::PrimarySide && len > needed {
        let theory = format!(
            "a double grant: the cut ({:.1} s) outlasts failover_after + lease ({:.1} s), plus Sentinel's election",
            own_s(len, scale),
            own_s(needed, scale)
        );
        let verdict = if twice == s.n {
            "as the theory says: a store that splits grants twice".to_string()
        } else {
            format!("{}/{} trials without one", s.n - twice, s.n)
        };
        (theory, verdict)
    } else {
        (String::new(), String::new())
    }
}
