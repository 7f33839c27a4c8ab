//! What a silent or half-deaf link to the lease server leaves behind:
//! renewals that failed, replies lost, and grants the server held for a
//! live worker that did not believe it led (an *orphaned* grant: nobody
//! leads, yet nobody else can take the lease until it runs out).
//!
//! The server's grants are read off the history: every `acquired` and
//! `renewed` (until its `lease_until`), and every request that failed for
//! the worker but whose reply the harness's proxy dropped (`reply_lost`,
//! dropped under lost replies or delayed past the worker's timeout; it
//! answers the latest request sent before it): the request reached the
//! server. A lost-reply renewal took effect if the worker
//! still held the lease when it was sent; a lost-reply acquire if nobody
//! else held it. Where the history cannot tell, the grant is counted as
//! *possible* and left out of the orphaned time, which is thus a lower
//! bound. A grant ends at its expiry, at a release, or when another
//! worker acquires (the server can only have let it go by then).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use leasequake_model::history::{Event, EventKind, Micros};

use super::metrics::Network;
use super::params::CheckParams;
use super::requests::{LostReplies, LostRequest, barrier_wall_us, grant_end, merge};
use super::spans::Span;

/// One server-side grant of one worker, while it may still be cut short or
/// asked about.
#[derive(Clone, Copy, Debug)]
struct Grant {
    seq: u64,
    start_us: Micros,
    end_us: Micros,
    /// The worker was told of it (an `acquired` or `renewed`), else it is
    /// a lost-reply request's.
    known: bool,
    /// Its end can no longer move: it is in the worker's runs.
    done: bool,
}

impl Grant {
    fn covers(&self, t: Micros) -> bool {
        self.start_us <= t && t < self.end_us
    }
}

#[derive(Debug, Default)]
struct Grants {
    /// In the order they were made, from the oldest still asked about.
    grants: VecDeque<Grant>,
    /// Its first `exit`: no grant to it lasts past its death.
    died: Option<Micros>,
    /// The union of its grants whose end is fixed, start → end.
    runs: BTreeMap<Micros, Micros>,
}

impl Grants {
    fn get_mut(&mut self, seq: u64) -> Option<&mut Grant> {
        let at = self.grants.binary_search_by_key(&seq, |g| g.seq).ok()?;
        self.grants.get_mut(at)
    }

    fn held(&self, t: Micros, known: bool) -> bool {
        self.grants.iter().any(|g| (g.known || !known) && g.covers(t))
    }

    /// Add `[start, end)` to the runs, joining what it overlaps or touches.
    fn join(&mut self, mut start: Micros, mut end: Micros) {
        if end <= start {
            return;
        }
        let touching: Vec<(Micros, Micros)> =
            self.runs.range(..=end).rev().take_while(|(_, b)| **b >= start).map(|(a, b)| (*a, *b)).collect();
        for (a, b) in touching {
            self.runs.remove(&a);
            (start, end) = (start.min(a), end.max(b));
        }
        self.runs.insert(start, end);
    }
}

/// The network's traces as the events come. Each worker's grants are held
/// until their end is fixed (what cuts a grant short, a release or another
/// worker's acquisition, comes before it ends) and while a lost-reply
/// request still to be settled may ask who held the lease when it was
/// sent; then they join the worker's runs, which stand against its beliefs
/// once the trial is over.
pub(crate) struct NetworkFold {
    out: Network,
    /// The server's grants are followed: a lease that runs out, one server.
    on: bool,
    lease_us: Micros,
    barrier_wall_us: Option<i64>,
    now_us: Micros,
    seq: u64,
    workers: Vec<Grants>,
    /// Open grants by end: (end, worker, seq).
    open: BTreeSet<(Micros, usize, u64)>,
    /// Acquisitions a grant still to be made may be cut by, in order.
    acquisitions: VecDeque<(Micros, usize)>,
    lost: LostReplies,
    settled: Vec<(usize, LostRequest)>,
}

