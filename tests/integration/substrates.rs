//! Every substrate passes the same core properties, against real servers
//! (Redis and PostgreSQL, run by the harness itself):
//! one leader at a time without faults, release on SIGTERM, takeover after
//! the holder's death. And a harness-managed Redis restarted without
//! persistence forgets the lease: a measured double leader, whose stale
//! writes a fenced store rejects.
//!
//! Scale 0.1: lease 900 ms, renew and watch 300 ms, expiry resolution
//! 100 ms. Tolerance 25 ms, as in bounds.rs, or what the machine makes of
//! it (`Timing`); the bugs these catch are off by a resolution or more.

use crate::helper::{Lab, Row, Timing};
use crate::this_test;

const SCALE: f64 = 0.1;
const LEASE: f64 = 9000.0 * SCALE;
const RENEW: f64 = 3000.0 * SCALE;
const WATCH: f64 = 3000.0 * SCALE;
const RESOLUTION: f64 = 1000.0 * SCALE;
const TOL: f64 = 25.0;

const KINDS: [&str; 5] = ["file", "flock", "redis", "postgres", "postgres-advisory"];

/// Three workers; the leader is sent SIGTERM at 3.1 s and the next leader
/// SIGKILL at 8.15 s (both clear of the 3 s ticks). Two gaps: the release's
/// and the crash's.
fn term_then_kill(kind: &str) -> String {
    let managed = if matches!(kind, "file" | "flock") { "" } else { ", managed: true" };
    format!(
        "name: core-{kind}\nworkers: 3\nduration: 24s\nseed: 11\nsubstrate: {{kind: {kind}{managed}}}\n\
         faults:\n  - at: 3.1s\n    target: leader\n    action: term\n  - at: 8.15s\n    target: leader\n    action: kill\n"
    )
}

#[test]
fn a_restarted_postgresql_keeps_the_lease_row_and_its_holder() {
    // The same schedule on a managed PostgreSQL: the restart is a crash
    // and its recovery, and the committed lease row survives it. Worker 1
    // finds the lease held (its look at 7 s may fail on the broken
    // connection; the next one sees the row), and worker 0's renewals
    // carry on from a new connection with the same token: one leader
    // throughout, never a second grant.
    let lab = Lab::new();
    let file = lab.file(
        "restart.yaml",
        "name: pg-restart\nworkers: 2\nduration: 15s\nseed: 1\nstart: staggered\nstagger: 1s\n\
         substrate: {kind: postgres, managed: true}\n\
         faults:\n  - at: 6.5s\n    action: server-restart\n",
    );
    let run = lab.run(file).scale(0.2).trials(1).output().expect_code(0);
    let trial = &run.table("trials.csv")[0];
    assert_eq!(trial.get("max_leaders"), "1", "the lease outlived the restart: {trial:?}");
    let events = run.table("events.csv");
    let acquired: Vec<&Row> = events.iter().filter(|e| e.get("event") == "acquired").collect();
    assert_eq!(acquired.len(), 1, "one grant in the whole trial: {acquired:?}");
    let renewed_after = events.iter().filter(|e| e.get("event") == "renewed" && e.f64("t_ms") > 6500.0 * 0.2).count();
    assert!(renewed_after >= 1, "the holder renews after the restart");
    let faults = run.table("faults.csv");
    assert!(faults.iter().any(|f| f.get("action") == "server-restart" && f.get("error").is_empty()), "{faults:?}");
}

#[test]
fn a_server_restarted_while_paused_comes_back_running() {
    // A restart inside a pause kills the frozen server; the new one must
    // not start in the frozen cgroup (it would never answer).
    let lab = Lab::new();
    let file = lab.file(
        "restart-paused.yaml",
        "name: restart-paused\nworkers: 2\nduration: 15s\nseed: 1\nsubstrate: {kind: postgres, managed: true}\n\
         faults:\n  - {at: 4s, action: server-pause, duration: 6s}\n  - {at: 6s, action: server-restart}\n",
    );
    let run = lab.run(file).scale(0.2).trials(1).output().expect_code(0);
    let faults = run.table("faults.csv");
    let restart = faults.iter().find(|f| f.get("action") == "server-restart").expect("a restart row");
    assert_eq!(restart.get("error"), "", "{faults:?}");
    let events = run.table("events.csv");
    assert!(
        events.iter().any(|e| e.get("event") == "renewed" && e.f64("t_ms") > 6000.0 * 0.2),
        "the restarted server answers renewals"
    );
}

