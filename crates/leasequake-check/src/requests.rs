//! What the history says of each request a worker made of its lease
//! service, for the checks that read the service's grants off it
//! (network.rs, grants.rs): when a grant a worker was told of ends, and
//! which requests reached the service though their reply was lost.

use std::collections::{BTreeMap, VecDeque};

use leasequake_model::history::{Event, EventKind, Micros};

/// The harness's wall clock at the barrier, µs since the Unix epoch: where
/// a `lease_until` is put on the trial's axis.
pub(crate) fn barrier_wall_us(e: &Event) -> Option<i64> {
    (e.kind == EventKind::Barrier).then_some(e.detail.wall_ns?.div_euclid(1000))
}

/// When the lease an `acquired`/`renewed` wrote ends: its `lease_until` on
/// the trial's axis, else its nominal expiry.
pub(crate) fn grant_end(e: &Event, barrier_wall_us: Option<i64>) -> Option<Micros> {
    match (e.detail.lease_until, barrier_wall_us) {
        (Some(until), Some(wall)) => Some((until * 1e6).round() as i64 - wall),
        _ => e.detail.expires_in_ms.map(|ms| e.t_us + (ms * 1000.0).round() as i64),
    }
}

/// A request of one worker that failed for it but whose reply the proxy
/// dropped: it reached the server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LostRequest {
    pub sent_us: Micros,
    /// When its reply was dropped.
    pub reply_us: Micros,
    /// A renewal (else an acquire or a takeover).
    pub renewal: bool,
}

/// Each worker's failed requests matched with the lost reply that answered
/// them, as the events come. A lost reply answers the latest request sent
/// before it (a delayed reply can come after its request failed by
/// timeout), so a failed request is settled once the worker has sent its
/// next one and the history has passed that send: no reply after it can
/// be this request's.
///
/// A send is known only when its outcome is (the outcome's time less the
/// operation's duration). A worker with one request in flight at a time
/// (the built-in worker, and most programs) sends each request after the
/// outcome of the one before, so whatever it has yet to report was sent
/// after its last outcome, and a send it reports comes after every send it
/// reported before: matched that way, the result is the one a look at the
/// whole history gives. For a worker with requests in flight at once, the
/// history must also have passed the next send by the longest operation
/// seen so far, which is as good as the operations before are long.
///
/// What it holds: each worker's unsettled failures and the sends and lost
/// replies since them, or since its last outcome.
#[derive(Debug, Default)]
pub(crate) struct LostReplies {
    workers: Vec<Asks>,
    /// Workers with unsettled failures, and when those were sent (counted).
    unsettled: Vec<usize>,
    failed_sent: BTreeMap<Micros, usize>,
    /// Sends of requests not yet reported, at the earliest, by worker:
    /// the renewal awaiting its outcome, else its last outcome (counted,
    /// live workers only).
    in_flight: BTreeMap<Micros, usize>,
    /// Workers whose pin may lapse: dead (their last words may still be
    /// read), or yet to report an outcome.
    lapsing: Vec<usize>,
    longest_op_us: Micros,
}

#[derive(Debug, Default)]
struct Asks {
    /// When its renewal awaiting an outcome was sent.
    renewing: Option<Micros>,
    /// When it last reported an outcome of a request.
    last_outcome: Option<Micros>,
    /// Its earliest possible unreported send, as counted in `in_flight`.
    counted: Option<Micros>,
    /// Its `exit`: what it wrote before dying may still be read (stamped
    /// on receipt) for a while.
    died: Option<Micros>,
    first_seen: Option<Micros>,
    /// When its requests were sent, in order, from the oldest still needed.
    sends: VecDeque<Micros>,
    /// Its lost replies, in order, from the oldest still needed.
    lost: VecDeque<Micros>,
    /// Requests that failed, in the order their failures came: when each
    /// was sent, and whether it was a renewal.
    failed: VecDeque<(Micros, bool)>,
    /// Listed among the workers with unsettled failures, and among those
    /// whose pin may lapse.
    listed: bool,
    lapse_listed: bool,
}