impl NetworkFold {
    pub fn new(params: &CheckParams) -> NetworkFold {
        NetworkFold {
            out: Network::default(),
            // A lock held by a session or a process has no expiry to read;
            // a replicated service's grants are not one server's (a grant
            // does not end where another worker's begins).
            on: params.expires && !params.replicated,
            lease_us: params.lease_us,
            barrier_wall_us: None,
            now_us: Micros::MIN,
            seq: 0,
            workers: Vec::new(),
            open: BTreeSet::new(),
            acquisitions: VecDeque::new(),
            lost: LostReplies::default(),
            settled: Vec::new(),
        }
    }

    fn worker(&mut self, w: usize) -> &mut Grants {
        if w >= self.workers.len() {
            self.workers.resize_with(w + 1, Grants::default);
        }
        &mut self.workers[w]
    }

    fn add(&mut self, w: usize, start_us: Micros, end_us: Micros, known: bool) {
        self.seq += 1;
        let g = Grant { seq: self.seq, start_us, end_us, known, done: false };
        self.worker(w).grants.push_back(g);
        self.open.insert((end_us, w, g.seq));
    }

    /// Move an open grant's end earlier.
    fn cut(&mut self, w: usize, seq: u64, at_us: Micros) {
        let Some(g) = self.workers[w].get_mut(seq) else { return };
        if g.done || at_us >= g.end_us {
            return;
        }
        self.open.remove(&(g.end_us, w, seq));
        g.end_us = at_us;
        self.open.insert((at_us, w, seq));
    }

    /// Grants that end by `now_us` are done: into their worker's runs,
    /// cut at its death.
    fn settle_ends(&mut self, now_us: Micros) {
        while let Some(&(end, w, seq)) = self.open.first() {
            if end > now_us {
                break;
            }
            self.open.pop_first();
            let worker = &mut self.workers[w];
            let died = worker.died.unwrap_or(Micros::MAX);
            let Some(g) = worker.get_mut(seq) else { continue };
            g.done = true;
            let start = g.start_us;
            worker.join(start, end.min(died));
        }
    }

    /// The grant a lost-reply request of `w` made, if the history settles
    /// it (the count of those it cannot, in `possible_grants`).
    fn request(&mut self, w: usize, r: LostRequest, end_us: Option<Micros>) {
        let LostRequest { sent_us: sent, reply_us: reply, renewal } = r;
        let took = if renewal {
            // The server renews only a lease still ours: told of, or
            // renewed by an earlier request whose reply was lost too.
            let ours = |t: Micros| self.workers[w].held(t, false);
            match (ours(sent), ours(reply)) {
                (true, true) => Some(true),
                (false, false) => Some(false),
                _ => None,
            }
        } else {
            // It grants only a lease nobody holds.
            let others = |t| self.workers.iter().enumerate().any(|(o, g)| o != w && g.held(t, true));
            match (others(sent), others(reply)) {
                (false, false) => Some(true),
                (true, true) => Some(false),
                _ => None,
            }
        };
        match took {
            // Timed from when the request was sent: the least it can last,
            // until another worker was granted the lease.
            Some(true) if end_us.is_none_or(|end| sent < end) => {
                let end = sent + self.lease_us;
                let by_other = self.acquisitions.iter().find(|&&(t, o)| o != w && sent < t && t < end);
                self.add(w, sent, by_other.map_or(end, |&(t, _)| t), false);
            }
            Some(_) => {}
            None => self.out.possible_grants += 1,
        }
    }

    /// Forget what no request still to be settled can ask about.
    fn prune(&mut self, w: usize) {
        let horizon = self.lost.horizon(self.now_us);
        let grants = &mut self.workers[w].grants;
        while grants.front().is_some_and(|g| g.done && g.end_us <= horizon) {
            grants.pop_front();
        }
        // A lost-reply grant is cut by the acquisitions after its send.
        while self.acquisitions.front().is_some_and(|&(t, _)| t < horizon) {
            self.acquisitions.pop_front();
        }
    }

