//! The built-in system under test: the blog's lease program, step by step.
//!
//! It runs inside each child (`leasequake worker`, hidden from --help),
//! reports every step as a JSON line on stdout (see `protocol`) and writes
//! the blog's human log lines to its own log file.
//!
//! One thread, no async: the process sleeps in `sigtimedwait` until its next
//! tick or a SIGTERM/SIGINT, so a shutdown is handled the instant it arrives
//! and a SIGSTOP freezes everything, exactly like the Go program's process.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use nix::sys::signal::{SigSet, Signal};

use crate::model::Resource;
use crate::model::clock::{mono_ns, utc, wall_ns};
use crate::model::expiry::ExpiryRule;
use crate::model::history::{Detail, EventKind};
use crate::model::protocol::WireEvent;
use crate::model::worker_config::WorkerConfig;
use crate::model::{Dur, Expiry, Failpoint, JobStrategy, Mode, Unreadable};
use crate::substrate::lockfile::{Lease, LockFile, ReadError};
use crate::substrate::resource::{self, JobOutcome};
use crate::substrate::{self, Renewal, Seen, Substrate};

/// Consecutive failed renewals after which a leader steps down (the blog's 3).
const MAX_RENEW_FAILURES: u32 = 3;

/// `leasequake worker`: the config comes from a file (the harness's
/// `worker.json`), from `key=value` words, or both (words win).
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// The worker's config (JSON; the harness writes one per trial).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Settings on top of the config or of the blog's defaults, e.g.
    /// `lock=/tmp/l lease=9s expiry=exact` (see `WorkerConfig`).
    #[arg(value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// Index of this worker in the trial.
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// Human-readable log in the blog's format (default: stderr).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Start at once instead of waiting for the barrier on stdin (manual runs).
    #[arg(long)]
    pub no_barrier: bool,
    /// Write the event protocol to this file instead of stdout (to observe
    /// the built-in worker through its log lines and its events at once).
    #[arg(long)]
    pub events_file: Option<PathBuf>,
}

/// What became of one attempt to run the epoch job.
enum JobRun {
    /// The store (or this worker) already had the epoch's result.
    AlreadyDone,
    Ran,
    /// A shutdown signal arrived mid-job.
    Interrupted(Signal),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Leader { failures: u32 },
    Watcher,
}

struct Worker {
    cfg: WorkerConfig,
    index: usize,
    pid: i64,
    lease: Box<dyn Substrate>,
    rule: ExpiryRule,
    log: Box<dyn Write>,
    started_ns: i64,
    /// This worker's current fencing token (while it leads, with tokens on).
    token: Option<u64>,
    /// The highest token seen in the lock file.
    seen_token: u64,
    /// Time of the barrier release as this worker saw it: epoch 0 starts here.
    origin_ns: i64,
    /// Epochs whose job this worker knows is done (by itself or, as the
    /// store said, by anyone): they are not asked about again.
    known_done: BTreeSet<u64>,
    /// (epoch, token) pairs the store refused: not retried under the same
    /// grant, but a new grant may run the epoch again.
    refused: BTreeSet<(u64, u64)>,
    /// Duration of the last substrate operation, until an event carries it.
    op_us: Option<u64>,
}

