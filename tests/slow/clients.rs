//! Each lock library of examples/clients/ under one kill of its leader
//! (experiments/clients/, their kill alone, one trial each): the adapter
//! starts, elects one leader, and the library hands the lock on after the
//! holder's death. What each library does under every fault is
//! scripts/clients.sh's table; this keeps each adapter working.

use crate::helper::{Lab, repo};

/// The experiment with its kill alone: no other fault, no sweep; and its
/// workers started 1 s apart (scaled; a third of a 3 s watch). portalocker's RedisLock fails
/// every contender that tries while another is subscribed, so three that
/// start on one barrier and retry in step can go on with no leader at all
/// (results/clients/portalocker-redis has such a trial): the kill then finds
/// no leader. Apart, the first takes the lock alone, and after the kill the
/// two left still try at different moments.
fn kill_only(text: &str) -> String {
    let faults = text.lines().filter(|l| !l.starts_with("  - {") || l.contains("action: kill}"));
    let kept: String = faults.take_while(|l| !l.starts_with("sweep:")).map(|l| format!("{l}\n")).collect();
    format!("{kept}start: staggered\nstagger: 1s\n")
}

/// A copy of experiments/clients/ with each experiment's kill alone, where
/// `{experiment_dir}/../../` still finds the adapters and the libraries.
fn kill_experiments(lab: &Lab) -> std::path::PathBuf {
    let dir = lab.path().join("experiments/clients");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["examples", ".clients"] {
        std::os::unix::fs::symlink(repo().join(name), lab.path().join(name)).unwrap();
    }
    for entry in std::fs::read_dir(repo().join("experiments/clients")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(dir.join(path.file_name().unwrap()), kill_only(&text)).unwrap();
        }
    }
    dir
}

#[test]
fn every_lock_library_elects_one_leader_and_hands_the_lock_on_after_a_kill() {
    let clients = repo().join(".clients");
    assert!(
        clients.join("python/bin/python").exists() && clients.join("node/node_modules").exists(),
        "the libraries are not installed: scripts/clients-install.sh (scripts/test.sh --slow runs it)"
    );
    let lab = Lab::new();
    let experiments = kill_experiments(&lab);
    let run = lab.run(&experiments).trials(1).args(["--max-jobs", "2"]).output().expect_code(0);
    let names: Vec<String> = std::fs::read_dir(&experiments)
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

#[test]
fn an_experiment_with_its_kill_alone_keeps_everything_else() {
    let text = "name: x\nprogram:\n  command: [a]\nfaults:\n  - {at: 1s, target: leader, action: kill}\n  - {at: 1s, target: leader, action: term}\n# Each point\nsweep:\n  fault: [kill, term]\n";
    assert_eq!(
        kill_only(text),
        "name: x\nprogram:\n  command: [a]\nfaults:\n  - {at: 1s, target: leader, action: kill}\n# Each point\nstart: staggered\nstagger: 1s\n"
    );
}
