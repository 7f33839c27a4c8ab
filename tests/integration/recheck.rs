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
    assert_eq!(record["results_format"], 4);
    // As a run from before the format was recorded left it.
    record.as_object_mut().unwrap().remove("results_format");
    std::fs::write(&host, record.to_string()).unwrap();
    let before = std::fs::read_to_string(run.out.join("trials.csv")).unwrap();
    for args in [vec!["check"], vec!["run", "--resume"]] {
        let out = std::process::Command::new(bin()).args(&args).arg(&run.out).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("results format 1") && stderr.contains("format 4"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(run.out.join("trials.csv")).unwrap(), before, "nothing rewritten");
}

/// Every file of a directory and its bytes (sub-directories skipped).
fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

#[test]
fn check_writes_a_new_directory_and_never_touches_the_run() {
    let lab = Lab::new();
    let file = lab.file(
        "k.yaml",
        "name: k\nworkers: 2\nduration: 8s\nfaults:\n  - at: 3s\n    target: leader\n    action: kill\n",
    );
    let run = lab.run(&file).scale(0.05).trials(2).output().expect_code(0);
    let before = snapshot(&run.out);
    let out = std::process::Command::new(bin()).arg("check").arg(&run.out).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(snapshot(&run.out), before, "check changed the run's own files");
    let made: Vec<_> = std::fs::read_dir(run.out.join("checks")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(stderr.contains(&made[0].display().to_string()), "says where: {stderr}");
    assert_eq!(read_table(&made[0].join("trials.csv")).len(), 2);
    assert_eq!(std::fs::read(made[0].join("trials.csv")).unwrap(), before["trials.csv"], "the same numbers");

    // A shortened history is refused, in place or not, and nothing is lost.
    let events = std::fs::read_to_string(run.out.join("events.csv")).unwrap();
    let first_trial: String = events.lines().filter(|l| !l.starts_with("2,")).map(|l| format!("{l}\n")).collect();
    std::fs::write(run.out.join("events.csv"), &first_trial).unwrap();
    let before = snapshot(&run.out);
    for extra in [vec![], vec!["--in-place"]] {
        let out = std::process::Command::new(bin()).arg("check").args(&extra).arg(&run.out).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains("trial(s) 2"), "{stderr}");
    }
    assert_eq!(snapshot(&run.out), before, "a refused check wrote nothing");

    // In place, asked for: the derived tables are replaced, the history kept.
    std::fs::write(run.out.join("events.csv"), &events).unwrap();
    let out = std::process::Command::new(bin()).args(["check", "--in-place"]).arg(&run.out).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(run.out.join("events.csv")).unwrap(), events);
    assert_eq!(read_table(&run.out.join("trials.csv")).len(), 2);
    assert!(!std::fs::read_dir(&run.out).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".tmp")));
}

#[test]
fn a_history_with_impossible_events_is_refused_by_check() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", "name: k\nworkers: 2\nduration: 6s\n");
    let run = lab.run(&file).scale(0.05).trials(1).output().expect_code(0);
    let events = std::fs::read_to_string(run.out.join("events.csv")).unwrap();
    let header = events.lines().next().unwrap();
    for (i, (row, want)) in [
        ("1,1.0,4000000000000,1,start,", "events.csv:2: worker 4000000000000: the experiment has 2 worker(s)"),
        ("1,NaN,0,1,start,", "events.csv:2: t_ms NaN is not a time within a trial"),
        ("1,inf,0,1,start,", "events.csv:2: t_ms inf is not a time within a trial"),
        ("0,1.0,0,1,start,", "events.csv:2: trial 0: trials are numbered from 1"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = lab.path().join(format!("bad-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(run.out.join("experiment.yaml"), dir.join("experiment.yaml")).unwrap();
        std::fs::write(dir.join("events.csv"), format!("{header}\n{row}\n")).unwrap();
        let out = std::process::Command::new(bin()).arg("check").arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{row}: {stderr}");
        assert!(stderr.contains(want), "{row}: want {want:?} in {stderr}");
        assert!(!dir.join("checks").exists(), "nothing written for {row}");
    }
}

#[test]
fn a_suite_is_rechecked_whole_and_its_readme_says_by_which_build() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(
        suite.join("a.yaml"),
        "name: a\nworkers: 2\nduration: 8s\nfaults:\n  - at: 3s\n    target: leader\n    action: kill\n",
    )
    .unwrap();
    std::fs::write(suite.join("b.yaml"), "name: b\nworkers: 2\nduration: 6s\n").unwrap();
    let run = lab.run(&suite).scale(0.05).trials(2).output().expect_code(0);
    let readme = std::fs::read_to_string(run.out.join("README.md")).unwrap();
    let tables = |dir: &std::path::Path| -> Vec<Vec<u8>> {
        ["a", "b"].iter().map(|x| std::fs::read(dir.join(x).join("trials.csv")).unwrap()).collect()
    };
    let before = tables(&run.out);

    // Elsewhere: the suite's layout, the same numbers, the run untouched.
    let again = lab.path().join("again");
    let out = std::process::Command::new(bin()).arg("check").arg(&run.out).arg("--out").arg(&again).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tables(&again), before);
    for file in
        ["README.md", "report.html", "host.json", "checked.json", "a/report.html", "a/timeline.svg", "b/checked.json"]
    {
        assert!(again.join(file).is_file(), "{file} missing");
    }
    assert_eq!(std::fs::read_to_string(run.out.join("README.md")).unwrap(), readme);
    let rewritten = std::fs::read_to_string(again.join("README.md")).unwrap();
    // The run's words and tables, and a line saying who judged them.
    let (old, new): (Vec<&str>, Vec<&str>) = (readme.lines().collect(), rewritten.lines().collect());
    assert_eq!(new[..3], old[..3], "{rewritten}");
    assert!(
        new[3].starts_with("Re-checked from its histories by `") && new[3].contains("(checked.json)"),
        "{rewritten}"
    );
    assert_eq!(new[4..], old[3..], "{rewritten}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("a/checked.json")).unwrap()).unwrap();
    let host: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("a/host.json")).unwrap()).unwrap();
    assert_eq!(record["run_build"], host["build"]);
    assert!(record["checked_by_build"].is_string() && record["checked_utc"].is_string(), "{record}");

    // In place: the same files, rewritten where they are.
    let out = std::process::Command::new(bin()).args(["check", "--in-place"]).arg(&run.out).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tables(&run.out), before);
    assert!(std::fs::read_to_string(run.out.join("README.md")).unwrap().contains("Re-checked from its histories"));

    // A suite one of whose histories cannot be judged is refused whole,
    // before anything is written: the other experiment keeps its files.
    let events = std::fs::read_to_string(run.out.join("b/events.csv")).unwrap();
    std::fs::write(run.out.join("b/events.csv"), format!("{}\n", events.lines().next().unwrap())).unwrap();
    let a = snapshot(&run.out.join("a"));
    let out = std::process::Command::new(bin()).args(["check", "--in-place"]).arg(&run.out).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(snapshot(&run.out.join("a")), a, "a refused suite check wrote nothing");
    std::fs::write(run.out.join("b/events.csv"), events).unwrap();

    // What a shrink found is not the checker's to redo: refused, untouched.
    let shrunk = format!("{readme}\n## Shrunk\n\nrows\n");
    std::fs::write(run.out.join("README.md"), &shrunk).unwrap();
    let out = std::process::Command::new(bin()).args(["check", "--in-place"]).arg(&run.out).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--shrink") && stderr.contains("run it again"), "{stderr}");
    assert_eq!(std::fs::read_to_string(run.out.join("README.md")).unwrap(), shrunk);
}