/// Entry point of `leasequake worker`; returns the exit code.
pub fn run(args: WorkerArgs) -> i32 {
    if !crate::child::tie_to_parent() {
        return 1;
    }
    let config = match &args.config {
        Some(path) => WorkerConfig::read(path),
        None => Ok(WorkerConfig::default()),
    };
    let cfg = match config.and_then(|c| c.with(&args.settings)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("leasequake worker: {e}");
            return 2;
        }
    };
    // A skewed clock is the whole process's: every wall-clock read of this
    // worker (its leases, its expiry checks) sees it.
    crate::model::clock::set_wall_offset(cfg.clock_offset(args.index).as_ns());
    let failpoint = if cfg.has_failpoint(args.index) { cfg.worker.failpoint } else { Failpoint::None };
    let no_barrier = args.no_barrier;
    // The worker's timed waits (the release, ticks, sigtimedwait) are what
    // the trial measures: no 50 µs timer coalescing.
    let _ = nix::sys::prctl::set_timerslack(1);
    // Block the shutdown signals first: from here on they are only ever
    // received by `sigtimedwait`, never by a handler racing with file I/O.
    let mut shutdown = SigSet::empty();
    shutdown.add(Signal::SIGTERM);
    shutdown.add(Signal::SIGINT);
    if let Err(e) = shutdown.thread_block() {
        eprintln!("leasequake worker: cannot block signals: {e}");
        return 3;
    }
    if let Some(path) = &args.events_file {
        match File::options().create(true).append(true).open(path) {
            Ok(f) => {
                let _ = EVENTS_FILE.set(std::sync::Mutex::new(f));
            }
            Err(e) => {
                eprintln!("leasequake worker: cannot open events file {}: {e}", path.display());
                return 3;
            }
        }
    }
    let log: Box<dyn Write> = match &args.log {
        Some(path) => match File::options().create(true).append(true).open(path) {
            Ok(f) => Box::new(BufWriter::new(f)),
            Err(e) => {
                eprintln!("leasequake worker: cannot open log {}: {e}", path.display());
                return 3;
            }
        },
        None => Box::new(io::stderr()),
    };
    let lock = LockFile::new(&cfg.lock, cfg.worker.acquire, cfg.worker.expiry).with_failpoint(failpoint, {
        let delay = cfg.worker.failpoint_delay.as_std();
        Box::new(move |at| {
            let name = match at {
                Failpoint::AfterCreate => "after-create",
                Failpoint::AfterTruncate => "after-truncate",
                Failpoint::BeforeRemove => "before-remove",
                Failpoint::None => "none",
            };
            emit(EventKind::Failpoint, Detail { reason: Some(name.into()), ..Detail::default() });
            // A plain sleep: the fault this window is for is a SIGKILL.
            std::thread::sleep(delay);
        })
    });
    let rule = ExpiryRule {
        // A server judges expiry itself, to the millisecond: leases it
        // reports are in exact Unix seconds.
        expiry: if cfg.substrate.server().is_some() { Expiry::Exact } else { cfg.worker.expiry },
        resolution_ns: cfg.timing.resolution.as_ns() as i64,
        lease_ns: cfg.timing.lease.as_ns() as i64,
    };
    let key = cfg.lease_key.clone().unwrap_or_else(|| cfg.lock.display().to_string());
    let open = substrate::Open {
        kind: cfg.substrate,
        lock: &cfg.lock,
        acquire: cfg.worker.acquire,
        expiry: cfg.worker.expiry,
        rule,
        fencing_tokens: cfg.worker.fencing_tokens,
        address: cfg.address.as_deref(),
        key: &key,
        lease: cfg.timing.lease.as_std(),
    };
    let lease = match substrate::open(&open, lock) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("leasequake worker: cannot open the {} lease: {e}", crate::model::setting_name(&cfg.substrate));
            return 3;
        }
    };
    let mut w = Worker {
        lease,
        pid: i64::from(std::process::id()),
        rule,
        log,
        started_ns: mono_ns(),
        token: None,
        seen_token: 0,
        origin_ns: 0,
        known_done: BTreeSet::new(),
        refused: BTreeSet::new(),
        op_us: None,
        index: args.index,
        cfg,
    };
    w.emit(EventKind::Ready, Detail::default());
    if !no_barrier && let Some(release) = wait_for_barrier() {
        sleep_until_mono(release);
    }
    w.origin_ns = mono_ns();
    let start_delay = w.cfg.start_delay(w.index);
    if start_delay > Dur::ZERO {
        let until = mono_ns() + start_delay.as_ns() as i64;
        if wait_until(&shutdown, until).is_some() {
            return w.shut_down(Role::Watcher);
        }
    }
    w.started_ns = mono_ns();
    // Every worker woke at the same instant, but they run one after the
    // other on few cores: step aside before reporting (a write that wakes
    // the harness) or doing any real work, so that the others take their
    // start timestamps first (the start spread).
    std::thread::yield_now();
    emit_at(w.started_ns, EventKind::Start, Detail::default());
    match w.cfg.worker.mode {
        Mode::Loop => w.lease_loop(&shutdown),
        Mode::OneShot => w.one_shot(&shutdown),
    }
}

