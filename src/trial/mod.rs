//! One trial: spawn N workers in a fresh directory, release them together,
//! inject the scheduled faults, collect every event into one history, clean
//! up. The history goes back to the caller, which checks it.
//!
//! The trial owns its children from spawn to reap. Whatever happens (an
//! error, Ctrl-C, a panic) they are SIGCONTed, SIGTERMed, given a grace
//! period, SIGKILLed and reaped before `run_trial` returns.

pub mod faults;
pub mod limits;
pub mod msg;
pub mod program;
pub mod server;
pub mod spawn;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use nix::sys::signal::Signal;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::clock::mono_ns;
use crate::model::history::{Detail, Event, EventKind, History};
use crate::model::worker_config::WorkerConfig;
use crate::model::{Dur, Experiment, FaultRow, Resource, StartMode};
use faults::{Delivery, Live, Nemesis};
use msg::{ExitStatus, Msg};
use spawn::{SpawnError, SpawnSpec, Workers};

/// Messages queued between the readers and the trial loop (a message is an
/// exit, a line, or a batch of up to 32 lines: at most about 65,000 lines,
/// 20 MB). A full queue blocks the readers, and so the programs that write
/// faster than the harness takes their lines, instead of growing the
/// harness's memory without bound. Room for 2048 messages: 1000 workers
/// started together tick together, and a burst of one line each must not
/// cost a blocked sender and a wake-up per line.
pub const EVENT_BACKLOG: usize = 2048;
/// How long workers may take to start up and reach the barrier.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Before a fault is due, poll for this long instead of sleeping.
const SPIN_NS: i64 = 1_000_000;
/// How long SIGKILLed workers may take to be reaped before we give up.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error("trial directory {}: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("worker {worker} exited before the barrier ({status:?}); see {}", log.display())]
    DiedEarly { worker: usize, status: ExitStatus, log: PathBuf },
    #[error("workers did not reach the barrier within {READY_TIMEOUT:?} ({ready} of {total} ready)")]
    NotReady { ready: usize, total: usize },
    #[error("interrupted")]
    Interrupted,
    #[error("{0} worker(s) survived SIGKILL for {KILL_TIMEOUT:?} (uninterruptible sleep?); giving up on them")]
    Unkillable(usize),
    #[error("worker {worker} crashed ({status:?}), not by a fault of this experiment; see {}", log.display())]
    Crashed { worker: usize, status: ExitStatus, log: PathBuf },
    #[error(transparent)]
    Server(#[from] server::ServerError),
}

/// Everything one trial produced.
#[derive(Debug)]
pub struct TrialRecord {
    pub trial: u32,
    pub seed: u64,
    pub history: History,
    pub deliveries: Vec<FaultRow>,
    /// Lines on a worker's stdout that were not protocol events.
    pub garbage_lines: usize,
    /// What became of each worker, in words (trials.csv `worker_outcomes`).
    pub outcomes: Vec<String>,
}

/// The built-in worker's config for a trial of `exp`: `address` is the
/// lease server's (a managed server's is known only per trial).
fn worker_config(exp: &Experiment, lock: &Path, address: Option<String>) -> WorkerConfig {
    let needs_store = exp.worker.resource != Resource::None || exp.worker.epoch_job.is_some();
    WorkerConfig {
        lock: lock.to_path_buf(),
        timing: exp.lease,
        worker: exp.worker.clone(),
        substrate: exp.substrate.kind,
        address,
        lease_key: None,
        resource_dir: needs_store.then(|| lock.with_file_name("resource")),
        workers: exp.workers,
        stagger: if exp.start == StartMode::Staggered { exp.stagger } else { Dur::ZERO },
    }
}

