//! A trial's events on their way out: each held until no event before it in
//! time can still arrive, then handed to the sink in time order, so that a
//! trial of any length is written as it runs and never held whole.
//!
//! Events arrive out of order: a worker stamps an event before it writes it
//! to its pipe, and the pipes are read by threads of their own. An event is
//! handed on once the trial loop's clock is `HOLD_NS` past it, or sooner
//! when `MAX_HELD` events wait (a flood); one that arrives after events
//! later than it have gone (a worker stopped between its stamp and its
//! write, a program that stamps its own times, the links' lost replies,
//! which are counted at the trial's end) is handed on when it comes, out of
//! order, and the sink sorts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::model::history::{Detail, Event, EventKind, EventSink, MAX_TRIAL_US};

pub fn to_us(ns: i64) -> i64 {
    // Round half away from zero, so -0.5 µs and 0.5 µs are symmetric.
    (ns as f64 / 1000.0).round() as i64
}

/// An event with its absolute monotonic time, before the barrier is known.
#[derive(Debug)]
#[cfg_attr(test, derive(Clone))]
pub struct RawEvent {
    pub(super) t_ns: i64,
    pub(super) worker: Option<usize>,
    pub(super) pid: Option<i32>,
    pub(super) kind: EventKind,
    pub(super) detail: Detail,
}

impl RawEvent {
    pub(super) fn harness(
        t_ns: i64,
        worker: Option<usize>,
        pid: Option<i32>,
        kind: EventKind,
        detail: Detail,
    ) -> RawEvent {
        RawEvent { t_ns, worker, pid, kind, detail }
    }

    pub(super) fn into_event(self, t0: i64) -> Event {
        Event { t_us: to_us(self.t_ns - t0), worker: self.worker, pid: self.pid, kind: self.kind, detail: self.detail }
    }
}

/// How far behind the trial loop's clock an event may arrive and still be
/// written in order: far more than a pipe and a reader thread take on a
/// busy machine, little memory (the events of this long).
pub(super) const HOLD_NS: i64 = 2_000_000_000;

/// At most this many events wait (tens of MB): past it the soonest goes.
const MAX_HELD: usize = 1 << 16;

pub struct Recorder<'s> {
    sink: &'s mut dyn EventSink,
    /// The barrier (monotonic ns), once released: events are timed from it.
    t0: Option<i64>,
    /// What came before the barrier, in arrival order.
    early: Vec<RawEvent>,
    /// Events not yet handed on, soonest first (arrival order within a µs,
    /// as a history keeps it).
    held: BinaryHeap<Reverse<Held>>,
    arrivals: u64,
    /// The sink's first error, until taken; nothing is handed on after it.
    error: Option<std::io::Error>,
    failed: bool,
    /// Events stamped further than a trial lasts from its barrier, dropped.
    pub(super) unplaceable: usize,
    /// In the last stretch before a moment the trial loop must keep:
    /// nothing is handed on, not even past `MAX_HELD`.
    pub(super) quiet: bool,
    /// Every event pushed, for the event loop's tests.
    #[cfg(test)]
    pub(super) all: Vec<RawEvent>,
}

