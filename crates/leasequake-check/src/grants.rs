//! Double grants: the lease service's side of a split. A single server
//! grants a lease to one worker at a time, whatever the network does; a
//! service that splits (a Redis primary cut off while its replica is
//! promoted) may grant it to two at once, each on its own side.
//!
//! Each `acquired` and `renewed` is a grant the worker was told of. When
//! exactly the service made it is not known, only that it was between the
//! request and the reply, so each grant is counted for the least it can
//! have lasted: from its reply to a lease after its request was sent (or
//! to its `lease_until`, where that is earlier: a lock file's whole-second
//! truncation), ended early by the worker's own release or death (a grant
//! to a dead worker harms nobody), or by the service telling it that
//! another holds the lease. Two such grants of different workers
//! that overlap are a *definite* double grant: no timing of the service's
//! work could keep them apart. Against a replicated service, a request
//! whose reply the proxy dropped may have been granted (docs/network.md):
//! counted the same way, it makes only a *possible* double grant.

use leasequake_model::history::{Event, EventKind, Micros};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::fold::Fold;
use super::params::CheckParams;
use super::requests::{LostReplies, LostRequest, barrier_wall_us, grant_end};

/// A service that keeps expiry in whole milliseconds may end a grant up
/// to a millisecond before a lease has passed on the harness's clock.
const ROUNDING_US: Micros = 1_000;

/// Double grants of one trial (or summed over trials).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DoubleGrants {
    /// Maximal intervals in which two workers held grants they were told of.
    pub definite: usize,
    /// Their total and longest time.
    pub definite_us: Micros,
    pub definite_max_us: Micros,
    /// Further intervals that a lost-reply request may have made double.
    pub possible: usize,
    /// Of the definite ones: the two grants came from different members
    /// of a replicated service (as the workers' events name them).
    pub across_members: usize,
    /// Trials with a definite double grant (one trial's: 0 or 1).
    pub trials: usize,
    /// Acquisitions whose fencing token is not above every token granted
    /// before them (a store that checks tokens could not tell the newer
    /// holder from the older), and acquisitions without a token at all.
    pub token_inversions: usize,
    pub untokened: usize,
}

impl std::ops::Add for DoubleGrants {
    type Output = DoubleGrants;

    fn add(self, o: DoubleGrants) -> DoubleGrants {
        DoubleGrants {
            definite: self.definite + o.definite,
            definite_us: self.definite_us + o.definite_us,
            definite_max_us: self.definite_max_us.max(o.definite_max_us),
            possible: self.possible + o.possible,
            across_members: self.across_members + o.across_members,
            trials: self.trials + o.trials,
            token_inversions: self.token_inversions + o.token_inversions,
            untokened: self.untokened + o.untokened,
        }
    }
}

/// One grant's least validity, and the member that made it.
#[derive(Clone, Copy, Debug)]
struct Window {
    worker: usize,
    start_us: Micros,
    end_us: Micros,
    member: Option<usize>,
}

/// The double grants as the events come. A grant's window ends at the
/// earliest of its least validity and what ends it early (its worker's
/// release, death or being told of another holder), so it is open until
/// one of those comes or its validity has passed; the windows are then
/// swept for overlaps in time order, up to the start of the oldest still
/// open. It holds the open windows and the lost requests being settled.
pub(crate) struct GrantsFold {
    lease_us: Micros,
    barrier_wall_us: Option<i64>,
    now_us: Micros,
    seq: u64,
    /// Open windows by their end; and by creation, with their starts
    /// (which are in creation order).
    by_end: BTreeMap<(Micros, u64), Window>,
    by_seq: BTreeMap<u64, Micros>,
    workers: Vec<Worker>,
    told: Depth,
    /// A replicated service's lost-reply requests, and the sweep of the
    /// told windows with those such a request may have made.
    lost: Option<LostReplies>,
    any: Option<Depth>,
    /// Windows of lost-reply requests that an over may still end.
    maybe_open: Vec<Window>,
    settled: Vec<(usize, LostRequest)>,
    highest_token: Option<u64>,
    token_inversions: usize,
    untokened: usize,
}

#[derive(Default)]
struct Worker {
    /// Its open windows: sequence number → end.
    open: BTreeMap<u64, Micros>,
    /// When it was last over (released, died, told of another holder):
    /// what ends a window that starts at that very instant.
    last_over: Option<Micros>,
    /// Its overs since the oldest lost reply that may yet be settled.
    overs: VecDeque<Micros>,
}