/// Write the workers' config into the trial directory; the arguments that
/// hand it to them.
fn write_worker_config(
    exp: &Experiment,
    dir: &Path,
    lock: &Path,
    address: Option<String>,
) -> std::io::Result<Vec<String>> {
    let path = dir.join("worker.json");
    let text = serde_json::to_string_pretty(&worker_config(exp, lock, address)).map_err(std::io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(vec!["worker".to_string(), "--config".to_string(), path.display().to_string()])
}

/// A program's placeholders for worker `i`: durations already scaled, in ms.
fn placeholder_values(
    exp: &Experiment,
    i: usize,
    dir: &Path,
    lock: &Path,
    address: Option<&str>,
) -> std::collections::BTreeMap<&'static str, String> {
    let ms = |d: crate::model::Dur| {
        let v = d.as_ms_f64();
        if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.3}") }
    };
    std::collections::BTreeMap::from([
        ("index", i.to_string()),
        ("workers", exp.workers.to_string()),
        ("lock", lock.display().to_string()),
        ("address", address.unwrap_or_default().to_string()),
        ("key", lock.display().to_string()),
        ("trial_dir", dir.display().to_string()),
        ("experiment_dir", exp.program.as_ref().map(|p| p.experiment_dir.clone()).unwrap_or_default()),
        ("events", "/dev/fd/3".to_string()),
        ("leasequake", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()),
        ("lease_ms", ms(exp.lease.lease)),
        ("renew_ms", ms(exp.lease.renew)),
        ("watch_ms", ms(exp.lease.watch)),
    ])
}

/// Run trial number `trial` (1-based, unique in the run) in `dir` with the
/// randomness of `seed` (the points of a sweep share seeds trial by trial,
/// so that they differ only in their settings).
pub fn run_trial(
    exp: &Experiment,
    trial: u32,
    seed: u64,
    dir: &Path,
    exe: &Path,
    stop: &AtomicBool,
) -> Result<TrialRecord, TrialError> {
    std::fs::create_dir_all(dir).map_err(|source| TrialError::Dir { path: dir.into(), source })?;
    let lock = dir.join("leader.lock");
    faults::prepare_lock(exp, &lock).map_err(|source| TrialError::Dir { path: lock.clone(), source })?;
    // Fault times are our precision budget: ask the kernel not to coalesce
    // this thread's timer wake-ups (default slack is 50 µs).
    let _ = nix::sys::prctl::set_timerslack(1);

    let (tx, rx) = mpsc::sync_channel(EVENT_BACKLOG);
    let mut server = if exp.substrate.managed { Some(server::ManagedRedis::start(dir)?) } else { None };
    let address = server.as_ref().map(|s| s.address()).or_else(|| exp.substrate.address());
    let values = |i: usize| placeholder_values(exp, i, dir, &lock, address.as_deref());
    let args = if exp.program.is_none() {
        write_worker_config(exp, dir, &lock, address.clone())
            .map_err(|source| TrialError::Dir { path: dir.join("worker.json"), source })?
    } else {
        Vec::new()
    };
    let spec = SpawnSpec {
        exe,
        args,
        dir,
        count: exp.workers,
        program: exp.program.as_ref().map(|p| (p, &values as &spawn::Placeholders)),
    };
    let mut raw: Vec<RawEvent> = Vec::new();
    let (mut workers, barrier) = spawn::spawn(&spec, &tx)?;
    drop(tx);
    for p in &workers.procs {
        raw.push(RawEvent::harness(
            p.spawned_ns,
            Some(p.index),
            Some(p.pid.as_raw()),
            EventKind::Spawn,
            Detail::default(),
        ));
    }

    let mut run = Run {
        rx,
        raw,
        live: Live::new(exp.workers),
        exited: 0,
        ready: 0,
        garbage: 0,
        deliveries: Vec::new(),
        end_ns: i64::MAX,
        unsettled: (exp.program.is_none() && exp.worker.mode == crate::model::Mode::OneShot)
            .then(|| vec![true; exp.workers]),
    };
    if exp.program.as_ref().is_some_and(|p| !p.ready) {
        // Without `ready: true` a program knows no barrier handshake: it is
        // ready once spawned (it may still wait for EOF on stdin, which
        // comes at the release).
        run.ready = exp.workers;
    }
    let outcome = run.drive(exp, seed, &workers, barrier, stop, Hit { lock: &lock, server: server.as_mut() });
    run.clean_up(exp, &mut workers)?;
    drop(server);
    if !exp.substrate.managed
        && let Some(address) = &address
    {
        // A shared server keeps the lease after the trial: remove it.
        crate::substrate::forget(exp.substrate.kind, address, &lock.display().to_string());
    }
    let t0 = outcome?;
    if exp.program.is_none() {
        run.check_exits(&workers)?;
    }
    let protocol = exp.program.as_ref().is_some_and(|p| p.observe == crate::model::program::Observe::Protocol);
    let outcomes = run.outcomes(&workers, t0, protocol);

    let events: Vec<Event> = run.raw.into_iter().map(|r| r.into_event(t0)).collect();
    let history = History::new(events);
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
    Ok(TrialRecord { trial, seed, history, deliveries, garbage_lines: run.garbage, outcomes })
}

