//! Bad input: a clear message naming file:line:column (or the flag),
//! exit code 2, and nothing spawned or written.

use crate::helper::{Lab, bin, repo};

fn rejects(yaml: &str, want: &str) {
    let lab = Lab::new();
    let file = lab.file("bad.yaml", yaml);
    let run = lab.run(&file).output();
    assert_eq!(run.code(), Some(2), "stderr: {}", run.stderr());
    let stderr = run.stderr();
    let want = format!("{}:{want}", file.display());
    assert!(stderr.contains(&want), "expected {want:?} in:\n{stderr}");
    assert!(!run.out.exists(), "nothing may be written for a bad experiment");
}

#[test]
fn a_yaml_syntax_error_names_its_line_and_column() {
    rejects("name: x\nworkers: [3\n", "2:");
}

#[test]
fn an_unknown_key_is_an_error() {
    rejects("name: x\nworkers: 3\nleese: 9s\n", "3:1: unknown field `leese`");
}

#[test]
fn an_unknown_action_is_an_error() {
    rejects(
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: explode\n",
        "6:13: unknown variant `explode`",
    );
}

#[test]
fn renew_not_shorter_than_lease_is_an_error() {
    rejects("name: x\nworkers: 3\nlease: 3s\nrenew: 3s\n", "4:8: renew (3s) must be shorter than lease (3s)");
}

#[test]
fn a_fault_after_the_end_is_an_error() {
    rejects(
        "name: x\nworkers: 3\nduration: 10s\nfaults:\n  - at: 12s\n    target: leader\n    action: kill\n",
        "5:9: fault at 12s is not before the trial ends",
    );
}

#[test]
fn zero_workers_and_bad_targets_are_errors() {
    rejects("name: x\nworkers: 0\n", "2:10: workers must be at least 1");
    rejects("name: x\nworkers: 2\nfaults:\n  - at: 1s\n    target: 2\n    action: kill\n", "5:13: worker index 2");
}

#[test]
fn bad_flags_exit_2() {
    let lab = Lab::new();
    let file = repo().join("experiments/blog/steady-state.yaml");
    for flag in [["--time-scale", "-1"], ["--trials", "0"], ["--jobs", "zero"]] {
        let run = lab.run(&file).arg(format!("{}={}", flag[0], flag[1])).output();
        assert_eq!(run.code(), Some(2), "{flag:?}: {}", run.stderr());
        assert!(run.stderr().contains(flag[0]), "{flag:?} not named in: {}", run.stderr());
        assert!(!run.out.exists());
    }
}