impl Asks {
    /// The earliest send of a request it has yet to report; none once it
    /// has been dead for `margin` (its last words are read by then).
    /// Before its first outcome, its first event, for `margin`: a worker
    /// that reports no operation's duration never dates a send back.
    fn unreported(&self, now_us: Micros, margin: Micros) -> Option<Micros> {
        let within = |t: Option<Micros>| t.is_some_and(|t| now_us - t <= margin);
        if self.died.is_some() && !within(self.died) {
            return None;
        }
        self.renewing.or(self.last_outcome).or(self.first_seen.filter(|&t| within(Some(t))))
    }

    /// Its pin on `in_flight` may lapse as time passes.
    fn lapsing(&self) -> bool {
        self.died.is_some() || (self.renewing.is_none() && self.last_outcome.is_none())
    }

    /// Keep what a failure yet to be settled, or yet to come, may ask for.
    fn prune(&mut self, now_us: Micros, margin: Micros) {
        let unreported = self.unreported(now_us, margin);
        let keep = self.failed.iter().map(|f| f.0).chain(unreported).fold(now_us - margin, Micros::min);
        while self.sends.front().is_some_and(|&t| t <= keep) {
            self.sends.pop_front();
        }
        while self.lost.front().is_some_and(|&t| t < keep) {
            self.lost.pop_front();
        }
    }

    /// The first lost reply from `sent` until the next send after it.
    fn answer(&self, sent: Micros, next: Micros) -> Option<Micros> {
        self.lost.get(self.lost.partition_point(|&t| t < sent)).copied().filter(|&t| t < next)
    }

    fn next_send(&self, sent: Micros) -> Option<Micros> {
        self.sends.get(self.sends.partition_point(|&t| t <= sent)).copied()
    }
}

impl LostReplies {
    /// Take one event; `out` gets the lost-reply requests it settled, each
    /// worker's in the order their failures came.
    pub fn event(&mut self, e: &Event, out: &mut Vec<(usize, LostRequest)>) {
        if let Some(w) = e.worker {
            self.take(w, e);
        }
        self.settle(e.t_us, out);
    }

    fn take(&mut self, w: usize, e: &Event) {
        if w >= self.workers.len() {
            self.workers.resize_with(w + 1, Asks::default);
        }
        let op = e.detail.op_us.map(|us| us as Micros);
        let asks = &mut self.workers[w];
        if asks.first_seen.is_none() {
            asks.first_seen = Some(e.t_us);
        }
        let failed = match e.kind {
            EventKind::ReplyLost => {
                asks.lost.push_back(e.t_us);
                None
            }
            EventKind::Exit => {
                asks.died.get_or_insert(e.t_us);
                None
            }
            EventKind::Renewing => {
                asks.renewing = Some(e.t_us);
                insert_sorted(&mut asks.sends, e.t_us);
                None
            }
            // A renewal's outcome: sent at its `renewing`, if no outcome
            // has answered that one yet.
            EventKind::RenewFailed | EventKind::Renewed => {
                let sent = asks.renewing.take().unwrap_or(e.t_us);
                asks.last_outcome = Some(e.t_us);
                self.longest_op_us = self.longest_op_us.max(e.t_us - sent);
                (e.kind == EventKind::RenewFailed).then_some((sent, true))
            }
            _ => {
                let failed =
                    matches!(e.kind, EventKind::NotAcquired | EventKind::TakeoverLost) && e.detail.error.is_some();
                if let Some(op) = op {
                    self.longest_op_us = self.longest_op_us.max(op);
                    insert_sorted(&mut asks.sends, e.t_us - op);
                    asks.last_outcome = Some(e.t_us);
                }
                failed.then(|| (e.t_us - op.unwrap_or(0), false))
            }
        };
        if let Some(f) = failed {
            asks.failed.push_back(f);
            *self.failed_sent.entry(f.0).or_default() += 1;
            if !std::mem::replace(&mut asks.listed, true) {
                self.unsettled.push(w);
            }
        }
        self.count(w, e.t_us);
        let asks = &mut self.workers[w];
        if asks.lapsing() && asks.counted.is_some() && !std::mem::replace(&mut asks.lapse_listed, true) {
            self.lapsing.push(w);
        }
        self.workers[w].prune(e.t_us, self.longest_op_us);
    }