impl GrantsFold {
    pub fn new(params: &CheckParams) -> GrantsFold {
        GrantsFold {
            lease_us: params.lease_us,
            barrier_wall_us: None,
            now_us: Micros::MIN,
            seq: 0,
            by_end: BTreeMap::new(),
            by_seq: BTreeMap::new(),
            workers: Vec::new(),
            told: Depth::default(),
            lost: params.replicated.then(LostReplies::default),
            any: params.replicated.then(Depth::default),
            maybe_open: Vec::new(),
            settled: Vec::new(),
            highest_token: None,
            token_inversions: 0,
            untokened: 0,
        }
    }

    fn worker(&mut self, w: usize) -> &mut Worker {
        if w >= self.workers.len() {
            self.workers.resize_with(w + 1, Worker::default);
        }
        &mut self.workers[w]
    }

    fn open(&mut self, g: Window) {
        // Ended at its very start by an over at the same instant.
        if self.workers.get(g.worker).and_then(|w| w.last_over) == Some(g.start_us) {
            return;
        }
        self.seq += 1;
        let seq = self.seq;
        self.worker(g.worker).open.insert(seq, g.end_us);
        self.by_end.insert((g.end_us, seq), g);
        self.by_seq.insert(seq, g.start_us);
    }

    /// Window `seq` (open until `end_us`) is final, cut at `cut_us`.
    fn close(&mut self, seq: u64, end_us: Micros, cut_us: Micros) {
        let mut g = self.by_end.remove(&(end_us, seq)).expect("an open window is indexed");
        self.by_seq.remove(&seq);
        self.workers[g.worker].open.remove(&seq);
        g.end_us = end_us.min(cut_us);
        if g.end_us > g.start_us {
            self.told.add(g);
            if let Some(any) = &mut self.any {
                any.add(g);
            }
        }
    }

    /// `w` is over at `at_us`: its open windows end there at the latest.
    fn over(&mut self, w: usize, at_us: Micros) {
        if let (Some(any), Some(lost)) = (&mut self.any, &self.lost) {
            let horizon = lost.horizon(at_us);
            let overs = &mut self.workers.get_mut(w).map(|w| &mut w.overs);
            if let Some(overs) = overs {
                // A reply still to be settled came after the horizon.
                while overs.len() > 1 && overs[1] < horizon {
                    overs.pop_front();
                }
            }
            let (cut, open): (Vec<Window>, Vec<Window>) = self.maybe_open.drain(..).partition(|g| g.worker == w);
            self.maybe_open = open;
            for g in cut {
                any.add_if_long(Window { end_us: g.end_us.min(at_us), ..g });
            }
        }
        let keep_overs = self.lost.is_some();
        let worker = self.worker(w);
        worker.last_over = Some(at_us);
        if keep_overs {
            worker.overs.push_back(at_us);
        }
        let open: Vec<(u64, Micros)> = worker.open.iter().map(|(&seq, &end)| (seq, end)).collect();
        for (seq, end) in open {
            self.close(seq, end, at_us);
        }
    }

    /// A possible grant of a settled lost-reply request: from its reply to
    /// a lease after it was sent, ended by the worker's first over since
    /// (an over still to come ends it too; the trial's end cuts it at the
    /// sweep's end).
    fn maybe(&mut self, w: usize, r: LostRequest) {
        let overs = &self.worker(w).overs;
        let over = overs.get(overs.partition_point(|&o| o < r.reply_us)).copied();
        let end = (r.sent_us + self.lease_us - ROUNDING_US).min(over.unwrap_or(Micros::MAX));
        let g = Window { worker: w, start_us: r.reply_us, end_us: end, member: None };
        match &mut self.any {
            Some(any) if over.is_some() || end <= self.now_us => any.add_if_long(g),
            Some(_) => self.maybe_open.push(g),
            None => {}
        }
    }

    /// Time moved on to `now_us`: windows whose validity has passed are
    /// final, and the sweeps go up to the oldest window that may yet come.
    fn advance(&mut self, now_us: Micros) {
        while let Some((&(end, seq), _)) = self.by_end.first_key_value()
            && end <= now_us
        {
            self.close(seq, end, end);
        }
        let oldest = self.by_seq.first_key_value().map_or(now_us, |(_, &start)| start.min(now_us));
        self.told.sweep_before(oldest);
        if let (Some(any), Some(lost)) = (&mut self.any, &self.lost) {
            let (done, open): (Vec<Window>, Vec<Window>) = self.maybe_open.drain(..).partition(|g| g.end_us <= now_us);
            self.maybe_open = open;
            done.into_iter().for_each(|g| any.add_if_long(g));
            // A request still to be settled may have been granted since it
            // was sent.
            let open = self.maybe_open.iter().map(|g| g.start_us);
            any.sweep_before(open.fold(oldest.min(lost.horizon(now_us)), Micros::min));
        }
    }
}

