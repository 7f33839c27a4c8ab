//! A fake OS for the nemesis and the event loop: a clock that moves only
//! when the trial waits, workers that are rows of state (running, stopped,
//! dead at a time), signals that change that state the way the kernel does
//! (a stop is seen only once the target runs, a TERM to a stopped process
//! waits for its CONT, a KILL ends even a stopped one), and the workers'
//! messages delivered at their times. Every signal sent is recorded.

use std::cell::{Cell, RefCell};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::msg::{ExitStatus, Msg};
use super::os::{Os, Stop};
use super::spawn::WorkerProc;
use crate::model::history::{Detail, EventKind};
use crate::model::protocol::WireEvent;
use crate::realtime::Threads;

/// Fake pids start past the largest pid_max Linux allows, so that a real
/// signal sent by mistake reaches no process.
const PID_BASE: i32 = 10_000_000;

pub const MS: i64 = 1_000_000;

/// What a look at the queue that finds nothing costs (ns).
const TICK: i64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Running,
    Stopped,
    /// Dies (its exit is reported) at this time.
    Dead(i64),
}

/// How one fake worker answers signals.
#[derive(Clone, Copy, Debug)]
pub struct Behaviour {
    /// How long a SIGSTOP takes to be seen by the kernel's wait; `None`:
    /// the target never runs, so its stop is never observed.
    pub stops_after: Option<i64>,
    /// How long the worker takes to exit on SIGTERM; `None`: ignores it.
    pub exits_on_term_after: Option<i64>,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour { stops_after: Some(50_000), exits_on_term_after: Some(5 * MS) }
    }
}

struct Worker {
    state: State,
    behaviour: Behaviour,
    /// A TERM that arrived while stopped, handled at the CONT.
    term_pending: bool,
}

pub struct FakeOs {
    now: Cell<i64>,
    tx: RefCell<Option<SyncSender<Msg>>>,
    workers: RefCell<Vec<Worker>>,
    /// Messages not yet sent, by time.
    script: RefCell<Vec<(i64, Msg)>>,
    /// Every signal sent: (time, worker, signal).
    pub sent: RefCell<Vec<(i64, usize, Signal)>>,
    /// The harness held up at this time for this long (see `harness_held_up`).
    held_up: Cell<Option<(i64, i64)>>,
}

impl FakeOs {
    /// `n` running workers at time `now`, and the receiving end of their
    /// messages.
    pub fn new(now: i64, behaviours: &[Behaviour]) -> (FakeOs, Receiver<Msg>) {
        let (tx, rx) = mpsc::sync_channel(1024);
        let workers =
            behaviours.iter().map(|&behaviour| Worker { state: State::Running, behaviour, term_pending: false });
        let os = FakeOs {
            now: Cell::new(now),
            tx: RefCell::new(Some(tx)),
            workers: RefCell::new(workers.collect()),
            script: RefCell::new(Vec::new()),
            sent: RefCell::new(Vec::new()),
            held_up: Cell::new(None),
        };
        (os, rx)
    }

    /// The harness itself is held up (stopped, starved) at `at_ns` for
    /// `for_ns`: the first time it reads its clock past `at_ns`, that much
    /// more time has gone by.
    pub fn harness_held_up(&self, at_ns: i64, for_ns: i64) {
        self.held_up.set(Some((at_ns, for_ns)));
    }

    /// Worker `w` reports `kind` at `t_ns`.
    pub fn event(&self, w: usize, t_ns: i64, kind: EventKind) {
        let event = Box::new(WireEvent { t_ns, event: kind, detail: Detail::default() });
        self.send_at(t_ns, Msg::Event { worker: w, pid: pid(w).as_raw(), event });
    }

    /// Worker `w` dies by itself at `t_ns`; its waiter reports the exit at
    /// `reported_ns`.
    pub fn exits_reported_at(&self, w: usize, t_ns: i64, reported_ns: i64) {
        self.workers.borrow_mut()[w].state = State::Dead(t_ns);
        self.send_at(reported_ns, Msg::Exit { worker: w, pid: pid(w).as_raw(), t_ns, status: ExitStatus::Code(1) });
    }

    /// The signals sent, by name, with their times relative to `t0` (ms).
    pub fn signals(&self, t0: i64) -> Vec<(i64, usize, &'static str)> {
        self.sent.borrow().iter().map(|&(t, w, s)| ((t - t0) / MS, w, s.as_str())).collect()
    }

    fn send_at(&self, t_ns: i64, msg: Msg) {
        let mut script = self.script.borrow_mut();
        let at = script.partition_point(|(t, _)| *t <= t_ns);
        script.insert(at, (t_ns, msg));
    }

    fn die(&self, w: usize, at: i64, status: ExitStatus) {
        let mut workers = self.workers.borrow_mut();
        if matches!(workers[w].state, State::Dead(_)) {
            return;
        }
        workers[w].state = State::Dead(at);
        drop(workers);
        self.send_at(at, Msg::Exit { worker: w, pid: pid(w).as_raw(), t_ns: at, status });
    }

    fn dead(&self, w: usize) -> bool {
        matches!(self.workers.borrow()[w].state, State::Dead(at) if at <= self.now.get())
    }