#[test]
fn every_committed_experiment_validates() {
    // Every directory of experiments/ (a new one is not forgotten), and the
    // benchmarks'.
    let dirs = std::fs::read_dir(repo().join("experiments")).unwrap().map(|e| e.unwrap().path());
    let files: Vec<_> = dirs
        .chain([repo().join("benches")])
        .filter(|d| d.is_dir())
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    assert!(files.len() >= 80, "{}", files.len());
    let out = std::process::Command::new(bin()).arg("validate").args(&files).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn validate_reports_a_bad_file_with_exit_2() {
    let lab = Lab::new();
    let bad = lab.file("bad.yaml", "name: x\nworkers: 3\nrenew: 10s\n");
    let out = std::process::Command::new(bin()).arg("validate").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.yaml:3:8: renew (10s) must be shorter than lease (9s)"));
}

#[test]
fn an_epoch_job_that_cannot_run_is_an_error() {
    let job = |spec: &str| format!("name: x\nworkers: 2\nworker:\n  fencing_tokens: true\n  epoch_job: {spec}\n");
    rejects(&job("{epoch: 20s, duration: 7s, strategy: fencing}"), "5:3: epoch_job: renew (3s) + job duration (7s)");
    rejects(&job("{epoch: 2s, duration: 2s, strategy: unique}"), "5:3: epoch_job: the job (2s) must be shorter");
    rejects(&job("{epoch: 20s, duration: 1s, strategy: quorum}"), "5:");
    rejects(
        "name: x\nworkers: 2\nworker:\n  epoch_job: {epoch: 20s, duration: 1s, strategy: fencing}\n",
        "4:3: epoch_job: strategy fencing needs fencing_tokens: true",
    );
}

#[test]
fn what_a_substrate_cannot_do_is_an_error() {
    rejects(
        "name: x\nworkers: 2\nsubstrate: {kind: flock, managed: true}\n",
        "3:26: managed: the flock substrate has no server to run",
    );
    rejects(
        "name: x\nworkers: 2\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    action: lock-empty\n",
        "6:13: lock-empty: the redis substrate has no lock file",
    );
    rejects(
        "name: x\nworkers: 2\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    action: server-restart\n",
        "6:13: server-restart needs a server the harness runs",
    );
    rejects(
        "name: x\nworkers: 2\nworker:\n  acquire: link\nsubstrate: {kind: flock}\n",
        "5:1: worker.acquire and failpoints are lock-file variants",
    );
    rejects(
        "name: x\nworkers: 2\nsubstrate: {kind: etcd, managed: true}\nlease: 2500ms\nrenew: 1s\n",
        "4:8: the etcd substrate's lease TTLs are whole multiples of 1s",
    );
    rejects(
        "name: x\nworkers: 2\nsubstrate: {kind: file}\nworker: {watch_by: push}\n",
        "4:10: watch_by: push needs a server that pushes",
    );
}

#[test]
fn a_bad_pattern_or_program_is_an_error() {
    let program =
        |patterns: &str| format!("name: x\nworkers: 2\nprogram:\n  command: [sh, w.sh]\n  patterns:\n{patterns}");
    rejects(&program("    - {regex: 'leader (', event: acquired}\n"), "6:15: invalid regex");
    rejects(&program("    - {regex: 'leader', event: crowned}\n"), "6:32: unknown event kind \"crowned\"");
    rejects(&program("    - {regex: '(?P<who>\\d+)', event: acquired}\n"), "6:15: capture group \"who\" means nothing");
    rejects("name: x\nworkers: 2\nprogram:\n  command: [w, \"{lokc}\"]\n", "4:12: unknown placeholder {lokc}");
    rejects("name: x\nworkers: 2\nprogram:\n  command: \"w\"\n", "4:12: command is a list");
    rejects(&(program("    - {regex: 'leader', event: acquired}\n") + "  ready: true\n"), "4:12: ready: true waits");
    rejects("name: x\nworkers: 2\nprogram:\n  command: [w]\n  max_lines: 0\n", "5:14: max_lines must be");
    rejects(
        "name: x\nworkers: 2\nprogram:\n  command: [no-such-program-xyz]\n",
        "4:12: no-such-program-xyz: no such program in PATH",
    );
}

/// Run leasequake with its stdout a pipe whose reader has already gone
/// (`leasequake … | head -1` once head has exited): exit code and stderr.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_stdout_costs_neither_the_files_nor_the_exit_code() {
    let lab = Lab::new();
    let blog = repo().join("experiments/blog");
    let (code, stderr) = with_stdout_closed(&["validate", blog.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let out = lab.path().join("out");
    let file = lab.file("x.yaml", "name: x\nworkers: 2\nduration: 6s\nexpect:\n  max_leaders: 1\n");
    let args = ["run", file.to_str().unwrap(), "--time-scale", "0.05", "--trials", "2", "--quiet", "--no-calibrate"];
    let (code, stderr) = with_stdout_closed(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(crate::helper::read_table(&out.join("trials.csv")).len(), 2);
    assert!(out.join("summary.csv").exists());
}

#[test]
fn a_replicated_service_is_refused_where_it_cannot_run() {
    let lab = Lab::new();
    let cases = [
        ("substrate: {kind: file, members: 2}\n", "members: a replicated service is one the harness runs"),
        ("substrate: {kind: redis, managed: true, members: 9}\n", "members: 9 is not in 1..=5"),
        (
            "substrate: {kind: redis, managed: true}\nfaults:\n  - at: 1s\n    target: primary-side\n    action: partition\n",
            "6:13: target primary-side is a part of a replicated service",
        ),
        (
            "substrate: {kind: redis, managed: true, members: 2}\nfaults:\n  - at: 1s\n    target: member-2\n    action: partition\n",
            "6:13: target member-2: the service has members 0..1",
        ),
        (
            "substrate: {kind: redis, managed: true, members: 2}\nfaults:\n  - at: 1s\n    target: member-1\n    action: kill\n",
            "6:13: target member-1 is cut off by a network fault",
        ),
        ("substrate: {kind: redlock, managed: true}\n", "redlock runs on independent Redis servers the harness starts"),
        (
            "substrate: {kind: redis, managed: true, members: 2}\nfaults:\n  - at: 1s\n    target: member-1\n    action: skew\n    by: 2s\n",
            "6:13: skew of member-1: only Redlock's servers have a clock the harness moves",
        ),
    ];
    for (yaml, want) in cases {
        let file = lab.file("bad.yaml", &format!("name: x\nworkers: 3\n{yaml}"));
        let out = std::process::Command::new(bin()).arg("validate").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{yaml}: {stderr}");
        assert!(stderr.contains(want), "expected {want:?} in: {stderr}");
    }
}
