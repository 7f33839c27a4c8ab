//! Verdicts that cannot say the opposite of the data: a failed `expect:` is
//! marked in the suite's README and named again at the end of the run.

use crate::helper::Lab;

#[test]
fn a_failed_expectation_is_marked_in_the_readme_and_named_at_the_end() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::fs::write(
        suite.join("a-holds.yaml"),
        "name: a-holds\nworkers: 2\nduration: 6s\nexpect:\n  max_leaders: 1\nreference:\n  claim: c\n  bound: [6s, 13s]\n",
    )
    .unwrap();
    std::fs::write(
        suite.join("b-fails.yaml"),
        "name: b-fails\nworkers: 2\nduration: 6s\nfaults:\n  - at: 2s\n    target: leader\n    action: kill\n\
         expect:\n  gap_max: 1s\nreference:\n  claim: c\n  bound: [6s, 13s]\n",
    )
    .unwrap();
    let run = lab.run(&suite).scale(0.05).trials(2).output().expect_code(1);
    let readme = std::fs::read_to_string(run.out.join("README.md")).unwrap();
    let row = |name: &str| readme.lines().find(|l| l.contains(&format!("[{name}]"))).unwrap_or("").to_string();
    assert!(!row("a-holds").contains('✗'), "{readme}");
    // ✗ first (then ⚠ where the machine disturbed a trial, then the name).
    assert!(row("b-fails").starts_with("| ✗ ") && row("b-fails").contains("[b-fails](b-fails)"), "{readme}");
    assert!(row("b-fails").contains("✗ expect: failed: trial 1 gap 1"), "{readme}");
    // In the file's own time (gap_max: 1s), not the scaled 50 ms.
    assert!(row("b-fails").contains("(expected at most 1s)"), "{readme}");
    assert!(run.stdout().contains("durations in the experiment's own time; run at time scale 0.05"));
    let stdout = run.stdout();
    let tail: Vec<&str> = stdout.lines().rev().take(4).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    assert!(tail.contains("suite: 2 experiments: 1 passed, 1 failed, 0 not run"), "{tail}");
    assert!(tail.contains("✓ a-holds") && tail.contains("✗ b-fails: 2 expectation(s) failed"), "{tail}");
    assert!(tail.contains(&format!("README: {}", run.out.join("README.md").display())), "{tail}");
}

#[test]
fn a_log_gets_progress_lines_with_an_eta() {
    // stderr is a pipe here, as in CI: no bar, but lines.
    let lab = Lab::new();
    let file = lab.file("p.yaml", "name: p\nworkers: 2\nduration: 6s\n");
    let out = lab.path().join("out");
    let run = std::process::Command::new(crate::helper::bin())
        .args(["run", "--no-calibrate", "--time-scale", "0.05", "--trials", "4", "--out"])
        .arg(&out)
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("leasequake: p: 4/4 trials, ") && stderr.contains("ETA 0 s"), "{stderr}");
}