    fn term(&self, w: usize) {
        let after = self.workers.borrow()[w].behaviour.exits_on_term_after;
        if let Some(after) = after {
            self.die(w, self.now.get() + after, ExitStatus::Signal("SIGTERM".into()));
        }
    }

    /// Send every message due by now; once every worker is dead and every
    /// message sent, the last sender goes (the readers' EOF).
    fn flush(&self) {
        let now = self.now.get();
        let mut script = self.script.borrow_mut();
        let due = script.partition_point(|(t, _)| *t <= now);
        let tx = self.tx.borrow();
        for (_, msg) in script.drain(..due) {
            if let Some(tx) = tx.as_ref() {
                tx.send(msg).expect("the fake's queue has room");
            }
        }
        let all_dead = (0..self.workers.borrow().len()).all(|w| self.dead(w));
        drop(tx);
        if all_dead && script.is_empty() {
            self.tx.borrow_mut().take();
        }
    }
}

/// The `WorkerProc`s of `n` fake workers.
pub fn procs(n: usize) -> Vec<WorkerProc> {
    (0..n).map(|w| WorkerProc::fake(w, pid(w).as_raw())).collect()
}

fn pid(w: usize) -> Pid {
    Pid::from_raw(PID_BASE + w as i32)
}

fn worker_of(pid: Pid) -> usize {
    (pid.as_raw() - PID_BASE) as usize
}

impl Os for FakeOs {
    fn mono_ns(&self) -> i64 {
        if let Some((at, by)) = self.held_up.get()
            && self.now.get() >= at
        {
            self.held_up.set(None);
            self.now.set(self.now.get() + by);
        }
        self.now.get()
    }

    fn wall_ns(&self) -> i64 {
        self.now.get() + 1_700_000_000_000_000_000
    }

    fn signal(&self, worker: &WorkerProc, signal: Signal) -> Result<bool, Errno> {
        let w = worker.index;
        if self.dead(w) {
            return Ok(false);
        }
        self.sent.borrow_mut().push((self.now.get(), w, signal));
        let state = self.workers.borrow()[w].state;
        match (signal, state) {
            // A process that is already dying takes no more signals.
            (_, State::Dead(_)) => {}
            (Signal::SIGKILL, _) => self.die(w, self.now.get() + 100_000, ExitStatus::Signal("SIGKILL".into())),
            (Signal::SIGSTOP, _) => self.workers.borrow_mut()[w].state = State::Stopped,
            (Signal::SIGTERM, State::Stopped) => self.workers.borrow_mut()[w].term_pending = true,
            (Signal::SIGTERM, State::Running) => self.term(w),
            (Signal::SIGCONT, State::Stopped) => {
                let pending = {
                    let mut workers = self.workers.borrow_mut();
                    workers[w].state = State::Running;
                    std::mem::take(&mut workers[w].term_pending)
                };
                if pending {
                    self.term(w);
                }
            }
            _ => {}
        }
        Ok(true)
    }

    fn set_realtime(&self, _: &WorkerProc, _: bool, _: Threads) {}

    fn realtime_available(&self) -> bool {
        false
    }

    fn poll_stopped(&self, pid: Pid, within_ns: i64) -> Stop {
        let worker = &self.workers.borrow()[worker_of(pid)];
        let now = self.now.get();
        match (worker.state, worker.behaviour.stops_after) {
            (State::Dead(at), _) if at <= now + within_ns => {
                self.now.set(now.max(at));
                Stop::Gone
            }
            (State::Stopped, Some(after)) if after <= within_ns => {
                self.now.set(now + after);
                Stop::Stopped
            }
            _ => {
                self.now.set(now + within_ns);
                Stop::NotYet
            }
        }
    }

    fn is_stopped(&self, pid: Pid) -> bool {
        let w = worker_of(pid);
        let worker = &self.workers.borrow()[w];
        worker.state == State::Stopped && worker.behaviour.stops_after.is_some()
    }

    fn sleep(&self, d: Duration) {
        self.now.set(self.now.get() + d.as_nanos() as i64);
    }

    fn recv(&self, rx: &Receiver<Msg>, timeout: Duration) -> Result<Msg, RecvTimeoutError> {
        self.flush();
        if let Ok(msg) = rx.try_recv() {
            return Ok(msg);
        }
        // Even a wait of nothing takes a moment: the loop's deadlines fall
        // on exact nanoseconds here, and time must pass them.
        let until = self.now.get() + (timeout.as_nanos() as i64).max(TICK);
        let next = self.script.borrow().first().map(|(t, _)| *t);
        self.now.set(next.filter(|t| *t <= until).unwrap_or(until).max(self.now.get()));
        self.flush();
        rx.try_recv().map_err(|e| match e {
            TryRecvError::Empty => RecvTimeoutError::Timeout,
            TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
        })
    }

    fn try_recv(&self, rx: &Receiver<Msg>) -> Result<Msg, TryRecvError> {
        self.flush();
        let got = rx.try_recv();
        if got.is_err() {
            // A poll takes time too: without this a spin would never end.
            self.now.set(self.now.get() + TICK);
        }
        got
    }
}
