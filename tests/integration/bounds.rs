//! Leaderless gaps against the theoretical bounds of docs/metrics.md, with real
//! workers and real signals at time scale 0.05 (lease 450 ms, renew and
//! watch 150 ms, expiry resolution 50 ms).
//!
//! Tolerance: 25 ms, or what the machine's measured wake-ups and stops make
//! of it (`Timing`), judged over the trials the machine did not disturb by
//! more. Every real bug this guards against (a missed tick, the wrong
//! comparison, a lost release) moves a gap by a whole resolution or
//! interval (≥ 50 ms at this scale): a tolerance that large would pass
//! them, and the test skips instead.

use crate::helper::{Finished, Lab, Row, Timing};
use crate::this_test;

const SCALE: f64 = 0.05;
const LEASE: f64 = 9000.0 * SCALE;
const RENEW: f64 = 3000.0 * SCALE;
const WATCH: f64 = 3000.0 * SCALE;
const RESOLUTION: f64 = 1000.0 * SCALE;
const TOL: f64 = 25.0;
/// The smallest error of the bugs these tests catch.
const BUG: f64 = RESOLUTION;

fn one_fault(action: &str, timing: &Timing) -> String {
    // A fault at a seeded uniform moment between the renewal ticks at 12 s
    // and 15 s, so that many phases between kill and renewal are sampled,
    // kept clear of each tick by more than the tolerance (at least 0.2 s,
    // 10 ms scaled). A kill that lands inside the renewal's
    // truncate-then-write leaves an empty lock file and wedges the system
    // (crash-mid-renewal): only a renewal the machine stalled or woke late
    // by more than the tolerance can reach the kill, and the harness names
    // that trial disturbed.
    let clear_ms = ((timing.tol + 1.0) / SCALE).max(200.0).round();
    format!(
        "name: {action}-bounds\nworkers: 3\nduration: 30s\nseed: 7\nfaults:\n  - at: {}ms\n    jitter: {}ms\n    target: leader\n    action: {action}\n",
        12_000.0 + clear_ms,
        3_000.0 - 2.0 * clear_ms
    )
}

/// Six trials of `one_fault(action)`, judged by `timing`: the gaps of the
/// undisturbed ones (at least three), and the run. The machine is the
/// caller's, alone.
fn six_trials(lab: &Lab, timing: &Timing, action: &str) -> Option<(Vec<Row>, Finished)> {
    let file = lab.file(&format!("{action}.yaml"), &(one_fault(action, timing) + &timing.yaml(SCALE)));
    let run = lab.run(&file).scale(SCALE).trials(6).jobs(3).output().expect_code(0);
    let trials = run.table("trials.csv");
    let calm = timing.undisturbed(&trials, 3)?;
    Some((gaps_by_trial(&run.table("gaps.csv"), &calm), run))
}

/// The gaps of the undisturbed trials, one each.
fn gaps_by_trial(gaps: &[Row], calm: &[&Row]) -> Vec<Row> {
    calm.iter()
        .map(|t| {
            let of: Vec<&Row> = gaps.iter().filter(|g| g.get("trial") == t.get("trial")).collect();
            assert_eq!(of.len(), 1, "trial {} should have exactly one gap: {gaps:?}", t.get("trial"));
            of[0].clone()
        })
        .collect()
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`).
mod alone {
    use super::*;

    #[test]
    fn sigkill_gap_lies_within_lease_minus_renew_and_lease_plus_watch_plus_resolution() {
        let lab = Lab::alone();
        let Some(timing) = Timing::new(this_test!(), TOL, BUG) else { return };
        let Some((gaps, run)) = six_trials(&lab, &timing, "kill") else { return };
        let (lo, hi, tol) = (LEASE - RENEW, LEASE + WATCH + RESOLUTION, timing.tol);
        let events = run.table("events.csv");
        for g in gaps {
            let d = g.f64("duration_ms");
            assert_eq!(g.get("cause"), "kill", "{g:?}");
            assert_eq!(g.get("ended"), "true", "{g:?}");
            assert!(
                d >= lo - tol && d <= hi + tol,
                "gap {d} ms outside [{lo}, {hi}] ± {tol:.1}: {g:?}\n{}",
                run.story(g.get("trial"))
            );
            // The decomposition: fault → expiry → takeover. Both it and the
            // gap start at the kill (the killed leader runs nothing after
            // it), not at the death the harness sees later (well under a ms
            // when idle, 26 ms once under load): they are equal.
            let parts = g.f64("lease_remainder_ms") + g.f64("detection_lag_ms");
            let sent = events
                .iter()
                .find(|e| {
                    e.get("trial") == g.get("trial")
                        && e.get("event") == "fault"
                        && e.get("detail").contains("\"kill\"")
                })
                .map(|e| e.f64("t_ms"))
                .unwrap_or_else(|| panic!("a kill: {g:?}"));
            assert!((g.f64("start_ms") - sent).abs() < 0.01, "the gap starts at the kill, {sent} ms: {g:?}");
            assert!((parts - d).abs() < 0.01, "remainder + lag = {parts} vs gap {d}: {g:?}");
            assert!(g.f64("lease_remainder_ms") <= LEASE + tol, "{g:?}");
        }
        // No assertion on max_leaders here: when two watchers see the expiry
        // in the same tick, one can remove the other's fresh lock file and
        // both win O_EXCL (the blog's "safe" takeover race). That is a finding
        // of the harness, not a flake of this test.
    }

    #[test]
    fn sigterm_gap_is_at_most_one_watch_interval() {
        let lab = Lab::alone();
        let Some(timing) = Timing::new(this_test!(), TOL, BUG) else { return };
        let Some((gaps, run)) = six_trials(&lab, &timing, "term") else { return };
        for g in gaps {
            let d = g.f64("duration_ms");
            assert_eq!(g.get("cause"), "term", "{g:?}");
            assert!(
                d <= WATCH + timing.tol,
                "gap {d} ms exceeds watch {WATCH} + {:.1}: {g:?}\n{}",
                timing.tol,
                run.story(g.get("trial"))
            );
        }
    }

    #[test]
    fn the_blog_sigkill_experiment_holds_its_own_bounds_at_scale_0_1() {
        // experiments/blog/sigkill-gap.yaml carries `expect:` bounds; exit 0
        // means every gap was in [6 s, 13 s] (scaled) and nobody wedged.
        // The remainder is where the kill fell after a renewal: a bug in
        // placing it (the wrong renewal, the wrong delay) moves it by a
        // whole second or interval, 100 ms or more at scale 0.1.
        let lab = Lab::alone();
        let Some(timing) = Timing::new(this_test!(), 10.0, 100.0) else { return };
        let shipped = std::fs::read_to_string(crate::helper::shipped("blog", "sigkill-gap")).unwrap();
        let file = lab.file("sigkill-gap.yaml", &(shipped + &timing.yaml(0.1)));
        let run = lab.run(&file).scale(0.1).trials(3).jobs(3).output().expect_code(0);
        let trials = run.table("trials.csv");
        let Some(calm) = timing.undisturbed(&trials, 1) else { return };
        // Same phase as the blog: 6.53 s of paid-for lease, then the watch.
        for g in gaps_by_trial(&run.table("gaps.csv"), &calm) {
            let remainder = g.f64("lease_remainder_ms");
            assert!(
                (remainder - 653.0).abs() < timing.tol,
                "remainder {remainder} ms, blog's is 6.53 s scaled (± {:.1}): {g:?}",
                timing.tol
            );
        }
    }
}
