//! The harness's own look at the lease (`substrate.observe`), on real
//! processes and a real server: grants as the service gave them, beside
//! what the workers said.

use crate::helper::Lab;

/// Worker 0 takes a real flock on the lock file through flock(1), which
/// holds it for the command it runs; worker 1 says it acquired the lease
/// without taking anything.
const WORKER: &str = r#"if [ "$1" = 0 ]; then
  exec flock -n "$2" sh -c 'echo "{\"event\":\"acquired\"}" >&3; exec sleep 60'
fi
sleep 0.2
echo '{"event":"acquired"}' >&3
exec sleep 60
"#;

#[test]
fn a_program_that_claims_a_lease_the_service_never_gave_it_is_caught() {
    let lab = Lab::new();
    let script = lab.path().join("worker.sh");
    std::fs::write(&script, WORKER).unwrap();
    let exp = lab.file(
        "o.yaml",
        &format!(
            "name: o\nworkers: 2\nduration: 1s\ntrials: 2\nseed: 1\nlease: 300ms\nrenew: 100ms\nwatch: 100ms\n\
             substrate: {{kind: file, observe: true}}\n\
             program:\n  command: [sh, {}, '{{index}}', '{{lock}}']\n  expiry: holder-death\n",
            script.display()
        ),
    );
    let done = lab.run(exp).output().expect_code(0);
    for r in done.table("service.csv") {
        // One grant (worker 0's flock), two who said they acquired, and
        // worker 1's belief from 0.2 s to the end unbacked by the service.
        assert_eq!((r.get("grants"), r.get("acquisitions"), r.get("unclaimed_grants")), ("1", "2", "0"), "{:?}", r.0);
        assert_eq!(r.get("unbacked_beliefs"), "1", "{:?}", r.0);
        assert!(r.f64("unbacked_belief_max_ms") > 500.0, "{:?}", r.0);
    }
    // The service named the holder: the flock(1) process, in worker 0's
    // process group (a look between flock(1)'s create and its lock sees an
    // empty file that names nobody yet).
    let events = done.table("events.csv");
    let held: Vec<_> = events.iter().filter(|e| e.get("event") == "lease_held").collect();
    assert!(held.iter().any(|e| e.get("worker") == "0"), "{events:?}");
    assert!(held.iter().all(|e| ["0", ""].contains(&e.get("worker"))), "{events:?}");
    let summary = done.table("summary-service.csv");
    assert_eq!((summary[0].get("grants"), summary[0].get("unbacked_beliefs")), ("2", "2"));
}

#[test]
fn a_redis_lease_is_seen_granted_once_per_acquisition_and_each_grant_claimed() {
    let lab = Lab::new();
    let exp = lab.file(
        "r.yaml",
        "name: r\nworkers: 3\nduration: 20s\ntrials: 2\nseed: 3\ntime_scale: 0.1\n\
         substrate: {kind: redis, managed: true, observe: true}\n\
         faults:\n  - {at: 8s, target: leader, action: kill}\n",
    );
    let done = lab.run(exp).output().expect_code(0);
    for r in done.table("service.csv") {
        // The first holder's and its successor's at least; a grant per
        // acquisition, each claimed by the worker that said it acquired.
        let grants: usize = r.get("grants").parse().unwrap();
        assert!(grants >= 2, "{:?}", r.0);
        assert_eq!(r.get("acquisitions"), r.get("grants"), "{:?}", r.0);
        assert_eq!(r.get("unclaimed_grants"), "0", "{:?}", r.0);
    }
    let events = std::fs::read_to_string(done.out.join("events.csv")).unwrap();
    assert!(events.contains("lease_held") && events.contains("lease_free"), "{events}");
    assert!(!events.contains(":token"), "the fencing-token counter is no lease:\n{events}");
}
