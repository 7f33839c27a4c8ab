//! The nemesis: when each fault fires, whom it hits, and delivering it.
//!
//! Faults fire at absolute monotonic times (`at`), or protocol-relative:
//! armed at `at`, they fire `delay` after the next matching event of the
//! target (e.g. 10 ms after the leader's next `renewed`). Targets are
//! resolved at the moment of firing from the live state the trial keeps.

use std::path::Path;

use nix::sys::signal::Signal;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::model::clock::{mono_ns, wall_ns};
use crate::model::expiry::ExpiryRule;
use crate::model::history::EventKind;
use crate::model::{Action, After, Experiment, InitialLock, PauseLen, Target};
use crate::substrate::lockfile::{self, LockFault};

use super::server::ManagedRedis;
use super::spawn::WorkerProc;

/// The live view of the trial that targets are resolved against.
#[derive(Debug, Default)]
pub struct Live {
    /// Workers that believe they lead, oldest acquisition first.
    pub leaders: Vec<usize>,
    pub alive: Vec<bool>,
    pub paused: Vec<bool>,
}

impl Live {
    pub fn new(workers: usize) -> Live {
        Live { leaders: Vec::new(), alive: vec![true; workers], paused: vec![false; workers] }
    }

    /// Fold one worker event (or death) into the live view.
    pub fn observe(&mut self, worker: usize, kind: EventKind) {
        match kind {
            EventKind::Acquired => {
                self.leaders.retain(|&w| w != worker);
                self.leaders.push(worker);
            }
            EventKind::SteppedDown | EventKind::Released | EventKind::Exit => {
                self.leaders.retain(|&w| w != worker);
                if kind == EventKind::Exit {
                    self.alive[worker] = false;
                    self.paused[worker] = false;
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone, Debug)]
enum When {
    /// Fire at this monotonic time.
    At(i64),
    /// Armed from this time; waiting for the trigger event.
    Armed { from: i64, after: After },
}

#[derive(Clone, Debug)]
pub struct Pending {
    pub fault: usize,
    pub action: Action,
    target: Target,
    /// Targets fixed in advance (the CONT of a pause, a triggered fault).
    fixed: Option<Vec<usize>>,
    when: When,
    /// Pause length, drawn when the pause fires.
    pause: Option<PauseLen>,
    /// The trigger, for re-arming a repeated `after:` fault.
    after: Option<After>,
    /// Repetition: the unjittered time of this occurrence, the period and
    /// the jitter of each occurrence (ns).
    repeat: Option<Repeat>,
}

#[derive(Clone, Copy, Debug)]
struct Repeat {
    base: i64,
    every: i64,
    jitter: i64,
}

/// One delivered (or undeliverable) primitive fault: a row of faults.csv.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub fault: usize,
    /// kill, term, stop, cont, lock-empty, … (a pause is a stop and a cont).
    pub action: &'static str,
    /// The target as written (leader, watcher, all, lock, or an index).
    pub target: String,
    pub worker: Option<usize>,
    pub pid: Option<i32>,
    pub scheduled_ns: i64,
    pub actual_ns: i64,
    /// Why it was not delivered (no leader, worker already dead, …).
    pub error: Option<String>,
}

pub struct Nemesis<'s> {
    pending: Vec<Pending>,
    rng: ChaCha8Rng,
    rule: ExpiryRule,
    lock: std::path::PathBuf,
    /// The harness-managed lease server, for server-* faults.
    server: Option<&'s mut ManagedRedis>,
}

impl<'s> Nemesis<'s> {
    pub fn new(
        exp: &Experiment,
        t0: i64,
        mut rng: ChaCha8Rng,
        lock: &Path,
        server: Option<&'s mut ManagedRedis>,
    ) -> Nemesis<'s> {
        let pending = exp
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let jitter = f.jitter.as_ns() as i64;
                let base = t0 + f.at.as_ns() as i64;
                let at = base + if jitter > 0 { rng.random_range(0..jitter) } else { 0 };
                Pending {
                    fault: i,
                    action: f.action,
                    target: f.target,
                    fixed: None,
                    when: match f.after {
                        None => When::At(at),
                        Some(after) => When::Armed { from: at, after },
                    },
                    pause: f.duration.clone(),
                    after: f.after,
                    repeat: f.every.map(|e| Repeat { base, every: e.as_ns() as i64, jitter }),
                }
            })
            .collect();
        Nemesis { pending, rng, rule: expiry_rule(exp), lock: lock.to_path_buf(), server }
    }

    /// Whether any fault is still waiting (timed or armed).
    pub fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The earliest time a timed fault is due (armed ones wait for events).
    pub fn next_due(&self) -> Option<i64> {
        self.pending
            .iter()
            .filter_map(|p| match p.when {
                When::At(t) => Some(t),
                When::Armed { .. } => None,
            })
            .min()
    }

    /// An event arrived: arm-triggered faults whose target matches fire
    /// `delay` after the event's own timestamp.
    pub fn on_event(&mut self, worker: usize, kind: EventKind, t_ns: i64, live: &Live) {
        for p in &mut self.pending {
            let When::Armed { from, after } = p.when else { continue };
            if after.event != kind || t_ns < from {
                continue;
            }
            let matches = match p.target {
                Target::Leader => live.leaders.contains(&worker),
                Target::Watcher => !live.leaders.contains(&worker),
                Target::Worker(i) => i == worker,
                Target::All | Target::Any => true,
                Target::Lock | Target::Server => false,
            };
            if matches {
                p.when = When::At(t_ns + after.delay.as_ns() as i64);
                if p.target != Target::All {
                    p.fixed = Some(vec![worker]);
                }
            }
        }
    }

    /// Deliver every fault due at `now`. Returns the deliveries in order.
    pub fn fire_due(&mut self, now: i64, procs: &[WorkerProc], live: &mut Live) -> Vec<Delivery> {
        let mut out = Vec::new();
        loop {
            let due = self.pending.iter().enumerate().filter_map(|(i, p)| match p.when {
                When::At(t) if t <= now => Some((t, i)),
                _ => None,
            });
            let Some((_, idx)) = due.min() else { break };
            let p = self.pending.remove(idx);
            out.extend(self.deliver(p, procs, live));
        }
        out
    }

    fn deliver(&mut self, p: Pending, procs: &[WorkerProc], live: &mut Live) -> Vec<Delivery> {
        let When::At(scheduled) = p.when else { unreachable!("only timed faults are delivered") };
        if let Some(r) = p.repeat {
            // The next occurrence, with fresh jitter (and, for a pause, a
            // fresh length when it fires).
            let base = r.base + r.every;
            let at = base + if r.jitter > 0 { self.rng.random_range(0..r.jitter) } else { 0 };
            self.pending.push(Pending {
                // A triggered fault is re-armed from `at`, but never sooner
                // than a period after this firing: a trigger that came late
                // must not leave the next one armed in the past, firing on
                // every following event.
                when: match p.after {
                    Some(after) => When::Armed { from: at.max(scheduled + r.every), after },
                    None => When::At(at),
                },
                fixed: None,
                repeat: Some(Repeat { base, ..r }),
                ..p.clone()
            });
        }
        let target_text = p.target.to_string();
        let base = |action: &'static str| Delivery {
            fault: p.fault,
            action,
            target: target_text.clone(),
            worker: None,
            pid: None,
            scheduled_ns: scheduled,
            actual_ns: 0,
            error: None,
        };
        if p.action.is_server() || p.target == Target::Server {
            return self.deliver_to_server(&p, scheduled, base);
        }
        if p.action.is_lock() {
            let fault = match p.action {
                Action::LockEmpty => LockFault::Empty,
                Action::LockDelete => LockFault::Delete,
                Action::LockCorrupt => LockFault::Corrupt,
                _ => LockFault::Stale { dead_pid: dead_pid(), lease_until: self.rule.stale(wall_ns()) },
            };
            let result = lockfile::inject(&self.lock, fault, self.rule.expiry);
            return vec![Delivery {
                actual_ns: mono_ns(),
                error: result.err().map(|e| e.to_string()),
                ..base(p.action.name())
            }];
        }
        let targets = match &p.fixed {
            Some(fixed) => Ok(fixed.clone()),
            None => self.resolve(p.target, p.action, live),
        };
        let targets = match targets {
            Ok(t) => t,
            Err(error) => {
                let action = if p.action == Action::Pause { "stop" } else { p.action.name() };
                return vec![Delivery { actual_ns: mono_ns(), error: Some(error), ..base(action) }];
            }
        };
        let (signal, action) = match p.action {
            Action::Kill => (Signal::SIGKILL, "kill"),
            Action::Term => (Signal::SIGTERM, "term"),
            Action::Stop | Action::Pause => (Signal::SIGSTOP, "stop"),
            Action::Cont => (Signal::SIGCONT, "cont"),
            _ => unreachable!("lock actions handled above"),
        };
        let mut out = Vec::new();
        for w in &targets {
            let proc_ = &procs[*w];
            let (actual_ns, error) = send(proc_, signal);
            if error.is_none() {
                match signal {
                    Signal::SIGSTOP => live.paused[*w] = true,
                    Signal::SIGCONT => live.paused[*w] = false,
                    _ => {}
                }
            }
            out.push(Delivery { worker: Some(*w), pid: Some(proc_.pid.as_raw()), actual_ns, error, ..base(action) });
        }
        if let (Action::Pause, Some(len)) = (p.action, &p.pause) {
            let len = len.sample(&mut self.rng);
            self.pending.push(Pending {
                fault: p.fault,
                action: Action::Cont,
                target: p.target,
                fixed: Some(targets),
                when: When::At(scheduled + len.as_ns() as i64),
                pause: None,
                after: None,
                repeat: None,
            });
        }
        out
    }

    /// server-pause (a stop now, a cont later), server-kill, server-restart.
    fn deliver_to_server(
        &mut self,
        p: &Pending,
        scheduled: i64,
        base: impl Fn(&'static str) -> Delivery,
    ) -> Vec<Delivery> {
        let Some(server) = self.server.as_deref_mut() else {
            return vec![Delivery { actual_ns: mono_ns(), error: Some("no managed server".into()), ..base("server") }];
        };
        let pid = server.pid().map(|p| p.as_raw());
        let (action, result) = match p.action {
            Action::ServerPause => ("server-stop", server.signal(Signal::SIGSTOP).map_err(|e| e.to_string())),
            Action::Cont => ("server-cont", server.signal(Signal::SIGCONT).map_err(|e| e.to_string())),
            Action::ServerKill => {
                server.kill();
                ("server-kill", Ok(()))
            }
            // Stamped at the kill: from here on the leases are gone.
            _ => ("server-restart", server.restart().map_err(|e| e.to_string())),
        };
        let actual_ns = mono_ns();
        if let (Action::ServerPause, Some(len), Ok(())) = (p.action, &p.pause, &result) {
            let len = len.sample(&mut self.rng);
            self.pending.push(Pending {
                fault: p.fault,
                action: Action::Cont,
                target: Target::Server,
                fixed: None,
                when: When::At(scheduled + len.as_ns() as i64),
                pause: None,
                after: None,
                repeat: None,
            });
        }
        vec![Delivery { pid, actual_ns, error: result.err(), ..base(action) }]
    }

    /// A row for every fault that never fired (its trigger never came, or
    /// its time fell after the end), so a schedule cannot vanish silently.
    pub fn never_fired(&mut self, end_ns: i64) -> Vec<Delivery> {
        self.pending
            .drain(..)
            .map(|p| {
                let (scheduled_ns, error) = match p.when {
                    When::At(t) => (t, "the trial ended first"),
                    When::Armed { from, .. } => (from, "its after: event never came"),
                };
                Delivery {
                    fault: p.fault,
                    action: p.action.name(),
                    target: p.target.to_string(),
                    worker: None,
                    pid: None,
                    scheduled_ns,
                    actual_ns: end_ns,
                    error: Some(format!("never fired: {error}")),
                }
            })
            .collect()
    }

    fn resolve(&mut self, target: Target, action: Action, live: &Live) -> Result<Vec<usize>, String> {
        // A CONT is for a paused worker: `leader` means the paused worker
        // that believes it leads, not whoever leads now.
        let alive = |w: &usize| live.alive[*w] && (action != Action::Cont || live.paused[*w]);
        match target {
            Target::Leader => live
                .leaders
                .iter()
                .rev()
                .find(|w| alive(w))
                .map(|w| vec![*w])
                .ok_or_else(|| "no leader at this moment".to_string()),
            Target::Watcher => {
                let watchers: Vec<usize> =
                    (0..live.alive.len()).filter(|w| alive(w) && !live.leaders.contains(w)).collect();
                if watchers.is_empty() {
                    Err("no live watcher at this moment".to_string())
                } else {
                    Ok(vec![watchers[self.rng.random_range(0..watchers.len())]])
                }
            }
            Target::All => {
                let all: Vec<usize> = (0..live.alive.len()).filter(alive).collect();
                if all.is_empty() { Err("no live worker".to_string()) } else { Ok(all) }
            }
            Target::Any => {
                let all: Vec<usize> = (0..live.alive.len()).filter(alive).collect();
                if all.is_empty() {
                    Err("no live worker".to_string())
                } else {
                    Ok(vec![all[self.rng.random_range(0..all.len())]])
                }
            }
            Target::Worker(i) if live.alive[i] => Ok(vec![i]),
            Target::Worker(i) => Err(format!("worker {i} is not running")),
            Target::Lock | Target::Server => unreachable!("lock and server targets are their actions'"),
        }
    }
}