impl Fold for GrantsFold {
    type Out = (DoubleGrants, Vec<(Micros, Micros)>);

    fn event(&mut self, e: &Event) {
        if e.t_us != self.now_us {
            self.advance(e.t_us);
            self.now_us = e.t_us;
        }
        if self.barrier_wall_us.is_none() {
            self.barrier_wall_us = barrier_wall_us(e);
        }
        if e.kind == EventKind::Acquired {
            match e.detail.token {
                None => self.untokened += 1,
                Some(token) => {
                    self.token_inversions += usize::from(self.highest_token.is_some_and(|h| token <= h));
                    self.highest_token = self.highest_token.max(Some(token));
                }
            }
        }
        if let Some(w) = e.worker {
            let over = match e.kind {
                EventKind::Released | EventKind::Exit => true,
                EventKind::SteppedDown => e.detail.reason.as_deref() == Some("other-holder"),
                _ => false,
            };
            if over {
                self.over(w, e.t_us);
            }
            // Only a lease that runs out by time has a least validity.
            if let (EventKind::Acquired | EventKind::Renewed, Some(ms)) = (e.kind, e.detail.expires_in_ms) {
                let sent = e.t_us - e.detail.op_us.map_or(0, |us| us as i64);
                let mut end = sent + (ms * 1000.0).round() as i64 - ROUNDING_US;
                if let Some(stated) = grant_end(e, self.barrier_wall_us) {
                    end = end.min(stated);
                }
                if end > e.t_us {
                    self.open(Window { worker: w, start_us: e.t_us, end_us: end, member: e.detail.member });
                }
            }
        }
        if let Some(lost) = &mut self.lost {
            lost.event(e, &mut self.settled);
            for (w, r) in std::mem::take(&mut self.settled) {
                self.maybe(w, r);
            }
        }
    }

    /// Never past the trial: what is open ends with it.
    fn finish(mut self, end_us: Micros) -> (DoubleGrants, Vec<(Micros, Micros)>) {
        if let Some(lost) = self.lost.take() {
            lost.finish(&mut self.settled);
            for (w, r) in std::mem::take(&mut self.settled) {
                self.maybe(w, r);
            }
        }
        let open: Vec<(u64, Micros)> = self.by_end.keys().map(|&(end, seq)| (seq, end)).collect();
        for (seq, end) in open {
            self.close(seq, end, end_us);
        }
        if let Some(any) = &mut self.any {
            self.maybe_open.drain(..).for_each(|g| any.add_if_long(g));
        }
        let definite = self.told.finish(end_us);
        let mut out = DoubleGrants {
            definite: definite.len(),
            trials: usize::from(!definite.is_empty()),
            definite_us: definite.iter().map(|d| d.end_us - d.start_us).sum(),
            definite_max_us: definite.iter().map(|d| d.end_us - d.start_us).max().unwrap_or(0),
            across_members: definite.iter().filter(|d| d.across).count(),
            token_inversions: self.token_inversions,
            untokened: self.untokened,
            ..DoubleGrants::default()
        };
        let definite: Vec<(Micros, Micros)> = definite.iter().map(|d| (d.start_us, d.end_us)).collect();
        if let Some(any) = self.any {
            let apart = |p: &Overlap| !definite.iter().any(|&(c, d)| c < p.end_us && p.start_us < d);
            out.possible = any.finish(end_us).iter().filter(|p| apart(p)).count();
        }
        (out, definite)
    }
}

/// A stretch in which two or more workers held a window.
struct Overlap {
    start_us: Micros,
    end_us: Micros,
    /// The windows it overlaps came from two members or more.
    across: bool,
}

/// The stretches in which two or more workers hold a window, swept in time
/// order from windows handed in as they become final. A worker's own
/// windows that overlap or touch are one: at an instant, every window that
/// ends is taken out before any that starts is put in, and a worker counts
/// as holding while any of its windows holds.
#[derive(Default)]
struct Depth {
    /// Edges not yet swept: at each time, (worker, +1 or −1, member).
    edges: BTreeMap<Micros, Vec<(usize, i32, Option<usize>)>>,
    holding: Vec<u32>,
    /// Workers holding.
    depth: usize,
    /// Members of the windows holding, counted.
    members: BTreeMap<usize, usize>,
    open: Option<(Micros, BTreeSet<usize>)>,
    out: Vec<Overlap>,
}