fn to_us(ns: i64) -> i64 {
    // Round half away from zero, so -0.5 µs and 0.5 µs are symmetric.
    (ns as f64 / 1000.0).round() as i64
}

/// How far ahead of the release the built-in workers are told its time:
/// long enough for every one of them to wake from the pipe and go back to
/// sleep on its timer (about 40 µs each on 2 cores), so all of them are
/// asleep until the same instant.
fn release_lead_ns(workers: usize) -> i64 {
    2_000_000 + 60_000 * workers as i64
}

/// The first monotonic time at least `ahead` from now at which the wall
/// clock is `offset` past a multiple of `resolution`.
fn next_wall_phase(resolution: i64, offset: i64, ahead: i64) -> i64 {
    let (mono, wall) = (mono_ns(), crate::model::clock::wall_ns());
    let mut target = wall - wall.rem_euclid(resolution) + offset;
    while target < wall + ahead {
        target += resolution;
    }
    mono + (target - wall)
}

/// Sleep until the monotonic `deadline`, spinning for the last stretch
/// (a timed sleep can oversleep by 50–150 µs on a VM).
fn sleep_until(deadline: i64) {
    let left = deadline - SPIN_NS - mono_ns();
    if left > 0 {
        std::thread::sleep(Duration::from_nanos(left as u64));
    }
    while mono_ns() < deadline {
        std::hint::spin_loop();
    }
}

/// Release the barrier; returns t = 0 (monotonic ns).
///
/// A program only sees EOF on stdin, so it starts when the pipe closes. The
/// built-in workers are instead handed the release time itself, 8 bytes
/// each, a little ahead: each sleeps on an absolute CLOCK_MONOTONIC timer
/// until then. The timers expire together, so the start spread no longer
/// includes the pipe waking 30 readers one after another, only the
/// scheduler running them.
fn release(exp: &Experiment, barrier: std::os::fd::OwnedFd) -> i64 {
    let lead = if exp.program.is_none() { release_lead_ns(exp.workers) } else { 0 };
    let t0 = match exp.align {
        Some(offset) => next_wall_phase(exp.lease.resolution.as_ns() as i64, offset.as_ns() as i64, lead + 1_000_000),
        None => mono_ns() + lead,
    };
    sleep_until(t0 - lead);
    let mut pipe = std::fs::File::from(barrier);
    if exp.program.is_none() {
        // One blocking write: chunks never straddle a pipe page (8 divides
        // 4096), so every 8-byte read gets one whole copy. A worker that
        // died meanwhile is reported by its exit; nothing to do here.
        let _ = std::io::Write::write_all(&mut pipe, &t0.to_le_bytes().repeat(exp.workers));
    }
    // Closing the only write end: EOF for programs (and for anyone left).
    drop(pipe);
    t0
}

/// An event with its absolute monotonic time, before the barrier is known.
struct RawEvent {
    t_ns: i64,
    worker: Option<usize>,
    pid: Option<i32>,
    kind: EventKind,
    detail: Detail,
}

impl RawEvent {
    fn harness(t_ns: i64, worker: Option<usize>, pid: Option<i32>, kind: EventKind, detail: Detail) -> RawEvent {
        RawEvent { t_ns, worker, pid, kind, detail }
    }

