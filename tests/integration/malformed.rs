//! The malformed-input corpus: every way an experiment file or a flag can
//! be wrong that we know of. Each is exit 2 with a message naming
//! file:line:column (or the flag), before anything is spawned or written.

use crate::helper::{Lab, bin, repo};

/// (experiment text, extra flags, what stderr must say after `FILE:`).
const CASES: &[(&str, &[&str], &str)] = &[
    // Syntax.
    ("name: x\nworkers: [3\n", &[], "2:"),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 5s\n\ttarget: leader\n    action: kill\n",
        &[],
        "5:1: while scanning a plain scalar, found a tab",
    ),
    ("name: x\nworkers: 3\n\tduration: 5s\n", &[], "3:1: while scanning a plain scalar, found a tab"),
    ("", &[], "1:1: the file holds no settings"),
    ("# only a comment\n\n", &[], "1:1: the file holds no settings"),
    ("name: x\nworkers: 3\nlease: 9s\nlease: 8s\n", &[], "4:1: `lease` is given twice; each setting may appear once"),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n  action: kill\n",
        &[],
        "6:3: missing field `action`: line 6 gives `action` at another indent",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: sigkil\n",
        &[],
        "6:13: unknown variant `sigkil` (did you mean `kill`?)",
    ),
    ("- a\n- b\n", &[], "1:1:"),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n   target: leader\n    action: kill\n",
        &[],
        "5:4: missing field `action`: line 5 is indented 3 spaces, the line above it 4 spaces",
    ),
    (
        "name: x\nworkers: 3\nworker:\n  acquire: excl\n expiry: exact\n",
        &[],
        "5:2: while parsing a block mapping, did not find expected key: line 5 is indented 1 space",
    ),
    (
        "name: x\nworkers: 3\nexpect:\n  summary.gaps: {max: 1}\n",
        &[],
        "4:3: unknown field `summary.gaps` (a metric's bound goes under `metrics:`",
    ),
    (
        "name: x\nworkers: 3\nexpect:\n  metrics:\n    summary.gap_p99_ms: {max: 10s}\n",
        &[],
        "5:31: \"10s\" is not a number",
    ),
    (
        "name: x\nworkers: 3\nexpect:\n  metrics:\n    summary.gaps: {max: 1, min: 2}\n",
        &[],
        "5:5: expect.metrics.summary.gaps: min 2 is above max 1",
    ),
    ("# a comment\nname: x\nlease: 9s\n", &[], "2:1: the file gives no `workers:`, which every experiment needs"),
    (
        "name: x\nworkers: 3\nexpect:\n  metrics:\n    jobs.duplicate_trials: {max: 0}\n",
        &[],
        "5:5: expect.metrics.jobs.duplicate_trials: this experiment writes no summary-jobs.csv: no epoch job runs",
    ),
    ("name: x\nworkers: 3\nleese: 9s\n", &[], "3:1: unknown field `leese` (did you mean `lease`?)"),
    ("name: x\nworkers: 3\nworker:\n  acquir: excl\n", &[], "4:3: unknown field `acquir` (did you mean `acquire`?)"),
    // Wrong types.
    ("name: x\nworkers: three\n", &[], "2:10: invalid i64"),
    ("name: x\nworkers: 3\ntrials: -1\n", &[], "3:9: trials must be at least 1, not -1"),
    ("name: x\nworkers: 3\ntrials: 4294967296\n", &[], "3:9: trials: 4294967296 is more than 4294967295"),
    ("name: x\nworkers: 3\nseed: abc\n", &[], "3:7: invalid u64"),
    ("name: x\nworkers: 3\nlease: 9 parsecs\n", &[], "3:8: duration \"9 parsecs\" has unknown unit"),
    ("name: x\nworkers: 3\ngrace: soon\n", &[], "3:8: duration \"soon\" does not start with a number"),
    ("name: x\nworkers: 3\nexpect:\n  max_leaders: -1\n", &[], "4:16: invalid u64"),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: explode\n",
        &[],
        "6:13: unknown variant `explode`",
    ),
    // Network faults.
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: partition\n",
        &[],
        "6:13: partition acts on the link to a lease server; the file substrate has none",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    target: leader\n    action: delay\n",
        &[],
        "7:13: delay needs a latency, e.g. `latency: 50ms`",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    target: all\n    action: reset\n    toxicity: 1.5\n",
        &[],
        "8:15: toxicity is the fraction of connections hit: above 0 and at most 1, not 1.5",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    target: leader\n    action: partition\n    latency: 5ms\n",
        &[],
        "8:14: latency applies to delay only, not to partition",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    target: server\n    action: partition\n",
        &[],
        "6:13: action partition cannot target server",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: redis}\nfaults:\n  - at: 1s\n    target: all\n    action: heal\n    duration: 1s\n",
        &[],
        "8:15: duration applies to pauses and network faults only, not to heal",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: flock, proxy: true}\n",
        &[],
        "3:26: proxy: the flock substrate has no server",
    ),
    (
        "name: x\nworkers: 3\nworker:\n  belief_margin: 9s\n",
        &[],
        "4:3: belief_margin: 9s must be shorter than the lease (9s)",
    ),
    ("name: x\nworkers: 3\nworker:\n  belief: forever\n", &[], "4:11: unknown variant `forever`"),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: watcher\n    action: skew\n",
        &[],
        "6:13: skew needs `by`, how far the clock jumps",
    ),
    (
        "name: x\nworkers: 3\nduration: 1000s\nfaults:\n  - at: 1s\n    every: 1s\n    target: watcher\n    action: skew\n    by: 200s\n",
        &[],
        "9:9: the skews (each as often as it can fire) and clock_offset could move a worker's clock by",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  random:\n    kinds:\n      - {action: skew, target: watcher, count: 500, by: 200s}\n",
        &[],
        "6:57: the skews (each as often as it can fire) and clock_offset could move a worker's clock by 100000s",
    ),
    ("name: x\nworkers: 3\nworker:\n  clock_rate: 3\n", &[], "4:3: clock_rate: 3 is out of range"),
    ("name: x\nworkers: 3\nworker:\n  clock_rate: [1, 2]\n", &[], "4:3: clock_rate: a list gives one rate per worker"),
    // Out of range.
    ("name: x\nworkers: 0\n", &[], "2:10: workers must be at least 1"),
    ("name: x\nworkers: -1\n", &[], "2:10: workers must be at least 1"),
    ("name: x\nworkers: 1001\n", &[], "2:10: workers must be at most 1000"),
    ("name: x\nworkers: 3\nduration: -5s\n", &[], "3:11: duration \"-5s\" is negative: durations cannot be negative"),
    ("name: x\nworkers: 3\nlease: 0s\n", &[], "3:8: lease must be longer than zero"),
    ("name: x\nworkers: 3\nlease: 3s\nrenew: 3s\n", &[], "4:8: renew (3s) must be shorter than lease (3s)"),
    ("name: x\nworkers: 3\ntime_scale: 0\n", &[], "3:13: time_scale must be a positive number, not 0"),
    ("name: x\nworkers: 3\ntime_scale: .nan\n", &[], "3:13: time_scale must be a positive number, not NaN"),
    ("name: x\nworkers: 3\njobs: 65\n", &[], "3:7: jobs must be between 1 and 64"),
    ("name: x\nworkers: 3\ngrace: 61s\n", &[], "3:8: grace is 61s; at most 60s"),
    ("name: x\nworkers: 3\ngrace: 100ms\n", &[], "3:8: grace is 100ms; at least 500ms"),
    ("name: x\nworkers: 3\nduration: 700000s\n", &[], "3:11: a trial would last 700000s; at most 604800s"),
    (
        "name: x\nworkers: 3\nworker:\n  failpoint_workers: [5]\n",
        &[],
        "4:3: failpoint_workers: worker 5 is out of range",
    ),
    (
        "name: x\nworkers: 3\nworker:\n  clock_offset: [1s, 2s]\n",
        &[],
        "4:3: clock_offset: a list gives one offset per worker",
    ),
    (
        "name: x\nworkers: 3\nexpect:\n  gap_min: 5s\n  gap_max: 1s\n",
        &[],
        "4:3: expect: gap_min (5s) is more than gap_max (1s)",
    ),
    (
        "name: x\nworkers: 3\nstart: staggered\nstagger: 20s\n",
        &[],
        "4:10: stagger 20s × 2 later workers does not start them all",
    ),
    ("name: x\nworkers: 3\nstagger: 1s\n", &[], "3:10: stagger needs `start: staggered` or `start: random`"),
    ("name: x\nworkers: 3\nstart: random\n", &[], "3:1: start: random needs a stagger"),
    // Names that are no directory name.
    ("name: \"a\\0b\"\nworkers: 3\n", &[], "1:7: name \"a\\0b\" must be usable as a directory name"),
    ("name: ../x\nworkers: 3\n", &[], "1:7: name \"../x\" must be usable as a directory name"),
    ("name: .hidden\nworkers: 3\n", &[], "1:7: name \".hidden\" must be usable"),
    // Faults.
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: pause\n",
        &[],
        "6:13: pause needs a duration",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    duration: 2s\n",
        &[],
        "7:15: duration applies to pauses and network faults only, not to kill",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: boss\n    action: kill\n",
        &[],
        "5:13: unknown target \"boss\"",
    ),
    ("name: x\nworkers: 2\nfaults:\n  - at: 1s\n    target: 2\n    action: kill\n", &[], "5:13: worker index 2"),
    (
        "name: x\nworkers: 3\nduration: 10s\nfaults:\n  - at: 12s\n    target: leader\n    action: kill\n",
        &[],
        "5:9: fault at 12s is not before the trial ends",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    after: acquired\n    delay: 40s\n",
        &[],
        "4:9: fault at 1s + delay 40s is not before the trial ends",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    every: 0s\n",
        &[],
        "7:12: every must be longer than zero",
    ),
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    every: 10us\n",
        &[],
        "7:12: every is 10us; a fault repeats at most once a 1ms",
    ),
    (
        "name: x\nworkers: 3\nduration: 1000s\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    every: 2ms\n",
        &[],
        "8:12: the faults would fire more than 100000 times",
    ),
    // Scaled to nonsense.
    (
        "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: kill\n    every: 1us\n",
        &["--time-scale", "0.1"],
        "7:12: every is 0s (1us × --time-scale 0.1)",
    ),
    (
        "name: x\nworkers: 3\n",
        &["--time-scale", "0.0000001"],
        " lease is 1us (9s × --time-scale 0.0000001); at least 1ms",
    ),
    (
        "name: x\nworkers: 3\nduration: 10s\n",
        &["--time-scale", "100000"],
        "3:11: a trial would last 1000000s (10s × --time-scale 100000)",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: etcd}\nlease: 9s\n",
        &["--time-scale", "0.1"],
        "4:8: the etcd substrate's lease TTLs are whole multiples of 1s; lease is 900ms (9s × --time-scale 0.1)",
    ),
    (
        "name: x\nworkers: 3\nsubstrate: {kind: etcd}\nlease: 1500ms\nrenew: 500ms\nwatch: 500ms\n",
        &[],
        "4:8: the etcd substrate's lease TTLs are whole multiples of 1s; lease is 1500ms: choose",
    ),
    (
        "name: x\nworkers: 3\ntime_scale: 0.5\n",
        &["--time-scale", "0.1"],
        "3:13: time_scale is set here and by --time-scale",
    ),
    // Runaway sizes.
    (
        "name: x\nworkers: 3\ntrials: 2000000\n",
        &[],
        "3:9: 2000000 trials × 1 sweep point(s) is 2000000 trials; at most 1000000",
    ),
    ("name: x\nworkers: 3\n", &["--trials", "2000000"], " --trials: 2000000 trials × 1 sweep point(s)"),
    (
        "name: x\nworkers: 3\nsweep:\n  lease: [1s,2s,3s,4s,5s,6s,7s,8s,9s,10s]\n  renew: [1ms,2ms,3ms,4ms,5ms,6ms,7ms,8ms,9ms,10ms]\n  watch: [1ms,2ms,3ms,4ms,5ms,6ms,7ms,8ms,9ms,10ms]\n  duration: [11s,12s,13s,14s,15s,16s,17s,18s,19s,20s]\n  workers: [1,2,3,4,5,6,7,8,9,10]\n",
        &[],
        "7:13: sweep has 10 × 10 × 10 × 10 × 10 points; at most 10000",
    ),
    ("name: x\nworkers: 3\nsweep:\n  lease: []\n", &[], "4:10: sweep lease: needs at least one value"),
    ("name: x\nworkers: 3\nsweep:\n  colour: [red]\n", &[], "4:11: unknown sweep setting \"colour\""),
    (
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\nname: x\nworkers: 3\n",
        &[],
        "1:1: unknown field `a`",
    ),
    // Substrates and programs.
    ("name: x\nworkers: 2\nsubstrate: {kind: zookeeper}\n", &[], "3:19: unknown variant `zookeeper`"),
    (
        "name: x\nworkers: 2\nsubstrate: {kind: flock}\nworker:\n  watch_by: push\n",
        &[],
        "5:3: watch_by: push needs a server that pushes (etcd, redis, postgres, postgres-advisory); the flock substrate does not",
    ),
    (
        "name: x\nworkers: 2\nsubstrate: {kind: file, managed: true}\n",
        &[],
        "3:25: managed: the file substrate has no server",
    ),
    ("name: x\nworkers: 2\nprogram:\n  command: [w, \"{lokc}\"]\n", &[], "4:12: unknown placeholder {lokc}"),
    ("name: x\nworkers: 2\nprogram:\n  command: \"w\"\n", &[], "4:12: command is a list"),
    (
        "name: x\nworkers: 2\nprogram:\n  shell: true\n  command: \"echo `cat {lock}`\"\n",
        &[],
        "5:12: {lock} inside backticks: its shell quoting cannot be told",
    ),
    (
        "name: x\nworkers: 2\nprogram:\n  command: [no-such-program-xyz]\n",
        &[],
        "4:12: no-such-program-xyz: no such program in PATH",
    ),
    ("name: x\nworkers: 2\nprogram:\n  command: [sh]\n  cwd: no-such-dir\n", &[], "5:8: cwd: "),
    (
        "name: x\nworkers: 2\nprogram:\n  command: [sh]\n  expiry: sometimes\n",
        &[],
        "5:11: unknown variant `sometimes`, expected one of exact, unix-seconds, holder-death",
    ),
    (
        "name: x\nworkers: 2\nprogram:\n  command: [sh]\n  patterns:\n    - {regex: x, event: renewed, detail: {expire_ms: 5}}\n",
        &[],
        "6:54: detail.expire_ms: not a detail field",
    ),
    (
        "name: x\nworkers: 2\nprogram:\n  command: [sh]\n  patterns:\n    - {regex: x, event: renewed, detail: {lease_until: 1796101978250000000}}\n",
        &[],
        "6:56: detail.lease_until: 1796101978250000000 is not Unix seconds (milliseconds or nanoseconds?)",
    ),
];

