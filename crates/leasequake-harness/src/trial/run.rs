//! One trial, from its directory to its history.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;

use super::contain::TrialGroup;
use super::error::TrialError;
use super::event_loop::{Hit, Run};
use super::msg::EVENT_BACKLOG;
use super::nemesis;
use super::record::Recorder;
use super::record::{RawEvent, to_us};
use super::schedule::Live;
use super::server;
use super::setup::{Addresses, placeholder_values, write_worker_config};
use super::spawn::{self, SpawnSpec};
use crate::model::history::{Detail, EventKind, EventSink};
use crate::model::{Experiment, FaultRow};

/// Everything one trial produced but its events, which went to the sink
/// as it ran.
#[derive(Debug)]
pub struct TrialRecord {
    pub trial: u32,
    pub seed: u64,
    pub deliveries: Vec<FaultRow>,
    /// Lines on a worker's stdout that were not protocol events.
    pub garbage_lines: usize,
    /// What became of each worker, in words (trials.csv `worker_outcomes`).
    pub outcomes: Vec<String>,
}

/// What a trial runs in: the executable that is the built-in worker, the
/// run's stop flag, the trial's containment, the run's managed servers.
#[derive(Clone, Copy)]
pub struct TrialEnv<'a> {
    pub exe: &'a Path,
    pub stop: &'a AtomicBool,
    pub group: &'a TrialGroup,
    pub servers: &'a server::Servers,
}

