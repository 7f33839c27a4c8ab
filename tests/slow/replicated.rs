//! A lease service that splits: Redis with a replica and three Sentinels,
//! run by the harness per trial, every link through its proxy. Cut the
//! primary and the leader off from the rest, and the Sentinels promote the
//! replica; the other workers take the lease there while the leader goes
//! on renewing on the old primary: two grants at once, from two members.
//!
//! Sentinel's own timers do not scale, so this runs at a quarter of real
//! time with a failover after 0.5 s of silence: the replica is promoted
//! about a second after the cut, the lease it was told of has run out
//! 2.25 s after the cut, and the partition lasts 5 s.

use crate::helper::{Lab, Row};

const SPLIT: &str = "name: split\nworkers: 3\nduration: 36s\nseed: 7\n\
    substrate: {kind: redis, managed: true, members: 2, failover_after: 2s}\n\
    worker: {fencing_tokens: true}\n\
    faults:\n  - at: 12s\n    target: primary-side\n    action: partition\n    duration: 20s\n";

fn detail(e: &Row) -> serde_json::Value {
    serde_json::from_str(e.get("detail")).expect("detail is JSON")
}

#[test]
fn a_split_redis_grants_the_lease_twice_and_a_fencing_token_tells_the_grants_apart() {
    let lab = Lab::new();
    let run = lab.run(lab.file("split.yaml", SPLIT)).scale(0.25).trials(1).output().expect_code(0);
    let net = run.table("network.csv").remove(0);
    assert!(net.f64("double_grants") >= 1.0, "no double grant: {net:?}\n{}", run.stderr());
    assert!(net.f64("double_grants_across_members") >= 1.0, "{net:?}");
    assert!(net.f64("double_grant_ms") > 0.0, "{net:?}");
    let trial = run.table("trials.csv").remove(0);
    assert_eq!(trial.get("max_leaders"), "2", "two believers as well: {trial:?}");

    // The grants came from both members, to different workers, the later
    // with the higher token.
    let events = run.table("events.csv");
    let grants: Vec<(String, u64, u64)> = events
        .iter()
        .filter(|e| e.get("event") == "acquired")
        .map(|e| {
            let d = detail(e);
            (
                e.get("worker").to_string(),
                d["member"].as_u64().expect("a member"),
                d["token"].as_u64().expect("a token"),
            )
        })
        .collect();
    let first = grants.iter().find(|g| g.1 == 0).expect("a grant by the first primary");
    let promoted = grants.iter().find(|g| g.1 == 1).expect("a grant by the promoted replica");
    assert_ne!(first.0, promoted.0, "two workers: {grants:?}");
    assert!(promoted.2 > first.2, "the promoted replica's token is above the first grant's: {grants:?}");
    let renewed_on_old = events.iter().any(|e| {
        e.get("event") == "renewed"
            && e.get("worker") == first.0
            && detail(e)["member"] == 0
            && e.f64("t_ms")
                > events.iter().find(|p| p.get("event") == "acquired" && detail(p)["member"] == 1).unwrap().f64("t_ms")
    });
    assert!(renewed_on_old, "the cut-off leader renewed on the old primary after the new grant");

    // The partition hit the leader and the primary (a row without a worker).
    let faults = run.table("faults.csv");
    let cut: Vec<&Row> = faults.iter().filter(|f| f.get("action") == "partition").collect();
    assert_eq!(cut.len(), 2, "{faults:?}");
    assert!(cut.iter().any(|f| f.get("worker").is_empty() && !f.get("pid").is_empty()), "{faults:?}");
}

/// etcd's whole-second TTLs: real time, a 2 s lease kept alive every
/// 500 ms. The Raft leader and the holder are cut off at 3 s for 5 s.
const ETCD_SPLIT: &str = "name: etcd-split\nworkers: 3\nduration: 10s\nseed: 7\nlease: 2s\nrenew: 500ms\nwatch: 500ms\n\
    substrate: {kind: etcd, managed: true, members: 3}\n\
    faults:\n  - at: 3s\n    target: primary-side\n    action: partition\n    duration: 5s\n";

