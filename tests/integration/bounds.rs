//! Leaderless gaps against the theoretical bounds of docs/metrics.md, with real
//! workers and real signals at time scale 0.05 (lease 450 ms, renew and
//! watch 150 ms, expiry resolution 50 ms).
//!
//! Tolerance: 25 ms. Timer wake-ups are accurate to ~1 ms here, but with the
//! suite running tests in parallel on 2 cores a worker's tick can be delayed
//! by a few ms. Every real bug this guards against (a missed tick, the
//! wrong comparison, a lost release) moves a gap by a whole interval
//! (≥ 50 ms at this scale), far outside the tolerance.

use crate::helper::{Lab, Row};

const SCALE: f64 = 0.05;
const LEASE: f64 = 9000.0 * SCALE;
const RENEW: f64 = 3000.0 * SCALE;
const WATCH: f64 = 3000.0 * SCALE;
const RESOLUTION: f64 = 1000.0 * SCALE;
const TOL: f64 = 25.0;

fn one_fault(action: &str) -> String {
    // A fault at a seeded uniform moment in [12.2 s, 14.8 s): almost a full
    // renewal period, so nearly every phase between kill and renewal is
    // sampled. The 0.2 s (10 ms scaled) kept clear of each renewal tick is
    // deliberate: a kill that lands inside the renewal's truncate-then-write
    // leaves an empty lock file and wedges the system (crash-mid-renewal),
    // and on a loaded machine that window widens to milliseconds.
    format!(
        "name: {action}-bounds\nworkers: 3\nduration: 30s\nseed: 7\nfaults:\n  - at: 12.2s\n    jitter: 2.6s\n    target: leader\n    action: {action}\n"
    )
}

fn gaps_by_trial(gaps: &[Row], trials: u32) -> Vec<Row> {
    for t in 1..=trials {
        let n = gaps.iter().filter(|g| g.get("trial") == t.to_string()).count();
        assert_eq!(n, 1, "trial {t} should have exactly one gap: {gaps:?}");
    }
    gaps.to_vec()
}

#[test]
fn sigkill_gap_lies_within_lease_minus_renew_and_lease_plus_watch_plus_resolution() {
    let lab = Lab::alone();
    let file = lab.file("kill.yaml", &one_fault("kill"));
    let trials = 6;
    let run = lab.run(&file).scale(SCALE).trials(trials).jobs(3).output().expect_code(0);
    let (lo, hi) = (LEASE - RENEW, LEASE + WATCH + RESOLUTION);
    let events = run.table("events.csv");
    for g in gaps_by_trial(&run.table("gaps.csv"), trials) {
        let d = g.f64("duration_ms");
        assert_eq!(g.get("cause"), "kill", "{g:?}");
        assert_eq!(g.get("ended"), "true", "{g:?}");
        assert!(d >= lo - TOL && d <= hi + TOL, "gap {d} ms outside [{lo}, {hi}] ± {TOL}: {g:?}");
        // The decomposition: fault → expiry → takeover. It starts at the
        // fault, the gap at the observed death, which the machine may
        // delay (well under a ms when idle, 22 ms once under a
        // hypervisor's steal): the two differ by exactly that delay.
        let parts = g.f64("lease_remainder_ms") + g.f64("detection_lag_ms");
        let of_trial = |kind: &str, detail: &str| {
            events
                .iter()
                .find(|e| {
                    e.get("trial") == g.get("trial") && e.get("event") == kind && e.get("detail").contains(detail)
                })
                .map(|e| e.f64("t_ms"))
        };
        let (Some(sent), Some(died)) = (of_trial("fault", "\"kill\""), of_trial("exit", "SIGKILL")) else {
            panic!("a kill and its death: {g:?}")
        };
        assert!(
            (parts - d - (died - sent)).abs() < 0.01,
            "remainder + lag = {parts} vs gap {d}, kill sent at {sent} ms and the death seen at {died} ms: {g:?}"
        );
        assert!(g.f64("lease_remainder_ms") <= LEASE + TOL, "{g:?}");
    }
    // No assertion on max_leaders here: when two watchers see the expiry
    // in the same tick, one can remove the other's fresh lock file and
    // both win O_EXCL (the blog's "safe" takeover race). That is a finding
    // of the harness, not a flake of this test.
}

#[test]
fn sigterm_gap_is_at_most_one_watch_interval() {
    let lab = Lab::alone();
    let file = lab.file("term.yaml", &one_fault("term"));
    let trials = 6;
    let run = lab.run(&file).scale(SCALE).trials(trials).jobs(3).output().expect_code(0);
    for g in gaps_by_trial(&run.table("gaps.csv"), trials) {
        let d = g.f64("duration_ms");
        assert_eq!(g.get("cause"), "term", "{g:?}");
        assert!(d <= WATCH + TOL, "gap {d} ms exceeds watch {WATCH} + {TOL}: {g:?}");
    }
}

#[test]
fn the_blog_sigkill_experiment_holds_its_own_bounds_at_scale_0_1() {
    // experiments/blog/sigkill-gap.yaml carries `expect:` bounds; exit 0
    // means every gap was in [6 s, 13 s] (scaled) and nobody wedged.
    let lab = Lab::alone();
    let file = crate::helper::repo().join("experiments/blog/sigkill-gap.yaml");
    let run = lab.run(&file).scale(0.1).trials(3).jobs(3).output().expect_code(0);
    // Same phase as the blog: 6.53 s of paid-for lease, then the watch.
    for g in run.table("gaps.csv") {
        let remainder = g.f64("lease_remainder_ms");
        assert!((remainder - 653.0).abs() < 10.0, "remainder {remainder} ms, blog's is 6.53 s scaled: {g:?}");
    }
}
