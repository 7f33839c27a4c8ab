//! Lock-file faults and pauses, end to end, at time scale 0.05 (lease
//! 450 ms, renew and watch 150 ms).

use crate::helper::{Finished, Lab, Row, Timing, repo};
use crate::this_test;

const SCALE: f64 = 0.05;

#[test]
fn a_zero_byte_lock_file_wedges_the_blogs_worker() {
    let lab = Lab::new();
    let run = lab
        .run(repo().join("experiments/blog/empty-lock-file.yaml"))
        .scale(0.05)
        .trials(2)
        .jobs(2)
        .output()
        .expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("wedged"), "true", "{t:?}");
        assert_eq!(t.get("first_leader_ms"), "", "nobody may ever lead: {t:?}");
    }
    // The workers were alive and trying the whole time.
    let events = run.table("events.csv");
    assert!(events.iter().filter(|e| e.get("event") == "unreadable").count() >= 3 * 10);
}

#[test]
fn a_stale_lease_of_a_dead_pid_is_taken_over() {
    let lab = Lab::new();
    let file = lab.file(
        "stale.yaml",
        "name: stale\nworkers: 3\nduration: 30s\nfaults:\n  - at: 10.5s\n    action: lock-stale\nexpect:\n  wedged: false\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).jobs(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("wedged"), "false", "{t:?}");
    }
    let events = run.table("events.csv");
    // The leader reads a lease naming another pid and steps down; a watcher
    // sees it expired and takes over (or, if another watcher removed it
    // first, finds no file and acquires it).
    for trial in ["1", "2"] {
        let of_trial = |kind: &str| {
            events.iter().filter(|e| e.get("trial") == trial && e.get("event") == kind).cloned().collect::<Vec<_>>()
        };
        let stepped = of_trial("stepped_down");
        assert!(stepped.iter().any(|e| e.get("detail").contains("other-holder")), "{stepped:?}");
        let fault_ms = of_trial("fault")[0].f64("t_ms");
        assert!(of_trial("acquired").iter().any(|e| e.f64("t_ms") > fault_ms), "nobody led after the stale lease");
    }
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`). Each judges only the trials the machine did
/// not disturb beyond its tolerance (`Timing`).
mod alone {
    use super::*;

    /// Run `yaml` (with the timing's budgets) as 2 trials: the undisturbed
    /// ones, the run's events, and the run.
    fn timed(lab: &Lab, timing: &Timing, yaml: &str) -> Option<(Vec<Row>, Vec<Row>, Finished)> {
        let file = lab.file("timing.yaml", &format!("{yaml}{}", timing.yaml(SCALE)));
        let run = lab.run(&file).scale(SCALE).trials(2).jobs(2).output().expect_code(0);
        let trials = run.table("trials.csv");
        let calm = timing.undisturbed(&trials, 1)?.into_iter().cloned().collect();
        Some((calm, run.table("events.csv"), run))
    }

    fn of_trial<'a>(events: &'a [Row], t: &Row, kind: &str) -> Vec<&'a Row> {
        events.iter().filter(|e| e.get("trial") == t.get("trial") && e.get("event") == kind).collect()
    }

    #[test]
    fn expiring_an_unreadable_file_by_age_recovers_from_the_zero_byte_file() {
        let lab = Lab::alone();
        // A bug (no recovery, or one a tick late) is off by a watch: 150 ms.
        let Some(timing) = Timing::new(this_test!(), 25.0, 150.0) else { return };
        let yaml = "name: age\nworkers: 3\nduration: 30s\ninitial_lock: empty\nworker:\n  unreadable: expire-age\n";
        let Some((trials, _, run)) = timed(&lab, &timing, yaml) else { return };
        for t in trials {
            assert_eq!(t.get("wedged"), "false", "{t:?}");
            // The file is older than the lease after 450 ms; a watcher
            // notices at its next tick: lease + watch.
            let first = t.f64("first_leader_ms");
            assert!(
                first <= 450.0 + 150.0 + timing.tol,
                "first leader at {first} ms (± {:.1}): {t:?}\n{}",
                timing.tol,
                run.story(t.get("trial"))
            );
            // max_leaders may be 2: two watchers that both find the file too
            // old race remove-then-create, the same hole as the expiry takeover.
        }
    }

    #[test]
    fn a_paused_leader_that_outlives_its_lease_is_a_double_leader_after_it_resumes() {
        let lab = Lab::alone();
        // A bug (no step-down at the first renewal after the resume) is off
        // by a renewal interval, 150 ms.
        let Some(timing) = Timing::new(this_test!(), 25.0, 100.0) else { return };
        // Pause the leader at 11.5 s (between renewals) for 15 s: its lease
        // (9 s) runs out, a watcher takes over (18 or 21 s); at 26.5 s it
        // resumes still believing it leads, until its renewal (the tick it
        // missed while stopped, at once, or the next at 27 s at the latest)
        // reads the file and sees another pid. Two workers, so that no
        // takeover race between watchers adds a double leader of its own.
        let yaml = "name: pause\nworkers: 2\nduration: 30s\nfaults:\n  - at: 11.5s\n    target: leader\n    action: pause\n    duration: 15s\n";
        let Some((trials, events, run)) = timed(&lab, &timing, yaml) else { return };
        for t in &trials {
            assert_eq!(t.get("max_leaders"), "2", "{t:?}");
            // While paused it believes but is not active: the double-leader
            // time counts from the takeover, the active part only after SIGCONT.
            let believing = t.f64("double_leader_ms");
            let active = t.f64("double_leader_active_ms");
            assert!(
                believing > 5500.0 * SCALE - timing.tol,
                "believes from the takeover (18 or 21 s) past the resume (26.5 s) scaled: {t:?}\n{}",
                run.story(t.get("trial"))
            );
            assert!(active > 0.0, "both active after the resume: {t:?}\n{}", run.story(t.get("trial")));
            assert!(
                active <= 150.0 + timing.tol,
                "it steps down at its first renewal tick after resuming (± {:.1}): {t:?}\n{}",
                timing.tol,
                run.story(t.get("trial"))
            );
            let stepped = of_trial(&events, t, "stepped_down");
            assert_eq!(stepped.len(), 1, "the resumed leader steps down: {stepped:?}");
        }
    }

    #[test]
    fn a_corrupted_lock_file_makes_the_leader_step_down_and_wedges_the_blogs_worker() {
        let lab = Lab::alone();
        // A bug (a failed renewal too few or too many) is off by a renewal.
        let Some(timing) = Timing::new(this_test!(), 25.0, 150.0) else { return };
        let yaml = "name: corrupt\nworkers: 3\nduration: 30s\nfaults:\n  - at: 6.5s\n    action: lock-corrupt\n";
        let Some((trials, events, run)) = timed(&lab, &timing, yaml) else { return };
        for t in &trials {
            assert_eq!(t.get("wedged"), "true", "nobody can parse or O_EXCL-create: {t:?}");
            let stepped = of_trial(&events, t, "stepped_down");
            assert_eq!(stepped.len(), 1, "{stepped:?}");
            assert!(stepped[0].get("detail").contains("failures"), "{stepped:?}");
            // Three failed renewals (at 9, 12, 15 s) after the fault at 6.5 s.
            let at = stepped[0].f64("t_ms");
            assert!(
                (at - 15_000.0 * SCALE).abs() < timing.tol,
                "steps down at its third failed renewal, 750 ms (± {:.1}): {t:?}\n{}",
                timing.tol,
                run.story(t.get("trial"))
            );
        }
    }

    #[test]
    fn a_watcher_whose_clock_runs_ahead_takes_over_a_lease_that_is_still_valid() {
        let lab = Lab::alone();
        // Worker 1 starts 1 s later with its wall clock 10 s ahead: at its
        // first watch (4 s) it reads the leader's leaseUntil (at most 9 s
        // ahead of the leader's clock) as already past, and takes over.
        // With true clocks no takeover can come before the lease runs out at
        // 9 s (450 ms scaled): the bug this catches is 250 ms off.
        let Some(timing) = Timing::new(this_test!(), 25.0, 250.0) else { return };
        let yaml = "name: skew\nworkers: 2\nduration: 8s\nstart: staggered\nstagger: 1s\n\
                    worker:\n  expiry: exact\n  clock_offset: [0s, 10s]\n";
        let Some((trials, events, run)) = timed(&lab, &timing, yaml) else { return };
        for t in &trials {
            assert_eq!(t.get("max_leaders"), "2", "{t:?}");
            let takeover = of_trial(&events, t, "acquired")
                .into_iter()
                .find(|e| e.get("detail").contains("takeover"))
                .unwrap_or_else(|| panic!("no takeover: {t:?}"));
            assert_eq!(takeover.get("worker"), "1");
            let at = takeover.f64("t_ms");
            // Its start is measured from the stagger's release, ms before.
            assert!(
                (4000.0 * SCALE - 10.0..=4000.0 * SCALE + timing.tol).contains(&at),
                "takeover at {at} ms, its first watch at 200 ms (+ {:.1}): {t:?}\n{}",
                timing.tol,
                run.story(t.get("trial"))
            );
        }
    }
}