#[test]
fn an_etcd_cluster_cut_in_two_grants_once_and_only_after_the_cut_off_lease_is_over() {
    let lab = Lab::new();
    let run = lab.run(lab.file("etcd-split.yaml", ETCD_SPLIT)).trials(1).output().expect_code(0);
    let net = run.table("network.csv").remove(0);
    assert_eq!(net.get("double_grants"), "0", "a consistent service never grants twice: {net:?}");
    let events = run.table("events.csv");
    let faults = run.table("faults.csv");
    let cut = faults.iter().find(|f| f.get("action") == "partition").expect("the cut").f64("actual_ms");
    let holder = faults.iter().find(|f| f.get("action") == "partition" && !f.get("worker").is_empty()).unwrap();
    let next = events
        .iter()
        .find(|e| e.get("event") == "acquired" && e.f64("t_ms") > cut && e.get("worker") != holder.get("worker"))
        .expect("another worker acquires on the majority side");
    // Not before the cut-off lease (2 s, whole again after the election)
    // ran out; by then an election (allowed 1 s on a loaded machine), the
    // lessor's loop (550 ms) and a watch tick (500 ms).
    let after = next.f64("t_ms") - cut;
    assert!((2000.0..=2000.0 + 1000.0 + 550.0 + 500.0 + 100.0).contains(&after), "acquired {after} ms after the cut");
}

/// Redlock's three servers at a quarter of real time, watched every
/// 250 ms: the third server is cut off until the leader's key there has
/// run out; 0.3 s after the leader's renewal at 18 s the second server's
/// clock jumps a whole lease ahead, and a watcher finds a majority free
/// before the leader's next renewal at 21 s. The workers start 100 ms
/// apart: started together, a watcher can win one server of the three in
/// the start race and give it back, and the leader then holds only two,
/// one of them the server about to be cut off (it loses the lease in the
/// cut, as Redlock says it must, and there is no double grant to see).
const REDLOCK_JUMP: &str = "name: redlock-jump\nworkers: 3\nduration: 24s\nseed: 5\nwatch: 250ms\n\
    start: staggered\nstagger: 100ms\n\
    substrate: {kind: redlock, managed: true, members: 3}\n\
    faults:\n  - at: 1s\n    target: member-2\n    action: partition\n    duration: 12s\n  \
    - at: 18.3s\n    target: member-1\n    action: skew\n    by: 9s\n";

#[test]
fn redlock_grants_twice_when_one_servers_clock_jumps() {
    let lab = Lab::new();
    let run = lab.run(lab.file("redlock.yaml", REDLOCK_JUMP)).scale(0.25).trials(1).output().expect_code(0);
    let net = run.table("network.csv").remove(0);
    assert_eq!(net.get("double_grants"), "1", "{net:?}\n{}", run.stderr());
    let events = run.table("events.csv");
    let grants: Vec<&Row> = events.iter().filter(|e| e.get("event") == "acquired").collect();
    assert!(grants.len() >= 2 && grants[0].get("worker") != grants.last().unwrap().get("worker"), "{grants:?}");
    assert!(grants.iter().all(|g| detail(g).get("token").is_none()), "Redlock has no fencing token");
    let jump = run.table("faults.csv").into_iter().find(|f| f.get("action") == "skew").expect("the jump");
    let after = grants.last().unwrap().f64("t_ms") - jump.f64("actual_ms");
    // Within a watch tick (250 ms, 62.5 ms real: the history is in real
    // time) and the operations, allowed 100 ms on a loaded machine.
    assert!((0.0..=62.5 + 100.0).contains(&after), "the second grant came {after} ms after the jump");
    // The first holder hears of it at its next renewal, at 21 s (5.25 s real).
    let first = grants[0].get("worker");
    assert!(
        events.iter().any(|e| e.get("event") == "stepped_down" && e.get("worker") == first && e.f64("t_ms") > 5_200.0),
        "the first holder stepped down at its renewal after the jump"
    );
}