    fn into_event(self, t0: i64) -> Event {
        Event { t_us: to_us(self.t_ns - t0), worker: self.worker, pid: self.pid, kind: self.kind, detail: self.detail }
    }
}

/// What faults other than signals to workers hit: the lock file, the
/// managed server.
struct Hit<'a> {
    lock: &'a Path,
    server: Option<&'a mut server::ManagedRedis>,
}

/// The state of the trial loop.
struct Run {
    rx: Receiver<Msg>,
    raw: Vec<RawEvent>,
    live: Live,
    exited: usize,
    ready: usize,
    garbage: usize,
    deliveries: Vec<Delivery>,
    /// Trial end (monotonic ns), once known.
    end_ns: i64,
    /// One-shot trials: workers that have not yet made their attempt (nor
    /// died). `None` for trials that run their whole duration.
    unsettled: Option<Vec<bool>>,
}

impl Run {
    /// Fold one message into the history and the live view.
    fn absorb(&mut self, msg: Msg, mut nemesis: Option<&mut Nemesis>) {
        match msg {
            Msg::Batch(msgs) => {
                for m in msgs {
                    self.absorb(m, nemesis.as_deref_mut());
                }
            }
            Msg::Event { worker, pid, event } => {
                if event.event == EventKind::Ready {
                    self.ready += 1;
                }
                if matches!(event.event, EventKind::Acquired | EventKind::NotAcquired) {
                    self.settle(worker);
                }
                self.live.observe(worker, event.event);
                if let Some(n) = nemesis {
                    n.on_event(worker, event.event, event.t_ns, &self.live);
                }
                self.raw.push(RawEvent::harness(event.t_ns, Some(worker), Some(pid), event.event, event.detail));
            }
            Msg::Garbage { worker, line } => {
                self.garbage += 1;
                if self.garbage <= 3 {
                    eprintln!("warning: worker {worker} wrote a line that is not an event: {line:?}");
                }
            }
            Msg::Exit { worker, pid, t_ns, status } => {
                self.exited += 1;
                self.settle(worker);
                self.live.observe(worker, EventKind::Exit);
                let detail = match status {
                    ExitStatus::Code(c) => Detail { code: Some(c), ..Detail::default() },
                    ExitStatus::Signal(s) => Detail { signal: Some(s), ..Detail::default() },
                };
                self.raw.push(RawEvent::harness(t_ns, Some(worker), Some(pid), EventKind::Exit, detail));
            }
        }
    }

    fn settle(&mut self, worker: usize) {
        if let Some(w) = self.unsettled.as_mut().and_then(|u| u.get_mut(worker)) {
            *w = false;
        }
    }

    /// A one-shot trial whose workers have all made their attempt, with no
    /// fault left to fire, cannot change any more: end it now rather than
    /// sleep out `duration` (the 30 × 30 race would otherwise be 9 s of
    /// waiting).
    fn settled(&self, nemesis: &Nemesis) -> bool {
        self.unsettled.as_ref().is_some_and(|u| !u.contains(&true)) && nemesis.idle()
    }

    fn record(&mut self, deliveries: Vec<Delivery>) {
        for d in &deliveries {
            let detail = Detail {
                fault: Some(d.fault),
                action: Some(d.action.to_string()),
                error: d.error.clone(),
                ..Detail::default()
            };
            self.raw.push(RawEvent::harness(d.actual_ns, d.worker, d.pid, EventKind::Fault, detail));
        }
        self.deliveries.extend(deliveries);
    }