/// Send a signal and return when it took effect, chosen so the history stays
/// causal. KILL/TERM/CONT: just before the syscall (a death, or the first
/// event after a resume, is never earlier than its cause). STOP: once /proc
/// shows the process stopped (its last event is never after its pause).
fn send(proc_: &WorkerProc, signal: Signal) -> (i64, Option<String>) {
    let before = mono_ns();
    match proc_.signal(signal) {
        Ok(true) => {}
        Ok(false) => return (mono_ns(), Some("worker already exited".into())),
        Err(e) => return (mono_ns(), Some(format!("kill failed: {e}"))),
    }
    match signal {
        Signal::SIGSTOP => stopped_at(proc_.pid),
        Signal::SIGCONT => continued(proc_.pid, before),
        _ => (before, None),
    }
}

/// The moment the kernel reports `pid` stopped: a SIGSTOP is delivered only
/// when the target next runs.
fn stopped_at(pid: nix::unistd::Pid) -> (i64, Option<String>) {
    match poll_stopped(pid, 100_000_000) {
        // Gone (reaped): it died, which the waiter reports as an exit.
        Stop::Stopped | Stop::Gone => (mono_ns(), None),
        Stop::NotYet => (mono_ns(), Some("not stopped after 100 ms".into())),
    }
}

