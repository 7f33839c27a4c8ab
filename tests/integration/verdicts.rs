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
    assert!(row("b-fails").starts_with("| ✗ [b-fails]"), "{readme}");
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