    /// Keep `in_flight` up to date with `w`'s earliest unreported send.
    fn count(&mut self, w: usize, now_us: Micros) {
        let asks = &mut self.workers[w];
        let now = asks.unreported(now_us, self.longest_op_us);
        if now == asks.counted {
            return;
        }
        if let Some(before) = asks.counted {
            forget(&mut self.in_flight, before);
        }
        if let Some(t) = now {
            *self.in_flight.entry(t).or_default() += 1;
        }
        asks.counted = now;
    }

    fn settle(&mut self, now_us: Micros, out: &mut Vec<(usize, LostRequest)>) {
        for w in std::mem::take(&mut self.lapsing) {
            self.count(w, now_us);
            let asks = &mut self.workers[w];
            asks.lapse_listed = asks.lapsing() && asks.counted.is_some();
            if asks.lapse_listed {
                self.lapsing.push(w);
            }
        }
        let margin = self.longest_op_us;
        let passed = now_us - margin;
        for &w in &self.unsettled {
            let asks = &mut self.workers[w];
            // A worker dead past the margin sends nothing more.
            let silent = asks.died.is_some_and(|d| now_us - d > margin);
            while let Some(&(sent_us, renewal)) = asks.failed.front() {
                let next = match asks.next_send(sent_us) {
                    Some(n) if n < passed || silent => n,
                    None if silent => Micros::MAX,
                    _ => break,
                };
                asks.failed.pop_front();
                forget(&mut self.failed_sent, sent_us);
                if let Some(reply_us) = asks.answer(sent_us, next) {
                    out.push((w, LostRequest { sent_us, reply_us, renewal }));
                }
            }
            asks.prune(now_us, margin);
        }
        let workers = &mut self.workers;
        self.unsettled.retain(|&w| {
            workers[w].listed = !workers[w].failed.is_empty();
            workers[w].listed
        });
    }

    /// No request yet to be settled was sent before this: the oldest
    /// unsettled one, and the earliest a request still to be reported may
    /// have been sent.
    pub fn horizon(&self, now_us: Micros) -> Micros {
        let unsettled = self.failed_sent.first_key_value().map(|(t, _)| *t);
        let in_flight = self.in_flight.first_key_value().map(|(t, _)| *t);
        unsettled.into_iter().chain(in_flight).fold(now_us - self.longest_op_us, Micros::min)
    }

    /// The history ended: settle every failure against what was sent.
    pub fn finish(mut self, out: &mut Vec<(usize, LostRequest)>) {
        for w in std::mem::take(&mut self.unsettled) {
            let asks = &mut self.workers[w];
            for (sent_us, renewal) in std::mem::take(&mut asks.failed) {
                let next = asks.next_send(sent_us).unwrap_or(Micros::MAX);
                if let Some(reply_us) = asks.answer(sent_us, next) {
                    out.push((w, LostRequest { sent_us, reply_us, renewal }));
                }
            }
        }
    }
}

/// One count of `t` less.
fn forget(counts: &mut BTreeMap<Micros, usize>, t: Micros) {
    if let Some(n) = counts.get_mut(&t) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&t);
        }
    }
}

/// Sends come nearly in order: an outcome's send is behind its time by the
/// operation's duration.
fn insert_sorted(v: &mut VecDeque<Micros>, t: Micros) {
    let at = v.len() - v.iter().rev().take_while(|&&x| x > t).count();
    v.insert(at, t);
}