/// Run trial number `trial` (1-based, unique in the run) in `dir` with the
/// randomness of `seed` (the points of a sweep share seeds trial by trial,
/// so that they differ only in their settings). Its events go to `events`
/// as it runs (see `record`); a trial that fails leaves there what it had.
pub fn run_trial(
    exp: &Experiment,
    trial: u32,
    seed: u64,
    dir: &Path,
    env: &TrialEnv<'_>,
    events: &mut dyn EventSink,
) -> Result<TrialRecord, TrialError> {
    let TrialEnv { exe, stop, group, servers } = *env;
    fresh_dir(dir).map_err(|source| TrialError::Dir { path: dir.into(), source })?;
    let lock = dir.join("leader.lock");
    nemesis::prepare_lock(exp, &lock).map_err(|source| TrialError::Dir { path: lock.clone(), source })?;
    // Fault times are our precision budget: ask the kernel not to coalesce
    // this thread's timer wake-ups (default slack is 50 µs).
    let _ = nix::sys::prctl::set_timerslack(1);

    let (tx, rx) = mpsc::sync_channel(EVENT_BACKLOG);
    let mut server = servers.for_trial(exp, dir)?;
    // A replicated service is each trial's own: a failover changes it.
    let service =
        if exp.substrate.replicated() { Some(server::ReplicatedService::start(exp, dir, seed)?) } else { None };
    let address = server.address().or_else(|| exp.substrate.address());
    if server.shared()
        && let Some(address) = &address
    {
        // The lease's name on a shared server is derived from the lock
        // path, which a rerun of an interrupted trial shares with the
        // attempt before it: that attempt's lease must not outlive it.
        crate::substrate::forget(exp.substrate.kind, address, &crate::model::worker_config::lease_key(&lock));
    }
    let proxy = match (exp.proxied(), &address) {
        (true, Some(server)) => Some(start_proxy(server, exp.workers, seed)?),
        _ => None,
    };
    let addresses = Addresses {
        server: address.clone(),
        links: match (&proxy, &address) {
            (Some(p), Some(server)) => (0..exp.workers)
                .map(|i| crate::proxy::with_endpoint(server, p.address(i)).map_err(TrialError::Address))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        },
        services: service.as_ref().map(|s| s.views()).unwrap_or_default(),
    };
    let values = |i: usize| placeholder_values(exp, i, dir, &lock, &addresses);
    let args = if exp.program.is_none() {
        write_worker_config(exp, dir, &lock, &addresses, seed)
            .map_err(|source| TrialError::Dir { path: dir.join("worker.json"), source })?
    } else {
        Vec::new()
    };
    // A program's clock is moved by the shim or in its vDSO; the anchor of
    // its rate is now, before anything of the trial has run.
    let clocks = if super::clock::moves_program_clock(exp) {
        let dir = super::nemesis::clock_dir(&lock);
        let prepared = super::clock::ProgramClocks::prepare(exp, &dir, crate::model::clock::wall_ns());
        Some(prepared.map_err(|source| TrialError::Dir { path: dir, source })?)
    } else {
        None
    };
    let spec = SpawnSpec {
        exe,
        args,
        dir,
        count: exp.workers,
        program: exp.program.as_ref().map(|p| (p, &values as &spawn::Placeholders)),
        group,
        clocks: clocks.as_ref(),
    };
    let view = if exp.substrate.observe {
        let members = service.as_ref().map(|s| s.member_addresses()).unwrap_or_default();
        let members = if members.is_empty() { address.iter().cloned().collect() } else { members };
        let key = crate::model::worker_config::lease_key(&lock);
        let view = crate::substrate::view::open_view(exp.substrate.kind, &lock, &key, &members);
        Some(view.map_err(|e| TrialError::Observe(e.to_string()))?)
    } else {
        None
    };
    let mut rec = Recorder::new(events);
    let (mut workers, barrier) = spawn::spawn(&spec, &tx)?;
    for p in &workers.procs {
        rec.push(RawEvent::harness(
            p.spawned_ns,
            Some(p.index),
            Some(p.pid.as_raw()),
            EventKind::Spawn,
            Detail::default(),
        ));
    }

    // Started after the spawn (it names holders by their workers' groups),
    // before the release: the lease's first grant is seen.
    let watch = view.and_then(|view| {
        let groups = workers.procs.iter().map(|p| p.pid.as_raw()).collect();
        super::lease_watch::LeaseWatch::start(view, groups, tx)
            .inspect_err(|e| crate::warnln!("warning: trial {trial}: the lease is not observed: {e}"))
            .ok()
    });
    let mut run = Run {
        os: &super::os::RealOs,
        rx,
        rec,
        exits: vec![None; exp.workers],
        said: vec![false; exp.workers],
        live: Live::new(exp.workers),
        exited: 0,
        ready: 0,
        garbage: 0,
        deliveries: Vec::new(),
        end_ns: i64::MAX,
        unsettled: (exp.program.is_none() && exp.worker.mode == crate::model::Mode::OneShot)
            .then(|| vec![true; exp.workers]),
        shim: clocks.as_ref().map(|_| vec![None; exp.workers]),
        vdso: std::mem::take(&mut workers.vdso),
        late_starts: Vec::new(),
    };
    if exp.program.as_ref().is_some_and(|p| !p.ready) {
        // Without `ready: true` a program knows no barrier handshake: it is
        // ready once spawned (it may still wait for EOF on stdin, which
        // comes at the release).
        run.ready = exp.workers;
    }
    let hit = Hit {
        lock: &lock,
        server: server.own().map(|s| s as &mut dyn nemesis::ServerControl),
        proxy: proxy.as_ref(),
        service: service.as_ref(),
        clocks: clocks.as_ref(),
    };
    let outcome = run.drive(exp, seed, &workers, barrier, stop, hit);
    if let Some(watch) = watch {
        for raw in watch.stop() {
            run.rec.push(raw);
        }
    }
    run.recheck_shims(&workers.procs);
    // Undo every fault still in force before the clean-up, so that the
    // workers' releases are not stuck behind the experiment's own faults:
    // the clean-up continues stopped workers first; a paused server is
    // continued here, and every link healed.
    if let Some(s) = server.own()
        && let Err(e) = s.resume()
    {
        crate::warnln!("warning: trial {trial}: the managed server could not be resumed: {e}");
    }
    if let Some(p) = &proxy {
        for link in 0..p.links() {
            let _ = p.heal(link);
        }
    }
    if let Some(s) = &service {
        s.heal_all();
    }
    let cleaned = run.clean_up(exp, &mut workers, group);
    if let Some(c) = &clocks {
        c.remove_shim();
    }
    // Each reply the links dropped, by worker: a request that reached the
    // server.
    let losses: Vec<Vec<i64>> = match (proxy, service) {
        (Some(p), _) => p.stop().into_iter().map(|link| link.reply_losses).collect(),
        (None, Some(s)) => s.stop(),
        (None, None) => Vec::new(),
    };
    for (i, lost) in losses.into_iter().enumerate() {
        let pid = workers.procs.get(i).map(|w| w.pid.as_raw());
        for t_ns in lost {
            run.rec.push(RawEvent::harness(t_ns, Some(i), pid, EventKind::ReplyLost, Detail::default()));
        }
    }
    // Every event is in: handed on whatever became of the trial (a failed
    // one's file keeps what explains it, its exits).
    run.rec.finish();
    let shared = server.shared();
    drop(server);
    if shared && let Some(address) = &address {
        // A shared server keeps the lease after the trial: remove it.
        crate::substrate::forget(exp.substrate.kind, address, &crate::model::worker_config::lease_key(&lock));
    }
    if run.rec.unplaceable > 0 {
        crate::warnln!(
            "warning: trial {trial}: {} events stamped more than a year from the trial's start were not kept (a \
             program's own times must be CLOCK_MONOTONIC nanoseconds)",
            run.rec.unplaceable
        );
    }
    // What went wrong first is the error: a trial that failed is then
    // cleaned up, and a clean-up failure after it is the lesser news.
    let t0 = outcome?;
    let left_behind = cleaned?;
    if let Some(e) = run.rec.take_error() {
        return Err(TrialError::Events(e));
    }
    if exp.program.is_none() {
        run.check_exits(&workers)?;
    }
    let protocol = exp.program.as_ref().is_some_and(|p| p.observe == crate::model::program::Observe::Protocol);
    let mut outcomes = run.outcomes(&workers, t0, protocol);
    if left_behind {
        outcomes.push("processes left running by the workers: killed at the end of the trial".into());
    }

    let deliveries = run
        .deliveries
        .into_iter()
        .map(|d| FaultRow {
            fault: d.fault,
            action: d.action.to_string(),
            target: d.target,
            worker: d.worker,
            pid: d.pid,
            scheduled_us: to_us(d.scheduled_ns - t0),
            actual_us: to_us(d.actual_ns - t0),
            error: d.error,
        })
        .collect();
    Ok(TrialRecord { trial, seed, deliveries, garbage_lines: run.garbage, outcomes })
}

