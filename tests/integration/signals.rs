//! The harness itself under signals: nothing leaks, nothing finished is lost.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::helper::{Lab, processes_mentioning, read_table, wait_for};

/// Long trials (1.5 s each at this scale) so the signal lands mid-trial.
/// The leader is stopped for good 1 s after its first renewal from 12 s
/// on: clear of the renewal itself, whose truncate-then-write a stop inside
/// would leave as an empty lock file (a wedge, not the stale believer every
/// trial here is meant to end with).
const SLOW: &str = "name: slow\nworkers: 5\nduration: 30s\nfaults:\n  - at: 12s\n    after: renewed\n    delay: 1s\n    target: leader\n    action: stop\n";

fn completed_trials(out: &std::path::Path) -> usize {
    let path = out.join("trials.csv");
    if path.exists() { read_table(&path).len() } else { 0 }
}

/// The same, with the built-in worker run as a program under test: it goes
/// through the exec trampoline, whose PR_SET_PDEATHSIG must survive exec.
const SLOW_PROGRAM: &str = "name: slow\nworkers: 5\nduration: 30s\nprogram:\n  command: [\"{leasequake}\", worker, \
     \"lock={lock}\", \"lease={lease_ms}ms\", \"renew={renew_ms}ms\", \"watch={watch_ms}ms\"]\n\
     faults:\n  - at: 12s\n    target: leader\n    action: stop\n";

#[test]
fn kill_9_of_the_harness_leaves_no_worker_and_keeps_finished_trials() {
    kill_9_mid_trial(SLOW);
}

#[test]
fn kill_9_of_the_harness_leaves_no_program_under_test() {
    kill_9_mid_trial(SLOW_PROGRAM);
}

fn kill_9_mid_trial(yaml: &str) {
    let lab = Lab::new();
    let file = lab.file("slow.yaml", yaml);
    let (mut child, out) = lab.run(&file).scale(0.05).trials(20).spawn();
    // Wait for one finished trial, then for the next trial's workers.
    wait_for(Duration::from_secs(30), "a finished trial", || (completed_trials(&out) >= 1).then_some(()));
    wait_for(Duration::from_secs(10), "workers of the next trial", || {
        (processes_mentioning(&out).len() == 5).then_some(())
    });
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGKILL).expect("kill -9 the harness");
    let _ = child.wait();
    // PR_SET_PDEATHSIG kills the workers (even the SIGSTOPped leader) as
    // soon as the harness is gone; give the kernel a moment to reap them.
    wait_for(Duration::from_secs(5), "workers to die with the harness", || {
        processes_mentioning(&out).is_empty().then_some(())
    });
    let trials = read_table(&out.join("trials.csv"));
    assert!(!trials.is_empty());
    for t in &trials {
        // Every row is complete: all columns present and the outcome set.
        assert!(!t.get("outcome").is_empty(), "{t:?}");
        assert_eq!(t.get("workers"), "5");
    }
}

#[test]
fn ctrl_c_stops_cleanly_keeps_results_and_exits_130() {
    let lab = Lab::new();
    let file = lab.file("slow.yaml", SLOW);
    let (child, out) = lab.run(&file).scale(0.05).trials(20).spawn();
    wait_for(Duration::from_secs(30), "a finished trial", || (completed_trials(&out) >= 1).then_some(()));
    wait_for(Duration::from_secs(10), "workers of the next trial", || {
        (processes_mentioning(&out).len() == 5).then_some(())
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT the harness");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(130), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    // Cleanup happened before exit: no waiting needed.
    assert_eq!(processes_mentioning(&out), Vec::<i32>::new());
    let kept = read_table(&out.join("trials.csv")).len();
    assert!((1..20).contains(&kept), "kept {kept} trials");
    assert_eq!(read_table(&out.join("summary.csv"))[0].get("n"), kept.to_string());
    assert!(String::from_utf8_lossy(&output.stderr).contains("interrupted"));
}

/// Server processes (`redis-server`, `postgres`, `etcd`) working in `dir`: a
/// managed server chdirs to its trial directory, or to its data directory
/// under the lab's TMPDIR; it rewrites its command line, so that is no help.
fn servers_in(dir: &std::path::Path) -> Vec<procfs::process::Process> {
    procfs::process::all_processes()
        .expect("/proc")
        .flatten()
        .filter(|p| {
            p.stat().is_ok_and(|s| matches!(s.comm.as_str(), "redis-server" | "postgres" | "etcd") && s.state != 'Z')
        })
        .filter(|p| p.cwd().is_ok_and(|cwd| cwd.starts_with(dir)))
        .collect()
}

/// Stopped by a signal, or in a frozen cgroup (which /proc shows as
/// sleeping).
fn paused(p: &procfs::process::Process) -> bool {
    let frozen = || {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            right.starts_with("cgroup2 ").then(|| left.split(' ').nth(4).map(std::path::PathBuf::from))?
        })?;
        let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid)).ok()?;
        let rel = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim_start_matches('/').to_string();
        let events = std::fs::read_to_string(mount.join(rel).join("cgroup.events")).ok()?;
        Some(events.lines().any(|l| l == "frozen 1"))
    };
    p.stat().is_ok_and(|s| s.state == 'T') || frozen().unwrap_or(false)
}

