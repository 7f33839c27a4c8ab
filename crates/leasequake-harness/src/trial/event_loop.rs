//! The trial loop: wait for every worker to be ready, release them, deliver
//! faults on time while folding every message into the history, then clean
//! up: SIGCONT, SIGTERM, grace, SIGKILL, reap.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::barrier::SPIN_NS;
use super::contain::TrialGroup;
use super::error::{KILL_TIMEOUT, READY_TIMEOUT, TrialError};
use super::msg::{ExitStatus, Msg};
use super::nemesis::{Delivery, Nemesis, ServerControl};
use super::os::Os;
use super::record::RawEvent;
use super::schedule::Live;
use super::server;
use super::spawn::{WorkerProc, Workers};
use crate::model::Experiment;
use crate::model::history::{Detail, EventKind};

/// What faults other than signals to workers hit: the lock file, the
/// managed server.
pub struct Hit<'a> {
    pub(super) lock: &'a Path,
    pub(super) server: Option<&'a mut dyn ServerControl>,
    /// The workers' links to the server, for network faults.
    pub(super) proxy: Option<&'a crate::proxy::Proxy>,
    /// A replicated service's links, for network faults instead.
    pub(super) service: Option<&'a server::ReplicatedService>,
    /// The programs' clocks, where the experiment moves them (`skew`).
    pub(super) clocks: Option<&'a super::clock::ProgramClocks>,
}

/// The state of the trial loop.
pub struct Run<'o> {
    pub(super) os: &'o dyn Os,
    pub(super) rx: Receiver<Msg>,
    /// Where the events go, in time order, as the trial runs.
    pub(super) rec: super::record::Recorder<'o>,
    /// How each worker exited (its time, code or signal), once it has.
    pub(super) exits: Vec<Option<(i64, Detail)>>,
    /// Whether each worker said anything of its own.
    pub(super) said: Vec<bool>,
    pub(super) live: Live,
    pub(super) exited: usize,
    pub(super) ready: usize,
    pub(super) garbage: usize,
    pub(super) deliveries: Vec<Delivery>,
    /// Trial end (monotonic ns), once known.
    pub(super) end_ns: i64,
    /// One-shot trials: workers that have not yet made their attempt (nor
    /// died). `None` for trials that run their whole duration.
    pub(super) unsettled: Option<Vec<bool>>,
    /// Where programs' clocks are moved: whether each program loaded the
    /// clock shim (None until that can be told, at its first event).
    pub(super) shim: Option<Vec<Option<bool>>>,
    /// Programs whose clock was to be moved in their vDSO: Ok(fast), or
    /// why it was not.
    pub(super) vdso: Vec<Option<Result<bool, String>>>,
    /// Programs released after the barrier, soonest first.
    pub(super) late_starts: Vec<super::barrier::LateStart>,
}

impl<'o> Run<'o> {
    /// A program that did not load the clock shim runs on the true clock,
    /// whatever the experiment says: say so, once, and in its outcome.
    /// Looked at in the worker's whole process group (`pid` is the
    /// worker's, and its group's id), at its first event and until told,
    /// and once more at the trial's end: a `shell: true` script's static
    /// child is as unmoved as a static program.
    fn note_shim(&mut self, worker: usize, pid: i32, told: super::clock::GroupShim) {
        use super::clock::GroupShim;
        // One whose clock is (or was to be) moved in its vDSO has no shim.
        if self.vdso.get(worker).is_some_and(Option::is_some) {
            return;
        }
        let Some(slot) = self.shim.as_mut().and_then(|s| s.get_mut(worker)) else { return };
        match told {
            GroupShim::Loaded => *slot = Some(true),
            GroupShim::Unknown => {}
            GroupShim::Missing { pid: missing, name } => {
                *slot = Some(false);
                let who = if missing == pid { String::new() } else { format!(" (its process {missing}, {name})") };
                crate::warnln!(
                    "warning: worker {worker}'s program{who} did not load the clock shim: its clock is not moved \
                     (a static binary, or one that reads the clock without libc, such as Go's)"
                );
            }
        }
    }