impl Depth {
    fn add_if_long(&mut self, g: Window) {
        if g.end_us > g.start_us {
            self.add(g);
        }
    }

    fn add(&mut self, g: Window) {
        self.edges.entry(g.start_us).or_default().push((g.worker, 1, g.member));
        self.edges.entry(g.end_us).or_default().push((g.worker, -1, g.member));
    }

    /// Sweep the edges before `before_us`: no window yet to come starts
    /// earlier.
    fn sweep_before(&mut self, before_us: Micros) {
        while let Some(entry) = self.edges.first_entry() {
            if *entry.key() >= before_us {
                break;
            }
            let (t, edges) = entry.remove_entry();
            self.instant(t, edges);
        }
    }

    fn instant(&mut self, t: Micros, edges: Vec<(usize, i32, Option<usize>)>) {
        let workers = edges.iter().map(|e| e.0 + 1).max().unwrap_or(0);
        if workers > self.holding.len() {
            self.holding.resize(workers, 0);
        }
        let before: Vec<(usize, bool)> = edges.iter().map(|&(w, _, _)| (w, self.holding[w] > 0)).collect();
        for &(w, step, member) in &edges {
            self.holding[w] = self.holding[w].saturating_add_signed(step);
            if let Some(m) = member {
                let n = self.members.entry(m).or_default();
                *n = n.saturating_add_signed(step as isize);
                if *n == 0 {
                    self.members.remove(&m);
                }
            }
        }
        let mut seen = BTreeSet::new();
        let (mut ended, mut started) = (0, 0);
        for (w, was) in before {
            if seen.insert(w) {
                match (was, self.holding[w] > 0) {
                    (true, false) => ended += 1,
                    (false, true) => started += 1,
                    _ => {}
                }
            }
        }
        self.depth -= ended;
        if self.depth < 2
            && let Some((start_us, members)) = self.open.take()
            && t > start_us
        {
            self.out.push(Overlap { start_us, end_us: t, across: members.len() >= 2 });
        }
        self.depth += started;
        match &mut self.open {
            None if self.depth >= 2 => self.open = Some((t, self.members.keys().copied().collect())),
            Some((_, members)) => {
                members.extend(edges.iter().filter(|e| e.1 > 0).filter_map(|e| e.2));
            }
            None => {}
        }
    }