/// The barrier is the read end of a pipe shared by all workers. The harness
/// writes each worker the release time (CLOCK_MONOTONIC ns, 8 bytes), then
/// closes the write end; a worker run by hand or by an older harness sees
/// only EOF and starts at once (None).
fn wait_for_barrier() -> Option<i64> {
    // Straight from fd 0: `io::stdin()` is buffered and would swallow the
    // other workers' copies.
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(io::stdin(), &mut buf[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
    Some(i64::from_le_bytes(buf))
}

/// Sleep on an absolute CLOCK_MONOTONIC timer: every worker's timer for the
/// release expires in the same tick, however late each read the time.
fn sleep_until_mono(deadline_ns: i64) {
    let ts = libc::timespec { tv_sec: deadline_ns / 1_000_000_000, tv_nsec: deadline_ns % 1_000_000_000 };
    // SAFETY: a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) }
        == libc::EINTR
    {}
}

/// Sleep until the monotonic `deadline` or a blocked shutdown signal,
/// whichever comes first.
fn wait_until(set: &SigSet, deadline_ns: i64) -> Option<Signal> {
    loop {
        let left = deadline_ns - mono_ns();
        if left <= 0 {
            return None;
        }
        let ts = libc::timespec { tv_sec: left / 1_000_000_000, tv_nsec: left % 1_000_000_000 };
        // SAFETY: `set` is a valid sigset_t; a null info pointer is allowed.
        let sig = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
        if sig > 0 {
            return Signal::try_from(sig).ok();
        }
        // EAGAIN: timed out (loop re-checks the clock); EINTR: SIGSTOP/SIGCONT.
    }
}

/// Report one event on stdout, stamped now.
fn emit(event: EventKind, detail: Detail) {
    emit_at(mono_ns(), event, detail);
}

/// Report an event that happened at `t_ns`.
fn emit_at(t_ns: i64, event: EventKind, detail: Detail) {
    let line = WireEvent { t_ns, event, detail }.to_line();
    let written = match EVENTS_FILE.get() {
        // Only this (single) thread writes: the lock is never contended.
        Some(file) => {
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(f, "{line}").and_then(|()| f.flush())
        }
        None => {
            let mut out = io::stdout().lock();
            writeln!(out, "{line}").and_then(|()| out.flush())
        }
    };
    if written.is_err() {
        // The harness is gone: nobody can observe us any more.
        std::process::exit(1);
    }
}

/// `--events-file`: the protocol goes here instead of stdout.
static EVENTS_FILE: std::sync::OnceLock<std::sync::Mutex<File>> = std::sync::OnceLock::new();

impl Worker {
    /// Report an event; the first one after a substrate operation carries
    /// that operation's duration (`op_us`).
    fn emit(&mut self, event: EventKind, detail: Detail) {
        emit(event, Detail { op_us: self.op_us.take(), ..detail });
    }

    /// Time one substrate operation, for the next event.
    fn timed<T>(&mut self, op: impl FnOnce(&mut dyn Substrate) -> T) -> T {
        let start = mono_ns();
        let out = op(self.lease.as_mut());
        self.op_us = Some(((mono_ns() - start) / 1000) as u64);
        out
    }

    /// A line in the blog's format: `12.53s [Process: 60222] [WATCHER] …`.
    fn log(&mut self, text: &str) {
        let elapsed = (mono_ns() - self.started_ns) as f64 / 1e9;
        let _ = writeln!(self.log, "{elapsed:.2}s [Process: {}] {text}", self.pid);
        let _ = self.log.flush();
    }

    /// Wall-clock time of a `leaseUntil`, as HH:MM:SS (with ms when scaled).
    fn clock_text(&self, wall_ns: i64) -> String {
        let (_, _, _, h, m, s) = utc(wall_ns.div_euclid(1_000_000_000));
        if self.rule.resolution_ns >= 1_000_000_000 {
            format!("{h:02}:{m:02}:{s:02}")
        } else {
            format!("{h:02}:{m:02}:{s:02}.{:03}", wall_ns.rem_euclid(1_000_000_000) / 1_000_000)
        }
    }

    fn until_text(&self, lease_until: f64) -> String {
        self.clock_text(self.rule.to_wall_ns(lease_until))
    }

    fn fresh_lease(&self) -> Lease {
        Lease { process_id: self.pid, lease_until: self.rule.lease_until(wall_ns()), token: self.token }
    }

    fn lease_detail(&self, lease: Lease) -> Detail {
        Detail {
            holder: Some(lease.process_id),
            lease_until: Some(lease.lease_until),
            // No nominal expiry where the lease does not expire by time:
            // the checker then does not split gaps into lease + detection.
            expires_in_ms: self.cfg.substrate.expires().then(|| self.cfg.timing.lease.as_ms_f64()),
            token: lease.token,
            ..Detail::default()
        }
    }

    /// Remember the highest fencing token seen in the lock file.
    fn saw(&mut self, lease: &Lease) {
        self.seen_token = self.seen_token.max(lease.token.unwrap_or(0));
    }

    /// Leader work: write the report with this grant's token. A leader that
    /// was paused does this on its first tick after resuming, before it
    /// learns (at the renewal) that it lost the lease: the stale write.
    fn work(&mut self) {
        let Some(dir) = self.cfg.resource_dir.clone() else { return };
        if self.cfg.worker.resource == Resource::None {
            return;
        }
        let token = self.token.unwrap_or(0);
        let (kind, error) = match resource::write(&dir, self.cfg.worker.resource, token, self.pid) {
            Ok(true) => (EventKind::WriteAccepted, None),
            Ok(false) => (EventKind::WriteRejected, None),
            Err(e) => (EventKind::WriteRejected, Some(e.to_string())),
        };
        self.emit(kind, Detail { token: Some(token), error, ..Detail::default() });
        let verdict = if kind == EventKind::WriteAccepted { "accepted" } else { "rejected" };
        self.log(&format!("[LEADER] Wrote report with token {token}: {verdict}"));
    }

    /// Try the configured acquire; report and log the outcome.
    fn try_acquire(&mut self, how: &str, take_over: bool) -> bool {
        self.token = None;
        let lease = self.fresh_lease();
        let seen = self.seen_token;
        let granted = self.timed(|s| if take_over { s.take_over(lease, seen) } else { s.acquire(lease, seen) });
        match granted {
            Ok(Some(lease)) => {
                self.token = lease.token;
                self.seen_token = self.seen_token.max(lease.token.unwrap_or(0));
                let detail = Detail { how: Some(how.into()), ..self.lease_detail(lease) };
                self.emit(EventKind::Acquired, detail);
                let text = if how == "takeover" {
                    format!("[WATCHER] Takeover successful, now leader until {}", self.until_text(lease.lease_until))
                } else {
                    format!(
                        "[LEADER] Acquired lease at {}, valid until {}",
                        self.clock_text(wall_ns()),
                        self.until_text(lease.lease_until)
                    )
                };
                self.log(&text);
                self.work();
                true
            }
            Ok(None) => {
                let kind = if how == "takeover" { EventKind::TakeoverLost } else { EventKind::NotAcquired };
                self.emit(kind, Detail::default());
                if how == "takeover" {
                    self.log("[WATCHER] Lost the takeover race, still watching");
                }
                false
            }
            Err(e) => {
                let kind = if how == "takeover" { EventKind::TakeoverLost } else { EventKind::NotAcquired };
                self.emit(kind, Detail { error: Some(e.to_string()), ..Detail::default() });
                self.log(&format!("Could not acquire lease: {e}"));
                false
            }
        }
    }

    /// How the epoch job is kept exactly-once (meaningless without a job).
    fn job_strategy(&self) -> JobStrategy {
        self.cfg.worker.epoch_job.map_or(JobStrategy::LeaseOnly, |j| j.strategy)
    }

    fn interval(&self, role: Role) -> i64 {
        match role {
            Role::Leader { .. } => self.cfg.timing.renew.as_ns() as i64,
            Role::Watcher => self.cfg.timing.watch.as_ns() as i64,
        }
    }

    fn lease_loop(&mut self, shutdown: &SigSet) -> i32 {
        let mut role = if self.try_acquire("start", false) { Role::Leader { failures: 0 } } else { Role::Watcher };
        let mut next = mono_ns() + self.interval(role);
        let epoch_ns = self.cfg.worker.epoch_job.map(|j| j.epoch.as_ns() as i64);
        let mut boundary = epoch_ns.map_or(i64::MAX, |e| self.origin_ns + e);
        loop {
            if wait_until(shutdown, next.min(boundary)).is_some() {
                return self.shut_down(role);
            }
            if let Some(epoch_ns) = epoch_ns
                && mono_ns() >= boundary
            {
                // Every worker wakes at the boundary; whoever should run the
                // job does. Boundaries missed while stopped are not replayed.
                let now = mono_ns();
                while boundary <= now {
                    boundary += epoch_ns;
                }
                if self.on_boundary(role, shutdown).is_some() {
                    return self.shut_down(role);
                }
                continue;
            }
            let was_leader = matches!(role, Role::Leader { .. });
            role = match role {
                Role::Leader { failures } => {
                    self.work();
                    self.renew(failures)
                }
                Role::Watcher => self.watch(),
            };
            // A leader, new or renewed, catches up on an epoch nobody ran.
            if matches!(role, Role::Leader { .. }) && self.catch_up(shutdown).is_some() {
                return self.shut_down(role);
            }
            let now = mono_ns();
            if was_leader != matches!(role, Role::Leader { .. }) {
                // First tick of a new role is one interval after the change.
                next = now + self.interval(role);
            } else {
                // Keep the grid, like Go's time.Ticker: ticks missed while
                // stopped or slow are dropped, not replayed.
                let step = self.interval(role);
                next += step;
                if next <= now {
                    next += ((now - next) / step + 1) * step;
                }
            }
        }
    }

    /// The epoch the worker is in now (0 before the first boundary).
    fn epoch_now(&self) -> u64 {
        match self.cfg.worker.epoch_job {
            Some(j) => ((mono_ns() - self.origin_ns).max(0) as u64) / j.epoch.as_ns(),
            None => 0,
        }
    }

    /// At an epoch boundary: run the job if it is ours to run.
    fn on_boundary(&mut self, role: Role, shutdown: &SigSet) -> Option<Signal> {
        let epoch = self.epoch_now();
        let ours = match self.job_strategy() {
            JobStrategy::Partitioned => epoch % self.cfg.workers.max(1) as u64 == self.index as u64,
            _ => matches!(role, Role::Leader { .. }),
        };
        if !ours {
            return None;
        }
        match self.run_job(epoch, shutdown) {
            JobRun::Interrupted(sig) => Some(sig),
            JobRun::AlreadyDone | JobRun::Ran => None,
        }
    }

    /// A leader's catch-up: the oldest epoch up to now whose job nobody ran
    /// (the leader that should have died, or was paused past the boundary
    /// and its late result refused). One job per tick, so that catching up
    /// never costs the lease. Partitioned jobs have no leader to catch up.
    fn catch_up(&mut self, shutdown: &SigSet) -> Option<Signal> {
        if self.cfg.worker.epoch_job.is_none() || self.job_strategy() == JobStrategy::Partitioned {
            return None;
        }
        for epoch in 1..=self.epoch_now() {
            if self.known_done.contains(&epoch) {
                continue;
            }
            match self.run_job(epoch, shutdown) {
                JobRun::AlreadyDone => continue,
                JobRun::Ran => return None,
                JobRun::Interrupted(sig) => return Some(sig),
            }
        }
        None
    }

    /// One run of the epoch's job: ask the store whether it is done (under
    /// fencing, presenting the token), work for the job's duration (a pause
    /// can land here), then store the result. The job does not look at the
    /// lease again: that is the point.
    fn run_job(&mut self, epoch: u64, shutdown: &SigSet) -> JobRun {
        let Some(dir) = self.cfg.resource_dir.clone() else { return JobRun::AlreadyDone };
        let strategy = self.job_strategy();
        let token = self.token.unwrap_or(0);
        if epoch == 0 || self.known_done.contains(&epoch) || self.refused.contains(&(epoch, token)) {
            return JobRun::AlreadyDone;
        }
        // A partitioned job runs on no lease: it has no token to carry.
        let carried = (strategy != JobStrategy::Partitioned).then_some(token);
        let detail = |error: Option<String>| Detail { epoch: Some(epoch), token: carried, error, ..Detail::default() };
        match resource::begin_job(&dir, strategy, epoch, token) {
            Ok(true) => {
                self.known_done.insert(epoch);
                return JobRun::AlreadyDone;
            }
            Ok(false) => {}
            Err(e) => {
                self.emit(EventKind::JobRejected, detail(Some(e.to_string())));
                return JobRun::Ran;
            }
        }
        self.emit(EventKind::JobStarted, detail(None));
        self.log(&format!("[JOB] Running the job of epoch {epoch} with token {token}"));
        if let Some(sig) =
            wait_until(shutdown, mono_ns() + self.cfg.worker.epoch_job.map_or(0, |j| j.duration.as_ns() as i64))
        {
            self.log(&format!("[JOB] Epoch {epoch} interrupted"));
            return JobRun::Interrupted(sig);
        }
        let (kind, error) = match resource::commit_job(&dir, strategy, epoch, token, self.pid) {
            Ok(JobOutcome::Applied) => (EventKind::JobApplied, None),
            Ok(JobOutcome::Repeated) => (EventKind::JobRepeated, None),
            Ok(JobOutcome::Rejected) => (EventKind::JobRejected, None),
            Err(e) => (EventKind::JobRejected, Some(e.to_string())),
        };
        if kind == EventKind::JobRejected {
            self.refused.insert((epoch, token));
        } else {
            self.known_done.insert(epoch);
        }
        self.emit(kind, detail(error));
        self.log(&format!("[JOB] Epoch {epoch} stored: {}", kind.name()));
        JobRun::Ran
    }

    fn renew(&mut self, failures: u32) -> Role {
        let fresh = self.fresh_lease();
        match self.timed(|s| s.renew(fresh)) {
            Err(e) => self.renew_failed(failures, e.to_string()),
            Ok(Renewal::Lost { holder }) => {
                self.emit(
                    EventKind::SteppedDown,
                    Detail { reason: Some("other-holder".into()), holder, ..Detail::default() },
                );
                let who = holder.map_or_else(|| "nobody".to_string(), |h| h.to_string());
                self.log(&format!("[LEADER] Lease now held by {who}, stepping down"));
                Role::Watcher
            }
            Ok(Renewal::Renewed(lease)) => {
                self.saw(&lease);
                self.emit(EventKind::Renewed, self.lease_detail(lease));
                self.log(&format!("[LEADER] Lease renewed, valid until {}", self.until_text(lease.lease_until)));
                Role::Leader { failures: 0 }
            }
        }
    }

    fn renew_failed(&mut self, failures: u32, error: String) -> Role {
        let count = failures + 1;
        self.log(&format!("[LEADER] Could not renew lease ({error}), failure {count}/{MAX_RENEW_FAILURES}"));
        self.emit(EventKind::RenewFailed, Detail { count: Some(count), error: Some(error), ..Detail::default() });
        if count >= MAX_RENEW_FAILURES {
            // The blog steps down without deleting the file.
            self.emit(EventKind::SteppedDown, Detail { reason: Some("failures".into()), ..Detail::default() });
            self.log("[LEADER] Too many failed renewals, stepping down");
            Role::Watcher
        } else {
            Role::Leader { failures: count }
        }
    }

    fn watch(&mut self) -> Role {
        let (current, expired) = match self.timed(|s| s.observe()) {
            Ok(Seen::Held(l)) => (l, false),
            Ok(Seen::Expired(l)) => (l, true),
            Ok(Seen::Free) => return self.unreadable(ReadError::Missing),
            Err(e) => return self.unreadable(e),
        };
        self.saw(&current);
        let seen = Detail {
            holder: Some(current.process_id),
            lease_until: Some(current.lease_until),
            token: current.token,
            ..Detail::default()
        };
        let (holder, until) = (current.process_id, self.until_text(current.lease_until));
        if expired {
            self.emit(EventKind::ExpiredSeen, seen);
            self.log(&format!("[WATCHER] Lease held by {holder} expired at {until}, attempting takeover"));
            self.take_over()
        } else {
            self.emit(EventKind::HeldBy, seen);
            self.log(&format!("[WATCHER] Lease held by {holder}, valid until {until}"));
            Role::Watcher
        }
    }

    fn take_over(&mut self) -> Role {
        if self.try_acquire("takeover", true) { Role::Leader { failures: 0 } } else { Role::Watcher }
    }

    fn unreadable(&mut self, error: ReadError) -> Role {
        let missing = matches!(error, ReadError::Missing);
        self.emit(EventKind::Unreadable, Detail { error: Some(error.to_string()), ..Detail::default() });
        if !missing && self.cfg.worker.unreadable == Unreadable::ExpireAge {
            let lease = self.cfg.timing.lease.as_std();
            if let Some(age) = self.lease.age()
                && age > lease
            {
                self.emit(EventKind::ExpiredSeen, Detail { error: Some(error.to_string()), ..Detail::default() });
                self.log("[WATCHER] Unreadable lease file is older than the lease, attempting takeover");
                return self.take_over();
            }
        }
        if !missing {
            self.log("[WATCHER] Could not read lease file, will retry");
        }
        // The blog treats any read error as a chance to acquire; with an
        // empty file O_EXCL fails here forever.
        if self.try_acquire("retry", false) { Role::Leader { failures: 0 } } else { Role::Watcher }
    }

    fn one_shot(&mut self, shutdown: &SigSet) -> i32 {
        let role = if self.try_acquire("start", false) { Role::Leader { failures: 0 } } else { Role::Watcher };
        if role == Role::Watcher {
            self.log("Did not become leader");
        }
        // Hold (or not) until the harness ends the trial.
        let _ = wait_until(shutdown, i64::MAX);
        self.shut_down(role)
    }

    fn shut_down(&mut self, role: Role) -> i32 {
        if matches!(role, Role::Leader { .. }) && self.cfg.worker.release_on_term {
            // Leadership ends when the release begins, not when it is
            // done: a watcher may take the lease the moment it is gone,
            // before this worker could report it.
            let began = mono_ns();
            self.log("Received shutdown signal, releasing lease");
            let detail = match self.lease.release(self.pid) {
                Ok(()) => Detail::default(),
                Err(e) => Detail { error: Some(e.to_string()), ..Detail::default() },
            };
            emit_at(began, EventKind::Released, detail);
            self.log("Lease released");
        } else {
            self.log("Received shutdown signal, exiting");
        }
        self.emit(EventKind::Exiting, Detail { code: Some(0), ..Detail::default() });
        0
    }
}