#[test]
fn exports_for_ci_carry_every_expectation_and_verdict() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::fs::write(suite.join("a-holds.yaml"), "name: a-holds\nworkers: 2\nduration: 6s\nexpect:\n  max_leaders: 1\n")
        .unwrap();
    std::fs::write(
        suite.join("b-fails.yaml"),
        "name: b-fails\nworkers: 2\nduration: 20s\nfaults:\n  - at: 2s\n    target: leader\n    action: kill\n\
         expect:\n  gap_max: 1s\n  max_leaders: 1\n",
    )
    .unwrap();
    let (json, junit) = (lab.path().join("r.json"), lab.path().join("r.xml"));
    let run = lab
        .run(&suite)
        .scale(0.05)
        .trials(2)
        .arg("--export-json")
        .arg(json.display().to_string())
        .arg("--junit")
        .arg(junit.display().to_string())
        .output()
        .expect_code(1);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let exps = doc["experiments"].as_array().unwrap();
    assert_eq!(exps.len(), 2, "{doc}");
    assert_eq!((exps[0]["name"].as_str(), exps[0]["verdict"].as_str()), (Some("a-holds"), Some("passed")));
    assert_eq!(exps[1]["verdict"], "failed");
    let expectations = exps[1]["expectations"].as_array().unwrap();
    let gap_max = expectations.iter().find(|e| e["expect"] == "gap_max: 1s").expect("gap_max is a check");
    assert_eq!(gap_max["held"], false);
    assert!(gap_max["failures"][0].as_str().unwrap().contains("(expected at most 1s)"), "{gap_max}");
    // In the file's own time: the kill gap of a 9 s lease, not the scaled one.
    let p50 = exps[1]["overall"]["kill_gaps"]["p50_ms"].as_f64().unwrap();
    assert!((6000.0..=13000.0).contains(&p50), "{p50}");
    assert_eq!(exps[1]["overall"]["kill_gaps"]["bound_ms"], serde_json::json!([6000.0, 13000.0]));
    assert_eq!(exps[1]["results"], run.out.join("b-fails").display().to_string());

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let root = doc.root_element();
    assert_eq!((root.attribute("tests"), root.attribute("failures")), (Some("3"), Some("1")), "{xml}");
    let failing: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
    assert_eq!(failing.len(), 1, "{xml}");
    let case = failing[0].parent().unwrap();
    assert_eq!(case.attribute("name"), Some("expect gap_max: 1s"));
    assert_eq!(case.attribute("classname"), Some("leasequake.b-fails"));

    // A place that cannot take the file is refused before anything runs.
    let out = lab.path().join("never");
    let bad = std::process::Command::new(crate::helper::bin())
        .args(["run", "--quiet", "--no-calibrate", "--junit", "/nonexistent-dir/r.xml", "--out"])
        .arg(&out)
        .arg(&suite)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--junit: /nonexistent-dir is not a directory"), "{stderr}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn any_summarised_metric_can_be_bounded_per_setting_and_each_bound_is_a_line_and_a_test_case() {
    let lab = Lab::new();
    let exp = lab.file(
        "m.yaml",
        "name: m\nworkers: 2\nduration: 20s\ntrials: 3\nfaults:\n  - {at: 2s, target: leader, action: kill}\n\
         sweep:\n  lease: [9s, 12s]\n\
         expect:\n  metrics:\n    summary.n: {min: 3}\n    summary.gap_max_ms: {max: 30000}\n\
         \x20   summary.gap_min_ms: {max: 1}\n    summary.double_leader_trials: {rate_max: 5%}\n",
    );
    let junit = lab.path().join("r.xml");
    let run = lab.run(&exp).scale(0.05).arg("--junit").arg(junit.display().to_string()).output().expect_code(1);
    let said = run.stdout();
    assert!(said.contains("expectations:   2 of 4 failed"), "{said}");
    assert!(said.contains("    ✓ metrics.summary.n: min 3\n"), "{said}");
    assert!(said.contains("    ✓ metrics.summary.gap_max_ms: max 30000\n"), "{said}");
    assert!(said.contains("    ✗ metrics.summary.gap_min_ms: max 1\n"), "{said}");
    // 0/3 is no evidence of a rate under 5 %: at each of the two points.
    assert!(said.contains("    ✗ metrics.summary.double_leader_trials: rate_max 5 %\n"), "{said}");
    assert_eq!(said.matches("/3: its rate's 95 % interval reaches ").count(), 2, "{said}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"expect metrics.summary.double_leader_trials: rate_max 5 %\""), "{xml}");
    // A metric no summary file has is refused at its place, before anything runs.
    let bad = lab.file("bad.yaml", "name: b\nworkers: 2\nexpect:\n  metrics:\n    summary.gap_p999_ms: {max: 1}\n");
    let refused = lab.run(&bad).output().expect_code(2);
    assert!(refused.stderr().contains("did you mean `summary.gap_p99_ms`?"), "{}", refused.stderr());
}