/// The proxy between the workers and `server`: a link per worker.
fn start_proxy(server: &str, workers: usize, seed: u64) -> Result<crate::proxy::Proxy, TrialError> {
    let upstream = crate::proxy::endpoint(server)?;
    crate::proxy::Proxy::start(upstream, workers, seed).map_err(TrialError::Proxy)
}

/// Make `dir` an empty directory. What an earlier attempt at this trial left
/// there (a run interrupted and resumed) is moved aside, kept, never reused:
/// its lock file may still hold the dead leader's lease.
fn fresh_dir(dir: &Path) -> std::io::Result<()> {
    if dir.symlink_metadata().is_ok() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let aside = (1..)
            .map(|k| dir.with_file_name(format!("{name}.interrupted-{k}")))
            .find(|p| p.symlink_metadata().is_err())
            .expect("an unused name");
        std::fs::rename(dir, aside)?;
    }
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::fresh_dir;

    #[test]
    fn an_earlier_attempt_is_moved_aside_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("0003");
        fresh_dir(&dir).unwrap();
        std::fs::write(dir.join("leader.lock"), "{\"pid\":1}").unwrap();
        fresh_dir(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let kept = tmp.path().join("0003.interrupted-1").join("leader.lock");
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "{\"pid\":1}");
        fresh_dir(&dir).unwrap();
        assert!(tmp.path().join("0003.interrupted-2").is_dir());
    }
}
