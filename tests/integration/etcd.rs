//! etcd, run by the harness itself (one member on loopback): the same core
//! properties as every other substrate, with etcd's own bound.
//!
//! etcd's TTLs are whole seconds, so these run in real time with a 2 s
//! lease renewed and watched every 500 ms. A lease that runs out is not
//! gone at once: etcd's lessor looks for expired leases every 500 ms and
//! revokes them through Raft, so the key can outlive the lease by up to
//! `SLACK` (docs/etcd.md).

use crate::helper::{Lab, Row};

const LEASE: f64 = 2000.0;
const RENEW: f64 = 500.0;
const WATCH: f64 = 500.0;
/// The lessor's 500 ms loop and the Raft round of the revocation.
const SLACK: f64 = 550.0;
const TOL: f64 = 25.0;
/// From a pushed deletion to the new grant: the push, a lease grant and a
/// transaction, each a round trip on loopback (and a Raft round for the
/// two writes).
const PUSHED: f64 = 100.0;

/// Three workers: the leader is sent SIGTERM at 2.1 s and the next leader
/// SIGKILL at 5.15 s (both clear of the 500 ms ticks), then nothing for
/// longer than a lease.
fn term_then_kill(watch_by: &str) -> String {
    let watch_by = if watch_by == "poll" { String::new() } else { format!("\n  watch_by: {watch_by}") };
    format!(
        "name: etcd-core\nworkers: 3\nduration: 9s\nseed: 11\nlease: 2s\nrenew: 500ms\nwatch: 500ms\n\
         substrate: {{kind: etcd, managed: true}}\nworker:\n  fencing_tokens: true{watch_by}\n\
         faults:\n  - at: 2.1s\n    target: leader\n    action: term\n  - at: 5.15s\n    target: leader\n    action: kill\n"
    )
}

fn gaps(lab: &Lab, watch_by: &str) -> (Row, Vec<Row>, Vec<Row>) {
    let file = lab.file("core.yaml", &term_then_kill(watch_by));
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
    let (trial, gaps, events) = gaps(&lab, "poll");
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

#[test]
fn with_push_watches_the_crash_gap_has_no_watch_term_and_a_release_is_taken_at_once() {
    let lab = Lab::new();
    let (trial, gaps, events) = gaps(&lab, "push");
    assert_eq!(trial.get("max_leaders"), "1", "two leaders without a race: {trial:?}");
    assert_eq!(gaps.len(), 2, "one gap per fault: {gaps:?}");
    let (term, kill) = (&gaps[0], &gaps[1]);
    // Both takeovers were told, not found at a tick.
    let told: Vec<&Row> = events.iter().filter(|e| e.get("event") == "notified").collect();
    assert!(told.len() >= 2, "a push for the release and one for the expiry: {told:?}");
    assert!(told.iter().all(|e| e.get("detail").contains("delete")), "{told:?}");
    // Release: the revocation is pushed; the takeover is one grant away,
    // well inside the 500 ms a poll could take.
    let t = term.f64("duration_ms");
    assert!(t <= PUSHED + TOL, "gap after SIGTERM {t} ms: not pushed");
    // Crash: [lease − renew, lease + the lessor's slack], no watch term.
    let k = kill.f64("duration_ms");
    let (lo, hi) = (LEASE - RENEW, LEASE + SLACK);
    assert!(k >= lo - TOL && k <= hi + TOL, "gap after SIGKILL {k} ms outside [{lo}, {hi}] ms");
}
