//! `leasequake worker`: the built-in worker as a process. It reads its
//! config, blocks the shutdown signals, opens its lease, waits at the
//! barrier and runs the state machine (`machine.rs`), reporting every step
//! as a JSON line on stdout (docs/worker-protocol.md) and writing the
//! blog's human log lines to its own log file.
//!
//! One thread, no async: the process sleeps in `sigtimedwait` until its next
//! tick or a SIGTERM/SIGINT, so a shutdown is handled the instant it arrives
//! and a SIGSTOP freezes everything, exactly like the Go program's process.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::signal::{SigSet, Signal};

use super::clock::LocalClock;
use super::env::{Env, Wake};
use super::machine::Worker;
use crate::model::clock::{mono_ns, wall_ns};
use crate::model::expiry::ExpiryRule;
use crate::model::history::{Detail, EventKind};
use crate::model::protocol::WireEvent;
use crate::model::worker_config::WorkerConfig;
use crate::model::{Expiry, Failpoint};
use crate::substrate;
use crate::substrate::lockfile::LockFile;

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

/// Entry point of `leasequake worker`; returns the exit code.
pub fn run(args: WorkerArgs) -> i32 {
    if !crate::child::tie_to_parent() || !crate::child::join_cgroup() {
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
    // worker (its leases, its expiry checks) sees it, and its timers run at
    // its rate.
    let jumps = cfg.clock_dir.as_ref().map(|d| d.join(args.index.to_string()));
    let clock = LocalClock::new(cfg.clock_offset(args.index).as_ns(), cfg.worker.clock_rate.of(args.index), jumps);
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
                Failpoint::AfterCheck => "after-check",
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
    let key = cfg.lease_key.clone().unwrap_or_else(|| crate::model::worker_config::lease_key(&cfg.lock));
    let open = substrate::Open {
        kind: cfg.substrate,
        lock: &cfg.lock,
        acquire: cfg.worker.acquire,
        expiry: cfg.worker.expiry,
        rule,
        fencing_tokens: cfg.worker.fencing_tokens,
        address: cfg.address_of(args.index),
        service: cfg.service_of(args.index),
        request_timeout: cfg.worker.request_timeout.map(|d| d.as_std()),
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
    // Every worker's timer for the release expires in the same tick; on a
    // busy machine an ordinary process then waits its turn behind the load
    // to take its start timestamp, and the start spread is the load's. At
    // real-time priority (where permitted) it takes it at once, and drops
    // back the moment it has.
    let releasing = !no_barrier && crate::realtime::try_raise_this_thread();
    let env = ProcessEnv { shutdown, log, clock, sigfd: None, releasing };
    let mut w = Worker::new(env, cfg, args.index, i64::from(std::process::id()), lease, rule);
    w.ready();
    if !no_barrier && let Some(release) = wait_for_barrier() {
        sleep_until_mono(release);
    }
    w.begin()
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

/// Sleep until the monotonic `deadline`, a blocked shutdown signal (read
/// from `sigfd`, a signalfd of them) or `fd` readable, whichever is first.
fn wait_or_readable(sigfd: RawFd, fd: RawFd, deadline_ns: i64) -> Wake {
    loop {
        let left = (deadline_ns - mono_ns()).max(0);
        let ts = libc::timespec { tv_sec: left / 1_000_000_000, tv_nsec: left % 1_000_000_000 };
        let mut fds = [
            libc::pollfd { fd: sigfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two valid pollfds, a valid timespec, no signal mask change.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if n > 0 && fds[0].revents != 0 {
            let mut info = std::mem::MaybeUninit::<libc::signalfd_siginfo>::zeroed();
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reading one siginfo into a buffer of its size.
            if unsafe { libc::read(sigfd, info.as_mut_ptr().cast(), size) } == size as isize {
                // SAFETY: fully written by the read above.
                let signo = unsafe { info.assume_init() }.ssi_signo as i32;
                if let Ok(sig) = Signal::try_from(signo) {
                    return Wake::Signal(sig);
                }
            }
            continue;
        }
        if n > 0 && fds[1].revents != 0 {
            // Readable, closed or broken: the substrate's read says which.
            return Wake::Readable;
        }
        if (n == 0 || left == 0) && mono_ns() >= deadline_ns {
            return Wake::Deadline;
        }
        // EINTR (SIGSTOP/SIGCONT) or an early timeout: look again.
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

/// The real world: the process's clocks, `sigtimedwait` on the blocked
/// shutdown signals, stdout (or the events file) and the log file.
struct ProcessEnv {
    shutdown: SigSet,
    log: Box<dyn Write>,
    clock: LocalClock,
    /// A signalfd of the shutdown signals, made at the first wait on a
    /// descriptor (push watchers only).
    sigfd: Option<OwnedFd>,
    /// Real-time priority for the release, until `start` is stamped.
    releasing: bool,
}

impl Env for ProcessEnv {
    fn mono_ns(&self) -> i64 {
        self.clock.local(mono_ns())
    }

    fn wall_ns(&self) -> i64 {
        wall_ns()
    }

    fn wait_until(&mut self, deadline_ns: i64) -> Option<Signal> {
        let woke = wait_until(&self.shutdown, self.clock.real(deadline_ns));
        // A skew the harness ordered meanwhile holds from this tick on.
        self.clock.refresh();
        woke
    }

    fn wait_or_readable(&mut self, deadline_ns: i64, fd: RawFd) -> Wake {
        if self.sigfd.is_none() {
            // SAFETY: a valid sigset; -1 makes a new descriptor.
            let sfd = unsafe { libc::signalfd(-1, self.shutdown.as_ref(), libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
            if sfd < 0 {
                // No signalfd: a wait without the descriptor still ends
                // at a shutdown signal; the push waits for the next tick.
                return self.wait_until(deadline_ns).into();
            }
            // SAFETY: a descriptor just made and owned by nobody else.
            self.sigfd = Some(unsafe { OwnedFd::from_raw_fd(sfd) });
        }
        let sigfd = self.sigfd.as_ref().map(AsRawFd::as_raw_fd).expect("made above");
        let woke = wait_or_readable(sigfd, fd, self.clock.real(deadline_ns));
        self.clock.refresh();
        woke
    }

    fn emit_at(&mut self, t_ns: i64, event: EventKind, detail: Detail) {
        // The history is on the machine's clock, not the worker's.
        emit_at(self.clock.real(t_ns), event, detail);
        if event == EventKind::Start && self.releasing {
            // Stamped: what the worker does next is the system under test,
            // and runs as any other process does.
            self.releasing = crate::realtime::lower(0).is_err();
        }
    }

    fn log(&mut self, line: &str) {
        let _ = writeln!(self.log, "{line}");
        let _ = self.log.flush();
    }
}
