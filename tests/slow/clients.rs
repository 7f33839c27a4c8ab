//! Each lock library of examples/clients/ under one kill of its leader
//! (experiments/clients/, one trial each): the adapter starts, elects one
//! leader, and the library hands the lock on after the holder's death.
//! What each library does under every fault is scripts/clients.sh's table;
//! this keeps each adapter working.

use crate::helper::{Lab, repo};

#[test]
fn every_lock_library_elects_one_leader_and_hands_the_lock_on_after_a_kill() {
    let clients = repo().join(".clients");
    assert!(
        clients.join("python/bin/python").exists() && clients.join("node/node_modules").exists(),
        "the libraries are not installed: scripts/clients-install.sh (scripts/test.sh --slow runs it)"
    );
    let lab = Lab::new();
    let run = lab.run(repo().join("experiments/clients")).trials(1).args(["--max-jobs", "2"]).output().expect_code(0);
    let names: Vec<String> = std::fs::read_dir(repo().join("experiments/clients"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 15, "{names:?}");
    for name in &names {
        let dir = run.out.join(name);
        let trial = &crate::helper::read_table(&dir.join("trials.csv"))[0];
        assert_eq!(trial.get("max_leaders"), "1", "{name}: {trial:?}");
        let outcomes = trial.get("worker_outcomes");
        assert_eq!(outcomes.matches(": ok").count(), 2, "{name}: the two it did not kill end well: {outcomes}");
        let gaps = crate::helper::read_table(&dir.join("gaps.csv"));
        assert!(
            gaps.iter().any(|g| g.get("cause") == "kill" && g.get("ended") == "true"),
            "{name}: the lock is taken over after the kill: {gaps:?}"
        );
    }
}