    /// The trial is over: each worker's runs against its beliefs.
    pub fn finish(mut self, end_us: Micros, tenures: &[Span]) -> Network {
        if !self.on {
            return self.out;
        }
        let mut settled = Vec::new();
        std::mem::take(&mut self.lost).finish(&mut settled);
        for (w, r) in settled {
            self.request(w, r, Some(end_us));
        }
        self.settle_ends(Micros::MAX);
        let workers = self.workers.len();
        let mut believed: Vec<Vec<(Micros, Micros)>> = vec![Vec::new(); workers];
        for t in tenures.iter().filter(|t| t.worker < workers) {
            believed[t.worker].push((t.start_us, t.end_us));
        }
        for (w, worker) in self.workers.iter().enumerate() {
            let runs = worker.runs.iter().map(|(&a, &b)| (a, b.min(end_us)));
            for (start, end) in merge(runs.collect()) {
                // One worker's tenures follow one another: those that end
                // after the run's start, until one starts at its end.
                let mine = &believed[w][believed[w].partition_point(|&(_, b)| b <= start)..];
                let over: Vec<(Micros, Micros)> = mine.iter().copied().take_while(|&(a, _)| a < end).collect();
                let orphaned = minus(start, end, &over);
                if orphaned > 0 {
                    self.out.orphaned_grants += 1;
                    self.out.orphaned_grant_us += orphaned;
                    self.out.orphaned_grant_max_us = self.out.orphaned_grant_max_us.max(orphaned);
                }
            }
        }
        self.out
    }
}

impl NetworkFold {
    pub fn event(&mut self, e: &Event) {
        self.out.renew_failures += usize::from(e.kind == EventKind::RenewFailed);
        self.out.replies_lost += usize::from(e.kind == EventKind::ReplyLost);
        if !self.on {
            return;
        }
        if e.t_us != self.now_us {
            self.settle_ends(e.t_us);
            self.now_us = e.t_us;
        }
        if self.barrier_wall_us.is_none() {
            self.barrier_wall_us = barrier_wall_us(e);
        }
        if let Some(w) = e.worker {
            self.worker(w);
            match e.kind {
                // From when the worker knows: the request's own round trip
                // is not time the grant went unbelieved.
                EventKind::Acquired | EventKind::Renewed => {
                    if e.kind == EventKind::Acquired {
                        // A grant ends when another worker is granted the lease.
                        let cut: Vec<(usize, u64)> = self
                            .open
                            .range((e.t_us + 1, 0, 0)..)
                            .filter(|&&(_, o, _)| o != w)
                            .map(|&(_, o, seq)| (o, seq))
                            .collect();
                        for (o, seq) in cut {
                            if self.workers[o].get_mut(seq).is_some_and(|g| g.start_us < e.t_us) {
                                self.cut(o, seq, e.t_us);
                            }
                        }
                        self.acquisitions.push_back((e.t_us, w));
                    }
                    if let Some(end) = grant_end(e, self.barrier_wall_us) {
                        self.add(w, e.t_us, end, true);
                    }
                }
                EventKind::Released => {
                    let open: Vec<u64> =
                        self.workers[w].grants.iter().filter(|g| g.known && !g.done).map(|g| g.seq).collect();
                    for seq in open {
                        self.cut(w, seq, e.t_us);
                    }
                }
                EventKind::Exit => {
                    self.workers[w].died.get_or_insert(e.t_us);
                }
                _ => {}
            }
        }
        let mut settled = std::mem::take(&mut self.settled);
        self.lost.event(e, &mut settled);
        for (w, r) in settled.drain(..) {
            self.request(w, r, None);
        }
        self.settled = settled;
        if let Some(w) = e.worker {
            self.prune(w);
        }
    }
}