    /// Barrier, faults, until the trial's end. Returns the barrier time.
    fn drive(
        &mut self,
        exp: &Experiment,
        seed: u64,
        workers: &Workers,
        barrier: std::os::fd::OwnedFd,
        stop: &AtomicBool,
        hit: Hit<'_>,
    ) -> Result<i64, TrialError> {
        // 1. Everyone ready.
        let ready_deadline = mono_ns() + READY_TIMEOUT.as_nanos() as i64;
        while self.ready < exp.workers {
            if stop.load(Ordering::SeqCst) {
                return Err(TrialError::Interrupted);
            }
            let left = ready_deadline - mono_ns();
            if left <= 0 {
                return Err(TrialError::NotReady { ready: self.ready, total: exp.workers });
            }
            match self.rx.recv_timeout(Duration::from_nanos(left.min(50_000_000) as u64)) {
                Ok(Msg::Exit { worker, status, .. }) => {
                    return Err(TrialError::DiedEarly { worker, status, log: workers.procs[worker].log.clone() });
                }
                Ok(msg) => self.absorb(msg, None),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TrialError::NotReady { ready: self.ready, total: exp.workers });
                }
            }
        }

        // 2. Release.
        let t0 = release(exp, barrier);
        let at = Detail { mono_ns: Some(t0), ..Detail::default() };
        self.raw.push(RawEvent::harness(t0, None, None, EventKind::Barrier, at));
        if exp.program.is_some() {
            // Programs start when spawned; the harness's clock starts here.
            for p in &workers.procs {
                self.raw.push(RawEvent::harness(
                    t0,
                    Some(p.index),
                    Some(p.pid.as_raw()),
                    EventKind::Start,
                    Detail::default(),
                ));
            }
        }

        // 3. Faults until the end.
        let end = t0 + exp.duration.as_ns() as i64;
        let rng = ChaCha8Rng::seed_from_u64(seed);
        let mut nemesis = Nemesis::new(exp, t0, rng, hit.lock, hit.server);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Err(TrialError::Interrupted);
            }
            let now = mono_ns();
            let fired = nemesis.fire_due(now, &workers.procs, &mut self.live);
            self.record(fired);
            let now = mono_ns();
            if now >= end || self.settled(&nemesis) {
                break;
            }
            // Wake for the next fault, the end, or at least every 50 ms to
            // notice Ctrl-C.
            let due = nemesis.next_due().unwrap_or(end).min(end);
            if due - now < SPIN_NS {
                // A timed wait can oversleep by 50–150 µs on a VM; for the
                // last stretch before a fault, poll instead.
                match self.rx.try_recv() {
                    Ok(msg) => self.absorb(msg, Some(&mut nemesis)),
                    Err(_) => std::hint::spin_loop(),
                }
                continue;
            }
            let wake = (due - SPIN_NS).min(now + 50_000_000);
            match self.rx.recv_timeout(Duration::from_nanos((wake - now).max(0) as u64)) {
                Ok(msg) => self.absorb(msg, Some(&mut nemesis)),
                Err(RecvTimeoutError::Timeout) => {}
                // All workers gone and all pipes closed: sleep out the trial.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_nanos((wake - now).max(0) as u64));
                }
            }
        }
        self.end_ns = mono_ns();
        self.raw.push(RawEvent::harness(self.end_ns, None, None, EventKind::TrialEnd, Detail::default()));
        // Faults still waiting for their moment never happened: say so.
        let never = nemesis.never_fired(self.end_ns);
        self.record(never);
        Ok(t0)
    }

    /// SIGCONT, SIGTERM, grace, SIGKILL, reap — and keep recording, so the
    /// exits appear in the history (after `trial_end`, which the checker cuts).
    fn clean_up(&mut self, exp: &Experiment, workers: &mut Workers) -> Result<(), TrialError> {
        for p in &workers.procs {
            let _ = p.signal(Signal::SIGCONT);
            let _ = p.signal(Signal::SIGTERM);
        }
        let grace_end = mono_ns() + exp.grace.as_ns() as i64;
        self.drain_until(grace_end, exp.workers);
        if self.exited < exp.workers {
            for p in &workers.procs {
                let _ = p.signal(Signal::SIGKILL);
            }
            self.drain_until(mono_ns() + KILL_TIMEOUT.as_nanos() as i64, exp.workers);
        }
        if self.exited < exp.workers {
            workers.detach();
            return Err(TrialError::Unkillable(exp.workers - self.exited));
        }
        // Every process is gone; read on until every reader has reached EOF
        // and every thread has dropped its sender (a reader may be blocked
        // on a full queue), then the history is complete.
        while let Ok(msg) = self.rx.recv() {
            self.absorb(msg, None);
        }
        workers.join();
        Ok(())
    }

    /// A worker that died by itself (non-zero exit, or a signal we did not
    /// send) is a broken system under test or harness, not a measurement.
    fn check_exits(&self, workers: &Workers) -> Result<(), TrialError> {
        let killed: Vec<usize> =
            self.deliveries.iter().filter(|d| d.action == "kill").filter_map(|d| d.worker).collect();
        for e in self.raw.iter().filter(|e| e.kind == EventKind::Exit) {
            let Some(worker) = e.worker else { continue };
            let expected = match (&e.detail.code, &e.detail.signal) {
                (Some(0), _) => true,
                // SIGKILL: a kill fault, or cleanup after the grace period.
                (_, Some(s)) if s == "SIGKILL" => killed.contains(&worker) || e.t_ns >= self.end_ns,
                _ => false,
            };
            if !expected {
                let status = match (&e.detail.code, &e.detail.signal) {
                    (Some(c), _) => ExitStatus::Code(*c),
                    (_, Some(s)) => ExitStatus::Signal(s.clone()),
                    _ => ExitStatus::Code(-1),
                };
                return Err(TrialError::Crashed { worker, status, log: workers.procs[worker].log.clone() });
            }
        }
        Ok(())
    }

    /// Each worker's fate in words: how it ended, whether it said anything,
    /// whether it flooded. A crash of a program is a result, not an error.
    fn outcomes(&self, workers: &Workers, t0: i64, protocol: bool) -> Vec<String> {
        let killed: Vec<usize> =
            self.deliveries.iter().filter(|d| d.action == "kill").filter_map(|d| d.worker).collect();
        let secs = |t: i64| (t - t0) as f64 / 1e9;
        workers
            .procs
            .iter()
            .map(|p| {
                let w = p.index;
                let exit = self.raw.iter().find(|e| e.kind == EventKind::Exit && e.worker == Some(w));
                let mut text = match exit.map(|e| (e.t_ns, e.detail.code, e.detail.signal.as_deref())) {
                    None => "never exited".to_string(),
                    Some((t, _, Some("SIGKILL"))) if t < self.end_ns && killed.contains(&w) => {
                        format!("killed by a fault at {:.3} s", secs(t))
                    }
                    Some((t, Some(code), _)) if t < self.end_ns => {
                        let how = if code == 0 { "exited" } else { "crashed" };
                        format!("{how} with code {code} at {:.3} s", secs(t))
                    }
                    Some((t, _, Some(sig))) if t < self.end_ns => format!("crashed by {sig} at {:.3} s", secs(t)),
                    Some((_, _, Some("SIGKILL"))) => "ignored SIGTERM: killed after the grace period".to_string(),
                    Some(_) => "ok".to_string(),
                };
                let said = self.raw.iter().any(|e| {
                    e.worker == Some(w)
                        && e.pid.is_some()
                        && !matches!(e.kind, EventKind::Spawn | EventKind::Start | EventKind::Exit | EventKind::Fault)
                });
                if !said {
                    text += ", silent: no events";
                }
                let (lines, dropped, unmatched) = (
                    p.counts.lines.load(std::sync::atomic::Ordering::Relaxed),
                    p.counts.dropped.load(std::sync::atomic::Ordering::Relaxed),
                    p.counts.unmatched.load(std::sync::atomic::Ordering::Relaxed),
                );
                if dropped > 0 {
                    text += &format!(", flooded: {lines} lines, {dropped} dropped past the budget");
                }
                if unmatched > 0 && protocol {
                    text += &format!(", {unmatched} lines not understood");
                }
                format!("{w}: {text}")
            })
            .collect()
    }

    fn drain_until(&mut self, deadline: i64, total: usize) {
        while self.exited < total {
            let left = deadline - mono_ns();
            if left <= 0 {
                return;
            }
            match self.rx.recv_timeout(Duration::from_nanos(left as u64)) {
                Ok(msg) => self.absorb(msg, None),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
