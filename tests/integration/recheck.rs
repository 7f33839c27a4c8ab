//! `leasequake check DIR` recomputes the derived tables from events.csv.

use crate::helper::{Lab, bin, read_table};

#[test]
fn check_recomputes_the_same_numbers_from_the_history() {
    let lab = Lab::new();
    let file = lab.file(
        "k.yaml",
        "name: k\nworkers: 3\nduration: 30s\nfaults:\n  - at: 12s\n    jitter: 3s\n    target: leader\n    action: kill\n  - at: 20s\n    target: watcher\n    action: pause\n    duration: 3s\n",
    );
    let run = lab.run(&file).scale(0.05).trials(3).jobs(3).output().expect_code(0);
    let again = lab.path().join("again");
    let status = std::process::Command::new(bin())
        .arg("check")
        .arg(&run.out)
        .arg("--out")
        .arg(&again)
        .output()
        .expect("run check");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    for name in ["trials.csv", "gaps.csv", "summary.csv", "evictions.csv", "summary-evictions.csv"] {
        // Trials may finish in any order with --jobs; compare as sets.
        let mut before =
            std::fs::read_to_string(run.out.join(name)).unwrap().lines().map(String::from).collect::<Vec<_>>();
        let mut after =
            std::fs::read_to_string(again.join(name)).unwrap().lines().map(String::from).collect::<Vec<_>>();
        before.sort();
        after.sort();
        assert_eq!(before, after, "{name} differs after check");
    }
    assert_eq!(read_table(&again.join("trials.csv")).len(), 3);
}

#[test]
fn a_directory_of_another_results_format_is_refused_by_check_and_resume() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", "name: k\nworkers: 2\nduration: 6s\n");
    let run = lab.run(&file).scale(0.05).trials(1).output().expect_code(0);
    let host = run.out.join("host.json");
    let mut record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&host).unwrap()).unwrap();
    assert_eq!(record["results_format"], 2);
    // As a run from before the format was recorded left it.
    record.as_object_mut().unwrap().remove("results_format");
    std::fs::write(&host, record.to_string()).unwrap();
    let before = std::fs::read_to_string(run.out.join("trials.csv")).unwrap();
    for args in [vec!["check"], vec!["run", "--resume"]] {
        let out = std::process::Command::new(bin()).args(&args).arg(&run.out).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("results format 1") && stderr.contains("format 2"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(run.out.join("trials.csv")).unwrap(), before, "nothing rewritten");
}
