//! etcd, run by the harness itself (one member on loopback): the same core
//! properties as every other substrate, with etcd's own bound.
//!
//! etcd's TTLs are whole seconds, so these run in real time with a 2 s
//! lease renewed and watched every 500 ms. A lease that runs out is not
//! gone at once: etcd's lessor looks for expired leases every 500 ms and
//! revokes them through Raft, so the key can outlive the lease by up to
//! `SLACK` (docs/etcd.md).

use crate::helper::{Lab, Row};

pub const LEASE: f64 = 2000.0;
pub const RENEW: f64 = 500.0;
pub const WATCH: f64 = 500.0;
/// The lessor's 500 ms loop and the Raft round of the revocation.
pub const SLACK: f64 = 550.0;
pub const TOL: f64 = 25.0;

/// Three workers: the leader is sent SIGTERM at 2.1 s and the next leader
/// SIGKILL at 5.15 s (both clear of the 500 ms ticks), then nothing for
/// longer than a lease.
pub fn term_then_kill(kind: &str, watch_by: &str) -> String {
    format!(
        "name: core-{kind}\nworkers: 3\nduration: 9s\nseed: 11\nlease: 2s\nrenew: 500ms\nwatch: 500ms\n\
         substrate: {{kind: {kind}, managed: true}}\nworker:\n  fencing_tokens: true\n  watch_by: {watch_by}\n\
         faults:\n  - at: 2.1s\n    target: leader\n    action: term\n  - at: 5.15s\n    target: leader\n    action: kill\n"
    )
}

/// One trial of `term_then_kill`: its row, its gaps, its events.
pub fn gaps(lab: &Lab, kind: &str, watch_by: &str) -> (Row, Vec<Row>, Vec<Row>) {
    let file = lab.file("core.yaml", &term_then_kill(kind, watch_by));
    let run = lab.run(file).trials(1).output().expect_code(0);
    (run.table("trials.csv").remove(0), run.table("gaps.csv"), run.table("events.csv"))
}

/// The fencing tokens of the grants, in order: etcd's revisions.
fn tokens(events: &[Row]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.get("event") == "acquired")
        .map(|e| {
            let detail: serde_json::Value = serde_json::from_str(e.get("detail")).expect("detail is JSON");
            detail["token"].as_u64().expect("a token")
        })
        .collect()
}

#[test]
fn etcd_keeps_one_leader_releases_on_term_and_fails_over_after_its_lessor_revokes() {
    let lab = Lab::new();
    let (trial, gaps, events) = gaps(&lab, "etcd", "poll");
    assert_eq!(trial.get("max_leaders"), "1", "two leaders without a race: {trial:?}");
    assert_eq!(gaps.len(), 2, "one gap per fault: {gaps:?}");
    let (term, kill) = (&gaps[0], &gaps[1]);
    assert_eq!((term.get("cause"), kill.get("cause")), ("term", "kill"));
    assert!(gaps.iter().all(|g| g.get("ended") == "true"), "a gap never ended: {gaps:?}");
    // Release revokes the lease: the next watch tick finds the key gone.
    let t = term.f64("duration_ms");
    assert!(t <= WATCH + TOL, "gap after SIGTERM {t} ms > watch {WATCH} ms");
    // Crash: the lease runs out (from the last renewal, at most `renew`
    // before the kill), the lessor revokes it within its slack, and the
    // next watch tick sees the key gone.
    let k = kill.f64("duration_ms");
    let (lo, hi) = (LEASE - RENEW, LEASE + SLACK + WATCH);
    assert!(k >= lo - TOL && k <= hi + TOL, "gap after SIGKILL {k} ms outside [{lo}, {hi}] ms");
    // Each grant's token is a revision of the store: strictly increasing.
    let tokens = tokens(&events);
    assert_eq!(tokens.len(), 3, "three grants: {tokens:?}");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens not increasing: {tokens:?}");
}
