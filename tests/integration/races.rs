//! Election races: 30 processes released by one barrier.

use crate::helper::{Lab, repo};

#[test]
fn the_o_excl_race_never_elects_two_leaders() {
    let lab = Lab::new();
    let run = lab.run(repo().join("experiments/blog/excl-race.yaml")).jobs(1).output().expect_code(0);
    let trials = run.table("trials.csv");
    assert_eq!(trials.len(), 30);
    for t in &trials {
        assert_eq!(t.get("max_leaders"), "1", "{t:?}");
        assert_eq!(t.get("workers"), "30");
        // Nothing can change once all 30 have tried: the trial ends then,
        // not at its 300 ms duration (the 30 attempts take a few ms).
        assert!(t.f64("end_ms") < 250.0, "a settled one-shot trial ran on: {t:?}");
    }
    // Every one of the 30 workers tried: one acquired, 29 lost.
    let events = run.table("events.csv");
    for trial in 1..=30 {
        let tried = |kind: &str| {
            events.iter().filter(|e| e.get("trial") == trial.to_string() && e.get("event") == kind).count()
        };
        assert_eq!((tried("acquired"), tried("not_acquired")), (1, 29), "trial {trial}");
    }
}
