//! The nemesis: carries out what the fault schedule orders (signals to
//! workers, lock-file faults, server faults) and records each delivery as
//! it happened. When and whom is decided by `schedule.rs`.

use std::path::Path;

use nix::sys::signal::Signal;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::os::{Os, Stop};
use super::schedule::{Live, Order, Schedule};
use super::server::{ControlError, ManagedServer, ReplicatedService};
use super::spawn::WorkerProc;
use crate::model::clock::wall_ns;
use crate::model::expiry::ExpiryRule;
use crate::model::history::EventKind;
use crate::model::{Action, Experiment, InitialLock};
use crate::proxy::{Proxy, Toxic};
use crate::substrate::lockfile::{self, LockFault};

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

/// What a server fault does to the lease server.
pub(super) trait ServerControl {
    fn pid(&self) -> Option<nix::unistd::Pid>;
    /// Stop every process of the server.
    fn pause(&self) -> Result<(), ControlError>;
    fn resume(&self) -> Result<(), ControlError>;
    /// Kill every process of the server and wait for them.
    fn kill(&mut self);
    fn start_again(&mut self) -> Result<(), ControlError>;
}

impl ServerControl for ManagedServer {
    fn pid(&self) -> Option<nix::unistd::Pid> {
        ManagedServer::pid(self)
    }

    fn pause(&self) -> Result<(), ControlError> {
        ManagedServer::pause(self)
    }

    fn resume(&self) -> Result<(), ControlError> {
        ManagedServer::resume(self)
    }

    fn kill(&mut self) {
        ManagedServer::kill(self)
    }

    fn start_again(&mut self) -> Result<(), ControlError> {
        Ok(ManagedServer::start_again(self)?)
    }
}

pub struct Nemesis<'s> {
    os: &'s dyn Os,
    schedule: Schedule,
    rule: ExpiryRule,
    lock: std::path::PathBuf,
    /// The harness-managed lease server, for server-* faults.
    server: Option<&'s mut dyn ServerControl>,
    /// The workers' links to their server, for network faults.
    proxy: Option<&'s Proxy>,
    /// A replicated service's links, for network faults instead.
    service: Option<&'s ReplicatedService>,
    /// The nodes each network fault cut off, by fault: its heal mends
    /// those links, whatever the primary is by then.
    sides: std::collections::HashMap<usize, Vec<usize>>,
    /// Where each worker's clock jumps are written (`skew`), and their
    /// totals so far (ns).
    clock_dir: std::path::PathBuf,
    jumps: Vec<i64>,
    /// A program's configured offsets, where its clock is moved by the
    /// shim (whose control file holds the whole offset, not the jumps).
    program_offsets: Option<Vec<i64>>,
    /// The programs' clocks, some of them in their vDSO.
    clocks: Option<&'s super::clock::ProgramClocks>,
}

