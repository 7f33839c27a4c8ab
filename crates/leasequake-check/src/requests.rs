//! What the history says of each request a worker made of its lease
//! service, for the checks that read the service's grants off it
//! (network.rs, grants.rs): when a grant a worker was told of ends, and
//! which requests reached the service though their reply was lost.

use std::collections::VecDeque;

use leasequake_model::history::{Event, EventKind, Micros};

/// The harness's wall clock at the barrier, µs since the Unix epoch: where
/// a `lease_until` is put on the trial's axis.
pub(crate) fn barrier_wall_us(events: &[Event]) -> Option<i64> {
    events.iter().find(|e| e.kind == EventKind::Barrier).and_then(|e| e.detail.wall_ns).map(|ns| ns.div_euclid(1000))
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
/// be this request's. A send is known only when its outcome is (its time
/// is the outcome's less the operation's duration), so the history must
/// pass the next send by the longest operation seen. What it holds: each
/// worker's unsettled failures and the sends and lost replies since them.
#[derive(Debug, Default)]
pub(crate) struct LostReplies {
    workers: Vec<Asks>,
    /// Workers with unsettled failures.
    unsettled: Vec<usize>,
    longest_op_us: Micros,
}

#[derive(Debug, Default)]
struct Asks {
    /// When its latest renewal was sent (a renewal's outcome was sent then).
    renewing: Option<Micros>,
    /// When its requests were sent, in order, from the oldest still needed.
    sends: VecDeque<Micros>,
    /// Its lost replies, in order, from the oldest still needed.
    lost: VecDeque<Micros>,
    /// Requests that failed, in the order their failures came: when each
    /// was sent, and whether it was a renewal.
    failed: VecDeque<(Micros, bool)>,
}

impl Asks {
    /// Keep what a failure yet to be settled, or yet to come (sent after
    /// `passed`), may ask for.
    fn prune(&mut self, passed: Micros) {
        let keep = self.failed.iter().map(|f| f.0).fold(passed, Micros::min);
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
        let op = e.detail.op_us.map(|us| us as Micros);
        if let Some(w) = e.worker {
            if w >= self.workers.len() {
                self.workers.resize_with(w + 1, Asks::default);
            }
            let asks = &mut self.workers[w];
            let failed = match e.kind {
                EventKind::ReplyLost => {
                    asks.lost.push_back(e.t_us);
                    None
                }
                EventKind::Renewing => {
                    asks.renewing = Some(e.t_us);
                    insert_sorted(&mut asks.sends, e.t_us);
                    None
                }
                // A renewal's outcome: sent at its `renewing`.
                EventKind::RenewFailed | EventKind::Renewed => {
                    let sent = asks.renewing.unwrap_or(e.t_us);
                    self.longest_op_us = self.longest_op_us.max(e.t_us - sent);
                    if e.kind == EventKind::RenewFailed {
                        asks.renewing = None;
                    }
                    (e.kind == EventKind::RenewFailed).then_some((sent, true))
                }
                _ => {
                    let failed =
                        matches!(e.kind, EventKind::NotAcquired | EventKind::TakeoverLost) && e.detail.error.is_some();
                    if let Some(op) = op {
                        self.longest_op_us = self.longest_op_us.max(op);
                        insert_sorted(&mut asks.sends, e.t_us - op);
                    }
                    failed.then(|| (e.t_us - op.unwrap_or(0), false))
                }
            };
            if let Some(f) = failed {
                asks.failed.push_back(f);
                if !self.unsettled.contains(&w) {
                    self.unsettled.push(w);
                }
            }
            asks.prune(e.t_us - self.longest_op_us);
        }
        self.settle(e.t_us, out);
    }

    fn settle(&mut self, now_us: Micros, out: &mut Vec<(usize, LostRequest)>) {
        let passed = now_us - self.longest_op_us;
        for &w in &self.unsettled {
            let asks = &mut self.workers[w];
            while let Some(&(sent_us, renewal)) = asks.failed.front() {
                let Some(next) = asks.next_send(sent_us).filter(|&n| n < passed) else { break };
                asks.failed.pop_front();
                if let Some(reply_us) = asks.answer(sent_us, next) {
                    out.push((w, LostRequest { sent_us, reply_us, renewal }));
                }
            }
            asks.prune(passed);
        }
        let workers = &self.workers;
        self.unsettled.retain(|&w| !workers[w].failed.is_empty());
    }

    /// The history ended: settle every failure against what was sent.
    /// No request yet to be settled was sent before this: the oldest
    /// unsettled one, and what an outcome still to come may date its send
    /// back to.
    pub fn horizon(&self, now_us: Micros) -> Micros {
        let unsettled = self.unsettled.iter().flat_map(|&w| self.workers[w].failed.iter().map(|f| f.0));
        unsettled.fold(now_us - self.longest_op_us, Micros::min)
    }

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