/// Overlapping or touching intervals joined, in order.
pub(crate) fn merge(mut v: Vec<(Micros, Micros)>) -> Vec<(Micros, Micros)> {
    v.retain(|(a, b)| b > a);
    v.sort_unstable();
    let mut out: Vec<(Micros, Micros)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind};

    use super::*;
    use crate::testkit::{ev, s};

    fn op(t: f64, w: usize, kind: EventKind, op: f64, error: bool) -> Event {
        ev(t, w, kind).with_detail(Detail {
            op_us: Some(s(op) as u64),
            error: error.then(|| "no reply".to_string()),
            ..Detail::default()
        })
    }

    /// Each event in turn: what it settled, at which event.
    fn settled(events: &[Event]) -> Vec<(usize, usize, LostRequest)> {
        let (mut lost, mut out) = (LostReplies::default(), Vec::new());
        for (i, e) in events.iter().enumerate() {
            let mut now = Vec::new();
            lost.event(e, &mut now);
            out.extend(now.into_iter().map(|(w, r)| (i, w, r)));
        }
        let mut last = Vec::new();
        lost.finish(&mut last);
        out.extend(last.into_iter().map(|(w, r)| (events.len(), w, r)));
        out
    }

    #[test]
    fn a_request_that_hangs_past_every_earlier_one_is_matched_with_the_reply_lost_while_it_hung() {
        use EventKind::*;
        // Looks of a millisecond, then an acquire whose reply the proxy
        // drops: it fails by timeout 2 s after it was sent, long after the
        // reply was lost. Its next send is a look at 4 s.
        let events = [
            op(1.0, 0, HeldBy, 0.001, false),
            ev(1.5, 0, ReplyLost),
            op(3.0, 0, NotAcquired, 1.999, true),
            op(4.0, 0, HeldBy, 0.001, false),
            ev(6.5, 1, Start),
            ev(9.0, 1, HeldBy),
        ];
        let lost = LostRequest { sent_us: s(1.001), reply_us: s(1.5), renewal: false };
        // Settled once the history has passed the next send by the longest
        // operation (2 s): at 6.5, not at the end.
        assert_eq!(settled(&events), [(4, 0, lost)]);
    }

    #[test]
    fn a_failed_renewal_is_sent_at_its_own_renewing_and_an_answered_one_is_done() {
        use EventKind::*;
        let failed =
            |t: f64| ev(t, 0, RenewFailed).with_detail(Detail { error: Some("x".into()), ..Detail::default() });
        let events = [
            ev(1.0, 0, Renewing),
            ev(1.2, 0, ReplyLost),
            failed(2.0),
            ev(3.0, 0, Renewing),
            ev(3.01, 0, Renewed),
            ev(4.0, 0, ReplyLost),
            // No `renewing` of its own: sent when it says it failed.
            failed(5.0),
        ];
        let got: Vec<LostRequest> = settled(&events).into_iter().map(|(_, _, r)| r).collect();
        assert_eq!(got, [LostRequest { sent_us: s(1.0), reply_us: s(1.2), renewal: true }]);
    }

    #[test]
    fn the_horizon_waits_for_a_renewal_in_flight() {
        use EventKind::*;
        let mut lost = LostReplies::default();
        let mut out = Vec::new();
        for e in [op(1.0, 0, HeldBy, 0.001, false), ev(2.0, 1, Renewing), op(5.0, 0, HeldBy, 0.001, false)] {
            lost.event(&e, &mut out);
        }
        assert_eq!(lost.horizon(s(5.0)), s(2.0), "worker 1's renewal may yet fail, sent at 2");
        lost.event(&ev(5.002, 1, Renewed), &mut out);
        // Answered, it holds nothing back; a renewal that took 3.002 s says
        // a send may be reported that much after it was made.
        assert_eq!(lost.horizon(s(6.0)), s(6.0 - 3.002));
        assert!(out.is_empty());
    }

    #[test]
    fn a_dead_workers_failure_is_settled_and_holds_nothing_back() {
        use EventKind::*;
        let failed = ev(1.3, 0, RenewFailed).with_detail(Detail { error: Some("x".into()), ..Detail::default() });
        let events =
            [ev(1.0, 0, Renewing), ev(1.1, 0, ReplyLost), failed, ev(2.0, 0, Exit), op(9.0, 1, HeldBy, 0.001, false)];
        let (mut lost, mut out) = (LostReplies::default(), Vec::new());
        for e in &events {
            lost.event(e, &mut out);
        }
        // It will send nothing more: its renewal is matched, and the history
        // is no longer held back for it.
        assert_eq!(out, [(0, LostRequest { sent_us: s(1.0), reply_us: s(1.1), renewal: true })]);
        assert!(lost.horizon(s(9.0)) > s(2.0), "{}", lost.horizon(s(9.0)));
    }
}
