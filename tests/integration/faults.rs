//! Lock-file faults and pauses, end to end.

use crate::helper::{Lab, repo};

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
fn expiring_an_unreadable_file_by_age_recovers_from_the_zero_byte_file() {
    let lab = Lab::new();
    let file = lab.file(
        "age.yaml",
        "name: age\nworkers: 3\nduration: 30s\ninitial_lock: empty\nworker:\n  unreadable: expire-age\nexpect:\n  wedged: false\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).jobs(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("wedged"), "false", "{t:?}");
        // The file is older than the lease after 450 ms; a watcher notices
        // at its next tick: lease + watch, plus the 25 ms tolerance.
        let first = t.f64("first_leader_ms");
        assert!(first <= 450.0 + 150.0 + 25.0, "first leader at {first} ms: {t:?}");
        // max_leaders may be 2: two watchers that both find the file too old
        // race remove-then-create, the same hole as the expiry takeover.
    }
}

#[test]
fn a_paused_leader_that_outlives_its_lease_is_a_double_leader_after_it_resumes() {
    let lab = Lab::new();
    // Pause the leader at 11.5 s (between renewals) for 15 s: its lease (9 s) runs out, a watcher
    // takes over (~21 s); at 26.5 s it resumes still believing it leads, until
    // its next renewal reads the file and sees another pid. Two workers, so
    // that no takeover race between watchers adds a double leader of its own.
    let file = lab.file(
        "pause.yaml",
        "name: pause\nworkers: 2\nduration: 30s\nfaults:\n  - at: 11.5s\n    target: leader\n    action: pause\n    duration: 15s\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).jobs(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("max_leaders"), "2", "{t:?}");
        // While paused it believes but is not active: the double-leader time
        // counts from the takeover, the active part only after SIGCONT.
        let believing = t.f64("double_leader_ms");
        let active = t.f64("double_leader_active_ms");
        assert!(believing > 200.0, "believes from ~21 s to ~27 s scaled (~300 ms): {t:?}");
        assert!(active > 0.0, "both active after the resume: {t:?}");
        assert!(active <= 150.0 + 25.0, "it steps down at its first renewal tick after resuming: {t:?}");
    }
    let gaps = run.table("gaps.csv");
    assert!(gaps.iter().all(|g| g.get("cause") == "stop"), "{gaps:?}");
    let stepped = run.table("events.csv").into_iter().filter(|e| e.get("event") == "stepped_down").count();
    assert!(stepped >= 2, "the resumed leader must step down in each trial");
}

#[test]
fn a_corrupted_lock_file_makes_the_leader_step_down_and_wedges_the_blogs_worker() {
    let lab = Lab::new();
    let file = lab.file(
        "corrupt.yaml",
        "name: corrupt\nworkers: 3\nduration: 30s\nfaults:\n  - at: 6.5s\n    action: lock-corrupt\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).jobs(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("wedged"), "true", "nobody can parse or O_EXCL-create: {t:?}");
    }
    for g in run.table("gaps.csv") {
        assert_eq!(g.get("cause"), "lock-corrupt", "{g:?}");
        // Three failed renewals (at 9, 12, 15 s) after the fault at 6.5 s.
        let start = g.f64("start_ms");
        assert!((start - 15_000.0 * 0.05).abs() < 25.0, "steps down at its third failed renewal: {g:?}");
    }
    let events = run.table("events.csv");
    let reasons: Vec<&str> =
        events.iter().filter(|e| e.get("event") == "stepped_down").map(|e| e.get("detail")).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons.iter().all(|d| d.contains("failures")), "{reasons:?}");
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

#[test]
fn a_watcher_whose_clock_runs_ahead_takes_over_a_lease_that_is_still_valid() {
    let lab = Lab::new();
    // Worker 1 starts 1 s later with its wall clock 10 s ahead: at its first
    // watch (4 s) it reads the leader's leaseUntil (at most 9 s ahead of the
    // leader's clock) as already past, and takes over. With true clocks no
    // takeover can come before the lease runs out at 9 s.
    let file = lab.file(
        "skew.yaml",
        "name: skew\nworkers: 2\nduration: 8s\nstart: staggered\nstagger: 1s\n\
         worker:\n  expiry: exact\n  clock_offset: [0s, 10s]\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).jobs(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert_eq!(t.get("max_leaders"), "2", "{t:?}");
    }
    let events = run.table("events.csv");
    for trial in ["1", "2"] {
        let takeover = events
            .iter()
            .find(|e| e.get("trial") == trial && e.get("event") == "acquired" && e.get("detail").contains("takeover"))
            .unwrap_or_else(|| panic!("trial {trial}: no takeover"));
        assert_eq!(takeover.get("worker"), "1");
        // 4 s scaled is 200 ms; the lease would run out at 450 ms.
        let at = takeover.f64("t_ms");
        assert!((190.0..300.0).contains(&at), "trial {trial}: takeover at {at} ms");
    }
}