#[test]
fn every_malformed_input_is_exit_2_with_its_place_and_nothing_written() {
    assert!(CASES.len() >= 40);
    let lab = Lab::new();
    let mut wrong = Vec::new();
    for (i, (yaml, flags, want)) in CASES.iter().enumerate() {
        let file = lab.file(&format!("case{i}.yaml"), yaml);
        let out = lab.path().join(format!("out{i}"));
        let run = std::process::Command::new(bin())
            .arg("run")
            .arg(&file)
            .args(["--quiet", "--no-calibrate", "--out"])
            .arg(&out)
            .args(*flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        let want = format!("{}:{want}", file.display());
        if run.status.code() != Some(2) || !stderr.contains(&want) || out.exists() {
            wrong.push(format!(
                "case {i}: exit {:?}, wrote {}, want {want:?}\n{stderr}",
                run.status.code(),
                out.exists()
            ));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases:\n{}", wrong.len(), CASES.len(), wrong.join("\n"));
}

#[test]
fn a_huge_or_missing_file_and_bad_paths_are_exit_2() {
    let lab = Lab::new();
    let huge = lab.file("huge.yaml", &format!("name: x\nworkers: 3\ndescription: \"{}\"\n", "x".repeat(2 << 20)));
    let empty_dir = lab.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![huge.display().to_string()], "such a file is at most 1048576 bytes"),
        (vec![lab.path().join("missing.yaml").display().to_string()], "cannot read experiment file"),
        (vec![empty_dir.display().to_string()], "directory holds no .yaml experiment"),
        (vec![repo().join("experiments").display().to_string()], "its subdirectories hold "),
        (
            vec![repo().join("experiments/blog").display().to_string(), "--filter".into(), "no-such-*".into()],
            "--filter no-such-*: matches none of the ",
        ),
    ];
    for (args, want) in cases {
        let run = std::process::Command::new(bin()).arg("run").args(&args).args(["--no-calibrate"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }
    // --out where nothing can be written: refused before the calibration
    // (about 2 s of spawning) starts.
    let started = std::time::Instant::now();
    let run = std::process::Command::new(bin())
        .arg("run")
        .arg(lab.file("ok.yaml", "name: x\nworkers: 2\n"))
        .args(["--out", "/proc/leasequake/out"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--out:"));
    assert!(started.elapsed() < std::time::Duration::from_millis(1500), "calibrated first: {:?}", started.elapsed());
    // --out that is a file.
    let file = lab.file("ok.yaml", "name: x\nworkers: 2\n");
    let run = std::process::Command::new(bin()).arg("run").arg(&file).arg("--out").arg(&file).output().unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--out: exists and is not a directory"));
}