struct Held {
    key: (i64, u64),
    event: Event,
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        self.key == other.key
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Held) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl<'s> Recorder<'s> {
    pub fn new(sink: &'s mut dyn EventSink) -> Recorder<'s> {
        Recorder {
            sink,
            t0: None,
            early: Vec::new(),
            held: BinaryHeap::new(),
            arrivals: 0,
            error: None,
            failed: false,
            unplaceable: 0,
            quiet: false,
            #[cfg(test)]
            all: Vec::new(),
        }
    }

    pub fn push(&mut self, raw: RawEvent) {
        #[cfg(test)]
        self.all.push(raw.clone());
        match self.t0 {
            Some(t0) => self.hold(raw.into_event(t0)),
            None => self.early.push(raw),
        }
    }

    fn hold(&mut self, event: Event) {
        if event.t_us.abs() > MAX_TRIAL_US {
            self.unplaceable += 1;
            return;
        }
        self.arrivals += 1;
        self.held.push(Reverse(Held { key: (event.t_us, self.arrivals), event }));
        if self.held.len() > MAX_HELD && !self.quiet {
            self.out();
        }
    }

    /// The barrier: from here events are timed and can be handed on.
    pub fn start(&mut self, t0: i64) {
        if self.t0.is_none() {
            self.t0 = Some(t0);
            for raw in std::mem::take(&mut self.early) {
                self.hold(raw.into_event(t0));
            }
        }
    }

    /// Hand on what is `HOLD_NS` older than `now_ns`, until `clock` says
    /// `deadline_ns` has come (the rest goes at the next call).
    pub fn release(&mut self, now_ns: i64, deadline_ns: i64, clock: &dyn Fn() -> i64) {
        let Some(t0) = self.t0 else { return };
        let before = to_us(now_ns - HOLD_NS - t0);
        let mut handed = 0u32;
        while self.held.peek().is_some_and(|h| h.0.key.0 < before) {
            self.out();
            handed += 1;
            if handed.is_multiple_of(64) && clock() >= deadline_ns {
                return;
            }
        }
    }

    /// The trial is over: hand on everything (nothing, if it was never
    /// released: a trial that failed before its barrier has no history).
    pub fn finish(&mut self) {
        self.quiet = false;
        while !self.held.is_empty() {
            self.out();
        }
    }

    fn out(&mut self) {
        if let Some(Reverse(held)) = self.held.pop()
            && !self.failed
            && let Err(e) = self.sink.event(held.event)
        {
            (self.error, self.failed) = (Some(e), true);
        }
    }

    /// Why the sink took no more events, once.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::history::{Detail, EventKind};

    fn raw(t_ms: i64, worker: usize) -> RawEvent {
        RawEvent::harness(t_ms * 1_000_000, Some(worker), None, EventKind::Renewed, Detail::default())
    }

    #[test]
    fn events_come_out_in_time_order_once_the_hold_has_passed_them() {
        let mut out: Vec<Event> = Vec::new();
        let mut rec = Recorder::new(&mut out);
        rec.push(raw(5, 0));
        rec.start(0);
        rec.push(raw(3, 1));
        rec.push(raw(3, 2));
        rec.push(raw(1, 3));
        rec.release(2_003_000_000, i64::MAX, &|| 0);
        // Before 3 ms only: what is still within the hold stays.
        rec.push(raw(2, 4));
        rec.release(2_010_000_000, i64::MAX, &|| 0);
        rec.push(raw(4, 5));
        rec.finish();
        drop(rec);
        let order: Vec<(i64, usize)> = out.iter().map(|e| (e.t_us / 1000, e.worker.unwrap())).collect();
        // Arrival order within an instant; 4 ms came after 5 ms had gone.
        assert_eq!(order, vec![(1, 3), (2, 4), (3, 1), (3, 2), (5, 0), (4, 5)]);
    }

    /// A sink that takes `room` events.
    struct Full(usize);

    impl EventSink for Full {
        fn event(&mut self, _: Event) -> std::io::Result<()> {
            self.0 = self.0.checked_sub(1).ok_or_else(|| std::io::Error::other("no room"))?;
            Ok(())
        }
    }

    #[test]
    fn a_sink_that_fails_is_said_once_and_given_nothing_more() {
        let mut sink = Full(1);
        let mut rec = Recorder::new(&mut sink);
        rec.start(0);
        for t in 1..=3 {
            rec.push(raw(t, 0));
        }
        rec.finish();
        assert_eq!(rec.take_error().map(|e| e.to_string()), Some("no room".into()));
        assert!(rec.take_error().is_none());
        rec.push(raw(4, 0));
        rec.finish();
        assert!(rec.take_error().is_none(), "a failed sink is given nothing more");
        drop(rec);
        assert_eq!(sink.0, 0);
    }

    #[test]
    fn a_flood_is_handed_on_past_the_most_that_may_wait() {
        let mut out: Vec<Event> = Vec::new();
        let mut rec = Recorder::new(&mut out);
        rec.start(0);
        for i in 0..MAX_HELD + 10 {
            rec.push(raw(1 + i as i64 / 1000, 0));
        }
        assert_eq!(rec.held.len(), MAX_HELD);
        drop(rec);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn nothing_goes_out_in_the_stretch_before_a_moment_nor_past_the_deadline() {
        let mut out: Vec<Event> = Vec::new();
        let mut rec = Recorder::new(&mut out);
        rec.start(0);
        rec.quiet = true;
        for i in 0..MAX_HELD + 10 {
            rec.push(raw(1, i % 3));
        }
        assert_eq!(rec.held.len(), MAX_HELD + 10, "a flood waits out the stretch");
        rec.quiet = false;
        // The deadline has come: the first 64 go, then it stops.
        rec.release(10_000_000_000, 0, &|| 1);
        assert_eq!(rec.held.len(), MAX_HELD + 10 - 64);
        rec.release(10_000_000_000, i64::MAX, &|| 1);
        assert!(rec.held.is_empty());
        drop(rec);
        assert_eq!(out.len(), MAX_HELD + 10);
    }

    #[test]
    fn an_event_stamped_beyond_any_trial_is_dropped_and_counted() {
        let mut out: Vec<Event> = Vec::new();
        let mut rec = Recorder::new(&mut out);
        rec.start(0);
        // A program's own stamp from the wall clock: decades after boot.
        rec.push(raw(1_765_000_000_000, 0));
        rec.push(raw(1, 0));
        rec.finish();
        assert_eq!(rec.unplaceable, 1);
        drop(rec);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn nothing_is_handed_on_before_the_barrier() {
        let mut out: Vec<Event> = Vec::new();
        let mut rec = Recorder::new(&mut out);
        rec.push(raw(1, 0));
        rec.release(i64::MAX / 2, i64::MAX, &|| 0);
        rec.finish();
        drop(rec);
        assert!(out.is_empty());
    }
}