    /// Sweep what is left; no window lasts past `end_us`.
    fn finish(mut self, end_us: Micros) -> Vec<Overlap> {
        let late: Vec<Micros> = self.edges.range(end_us + 1..).map(|(t, _)| *t).collect();
        for t in late {
            let edges = self.edges.remove(&t).unwrap_or_default();
            self.edges.entry(end_us).or_default().extend(edges);
        }
        self.sweep_before(Micros::MAX);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;

    use crate::testkit::{LEASE, ev, s};

    /// A grant told at `t`, its request sent `op` before, made by `member`.
    fn grant(t: f64, w: usize, kind: EventKind, op: f64, member: Option<usize>) -> Event {
        ev(t, w, kind).with_detail(Detail {
            expires_in_ms: Some(LEASE * 1000.0),
            op_us: Some(s(op) as u64),
            member,
            ..Detail::default()
        })
    }

    fn trial(mut events: Vec<Event>, end: f64) -> super::DoubleGrants {
        events.insert(0, Event::new(0, None, EventKind::Barrier));
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        events.sort_by_key(|e| e.t_us);
        let params = CheckParams { replicated: true, ..crate::params::server_lease(s(LEASE), s(3.0), s(3.0)) };
        check(&History::new(events), &params).network.double_grants
    }

    #[test]
    fn a_takeover_after_the_lease_ran_out_is_no_double_grant_however_slow_the_requests() {
        use EventKind::*;
        // The holder's last renewal was sent at 2.9 (its reply at 3.0):
        // the server ended the lease at 11.9 at the earliest. A takeover
        // answered at 11.95 cannot have been granted before 11.9.
        let g = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, Some(0)),
                grant(3.0, 0, Renewed, 0.1, Some(0)),
                ev(4.0, 0, Exit),
                grant(11.95, 1, Acquired, 0.2, Some(0)),
            ],
            20.0,
        );
        assert_eq!((g.definite, g.possible), (0, 0));
    }

    #[test]
    fn two_primaries_granting_at_once_are_a_definite_double_grant_across_members() {
        use EventKind::*;
        // Worker 0 keeps renewing on member 0 every 3 s; worker 1 acquires
        // on member 1 at 10 and renews there at 13.
        let mut events = vec![grant(0.0, 0, Acquired, 0.001, Some(0))];
        for k in 1..6 {
            events.push(grant(3.0 * k as f64, 0, Renewed, 0.001, Some(0)));
        }
        events.push(grant(10.0, 1, Acquired, 0.001, Some(1)));
        events.push(grant(13.0, 1, Renewed, 0.001, Some(1)));
        events.push(ev(16.5, 0, Renewing));
        events.push(ev(16.5, 0, SteppedDown));
        let g = trial(events, 30.0);
        // Both hold from worker 1's acquire at 10 until its renewal's least
        // validity, sent at 12.999, ends (less the rounding): 21.998.
        assert_eq!((g.definite, g.across_members, g.possible), (1, 1, 0));
        assert_eq!(g.definite_us, s(21.998) - s(10.0));
        assert_eq!(g.definite_max_us, g.definite_us);
    }

    #[test]
    fn a_release_or_a_death_ends_a_grant_and_one_workers_renewals_never_overlap_themselves() {
        use EventKind::*;
        let released = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, None),
                grant(3.0, 0, Renewed, 0.001, None),
                ev(4.0, 0, Released),
                grant(4.5, 1, Acquired, 0.001, None),
            ],
            20.0,
        );
        assert_eq!(released.definite, 0);
        let dead = trial(
            vec![grant(0.0, 0, Acquired, 0.001, None), ev(1.0, 0, Exit), grant(2.0, 1, Acquired, 0.001, None)],
            20.0,
        );
        assert_eq!(dead.definite, 0);
    }

    #[test]
    fn a_grant_ends_when_the_service_names_another_holder() {
        use EventKind::*;
        // Worker 0's renewal at 6 was granted to 15, but at 8 the service
        // (its old primary, demoted) says worker 1 holds the lease.
        let mut events = vec![
            grant(0.0, 0, Acquired, 0.001, Some(0)),
            grant(6.0, 0, Renewed, 0.001, Some(0)),
            grant(7.0, 1, Acquired, 0.001, Some(1)),
        ];
        let down = Detail { reason: Some("other-holder".into()), ..Detail::default() };
        events.push(ev(8.0, 0, SteppedDown).with_detail(down));
        let g = trial(events, 20.0);
        assert_eq!((g.definite, g.definite_us), (1, s(1.0)));
    }

    #[test]
    fn a_token_not_above_every_earlier_one_is_an_inversion() {
        use EventKind::*;
        let with = |t: f64, w: usize, token: Option<u64>| {
            ev(t, w, Acquired).with_detail(Detail { token, expires_in_ms: Some(1000.0), ..Detail::default() })
        };
        let g =
            trial(vec![with(0.0, 0, Some(5)), with(2.0, 1, Some(7)), with(4.0, 2, Some(6)), with(6.0, 0, None)], 10.0);
        assert_eq!((g.token_inversions, g.untokened), (1, 1));
    }

    #[test]
    fn a_lost_reply_makes_only_a_possible_double_grant() {
        use EventKind::*;
        // Worker 1's acquire at 5 reached the service, its reply lost,
        // while worker 0 held the lease.
        let g = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, None),
                grant(3.0, 0, Renewed, 0.001, None),
                ev(5.001, 1, ReplyLost),
                ev(5.3, 1, NotAcquired).with_detail(Detail {
                    error: Some("no reply".into()),
                    op_us: Some(s(0.3) as u64),
                    ..Detail::default()
                }),
            ],
            20.0,
        );
        assert_eq!((g.definite, g.possible), (0, 1));
    }

    #[test]
    fn a_lock_files_truncated_lease_until_is_what_the_grant_said() {
        use EventKind::*;
        // The holder wrote lease_until 9 s after the barrier's wall clock,
        // though its write was at 0.6 (whole seconds): a takeover at 9.2
        // overlaps nothing it was granted.
        let wall0 = 1_700_000_000.0;
        let mut barrier = Event::new(0, None, Barrier);
        barrier.detail.wall_ns = Some((wall0 * 1e9) as i64);
        let held = ev(0.6, 0, Acquired).with_detail(Detail {
            expires_in_ms: Some(LEASE * 1000.0),
            lease_until: Some(wall0 + 9.0),
            ..Detail::default()
        });
        let mut events = vec![barrier, held, grant(9.2, 1, Acquired, 0.001, None)];
        events.push(Event::new(s(20.0), None, TrialEnd));
        let params: CheckParams = crate::params::server_lease(s(LEASE), s(3.0), s(3.0));
        assert_eq!(check(&History::new(events), &params).network.double_grants.definite, 0);
    }
}