/// The servers' data directories in the lab's TMPDIR.
fn data_dirs(lab: &Lab) -> Vec<String> {
    std::fs::read_dir(lab.path().join("tmp"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("leasequake-pg-") || n.starts_with("leasequake-etcd-"))
                .collect()
        })
        .unwrap_or_default()
}

fn kill_9_of_the_harness_takes_a_paused_server_with_it(kind: &str, cgroup: bool) {
    // A managed server that a server-pause left stopped (or frozen) must
    // die with the harness too, every process of it, and its data go.
    // Without a cgroup (not root, a container) too: a stopped PostgreSQL
    // backend never notices its postmaster's death. etcd's TTLs are whole
    // seconds: its lease is 2 s in real time, the others' 0.9 s.
    let (lease, scale) = if kind == "etcd" { ("lease: 2s\nrenew: 500ms\nwatch: 500ms\n", 1.0) } else { ("", 0.1) };
    let at = if kind == "etcd" { "1s" } else { "5s" };
    let lab = Lab::new();
    let file = lab.file(
        "server.yaml",
        &format!(
            "name: server\nworkers: 2\nduration: 30s\n{lease}substrate: {{kind: {kind}, managed: true}}\n\
             faults:\n  - at: {at}\n    action: server-pause\n    duration: 20s\n"
        ),
    );
    let mut run = lab.run(&file).scale(scale).trials(1);
    if !cgroup {
        run = run.env("LEASEQUAKE_NO_CGROUP", "1");
    }
    let (mut child, out) = run.spawn();
    wait_for(Duration::from_secs(20), "the server paused", || {
        let servers = servers_in(lab.path());
        (!servers.is_empty() && servers.iter().all(paused)).then_some(())
    });
    assert_eq!(processes_mentioning(&out).len(), 2, "both workers run");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9 the harness");
    let _ = child.wait();
    wait_for(Duration::from_secs(5), "workers and server to die with the harness", || {
        (processes_mentioning(&out).is_empty() && servers_in(lab.path()).is_empty()).then_some(())
    });
    wait_for(Duration::from_secs(15), "the servers' data directories to go", || {
        data_dirs(&lab).is_empty().then_some(())
    });
}

#[test]
fn kill_9_of_the_harness_takes_a_paused_managed_redis_with_it() {
    kill_9_of_the_harness_takes_a_paused_server_with_it("redis", true);
}

#[test]
fn kill_9_of_the_harness_takes_a_paused_managed_postgresql_and_its_data_with_it() {
    kill_9_of_the_harness_takes_a_paused_server_with_it("postgres", true);
}

#[test]
fn kill_9_of_the_harness_without_a_cgroup_takes_every_stopped_postgresql_process_and_its_data_with_it() {
    kill_9_of_the_harness_takes_a_paused_server_with_it("postgres", false);
}

#[test]
fn kill_9_of_the_harness_takes_a_paused_managed_etcd_and_its_data_with_it() {
    kill_9_of_the_harness_takes_a_paused_server_with_it("etcd", true);
}