/// What `poll_stopped` saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    Stopped,
    Gone,
    NotYet,
}

/// Poll for up to `within_ns` until the kernel reports our child `pid`
/// stopped. `waitid(WSTOPPED | WNOWAIT | WNOHANG)` is a cheap syscall that
/// neither blocks nor consumes the report (the waiter thread only waits for
/// exits), so it can be polled tightly; return, then read the clock.
pub fn poll_stopped(pid: nix::unistd::Pid, within_ns: i64) -> Stop {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let deadline = mono_ns() + within_ns;
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WSTOPPED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(..)) => return Stop::Stopped,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Stop::Gone,
            Ok(_) if mono_ns() < deadline => std::thread::yield_now(),
            Ok(_) => return Stop::NotYet,
        }
    }
}

/// SIGCONT takes effect when sent; wait (briefly) until /proc agrees, so
/// that the next fault sees a running process.
fn continued(pid: nix::unistd::Pid, sent: i64) -> (i64, Option<String>) {
    let deadline = mono_ns() + 100_000_000;
    loop {
        match procfs::process::Process::new(pid.as_raw()).and_then(|p| p.stat()).map(|s| s.state) {
            Ok('T') if mono_ns() < deadline => std::thread::yield_now(),
            Ok('T') => return (mono_ns(), Some("state still 'T' after 100 ms".into())),
            _ => return (sent, None),
        }
    }
}

/// A pid with no process behind it, for stale leases.
fn dead_pid() -> i64 {
    (1..4_000_000i64).rev().step_by(7919).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap_or(3_999_999)
}

pub fn expiry_rule(exp: &Experiment) -> ExpiryRule {
    ExpiryRule {
        expiry: exp.worker.expiry,
        resolution_ns: exp.lease.resolution.as_ns() as i64,
        lease_ns: exp.lease.lease.as_ns() as i64,
    }
}

/// Put the lock file in its starting state, before any worker exists.
pub fn prepare_lock(exp: &Experiment, lock: &Path) -> std::io::Result<()> {
    let rule = expiry_rule(exp);
    let fault = match exp.initial_lock {
        InitialLock::None => return Ok(()),
        InitialLock::Empty => LockFault::Empty,
        InitialLock::Corrupt => LockFault::Corrupt,
        InitialLock::Stale => LockFault::Stale { dead_pid: dead_pid(), lease_until: rule.stale(wall_ns()) },
    };
    lockfile::inject(lock, fault, exp.worker.expiry)
}
