//! What a gap's explanation and its takeover's cost look back for, kept as
//! the sweep goes: each worker's latest faults, its last lease write and
//! renewal step, and its recent looks. The sweep searched the history
//! behind each gap for them; held here, it needs no history behind the
//! current instant, so a history can be checked as it is read.

use std::collections::VecDeque;

use leasequake_model::history::{Event, EventKind, Micros, ms_to_us};

use super::latency::{Op, operation};

/// Fault actions that open a pause and close it.
pub(crate) const STOP: &str = "stop";
pub(crate) const CONT: &str = "cont";
/// Fault actions aimed at the lock itself (worker = None) start with this.
const LOCK_FAULT_PREFIX: &str = "lock-";

/// A fault's action if it was delivered: faults with an `error` never
/// reached their target (e.g. "no leader to target") and changed nothing.
pub(crate) fn delivered_action(event: &Event) -> Option<&str> {
    if event.kind != EventKind::Fault || event.detail.error.is_some() {
        return None;
    }
    event.detail.action.as_deref()
}

/// A delivered fault that may explain a gap.
#[derive(Clone, Debug)]
pub(crate) struct FaultSeen {
    /// Its place in the history: of two candidates, the later one is the
    /// cause.
    seq: u64,
    pub t_us: Micros,
    pub worker: Option<usize>,
    pub action: String,
    pub fault: Option<usize>,
    /// Its target's state once every event of the fault's instant was
    /// applied (what "at or before the fault's time" means in a history
    /// where events share a µs): the nominal expiry of the lease it last
    /// wrote, and whether its last renewal step was a `renewing`.
    pub expiry_us: Option<Micros>,
    pub mid_renewal: bool,
}

#[derive(Debug, Default)]
struct Past {
    /// The latest delivered fault aimed at the worker that can take its
    /// leadership away (a resume cannot; a stop only through its pause).
    fault: Option<FaultSeen>,
    stop: Option<FaultSeen>,
    /// Nominal expiry of the lease of its last `acquired`/`renewed`.
    expiry_us: Option<Micros>,
    /// Its last renewal step (`renewing`, `renewed`, `renew_failed`,
    /// `acquired`) was a `renewing`.
    renewing: bool,
    /// Its recent timed looks: when each ended, and how long it took.
    looks: VecDeque<(Micros, Micros)>,
}

#[derive(Debug, Default)]
pub(crate) struct Lookback {
    seq: u64,
    now_us: Micros,
    workers: Vec<Past>,
    lock_fault: Option<FaultSeen>,
    /// Faults of the current instant, whose state is taken when it ends.
    pending: Vec<(usize, bool)>,
    watch_us: Micros,
    longest_op_us: Micros,
}

impl Lookback {
    pub fn new(watch_us: Micros) -> Lookback {
        Lookback { watch_us, ..Lookback::default() }
    }

    pub fn event(&mut self, e: &Event) {
        if e.t_us != self.now_us {
            self.settle();
            self.now_us = e.t_us;
        }
        self.seq += 1;
        if let Some(us) = e.detail.op_us.filter(|_| operation(e.kind).is_some()) {
            self.longest_op_us = self.longest_op_us.max(us as Micros);
        }
        let Some(w) = e.worker else {
            if let Some(action) = delivered_action(e).filter(|a| a.starts_with(LOCK_FAULT_PREFIX)) {
                self.lock_fault = Some(self.seen(e, action));
            }
            return;
        };
        if w >= self.workers.len() {
            self.workers.resize_with(w + 1, Past::default);
        }
        match e.kind {
            EventKind::Acquired | EventKind::Renewed => {
                self.workers[w].expiry_us = e.detail.expires_in_ms.map(|ms| e.t_us + ms_to_us(ms));
            }
            _ => {}
        }
        if matches!(e.kind, EventKind::Renewing | EventKind::Renewed | EventKind::RenewFailed | EventKind::Acquired) {
            self.workers[w].renewing = e.kind == EventKind::Renewing;
        }
        if let (Some(us), Some(Op::Observe)) = (e.detail.op_us, operation(e.kind)) {
            self.look(w, e.t_us, us as Micros);
        }
        match delivered_action(e) {
            Some(CONT) | None => {}
            Some(action) => {
                let stop = action == STOP;
                let seen = Some(self.seen(e, action));
                let past = &mut self.workers[w];
                if stop {
                    past.stop = seen
                } else {
                    past.fault = seen
                }
                self.pending.push((w, stop));
            }
        }
    }

    fn seen(&self, e: &Event, action: &str) -> FaultSeen {
        FaultSeen {
            seq: self.seq,
            t_us: e.t_us,
            worker: e.worker,
            action: action.to_string(),
            fault: e.detail.fault,
            expiry_us: None,
            mid_renewal: false,
        }
    }

    /// Keep a look while a takeover may still be timed from it: one that
    /// ended more than a watch interval before the longest operation yet
    /// seen began is too old for any acquire that does not outlast every
    /// operation before it; the newest such is kept all the same.
    fn look(&mut self, w: usize, t_us: Micros, op_us: Micros) {
        let cutoff = t_us - self.watch_us - self.longest_op_us;
        let looks = &mut self.workers[w].looks;
        looks.push_back((t_us, op_us));
        while looks.len() > 1 && looks[1].0 < cutoff {
            looks.pop_front();
        }
    }

    /// The instant is over: its faults' targets are as they will be seen.
    fn settle(&mut self) {
        for (w, stop) in std::mem::take(&mut self.pending) {
            let past = &mut self.workers[w];
            let (expiry_us, renewing) = (past.expiry_us, past.renewing);
            if let Some(f) = if stop { &mut past.stop } else { &mut past.fault } {
                f.expiry_us = expiry_us;
                f.mid_renewal = renewing;
            }
        }
    }

    /// The most recent delivered fault, since `since_us` and up to now,
    /// that could have cost `worker` its leadership: one aimed at it (its
    /// stop only if `paused`: a lifted pause took nothing), or one aimed at
    /// the lock. Asked once the current instant's events are all in.
    pub fn cause(&mut self, worker: usize, since_us: Micros, paused: bool) -> Option<&FaultSeen> {
        self.settle();
        let mine = self.workers.get(worker);
        let stop = mine.and_then(|p| p.stop.as_ref()).filter(|_| paused);
        [mine.and_then(|p| p.fault.as_ref()), stop, self.lock_fault.as_ref()]
            .into_iter()
            .flatten()
            .filter(|f| f.t_us >= since_us)
            .max_by_key(|f| f.seq)
    }

    /// When `worker`'s takeover began, for an acquire that began at
    /// `began_us`: at the start of its last look that ended by then, if it
    /// ended no more than a watch interval before; else at the acquire.
    pub fn takeover_from(&self, worker: usize, began_us: Micros) -> Micros {
        let looks = self.workers.get(worker).map(|p| &p.looks);
        let look = looks.and_then(|l| l.iter().rev().find(|(t, _)| *t <= began_us));
        match look {
            Some(&(t, op)) if began_us - t <= self.watch_us => t - op,
            _ => began_us,
        }
    }
}