/// kill -9 mid-trial, then `--resume`: the interrupted trial runs again from
/// a clean slate (its directory moved aside, its lease gone from the lock
/// file or the server), and a torn last line in events.csv is tolerated.
fn resumed_after_kill_9(substrate: &str) {
    let lab = Lab::new();
    // The lease must outlive the harness: a server of the test's own.
    let redis = (substrate == "redis").then(|| crate::helper::OwnRedis::start(lab.path()));
    let address = redis.as_ref().map(|r| format!(", address: \"{}\"", r.address())).unwrap_or_default();
    let yaml = format!("{SLOW}substrate: {{kind: {substrate}{address}}}\n");
    let file = lab.file("slow.yaml", &yaml);
    let (mut child, out) = lab.run(&file).scale(0.05).trials(3).spawn();
    wait_for(Duration::from_secs(30), "a finished trial", || (completed_trials(&out) >= 1).then_some(()));
    wait_for(Duration::from_secs(10), "a leader in the next trial", || {
        let events = std::fs::read_to_string(out.join("events.csv")).ok()?;
        let n = completed_trials(&out);
        // The next trial's events are not written until it ends: watch its
        // workers' logs instead.
        let dir = out.join("trials").join(format!("{:04}", n + 1));
        let logs =
            std::fs::read_dir(&dir).ok()?.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".log"));
        let leading = logs.into_iter().any(|l| std::fs::read_to_string(l.path()).is_ok_and(|t| t.contains("LEADER")));
        (leading && !events.is_empty()).then_some(())
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9 the harness");
    let _ = child.wait();
    wait_for(Duration::from_secs(5), "workers to die with the harness", || {
        processes_mentioning(&out).is_empty().then_some(())
    });
    let finished = completed_trials(&out);
    // As a kill in the middle of a write leaves it: a torn last line.
    let mut events = std::fs::OpenOptions::new().append(true).open(out.join("events.csv")).unwrap();
    std::io::Write::write_all(&mut events, b"9,12.5,0,4").unwrap();
    drop(events);

    let resumed = std::process::Command::new(crate::helper::bin())
        .args(["run", "--quiet", "--resume"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let trials = read_table(&out.join("trials.csv"));
    assert_eq!(trials.len(), 3, "{trials:?}");
    for t in &trials {
        // From a clean slate the first leader comes at once; on the old
        // attempt's lock it would wait out the dead leader's lease (450 ms).
        let first = t.f64("first_leader_ms");
        assert!(first < 200.0, "{substrate}: trial {} first leader at {first} ms", t.get("trial"));
        // The stopped leader still believes it leads: every trial, resumed
        // or not, ends as the first did.
        assert_eq!(t.get("outcome"), trials[0].get("outcome"), "{t:?}");
    }
    let interrupted = format!("{:04}.interrupted-1", finished + 1);
    assert!(out.join("trials").join(&interrupted).is_dir(), "the interrupted attempt is kept as {interrupted}");
    let kept = std::fs::read_to_string(out.join("events.csv")).unwrap();
    assert!(kept.ends_with('\n') && !kept.contains("9,12.5,0,4"), "the torn line is gone");
}

#[test]
fn a_resumed_run_reruns_the_interrupted_trial_from_a_clean_slate() {
    resumed_after_kill_9("file");
}

#[test]
fn a_resumed_run_clears_the_interrupted_trials_lease_from_redis() {
    resumed_after_kill_9("redis");
}

/// A program whose shell leaves a grandchild working in the trial
/// directory: `setsid` puts it in a session of its own (only a cgroup holds
/// it), or it stays in the worker's process group.
fn with_grandchild(setsid: bool) -> String {
    let start = if setsid { "setsid sh" } else { "sh" };
    format!(
        "name: tree\nworkers: 2\nduration: 30s\nprogram:\n  shell: true\n  command: >-\n    \
         cd {{trial_dir}} && {start} -c 'sleep 1000; :' &\n    \
         exec {{leasequake}} worker lock={{lock}} lease={{lease_ms}}ms renew={{renew_ms}}ms watch={{watch_ms}}ms\n  \
         patterns:\n    - {{regex: 'Acquired lease', event: acquired}}\n"
    )
}

fn grandchildren_die_with_the_harness(setsid: bool, no_cgroup: bool) {
    let lab = Lab::new();
    let file = lab.file("tree.yaml", &with_grandchild(setsid));
    let mut run = lab.run(&file).scale(0.1).trials(2);
    if no_cgroup {
        run = run.env("LEASEQUAKE_NO_CGROUP", "1");
    }
    let (mut child, out) = run.spawn();
    let sleeping = |out: &std::path::Path| {
        crate::helper::processes_in(out).into_iter().filter(|(_, cmd)| cmd.starts_with("sleep")).count()
    };
    wait_for(Duration::from_secs(20), "the grandchildren", || (sleeping(&out) == 2).then_some(()));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9 the harness");
    let _ = child.wait();
    wait_for(Duration::from_secs(5), "every descendant to die with the harness", || {
        crate::helper::processes_in(&out).is_empty().then_some(())
    });
}

#[test]
fn kill_9_of_the_harness_leaves_no_grandchild_even_in_its_own_session() {
    grandchildren_die_with_the_harness(true, false);
}

#[test]
fn kill_9_of_the_harness_leaves_no_grandchild_without_a_cgroup() {
    grandchildren_die_with_the_harness(false, true);
}

#[test]
fn what_a_program_leaves_running_is_killed_at_the_end_of_its_trial() {
    let lab = Lab::new();
    let file = lab.file("tree.yaml", &with_grandchild(true).replace("duration: 30s", "duration: 5s"));
    let run = lab.run(&file).scale(0.1).trials(2).output().expect_code(0);
    for t in run.table("trials.csv") {
        assert!(t.get("worker_outcomes").contains("processes left running by the workers: killed"), "{t:?}");
    }
    assert!(crate::helper::processes_in(&run.out).is_empty());
}

#[test]
fn faults_still_in_force_are_undone_before_the_clean_up() {
    // The server is paused past the end of the trial, the leader stopped
    // past it too: both are continued before the workers are asked to
    // release, so every worker releases and exits on its own.
    let lab = Lab::new();
    let file = lab.file(
        "held.yaml",
        "name: held\nworkers: 2\nduration: 10s\nsubstrate: {kind: redis, managed: true}\n\
         faults:\n  - at: 4s\n    target: watcher\n    action: stop\n  - at: 6s\n    action: server-pause\n    duration: 60s\n",
    );
    let run = lab.run(&file).scale(0.1).trials(1).output().expect_code(0);
    let t = &run.table("trials.csv")[0];
    assert_eq!(t.get("worker_outcomes"), "0: ok; 1: ok", "{t:?}");
    let released =
        run.table("events.csv").iter().filter(|e| e.get("event") == "released" || e.get("event") == "exiting").count();
    assert!(released >= 2, "every worker wound up on its own");
}

#[test]
fn a_trial_past_its_time_limit_is_killed_whole_and_reported() {
    // The limit is normally the trial's duration, grace and every wait
    // with a margin; here it is cut below the duration to make a trial
    // overrun on purpose.
    let lab = Lab::new();
    let file = lab.file("long.yaml", &with_grandchild(true));
    let started = std::time::Instant::now();
    let run = lab.run(&file).scale(0.1).trials(2).env("LEASEQUAKE_TRIAL_LIMIT_MS", "800").output().expect_code(3);
    assert!(started.elapsed() < Duration::from_secs(15), "it took {:?}", started.elapsed());
    assert!(run.stderr().contains("trial 1: the trial overran its time limit of 800ms"), "{}", run.stderr());
    assert!(crate::helper::processes_in(&run.out).is_empty(), "killed whole, grandchildren too");
}

#[test]
fn ctrl_c_during_the_calibration_leaves_nothing_behind() {
    let lab = Lab::new();
    let file = lab.file("slow.yaml", SLOW);
    let tmp = lab.path().join("private-tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = lab.path().join("out");
    let child = std::process::Command::new(crate::helper::bin())
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&file)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The calibration (about 2 s) works in a scratch directory under TMPDIR.
    wait_for(Duration::from_secs(10), "the calibration's scratch directory", || {
        (std::fs::read_dir(&tmp).unwrap().count() > 0).then_some(())
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted before the first trial"), "{stderr}");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the scratch directory is gone");
    assert!(!out.exists(), "nothing was written");
}