/// The length of [start, end) not covered by `cover`.
fn minus(start: Micros, end: Micros, cover: &[(Micros, Micros)]) -> Micros {
    let covered: Micros =
        merge(cover.iter().map(|&(a, b)| (a.max(start), b.min(end))).collect()).iter().map(|(a, b)| b - a).sum();
    (end - start) - covered
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;

    use crate::testkit::{LEASE, ev, s};

    /// A grant the worker was told of, lasting a lease from `t`.
    fn grant(t: f64, w: usize, kind: EventKind) -> Event {
        ev(t, w, kind).with_detail(Detail { expires_in_ms: Some(LEASE * 1000.0), ..Detail::default() })
    }

    fn failed(t: f64, w: usize, kind: EventKind, op: f64) -> Event {
        ev(t, w, kind).with_detail(Detail {
            error: Some("no reply".into()),
            op_us: Some(s(op) as u64),
            ..Detail::default()
        })
    }

    /// A renewal sent at `t` that failed by timeout 0.3 s later, its reply
    /// lost 1 ms after it was sent (it reached the server).
    fn lost_renewal(t: f64, w: usize) -> [Event; 3] {
        use EventKind::*;
        [ev(t, w, Renewing), ev(t + 0.001, w, ReplyLost), failed(t + 0.3, w, RenewFailed, 0.3)]
    }

    fn params() -> CheckParams {
        crate::params::server_lease(s(LEASE), s(3.0), s(3.0))
    }

    fn trial(mut events: Vec<Event>, end: f64) -> super::Network {
        events.insert(0, Event::new(0, None, EventKind::Barrier));
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        check(&History::new(events), &params()).network
    }

    #[test]
    fn a_renewal_whose_reply_was_lost_holds_the_lease_for_a_holder_that_stepped_down() {
        // Granted at 0; renewals at 3 and 6 reach the server, their replies
        // lost; the blog's third failure at 9 steps down. The server's
        // grant runs a lease from the last one sent: to 15.
        use EventKind::*;
        let mut events = vec![grant(0.0, 0, Acquired)];
        events.extend(lost_renewal(3.0, 0));
        events.extend(lost_renewal(6.0, 0));
        events.extend([ev(9.0, 0, Renewing), failed(9.3, 0, RenewFailed, 0.3), ev(9.3, 0, SteppedDown)]);
        let n = trial(events, 20.0);
        assert_eq!((n.renew_failures, n.replies_lost, n.possible_grants), (3, 2, 0));
        assert_eq!((n.orphaned_grants, n.orphaned_grant_us), (1, s(15.0 - 9.3)));
        // A chain of them: each renews the lease the one before kept alive
        // (the told-of grant ended at 9, the renewal at 12 still finds it).
        let chain = || {
            let mut v = Vec::from(lost_renewal(6.0, 0));
            v.extend(lost_renewal(12.0, 0));
            v.push(ev(12.3, 0, SteppedDown));
            v
        };
        let mut chained = vec![grant(0.0, 0, Acquired)];
        chained.extend(chain());
        assert_eq!(trial(chained, 30.0).orphaned_grant_us, s(21.0 - 12.3));
        // Taken by another meanwhile: the renewal after that found the
        // lease gone, whatever reply it lost.
        let mut taken = vec![grant(0.0, 0, Acquired), grant(10.0, 1, Acquired)];
        taken.extend(chain());
        taken.sort_by_key(|e| e.t_us);
        assert_eq!(trial(taken, 30.0).orphaned_grant_us, 0);
    }

    #[test]
    fn a_reply_delayed_past_the_timeout_answers_the_request_before_it() {
        use EventKind::*;
        // The renewal at 6 times out at 6.3; its reply, delayed, comes at
        // 6.5: it renewed the lease to 15. The holder stepped down at 7.
        let n = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(6.0, 0, Renewing),
                failed(6.3, 0, RenewFailed, 0.3),
                ev(6.5, 0, ReplyLost),
                ev(7.0, 0, SteppedDown),
            ],
            20.0,
        );
        assert_eq!(n.orphaned_grant_us, s(15.0 - 7.0));
    }

    #[test]
    fn a_killed_holder_or_a_release_leaves_no_orphan() {
        use EventKind::*;
        let killed = trial(vec![grant(0.0, 0, Acquired), ev(4.0, 0, Exit)], 20.0);
        assert_eq!(killed.orphaned_grant_us, 0, "a dead holder's lease is the crash gap, not an orphan");
        let released = trial(vec![grant(0.0, 0, Acquired), ev(4.0, 0, Released), ev(4.0, 0, SteppedDown)], 20.0);
        assert_eq!(released.orphaned_grant_us, 0);
    }

    #[test]
    fn a_holder_that_steps_down_at_a_local_deadline_orphans_only_what_is_left_of_its_grant() {
        use EventKind::*;
        let n = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(3.0, 0, Renewing),
                failed(3.3, 0, RenewFailed, 0.3),
                ev(8.0, 0, SteppedDown),
                grant(9.5, 1, Acquired),
            ],
            20.0,
        );
        assert_eq!((n.orphaned_grants, n.orphaned_grant_us), (1, s(1.0)), "from 8 to the expiry at 9");
    }

    #[test]
    fn an_acquire_whose_reply_was_lost_is_a_grant_if_nobody_held_the_lease() {
        use EventKind::*;
        // Worker 0's lease ran out at 9; worker 1's takeover at 10 reached
        // the server, its reply lost: the lease is worker 1's until 19,
        // and nobody knows it.
        let free = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(1.0, 0, Exit),
                ev(10.001, 1, ReplyLost),
                failed(10.3, 1, TakeoverLost, 0.3),
            ],
            30.0,
        );
        assert_eq!((free.orphaned_grants, free.orphaned_grant_us, free.possible_grants), (1, s(LEASE), 0));
        // The same attempt while worker 0 still held the lease: no grant.
        let held =
            trial(vec![grant(0.0, 0, Acquired), ev(5.001, 1, ReplyLost), failed(5.3, 1, NotAcquired, 0.3)], 30.0);
        assert_eq!((held.orphaned_grant_us, held.possible_grants), (0, 0));
        // Sent before the expiry, answered after it: the history cannot tell.
        let unsure = trial(
            vec![grant(0.0, 0, Acquired), ev(1.0, 0, Exit), ev(9.1, 1, ReplyLost), failed(9.2, 1, NotAcquired, 0.3)],
            30.0,
        );
        assert_eq!((unsure.orphaned_grant_us, unsure.possible_grants), (0, 1));
    }

    #[test]
    fn a_grant_ends_when_another_worker_is_granted_the_lease() {
        use EventKind::*;
        let n = trial(vec![grant(0.0, 0, Acquired), ev(2.0, 0, SteppedDown), grant(5.0, 1, Acquired)], 20.0);
        assert_eq!(n.orphaned_grant_us, s(3.0));
    }

    #[test]
    fn a_holders_own_acquisition_does_not_end_its_grant_for_another_workers_request() {
        use EventKind::*;
        // Worker 0 holds the lease from 0 to 9 and acquires it again at 2
        // (a lease without an expiry). Worker 1's acquire at 4 reached the
        // server, its reply lost: the server was holding the lease for
        // worker 0, so it granted nothing.
        let again = ev(2.0, 0, Acquired);
        let asked = [ev(4.001, 1, ReplyLost), failed(4.3, 1, NotAcquired, 0.3)];
        let n = trial([vec![grant(0.0, 0, Acquired), again], asked.to_vec()].concat(), 20.0);
        assert_eq!((n.orphaned_grants, n.possible_grants), (0, 0));
    }
}