impl<'s> Nemesis<'s> {
    pub(super) fn new(
        os: &'s dyn Os,
        exp: &Experiment,
        (t0, seed): (i64, u64),
        lock: &Path,
        server: Option<&'s mut dyn ServerControl>,
        (proxy, service): (Option<&'s Proxy>, Option<&'s ReplicatedService>),
        clocks: Option<&'s super::clock::ProgramClocks>,
    ) -> Nemesis<'s> {
        Nemesis {
            os,
            schedule: Schedule::new(&super::schedule::trial_faults(exp, seed), t0, ChaCha8Rng::seed_from_u64(seed)),
            rule: expiry_rule(exp),
            lock: lock.to_path_buf(),
            server,
            proxy,
            service,
            sides: std::collections::HashMap::new(),
            clock_dir: clock_dir(lock),
            jumps: vec![0; exp.workers],
            program_offsets: super::clock::moves_program_clock(exp)
                .then(|| (0..exp.workers).map(|w| exp.worker.clock_offset.of(w).as_ns()).collect()),
            clocks,
        }
    }

    /// Whether no fault is waiting any more.
    pub fn idle(&self) -> bool {
        self.schedule.idle()
    }

    /// The earliest time a timed fault is due.
    pub fn next_due(&self) -> Option<i64> {
        self.schedule.next_due()
    }

    /// An event arrived (it may trigger an armed fault).
    pub fn on_event(&mut self, worker: usize, kind: EventKind, t_ns: i64, live: &Live) {
        self.schedule.on_event(worker, kind, t_ns, live);
    }

    /// Deliver every fault due at `now`. Returns the deliveries in order.
    pub fn fire_due(&mut self, now: i64, procs: &[WorkerProc], live: &mut Live) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(order) = self.schedule.next_order(now, live) {
            out.extend(self.deliver(order, procs, live));
        }
        out
    }

    /// A row for every fault that never fired (its trigger never came, or
    /// its time fell after the end), so a schedule cannot vanish silently.
    pub fn never_fired(&mut self, end_ns: i64) -> Vec<Delivery> {
        self.schedule
            .never_fired()
            .into_iter()
            .map(|u| Delivery {
                fault: u.fault,
                action: u.action.name(),
                target: u.target.to_string(),
                worker: None,
                pid: None,
                scheduled_ns: u.scheduled_ns,
                actual_ns: end_ns,
                error: Some(format!("never fired: {}", u.why)),
            })
            .collect()
    }

    fn deliver(&mut self, o: Order, procs: &[WorkerProc], live: &mut Live) -> Vec<Delivery> {
        let target_text = o.target.to_string();
        let base = |action: &'static str| Delivery {
            fault: o.fault,
            action,
            target: target_text.clone(),
            worker: None,
            pid: None,
            scheduled_ns: o.scheduled_ns,
            actual_ns: 0,
            error: None,
        };
        if o.action.is_server() || o.target == crate::model::Target::Server {
            return vec![self.deliver_to_server(&o, base)];
        }
        if o.action.is_lock() {
            let fault = match o.action {
                Action::LockEmpty => LockFault::Empty,
                Action::LockDelete => LockFault::Delete,
                Action::LockCorrupt => LockFault::Corrupt,
                _ => LockFault::Stale { dead_pid: dead_pid(), lease_until: self.rule.stale(self.os.wall_ns()) },
            };
            let result = lockfile::inject(&self.lock, fault, self.rule.expiry);
            return vec![Delivery {
                actual_ns: self.os.mono_ns(),
                error: result.err().map(|e| e.to_string()),
                ..base(o.action.name())
            }];
        }
        let targets = match o.workers.clone() {
            Ok(t) => t,
            Err(error) => {
                let error = Some(error.to_string());
                return vec![Delivery { actual_ns: self.os.mono_ns(), error, ..base(o.action.name()) }];
            }
        };
        if let (Action::Skew, crate::model::Target::Member(k), Some(service)) = (o.action, o.target, self.service) {
            let result = service.jump_clock(k, o.skew.map_or(0, |s| s.as_ns()));
            return vec![Delivery {
                pid: service.server_pid(k),
                actual_ns: self.os.mono_ns(),
                error: result.err().map(|e| e.to_string()),
                ..base(o.action.name())
            }];
        }
        if o.action == Action::Skew {
            let by = o.skew.map_or(0, |s| s.as_ns());
            return targets
                .iter()
                .map(|&w| {
                    self.jumps[w] += by;
                    let written = match &self.program_offsets {
                        Some(offsets) => match self.clocks {
                            Some(clocks) => clocks.jump(&self.clock_dir, w, offsets[w] + self.jumps[w]),
                            None => super::clock::jump(&self.clock_dir, w, offsets[w] + self.jumps[w]),
                        },
                        None => write_jump(&self.clock_dir, w, self.jumps[w]),
                    };
                    Delivery {
                        worker: Some(w),
                        pid: Some(procs[w].pid.as_raw()),
                        actual_ns: self.os.mono_ns(),
                        error: written.err().map(|e| format!("cannot move the clock: {e}")),
                        ..base(o.action.name())
                    }
                })
                .collect();
        }
        if o.action.is_network()
            && let Some(service) = self.service
        {
            return self.cut_off(service, &o, &targets, procs, base);
        }
        if o.action.is_network() {
            let net = o.net.unwrap_or_default();
            return targets
                .iter()
                .map(|&w| {
                    let done = match (self.proxy, Toxic::of(o.action, &net)) {
                        (None, _) => Err("no proxy between this worker and its server".to_string()),
                        (Some(p), Some(toxic)) => p.apply(w, toxic, net.toxicity).map_err(|e| e.to_string()),
                        (Some(p), None) => p.heal(w).map_err(|e| e.to_string()),
                    };
                    Delivery {
                        worker: Some(w),
                        pid: Some(procs[w].pid.as_raw()),
                        actual_ns: *done.as_ref().unwrap_or(&self.os.mono_ns()),
                        error: done.err(),
                        ..base(o.action.name())
                    }
                })
                .collect();
        }
        let signal = match o.action {
            Action::Kill => Signal::SIGKILL,
            Action::Term => Signal::SIGTERM,
            Action::Stop => Signal::SIGSTOP,
            Action::Cont => Signal::SIGCONT,
            other => unreachable!("the schedule orders no {}", other.name()),
        };
        let mut out = Vec::new();
        for w in &targets {
            let proc_ = &procs[*w];
            let (actual_ns, error) = send(self.os, proc_, signal);
            if error.is_none() {
                match signal {
                    Signal::SIGSTOP => live.paused[*w] = true,
                    Signal::SIGCONT => live.paused[*w] = false,
                    _ => {}
                }
            }
            out.push(Delivery {
                worker: Some(*w),
                pid: Some(proc_.pid.as_raw()),
                actual_ns,
                error,
                ..base(o.action.name())
            });
        }
        out
    }

    /// A network fault on a replicated service: the side it names (the
    /// workers targeted, and the primary or a member) is cut off from the
    /// rest, every link between them faulted at once; its heal mends the
    /// same links. A row per node of the side.
    fn cut_off(
        &mut self,
        service: &ReplicatedService,
        o: &Order,
        targets: &[usize],
        procs: &[WorkerProc],
        base: impl Fn(&'static str) -> Delivery,
    ) -> Vec<Delivery> {
        use crate::model::Target;
        let net = o.net.unwrap_or_default();
        let toxic = Toxic::of(o.action, &net);
        let side = match (toxic, self.sides.remove(&o.fault)) {
            (None, Some(side)) => side,
            _ => {
                let mut side = targets.to_vec();
                match o.target {
                    Target::PrimarySide => side.push(service.member_node(service.primary())),
                    Target::Majority => side.extend(service.servers_but(service.primary())),
                    Target::Member(k) => side.push(service.member_node(k)),
                    _ => {}
                }
                side
            }
        };
        let done = match toxic {
            Some(t) => service.apply(&side, t, net.toxicity),
            None => service.heal(&side),
        };
        if toxic.is_some() {
            self.sides.insert(o.fault, side.clone());
        }
        let (actual_ns, error) = match done {
            Ok(at) => (at, None),
            Err(e) => (self.os.mono_ns(), Some(e.to_string())),
        };
        side.iter()
            .map(|&n| {
                let (worker, pid) = if n < procs.len() {
                    (Some(n), Some(procs[n].pid.as_raw()))
                } else {
                    (None, service.server_pid(n - procs.len()))
                };
                Delivery { worker, pid, actual_ns, error: error.clone(), ..base(o.action.name()) }
            })
            .collect()
    }

    /// server-pause (a stop now, a cont later), server-kill, server-restart.
    fn deliver_to_server(&mut self, o: &Order, base: impl Fn(&'static str) -> Delivery) -> Delivery {
        let Some(server) = self.server.as_deref_mut() else {
            return Delivery {
                actual_ns: self.os.mono_ns(),
                error: Some("no managed server".into()),
                ..base("server")
            };
        };
        let pid = server.pid().map(|p| p.as_raw());
        // Stamped as a worker's signals are, so the history stays causal: a
        // pause once the server is frozen, a resume just before it thaws, a
        // kill (and a restart) once every process of the server is gone:
        // from there on its sessions, and Redis's leases, are lost.
        let (action, actual_ns, result) = match o.action {
            Action::ServerPause => {
                let r = server.pause();
                ("server-stop", self.os.mono_ns(), r)
            }
            Action::Cont => ("server-cont", self.os.mono_ns(), server.resume()),
            Action::ServerKill => {
                server.kill();
                ("server-kill", self.os.mono_ns(), Ok(()))
            }
            _ => {
                server.kill();
                let at = self.os.mono_ns();
                ("server-restart", at, server.start_again())
            }
        };
        if let (Some(at), Ok(())) = (o.resume_at, &result) {
            self.schedule.resume_server(o.fault, at);
        }
        Delivery { pid, actual_ns, error: result.err().map(|e| e.to_string()), ..base(action) }
    }
}

/// Send a signal and return when it took effect, chosen so the history stays
/// causal. KILL/TERM/CONT: just before the syscall (a death, or the first
/// event after a resume, is never earlier than its cause). STOP: once /proc
/// shows the process stopped (its last event is never after its pause).
///
/// A stop or a kill takes effect only once the target runs (a death once
/// the kernel has torn it down in the target's own time), which on a busy
/// machine waits behind the load: the target runs at real-time priority
/// until it has (a stop is lowered again once the kernel reports it).
fn send(os: &dyn Os, proc_: &WorkerProc, signal: Signal) -> (i64, Option<String>) {
    use crate::realtime::Threads;
    let boost = matches!(signal, Signal::SIGSTOP | Signal::SIGKILL) && os.realtime_available();
    if boost {
        os.set_realtime(proc_, true, Threads::Main);
    }
    let before = os.mono_ns();
    let failed = match os.signal(proc_, signal) {
        Ok(true) => None,
        Ok(false) => Some("worker already exited".to_string()),
        Err(e) => Some(format!("kill failed: {e}")),
    };
    if let Some(failed) = failed {
        if boost {
            os.set_realtime(proc_, false, Threads::All);
        }
        return (os.mono_ns(), Some(failed));
    }
    if boost {
        os.set_realtime(proc_, true, Threads::Others);
    }
    match signal {
        Signal::SIGSTOP => {
            let stopped = stopped_at(os, proc_.pid);
            if boost {
                os.set_realtime(proc_, false, Threads::All);
            }
            stopped
        }
        Signal::SIGCONT => continued(os, proc_.pid, before),
        _ => (before, None),
    }
}

/// How a signal that was sent but not seen to act in time ends its error.
pub(super) const UNCONFIRMED: &str = "after 100 ms";

/// The moment the kernel reports `pid` stopped: a SIGSTOP is delivered only
/// when the target next runs.
fn stopped_at(os: &dyn Os, pid: nix::unistd::Pid) -> (i64, Option<String>) {
    match os.poll_stopped(pid, 100_000_000) {
        // Gone (reaped): it died, which the waiter reports as an exit.
        Stop::Stopped | Stop::Gone => (os.mono_ns(), None),
        Stop::NotYet => (os.mono_ns(), Some(format!("not stopped {UNCONFIRMED}"))),
    }
}

/// SIGCONT takes effect when sent; wait (briefly) until /proc agrees, so
/// that the next fault sees a running process.
fn continued(os: &dyn Os, pid: nix::unistd::Pid, sent: i64) -> (i64, Option<String>) {
    let deadline = os.mono_ns() + 100_000_000;
    while os.is_stopped(pid) {
        if os.mono_ns() >= deadline {
            return (os.mono_ns(), Some(format!("state still 'T' {UNCONFIRMED}")));
        }
        // As for a stop: a real-time poller sleeps between looks.
        os.sleep(std::time::Duration::from_micros(20));
    }
    (sent, None)
}

/// Where the workers of the trial whose lock is `lock` read their clock
/// jumps.
pub fn clock_dir(lock: &Path) -> std::path::PathBuf {
    lock.with_file_name("clock")
}

/// Worker `w`'s clock jumps to `total_ns` off its configured offset: the
/// file is replaced whole, so the worker reads the old total or the new.
fn write_jump(dir: &Path, w: usize, total_ns: i64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{w}.new"));
    std::fs::write(&tmp, total_ns.to_string())?;
    std::fs::rename(tmp, dir.join(w.to_string()))
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