/// A `redis-server` on PATH in `lab` that, at each of its first `held`
/// starts on a port, first has a real Redis take that port and answer on it
/// (gone with the start that found it taken), then starts the real one,
/// which finds the port in use. What another process does when it takes
/// the port the harness chose before its server binds it.
fn redis_whose_port_is_taken(lab: &Lab, held: u32) -> String {
    let real = std::process::Command::new("sh").args(["-c", "command -v redis-server"]).output().unwrap();
    let real = String::from_utf8(real.stdout).unwrap().trim().to_string();
    assert!(!real.is_empty(), "redis-server (apt-get install redis-server)");
    let bin = lab.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let (count, dir) = (lab.path().join("starts"), lab.path().display().to_string());
    let shim = format!(
        "#!/bin/sh\n\
         case \" $* \" in *\" --port \"*) ;; *) exec {real} \"$@\" ;; esac\n\
         n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n\
         if [ \"$n\" -lt {held} ]; then\n\
           port=$(echo \" $* \" | sed 's/.* --port \\([0-9]*\\) .*/\\1/')\n\
           setpriv --pdeathsig KILL {real} --port \"$port\" --bind 127.0.0.1 --save '' --appendonly no --dir {dir} >/dev/null 2>&1 &\n\
           i=0; until [ \"$(redis-cli -p \"$port\" ping 2>/dev/null)\" = PONG ] || [ $i -ge 500 ]; do sleep 0.01; i=$((i + 1)); done\n\
           # The holder answers for a while before this start fails.\n\
           sleep 0.3\n\
         fi\n\
         exec {real} \"$@\"\n",
        count = count.display(),
    );
    let path = bin.join("redis-server");
    std::fs::write(&path, shim).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

const REDIS_BRIEFLY: &str =
    "name: port-taken\nworkers: 2\nduration: 3s\nseed: 1\nsubstrate: {kind: redis, managed: true}\n";

#[test]
fn a_managed_server_that_finds_its_port_taken_starts_again_on_another() {
    // The holder answers PING on the port while the harness's own server
    // has not yet failed: a harness that took any answer for its server's
    // would run the trial against the holder, which dies with that start.
    let lab = Lab::new();
    let path = redis_whose_port_is_taken(&lab, 1);
    let file = lab.file("port-taken.yaml", REDIS_BRIEFLY);
    let run = lab.run(file).env("PATH", &path).trials(1).output().expect_code(0);
    let starts = std::fs::read_to_string(lab.path().join("starts")).unwrap();
    assert_eq!(starts.trim(), "2", "one start found its port taken, the next ran: {}", run.stderr());
    let events = run.table("events.csv");
    assert!(events.iter().any(|e| e.get("event") == "acquired"), "the trial ran on the second server: {events:?}");
    let trial = &run.table("trials.csv")[0];
    assert_eq!(trial.get("max_leaders"), "1", "{trial:?}");
}

#[test]
fn a_managed_server_whose_every_port_is_taken_is_an_error_naming_it() {
    let lab = Lab::new();
    let path = redis_whose_port_is_taken(&lab, u32::MAX);
    let file = lab.file("port-taken.yaml", REDIS_BRIEFLY);
    let run = lab.run(file).env("PATH", &path).trials(1).output().expect_code(3);
    let stderr = run.stderr();
    assert!(stderr.contains("redis-server found its port") && stderr.contains("taken by another process"), "{stderr}");
    let starts = std::fs::read_to_string(lab.path().join("starts")).unwrap();
    assert_eq!(starts.trim(), "3", "three starts, each on its own port: {stderr}");
}

/// What the takeover that ended `gap` took by its worker's own account:
/// how late it woke for its tick and how long its acquire ran (the
/// `acquired` event is stamped at the acquire's end, the gap's end).
fn takeover_cost_ms(events: &[Row], gap: &Row) -> f64 {
    let end = gap.f64("end_ms");
    let acquired = events
        .iter()
        .find(|e| {
            e.get("event") == "acquired"
                && e.get("worker") == gap.get("ended_by")
                && (e.f64("t_ms") - end).abs() < 0.002
        })
        .unwrap_or_else(|| panic!("the acquire that ended the gap: {gap:?}"));
    let detail: serde_json::Value = serde_json::from_str(acquired.get("detail")).expect("an event's detail is JSON");
    let us = |key: &str| detail.get(key).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    (us("op_us") + us("late_us")) / 1000.0
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`).
mod alone {
    use super::*;

    #[test]
    fn every_substrate_keeps_one_leader_releases_on_term_and_fails_over_after_a_kill() {
        // Alone, the five substrates side by side: each trial judged by the
        // tolerance, a disturbed one skipped by name.
        let machine = Lab::alone();
        let Some(timing) = Timing::new(this_test!(), TOL, RESOLUTION) else { return };
        let (machine, timing) = (&machine, &timing);
        let results: Vec<(Row, Vec<Row>, Vec<Row>)> = std::thread::scope(|s| {
            let handles: Vec<_> = KINDS
                .iter()
                .map(|kind| {
                    s.spawn(move || {
                        let lab = Lab::beside(machine);
                        let file = lab.file("core.yaml", &(term_then_kill(kind) + &timing.yaml(SCALE)));
                        let run = lab.run(file).scale(SCALE).trials(1).output().expect_code(0);
                        (run.table("trials.csv").remove(0), run.table("gaps.csv"), run.table("events.csv"))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("run thread")).collect()
        });
        for (kind, (trial, gaps, events)) in KINDS.iter().zip(&results) {
            if timing.part(kind).undisturbed(std::slice::from_ref(trial), 1).is_none() {
                continue;
            }
            let tol = timing.tol;
            assert_eq!(trial.get("max_leaders"), "1", "{kind}: two leaders without a race: {trial:?}");
            assert!(!trial.get("first_leader_ms").is_empty(), "{kind}: nobody led");
            assert_eq!(gaps.len(), 2, "{kind}: one gap per fault: {gaps:?}");
            let (term, kill) = (&gaps[0], &gaps[1]);
            assert_eq!((term.get("cause"), kill.get("cause")), ("term", "kill"), "{kind}");
            assert!(gaps.iter().all(|g| g.get("ended") == "true"), "{kind}: a gap never ended: {gaps:?}");
            // Release: the next watch tick finds the lease free, and the
            // takeover then takes what it took (recorded by its worker): a
            // server beside four others, all starting at once, answered a
            // first acquire in 30 ms, which is the system's, not a stall.
            let t = term.f64("duration_ms");
            let cost = takeover_cost_ms(events, term);
            assert!(
                t <= WATCH + cost + tol,
                "{kind}: gap after SIGTERM {t} ms > watch {WATCH} ms + the takeover's {cost:.1} ms (+ {tol:.1})"
            );
            // Crash: an expiring lease runs out (from the last renewal, at most
            // `renew` before the kill), then the next watch tick sees it; a
            // lock held by a process or a session is dropped at its death.
            let k = kill.f64("duration_ms");
            let cost = takeover_cost_ms(events, kill);
            let (lo, hi) = match *kind {
                "file" => (LEASE - RENEW, LEASE + WATCH + RESOLUTION),
                "redis" | "postgres" => (LEASE - RENEW, LEASE + WATCH),
                _ => (0.0, WATCH),
            };
            assert!(
                k >= lo - tol && k <= hi + cost + tol,
                "{kind}: gap after SIGKILL {k} ms outside [{lo}, {hi} + the takeover's {cost:.1} ms] ± {tol:.1} ms"
            );
        }
    }

    #[test]
    fn a_restarted_redis_forgets_the_lease_and_fencing_rejects_the_old_holders_writes() {
        // Worker 0 starts at 0 and leads, renewing at 3 s, 6 s, 9 s; worker 1
        // starts 1 s later and watches at 4 s, 7 s, 10 s. The server restarts
        // empty at 6.5 s, between a renewal and a watch: worker 1 finds the
        // lease free at 7 s and takes it, with a token from the new server's
        // counter (seeded from its clock, so higher). Worker 0 still believes
        // until its tick at 9 s, where it writes its report with the old token
        // (rejected), then finds the lease taken and steps down: 2 s of two
        // leaders. At scale 0.2 the restart is 100 ms from the ticks on either
        // side; the test runs alone, since a worker woken that late by other
        // tests' load would renew after the restart (the trial would say so:
        // disturbed).
        let lab = Lab::alone();
        // A bug (a renewal after the restart, a step-down a tick late) is
        // off by the restart's 100 ms margin to the ticks or more.
        let Some(timing) = Timing::new(this_test!(), 50.0, 100.0) else { return };
        let file = lab.file(
            "restart.yaml",
            &format!(
                "name: redis-restart\nworkers: 2\nduration: 12s\nseed: 1\nstart: staggered\nstagger: 1s\n\
                 substrate: {{kind: redis, managed: true}}\nworker:\n  fencing_tokens: true\n  resource: fenced\n\
                 faults:\n  - at: 6.5s\n    action: server-restart\n{}",
                timing.yaml(0.2)
            ),
        );
        let run = lab.run(file).scale(0.2).trials(1).output().expect_code(0);
        let trials = run.table("trials.csv");
        let Some(calm) = timing.undisturbed(&trials, 1) else { return };
        let trial = calm[0];
        assert_eq!(trial.get("max_leaders"), "2", "the restart must produce two leaders: {trial:?}");
        let double = trial.f64("double_leader_ms");
        let tol = timing.tol;
        assert!((400.0 - tol..=400.0 + tol).contains(&double), "double leader for {double} ms, not 400 ± {tol:.1}");
        let writes = &run.table("writes.csv")[0];
        assert!(writes.f64("stale_writes") >= 1.0, "the old holder wrote after the new grant: {writes:?}");
        assert_eq!(writes.get("stale_writes_accepted"), "0", "fenced storage took a stale write");
        assert!(writes.f64("stale_writes_rejected") >= 1.0);
        let faults = run.table("faults.csv");
        assert!(faults.iter().any(|f| f.get("action") == "server-restart" && f.get("error").is_empty()), "{faults:?}");
    }
}