    /// The trial's end: the groups of the workers not yet found without the
    /// shim looked at once more, in one pass over /proc, for a process
    /// started after a worker's first event.
    pub(super) fn recheck_shims(&mut self, procs: &[WorkerProc]) {
        let Some(shim) = &self.shim else { return };
        let in_vdso = |w: usize| self.vdso.get(w).is_some_and(Option::is_some);
        let open: Vec<&WorkerProc> = procs
            .iter()
            .filter(|p| shim.get(p.index) != Some(&Some(false)) && !in_vdso(p.index) && !p.reaped())
            .collect();
        let pgids: Vec<i32> = open.iter().map(|p| p.pid.as_raw()).collect();
        for (p, told) in open.iter().zip(super::clock::groups_shim(&pgids)) {
            self.note_shim(p.index, p.pid.as_raw(), told);
        }
    }

    /// Fold one message into the history and the live view.
    pub(super) fn absorb(&mut self, msg: Msg, mut nemesis: Option<&mut Nemesis>) {
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
                if self.shim.as_ref().and_then(|s| s.get(worker)).is_some_and(Option::is_none) {
                    let told = super::clock::groups_shim(&[pid]).remove(0);
                    self.note_shim(worker, pid, told);
                }
                if let Some(n) = nemesis {
                    n.on_event(worker, event.event, event.t_ns, &self.live);
                }
                // The readers let only a worker's own kinds through.
                if let Some(said) = self.said.get_mut(worker)
                    && event.event != EventKind::Start
                {
                    *said = true;
                }
                self.rec.push(RawEvent::harness(event.t_ns, Some(worker), Some(pid), event.event, event.detail));
            }
            Msg::Garbage { worker, line } => {
                self.garbage += 1;
                if self.garbage <= 3 {
                    crate::warnln!("warning: worker {worker} wrote a line that is not an event: {line:?}");
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
                if let Some(exit) = self.exits.get_mut(worker) {
                    *exit = Some((t_ns, detail.clone()));
                }
                self.rec.push(RawEvent::harness(t_ns, Some(worker), Some(pid), EventKind::Exit, detail));
            }
            Msg::Observed(raw) => self.rec.push(*raw),
        }
    }

    pub(super) fn settle(&mut self, worker: usize) {
        if let Some(w) = self.unsettled.as_mut().and_then(|u| u.get_mut(worker)) {
            *w = false;
        }
    }

    /// A one-shot trial whose workers have all made their attempt, with no
    /// fault left to fire, cannot change any more: end it now rather than
    /// sleep out `duration` (the 30 × 30 race would otherwise be 9 s of
    /// waiting).
    pub(super) fn settled(&self, nemesis: &Nemesis) -> bool {
        self.unsettled.as_ref().is_some_and(|u| !u.contains(&true)) && nemesis.idle()
    }

    pub(super) fn record(&mut self, deliveries: Vec<Delivery>) {
        for d in &deliveries {
            let detail = Detail {
                fault: Some(d.fault),
                action: Some(d.action.to_string()),
                error: d.error.clone(),
                error_us: held_to_budget(d).then(|| (d.actual_ns - d.scheduled_ns) / 1000),
                ..Detail::default()
            };
            self.rec.push(RawEvent::harness(d.actual_ns, d.worker, d.pid, EventKind::Fault, detail));
        }
        self.deliveries.extend(deliveries);
    }

    /// Barrier, faults, until the trial's end. Returns the barrier time.
    pub(super) fn drive<'h>(
        &mut self,
        exp: &Experiment,
        seed: u64,
        workers: &Workers,
        barrier: Vec<std::os::fd::OwnedFd>,
        stop: &AtomicBool,
        hit: Hit<'h>,
    ) -> Result<i64, TrialError>
    where
        'o: 'h,
    {
        self.await_ready(exp, &workers.procs, stop)?;
        let offsets = super::setup::start_offsets(exp, seed);
        // From the release to the trial's end this thread runs at real-time
        // priority, so that no load makes a moment late: the release, each
        // fault, each stop observed. (Lowering it between faults, to leave
        // a woken target this core, made a loaded machine's SIGTERM late
        // again.) The clean-up is ordinary work.
        let mut timing = crate::realtime::Raised::this_thread();
        let (t0, late) = super::barrier::release(exp, barrier, &offsets);
        self.late_starts = late;
        self.released(exp, t0, &workers.procs);
        let outcome = self.faults_until_end(exp, (t0, seed), &workers.procs, stop, hit);
        timing.lower();
        outcome.map(|()| t0)
    }

    /// Every worker ready, or the error that stopped them.
    pub(super) fn await_ready(
        &mut self,
        exp: &Experiment,
        procs: &[WorkerProc],
        stop: &AtomicBool,
    ) -> Result<(), TrialError> {
        let ready_deadline = self.os.mono_ns() + READY_TIMEOUT.as_nanos() as i64;
        while self.ready < exp.workers {
            if stop.load(Ordering::SeqCst) {
                return Err(TrialError::Interrupted);
            }
            let left = ready_deadline - self.os.mono_ns();
            if left <= 0 {
                return Err(TrialError::NotReady { ready: self.ready, total: exp.workers });
            }
            match self.os.recv(&self.rx, Duration::from_nanos(left.min(50_000_000) as u64)) {
                Ok(msg @ Msg::Exit { .. }) => {
                    let Msg::Exit { worker, ref status, .. } = msg else { unreachable!() };
                    let early =
                        TrialError::DiedEarly { worker, status: status.clone(), log: procs[worker].log.clone() };
                    // Counted like any exit: the clean-up waits for the others only.
                    self.absorb(msg, None);
                    return Err(early);
                }
                Ok(msg) => self.absorb(msg, None),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TrialError::NotReady { ready: self.ready, total: exp.workers });
                }
            }
        }
        Ok(())
    }

    /// t = 0: the barrier's event, with both clocks, and a program's start.
    fn released(&mut self, exp: &Experiment, t0: i64, procs: &[WorkerProc]) {
        // Both clocks read back to back: the wall clock at t0, to the µs.
        let wall_at_t0 = t0 + (self.os.wall_ns() - self.os.mono_ns());
        let at = Detail { mono_ns: Some(t0), wall_ns: Some(wall_at_t0), ..super::machine::counters() };
        self.rec.push(RawEvent::harness(t0, None, None, EventKind::Barrier, at));
        if exp.program.is_some() {
            // A program starts at its stdin's EOF: here, or when its late
            // start comes.
            let late: Vec<usize> = self.late_starts.iter().map(|l| l.worker).collect();
            for p in procs.iter().filter(|p| !late.contains(&p.index)) {
                self.rec.push(RawEvent::harness(
                    t0,
                    Some(p.index),
                    Some(p.pid.as_raw()),
                    EventKind::Start,
                    Detail::default(),
                ));
            }
        }
    }

    /// Start the programs whose moment has come: close their stdin.
    fn start_due(&mut self, now: i64, procs: &[WorkerProc]) {
        while self.late_starts.first().is_some_and(|l| l.at_ns <= now) {
            let late = self.late_starts.remove(0);
            drop(late.release);
            let at = self.os.mono_ns();
            let pid = procs.get(late.worker).map(|p| p.pid.as_raw());
            self.rec.push(RawEvent::harness(at, Some(late.worker), pid, EventKind::Start, Detail::default()));
        }
    }

    /// Deliver the faults on time, folding in every message, until the
    /// trial's end (or, one-shot, until nothing can change any more).
    pub(super) fn faults_until_end<'h>(
        &mut self,
        exp: &Experiment,
        (t0, seed): (i64, u64),
        procs: &[WorkerProc],
        stop: &AtomicBool,
        hit: Hit<'h>,
    ) -> Result<(), TrialError>
    where
        'o: 'h,
    {
        let end = t0 + exp.duration.as_ns() as i64;
        self.rec.start(t0);
        let mut nemesis =
            Nemesis::new(self.os, exp, (t0, seed), hit.lock, hit.server, (hit.proxy, hit.service), hit.clocks);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Err(TrialError::Interrupted);
            }
            let now = self.os.mono_ns();
            // Never past the end: a harness held up (stopped, starved) past
            // it fires nothing more; what was still due never happened.
            if now < end {
                self.start_due(now, procs);
                let fired = nemesis.fire_due(now, procs, &mut self.live);
                self.record(fired);
            }
            let now = self.os.mono_ns();
            if now >= end || self.settled(&nemesis) {
                break;
            }
            // Wake for the next fault, the end, or at least every 50 ms to
            // notice Ctrl-C.
            let start = self.late_starts.first().map_or(end, |l| l.at_ns);
            let due = nemesis.next_due().unwrap_or(end).min(start).min(end);
            // Events go out only outside the last stretch before a moment,
            // and only until it begins.
            self.rec.quiet = due - now < SPIN_NS;
            if !self.rec.quiet {
                let os = self.os;
                self.rec.release(now, due - SPIN_NS, &|| os.mono_ns());
                if let Some(e) = self.rec.take_error() {
                    return Err(TrialError::Events(e));
                }
            }
            if due - now < SPIN_NS {
                // A timed wait can oversleep, more so on a VM; for the
                // last stretch before a fault, poll instead.
                match self.os.try_recv(&self.rx) {
                    Ok(msg) => self.absorb(msg, Some(&mut nemesis)),
                    Err(_) => std::hint::spin_loop(),
                }
                continue;
            }
            let wake = (due - SPIN_NS).min(now + 50_000_000);
            let wait = Duration::from_nanos((wake - now).max(0) as u64);
            match self.os.recv(&self.rx, wait) {
                Ok(msg) => self.absorb(msg, Some(&mut nemesis)),
                Err(RecvTimeoutError::Timeout) => {}
                // All workers gone and all pipes closed: sleep out the trial.
                Err(RecvTimeoutError::Disconnected) => self.os.sleep(wait),
            }
        }
        self.rec.quiet = false;
        self.end_ns = self.os.mono_ns();
        self.rec.push(RawEvent::harness(self.end_ns, None, None, EventKind::TrialEnd, super::machine::counters()));
        // Faults still waiting for their moment never happened: say so.
        let never = nemesis.never_fired(self.end_ns);
        self.record(never);
        Ok(())
    }

    /// SIGCONT, SIGTERM, grace, SIGKILL, reap — and keep recording, so the
    /// exits appear in the history (after `trial_end`, which the checker cuts).
    ///
    /// Once every worker is reaped, whatever they started is killed (it may
    /// hold a worker's output pipe open, and the history is complete only
    /// at EOF); returns whether anything was left.
    pub(super) fn clean_up(
        &mut self,
        exp: &Experiment,
        workers: &mut Workers,
        group: &TrialGroup,
    ) -> Result<bool, TrialError> {
        if let Err(e) = self.stop_workers(exp, &workers.procs) {
            workers.detach();
            return Err(e);
        }
        let left_behind = group.kill_rest();
        // Every process is gone; read on until every reader has reached EOF
        // and every thread has dropped its sender (a reader may be blocked
        // on a full queue), then the history is complete. A descendant that
        // escaped every mechanism (no cgroup, its own session) may still
        // hold a pipe: past the deadline its readers are left behind.
        let deadline = self.os.mono_ns() + KILL_TIMEOUT.as_nanos() as i64;
        loop {
            let left = deadline - self.os.mono_ns();
            if left <= 0 {
                workers.detach();
                return Err(TrialError::PipesHeld);
            }
            match self.os.recv(&self.rx, Duration::from_nanos(left as u64)) {
                Ok(msg) => self.absorb(msg, None),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        workers.join();
        Ok(left_behind)
    }

    /// Every worker continued and asked to stop; those still running after
    /// the grace period killed; every exit recorded.
    pub(super) fn stop_workers(&mut self, exp: &Experiment, procs: &[WorkerProc]) -> Result<(), TrialError> {
        for p in procs {
            let _ = self.os.signal(p, Signal::SIGCONT);
            let _ = self.os.signal(p, Signal::SIGTERM);
        }
        let grace_end = self.os.mono_ns() + exp.grace.as_ns() as i64;
        self.drain_until(grace_end, exp.workers);
        if self.exited < exp.workers {
            for p in procs {
                let _ = self.os.signal(p, Signal::SIGKILL);
            }
            self.drain_until(self.os.mono_ns() + KILL_TIMEOUT.as_nanos() as i64, exp.workers);
        }
        if self.exited < exp.workers {
            return Err(TrialError::Unkillable(exp.workers - self.exited));
        }
        Ok(())
    }

    pub(super) fn drain_until(&mut self, deadline: i64, total: usize) {
        while self.exited < total {
            let left = deadline - self.os.mono_ns();
            if left <= 0 {
                return;
            }
            match self.os.recv(&self.rx, Duration::from_nanos(left as u64)) {
                Ok(msg) => self.absorb(msg, None),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// Whether a delivery's lateness is the harness's precision: a signal or a
/// lock-file change, delivered, or sent but not confirmed in time (the
/// clearest sign of a busy machine). A server's or the network's fault is
/// stamped once it has taken effect whole (a server torn down, a proxy
/// reconfigured), which is not lateness; a fault that was never sent has
/// none.
fn held_to_budget(d: &Delivery) -> bool {
    let timed = matches!(d.action, "kill" | "term" | "stop" | "cont") || d.action.starts_with("lock-");
    timed && d.error.as_deref().is_none_or(|e| e.ends_with(super::nemesis::UNCONFIRMED))
}

#[cfg(test)]
#[path = "event_loop_tests.rs"]
mod tests;
