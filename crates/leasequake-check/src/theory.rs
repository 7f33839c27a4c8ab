//! The theory's prediction for each leader pause and each gap, trial by
//! trial, from the phases the history recorded.
//!
//! A watcher takes over at its first tick at which the lease is *visibly*
//! expired: after the holder's `lease_until` (one resolution unit later
//! where `lease_until` is truncated and compared with a strict `<`), or at
//! once where the lock is free (released, or dropped with its holder). Both
//! phases are in the history: the holder's last write carries its
//! `lease_until`, the barrier the wall clock that puts it on the trial's
//! axis, and each watcher's observations the grid its ticks keep (a ticker
//! that drops missed ticks, never drifts). Nothing here looks at how the
//! pause or the gap turned out: the prediction is made from what came
//! before, then set beside the measurement. Where the two differ, the
//! harness or the system under test did something the protocol does not
//! explain: an anomaly worth a look.

use super::by_worker::{ByWorker, upto, within};
use super::metrics::{Gap, KILL, PauseOutcome};
use super::params::CheckParams;
use super::spans::{Span, Spans};
use leasequake_model::history::{Event, EventKind, Micros, ms_to_us};
use leasequake_model::settings::Push;

/// How many of a watcher's latest ticks fix its grid: the earliest-woken of
/// them is the best estimate of where the grid lies.
const GRID_TICKS: usize = 8;

/// The phases of one trial.
pub(crate) struct Phases<'a> {
    events: &'a [Event],
    params: &'a CheckParams,
    spans: &'a Spans,
    end_us: Micros,
    /// The wall clock at the barrier, µs since the Unix epoch.
    barrier_wall_us: Option<i64>,
    /// Each worker's own events, tenures and pauses, in time order, and
    /// the times it lost an election: every question asked per gap and per
    /// pause is about one worker around one moment, found by binary search.
    /// (Scanning the whole history for each made a check quadratic in the
    /// history's length.)
    by_worker: Vec<Own<'a>>,
}

#[derive(Default)]
struct Own<'a> {
    events: &'a [&'a Event],
    tenures: Vec<&'a Span>,
    pauses: Vec<&'a Span>,
    not_acquired: Vec<Micros>,
}

impl<'a> Own<'a> {
    /// Its events at or before `at_us`.
    fn upto(&self, at_us: Micros) -> &'a [&'a Event] {
        upto(self.events, at_us)
    }

    /// Its events in `(from_us, to_us]`.
    fn within(&self, from_us: Micros, to_us: Micros) -> &'a [&'a Event] {
        within(self.events, from_us, to_us)
    }
}

impl<'a> Phases<'a> {
    pub fn new(
        events: &'a [Event],
        by: &'a ByWorker<'a>,
        params: &'a CheckParams,
        spans: &'a Spans,
        end_us: Micros,
    ) -> Phases<'a> {
        let barrier_wall_us = events
            .iter()
            .find(|e| e.kind == EventKind::Barrier)
            .and_then(|e| e.detail.wall_ns)
            .map(|ns| ns.div_euclid(1000));
        let mut by_worker: Vec<Own<'a>> = (0..by.workers())
            .map(|w| Own {
                events: by.of(w),
                not_acquired: by.of(w).iter().filter(|e| e.kind == EventKind::NotAcquired).map(|e| e.t_us).collect(),
                ..Own::default()
            })
            .collect();
        for t in &spans.tenures {
            if let Some(own) = by_worker.get_mut(t.worker) {
                own.tenures.push(t);
            }
        }
        for p in &spans.pauses {
            if let Some(own) = by_worker.get_mut(p.worker) {
                own.pauses.push(p);
            }
        }
        Phases { events, params, spans, end_us, barrier_wall_us, by_worker }
    }

    /// `worker`'s own events and spans (none for a worker never seen).
    fn own(&self, worker: usize) -> &Own<'a> {
        static NONE: Own<'static> =
            Own { events: &[], tenures: Vec::new(), pauses: Vec::new(), not_acquired: Vec::new() };
        self.by_worker.get(worker).unwrap_or(&NONE)
    }

    /// When the lease `write` wrote is visibly expired to a watcher: from
    /// its `lease_until` on, up to the write's own duration later (a server
    /// times the lease from when the write reached it).
    fn visible_expiry(&self, write: &Event) -> Option<Window> {
        let op = write.detail.op_us.map_or(0, |us| us as i64);
        if let (Some(until), Some(wall_us)) = (write.detail.lease_until, self.barrier_wall_us) {
            let until_us = (until * 1e6).round() as i64 - wall_us;
            // `lease_until < now`: with whole units, from the next unit on.
            return Some(Window::from(until_us + self.params.resolution_us, op + self.params.server_slack_us));
        }
        // Without the wall clock, the nominal expiry is only the visible one
        // when nothing truncates it.
        if self.params.resolution_us == 0 {
            let width = op + self.params.server_slack_us;
            return write.detail.expires_in_ms.map(|ms| Window::from(write.t_us - op + ms_to_us(ms), width));
        }
        None
    }

    /// `worker`'s last lease write at or before `at_us`, unless a renewal it
    /// began since was left unfinished (a lock file may then be empty).
    fn last_write(&self, worker: usize, at_us: Micros) -> Option<&'a Event> {
        let own = self.own(worker).upto(at_us);
        let last = own.iter().rev().find(|e| {
            matches!(e.kind, EventKind::Acquired | EventKind::Renewed | EventKind::Renewing | EventKind::RenewFailed)
        })?;
        match last.kind {
            EventKind::Renewing if self.params.rewritten_in_place => None,
            EventKind::Acquired | EventKind::Renewed => Some(last),
            _ => own.iter().rev().find(|e| matches!(e.kind, EventKind::Acquired | EventKind::Renewed)).copied(),
        }
    }

    fn believes(&self, worker: usize, at_us: Micros) -> bool {
        self.own(worker).tenures.iter().any(|t| t.start_us <= at_us && at_us < t.end_us)
    }

    fn paused_at(&self, worker: usize, at_us: Micros) -> bool {
        self.own(worker).pauses.iter().any(|p| p.start_us <= at_us && at_us < p.end_us)
    }

    fn dies_within(&self, worker: usize, from_us: Micros, to_us: Micros) -> bool {
        self.own(worker).within(from_us, to_us).iter().any(|e| e.kind == EventKind::Exit)
    }

    /// `worker`'s ticks around `from_us`, from the grid its observations up
    /// to `at_us` show: `None` if it was leading, paused or silent then, or
    /// is dead or paused by the time of those ticks.
    fn ticks(&self, worker: usize, at_us: Micros, free: Window) -> Option<Ticks> {
        // What is known before the lock becomes free says nothing of who
        // takes it: the grids are read up to then.
        let known = at_us.max(free.from);
        let dead = self.dies_within(worker, Micros::MIN, known);
        if dead || self.believes(worker, known) || self.paused_at(worker, known) {
            return None;
        }
        let polled = self.polled(worker, at_us, free, known);
        // A subscribed watcher is told when the server frees the lease:
        // somewhere in the window itself, no tick to wait for.
        let told = free.to + if free.released { 0 } else { self.params.push_slack_us };
        let pushed = Some(Ticks { earliest: free.from, sure: told, op: 0 })
            .filter(|_| self.pushed(free))
            .filter(|t| !self.dies_within(worker, at_us, t.sure) && !self.paused_at(worker, t.earliest));
        match (polled, pushed) {
            (Some(p), Some(q)) => Some(Ticks {
                earliest: p.earliest.min(q.earliest),
                sure: p.sure.min(q.sure),
                op: if q.sure <= p.sure { q.op } else { p.op },
            }),
            (p, q) => p.or(q),
        }
    }

    /// Does the server push the end of a lease freed within `free` to its
    /// subscribed watchers?
    fn pushed(&self, free: Window) -> bool {
        match self.params.push {
            Push::Nothing => false,
            Push::Release => free.released,
            Push::ReleaseAndExpiry => true,
        }
    }

    /// `worker`'s polling ticks, from its grid (see `ticks`).
    fn polled(&self, worker: usize, at_us: Micros, free: Window, known: Micros) -> Option<Ticks> {
        let watch = self.params.watch_us;
        if watch <= 0 {
            return None;
        }
        // A new role starts a new grid, its first tick one interval after
        // the change: when the worker last stopped leading, or lost its
        // first election.
        let own = self.own(worker);
        let lost = own.not_acquired[..own.not_acquired.partition_point(|&t| t <= known)].last().copied();
        let role_start = own.tenures.iter().filter(|t| t.end_us <= known).map(|t| t.end_us).chain(lost).max();
        let observed: Vec<(Micros, Micros)> = own
            .upto(known)
            .iter()
            .rev()
            .take_while(|e| role_start.is_none_or(|r| e.t_us >= r))
            .filter(|e| matches!(e.kind, EventKind::HeldBy | EventKind::ExpiredSeen | EventKind::Unreadable))
            .map(|e| {
                let op = e.detail.op_us.map_or(0, |us| us as i64);
                (e.t_us - op, op)
            })
            .take(GRID_TICKS)
            .collect();
        let (grid, op) = match (observed.first(), role_start) {
            (Some(&(last, _)), _) => {
                // Silent for two intervals: not watching (a program that
                // reports only some ticks has no grid to speak of).
                if at_us - last > 2 * watch {
                    return None;
                }
                let grid = observed.iter().enumerate().map(|(k, (t, _))| t + k as i64 * watch).min()?;
                (grid, observed.iter().map(|&(_, op)| op).max().unwrap_or(0))
            }
            // Not a tick yet in this role: the first is one interval in.
            (None, Some(r)) if known - r < watch => (r + watch, 0),
            _ => return None,
        };
        let ticks = match drift(&observed, watch) {
            // A ticker that waits an interval from each tick (Node's chained
            // setTimeout) is later every time by its own wake-up: its ticks
            // are one of its observed periods apart, from its last one.
            Some(periods) => {
                let last = observed[0].0;
                let at_or_after = |t: Micros, p: Micros| last + ((t - last).max(0) + p - 1) / p * p;
                let each = |t: Micros| periods.map(|p| at_or_after(t, p));
                let (early, sure) = (each(free.from - op), each(free.to));
                Ticks { earliest: early[0].min(early[1]), sure: sure[0].max(sure[1]), op }
            }
            None => {
                let at_or_after = |t: Micros| grid + ((t - grid).max(0) + watch - 1) / watch * watch;
                // The observation compares somewhere inside [start, start + op].
                Ticks { earliest: at_or_after(free.from - op), sure: at_or_after(free.to), op }
            }
        };
        if self.dies_within(worker, at_us, ticks.sure) || self.paused_at(worker, ticks.earliest) {
            return None;
        }
        Some(ticks)
    }

    /// The takeover of the lease, free within `free`, by any worker, from
    /// the grids known by then (and the deaths and pauses since `at_us`).
    fn takeover(&self, at_us: Micros, free: Window) -> Option<Ticks> {
        let workers = self.by_worker.len();
        // The holder too, once it watches again (it stepped down); dead,
        // paused or leading, a worker has no ticks.
        let each: Vec<Ticks> = (0..workers).filter_map(|w| self.ticks(w, at_us, free)).collect();
        let earliest = each.iter().map(|t| t.earliest).min()?;
        let sure = each.iter().min_by_key(|t| t.sure)?;
        Some(Ticks { earliest, sure: sure.sure, op: sure.op })
    }

    /// The theory's outcome of a leader pause.
    pub fn pause(&self, pause: &Span, resumed: bool, evicted: bool) -> PauseOutcome {
        let mut out = PauseOutcome {
            worker: pause.worker,
            start_us: pause.start_us,
            end_us: pause.end_us,
            resumed,
            evicted,
            visible_expiry_us: None,
            takeover_tick_us: None,
            predicted: None,
        };
        if !self.params.expires {
            // The paused holder is alive: its lock stays with it.
            out.predicted = Some(false);
            return out;
        }
        let visible = self.last_write(pause.worker, pause.start_us).and_then(|w| self.visible_expiry(w));
        let Some(visible) = visible else { return out };
        out.visible_expiry_us = Some(visible.from);
        let Some(ticks) = self.takeover(pause.start_us, visible) else { return out };
        out.takeover_tick_us = Some(ticks.earliest);
        out.predicted = if !resumed || ticks.earliest >= pause.end_us {
            Some(false)
        } else if ticks.sure + ticks.op < pause.end_us {
            Some(true)
        } else {
            // The expiry or the resume falls inside a watcher's observation:
            // either outcome keeps to the protocol.
            None
        };
        out
    }

    /// The theory's end of `gap`, and how the measurement disagrees with
    /// it, if it does.
    pub fn gap(&self, gap: &Gap) -> (Option<Micros>, Option<String>) {
        let Some(predicted) = self.gap_end(gap) else { return (None, None) };
        let anomaly = match predicted {
            End::Resumed(at) => {
                let agrees = gap.ended && gap.end_us == at;
                (!agrees).then(|| "a paused leader's resume should have ended it".to_string())
            }
            End::TakenOver { free, ticks } => {
                let watch = self.params.watch_us;
                if !gap.ended {
                    // Still open at the trial's end: as predicted if no
                    // takeover was due before then.
                    (ticks.sure + ticks.op < self.end_us).then(|| "no takeover".to_string())
                } else if gap.ended_by.is_some_and(|w| self.resumed(w, gap.end_us)) {
                    Some("a paused leader resumed before the predicted takeover".to_string())
                } else if gap.end_us < free.from {
                    Some("taken over before the lease was visibly expired".to_string())
                } else if gap.end_us >= ticks.sure + watch {
                    let rounds = (gap.end_us - ticks.sure) / watch;
                    Some(format!("taken over {rounds} watch interval(s) late"))
                } else {
                    None
                }
            }
        };
        let at = match predicted {
            End::Resumed(at) => at,
            // The expiry inside an observation: that tick or the next may
            // take over, and the one that could have is the prediction.
            End::TakenOver { ticks, .. } if gap.ended && gap.end_us >= ticks.sure => ticks.sure,
            End::TakenOver { ticks, .. } => ticks.earliest,
        };
        (Some(at), anomaly)
    }

    fn gap_end(&self, gap: &Gap) -> Option<End> {
        let holder = gap.holder?;
        let start = gap.start_us;
        let lock_fault = gap.cause.starts_with("lock-") || gap.cause == super::metrics::KILL_MID_RENEWAL;
        if lock_fault {
            return None;
        }
        let own = self.own(holder);
        let ended_with =
            |kind: EventKind| own.upto(start).iter().rev().take_while(|e| e.t_us == start).any(|e| e.kind == kind);

        // A kill opens its gap at once; the kernel frees a lock held by the
        // process (flock, a database session) only once it has torn the
        // process down, at its `exit`.
        let died_us = if ended_with(EventKind::Exit) {
            Some(start)
        } else if gap.cause == KILL {
            own.within(start - 1, Micros::MAX).iter().find(|e| e.kind == EventKind::Exit).map(|e| e.t_us)
        } else {
            None
        };
        let free = if ended_with(EventKind::Released) {
            Some(Window { released: true, ..Window::from(start, 0) })
        } else if let (true, Some(died_us)) = (self.params.dropped_at_death, died_us) {
            Some(Window::from(died_us, 0))
        } else if !self.params.expires {
            None
        } else {
            // The lease in the lock is the last one anybody wrote (a
            // resumed stale leader that steps down wrote none of it).
            self.last_write(holder, start)?;
            let writer = self.events[..self.events.partition_point(|e| e.t_us <= start)]
                .iter()
                .rev()
                .find(|e| matches!(e.kind, EventKind::Acquired | EventKind::Renewed))?
                .worker?;
            Some(self.visible_expiry(self.last_write(writer, start)?)?)
        };
        let takeover = free.and_then(|free| Some((free, self.takeover(start, free)?)));
        // A paused believer (the holder, or an older leader paused before
        // it was replaced) that is resumed ends the gap.
        let resume = self
            .spans
            .pauses
            .iter()
            .filter(|p| p.start_us <= start && start < p.end_us && p.end_us < self.end_us)
            .filter(|p| self.believes(p.worker, start) && self.resumed(p.worker, p.end_us))
            .map(|p| p.end_us)
            .min();
        match (takeover, resume) {
            (Some((_, t)), Some(r)) if r <= t.earliest => Some(End::Resumed(r)),
            // Too close to call: the resume falls inside the takeover's
            // observations.
            (Some((_, t)), Some(r)) if r <= t.sure + t.op => None,
            (Some((free, ticks)), _) => Some(End::TakenOver { free, ticks }),
            (None, Some(r)) if free.is_none() => Some(End::Resumed(r)),
            _ => None,
        }
    }

    /// A delivered `cont` to `worker` at `at_us`.
    pub fn resumed(&self, worker: usize, at_us: Micros) -> bool {
        self.own(worker).within(at_us - 1, at_us).iter().any(|e| {
            e.kind == EventKind::Fault && e.detail.error.is_none() && e.detail.action.as_deref() == Some("cont")
        })
    }
}

/// How the theory expects a gap to end.
#[derive(Clone, Copy, Debug)]
enum End {
    Resumed(Micros),
    /// At a watcher's tick once the lock is free (`free`).
    TakenOver {
        free: Window,
        ticks: Ticks,
    },
}

/// When the lock becomes free to the watchers: somewhere in [from, to].
#[derive(Clone, Copy, Debug)]
struct Window {
    from: Micros,
    to: Micros,
    /// Freed by its holder's release (not by expiry or a death).
    released: bool,
}

impl Window {
    fn from(from: Micros, width: Micros) -> Window {
        Window { from, to: from + width, released: false }
    }
}

/// The shortest and the longest of a watcher's observed periods, if its
/// ticks drift: every one of them (newest first, at least three) longer
/// than `watch` by more than a five-hundredth of it. A ticker on a fixed
/// grid comes back to it after a late wake (an interval shorter than the
/// watch follows a long one), so some interval is never much longer.
fn drift(observed: &[(Micros, Micros)], watch: Micros) -> Option<[Micros; 2]> {
    if observed.len() < 3 {
        return None;
    }
    let periods = observed.windows(2).map(|w| w[0].0 - w[1].0);
    let (lo, hi) = periods.fold((Micros::MAX, 0), |(lo, hi), p| (lo.min(p), hi.max(p)));
    (lo > watch + watch / 500).then_some([lo, hi])
}

/// Where a takeover can happen.
#[derive(Clone, Copy, Debug)]
struct Ticks {
    /// The first tick whose observation reaches the free moment (it may
    /// see the lock free, or not yet).
    earliest: Micros,
    /// The first tick that starts once the lock is free: it sees it free.
    sure: Micros,
    /// How long an observation takes (the longest recent one).
    op: Micros,
}

#[cfg(test)]
mod tests {
    use super::super::intervals::check;
    use super::super::params::CheckParams;
    use leasequake_model::history::{Detail, Event, EventKind, History};

    const WALL_S: f64 = 1_700_000_000.0;

    fn s(x: f64) -> i64 {
        (x * 1e6).round() as i64
    }

    fn ev(t: f64, w: usize, kind: EventKind) -> Event {
        Event::new(s(t), Some(w), kind)
    }

    /// A write at `t` of the blog's lease: `lease_until` = floor(t + 9).
    fn write(t: f64, w: usize, kind: EventKind) -> Event {
        let until = (WALL_S + t + 9.0).floor();
        ev(t, w, kind).with_detail(Detail {
            lease_until: Some(until),
            expires_in_ms: Some(9000.0),
            ..Detail::default()
        })
    }

    fn fault(t: f64, w: usize, action: &str) -> Event {
        ev(t, w, EventKind::Fault).with_detail(Detail {
            fault: Some(0),
            action: Some(action.into()),
            ..Detail::default()
        })
    }

    fn params() -> CheckParams {
        crate::testkit::BLOG
    }

    /// Worker 0 leads from 0.1 s, renewing every 3 s; worker 1 watches on
    /// the grid 0.2 + 3k s. The leader's last renewal before `cut` is kept.
    fn trial(cut: f64) -> Vec<Event> {
        let barrier = Event::new(0, None, EventKind::Barrier)
            .with_detail(Detail { wall_ns: Some((WALL_S * 1e9) as i64), ..Detail::default() });
        let mut events = vec![barrier, ev(0.0, 0, EventKind::Spawn), ev(0.0, 1, EventKind::Spawn)];
        events.push(write(0.1, 0, EventKind::Acquired));
        let mut t = 3.1;
        while t < cut {
            events.push(write(t, 0, EventKind::Renewed));
            t += 3.0;
        }
        let mut w = 0.2;
        while w < cut {
            events.push(ev(w, 1, EventKind::HeldBy));
            w += 3.0;
        }
        events
    }

    fn judge(mut events: Vec<Event>, end: f64) -> super::super::metrics::TrialMetrics {
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        check(&History::new(events), &params())
    }

    #[test]
    fn a_pause_evicts_only_if_a_watcher_ticks_between_the_visible_expiry_and_the_resume() {
        // Last renewal 9.1 s: lease_until floor(18.1) = 18, visibly expired
        // from 19 s; the watcher ticks at 18.2 (still valid) and 21.2 s.
        let pause = |until: f64, takeover: bool| {
            let mut events = trial(10.0);
            events.extend([fault(10.0, 0, "stop"), fault(until, 0, "cont")]);
            if takeover {
                events.push(ev(21.2, 1, EventKind::ExpiredSeen));
                events.push(write(21.2005, 1, EventKind::Acquired));
            }
            let m = judge(events, 30.0);
            m.evictions.pauses[0].clone()
        };
        // Resumed at 20 s: 10 s of pause, longer than the 8.1 s remainder,
        // yet no tick fell in [19, 20): no eviction, as measured.
        let p = pause(20.0, false);
        assert_eq!(p.visible_expiry_us, Some(s(19.0)));
        assert_eq!(p.takeover_tick_us, Some(s(21.2)));
        assert_eq!((p.predicted, p.evicted, p.anomaly()), (Some(false), false, false));
        // Resumed at 22 s: the 21.2 s tick took over.
        let p = pause(22.0, true);
        assert_eq!((p.predicted, p.evicted, p.anomaly()), (Some(true), true, false));
        // Measured an eviction the phases do not allow: an anomaly.
        let p = pause(21.0, false);
        assert_eq!((p.predicted, p.evicted, p.anomaly()), (Some(false), false, false));
        let mut events = trial(10.0);
        events.extend([
            fault(10.0, 0, "stop"),
            ev(19.5, 1, EventKind::ExpiredSeen),
            write(19.5, 1, EventKind::Acquired),
        ]);
        events.push(fault(20.0, 0, "cont"));
        let p = judge(events, 30.0).evictions.pauses[0].clone();
        assert_eq!((p.predicted, p.evicted, p.anomaly()), (Some(false), true, true));
    }

    #[test]
    fn a_kill_gap_ends_at_the_first_tick_after_the_visible_expiry() {
        // Killed at 10 s after the 9.1 s renewal: visible from 19 s, the
        // watcher's 21.2 s tick takes over.
        let mut events = trial(10.0);
        events.extend([fault(10.0, 0, "kill"), ev(10.001, 0, EventKind::Exit), ev(18.2, 1, EventKind::HeldBy)]);
        events.extend([ev(21.2, 1, EventKind::ExpiredSeen), write(21.2004, 1, EventKind::Acquired)]);
        let m = judge(events.clone(), 30.0);
        assert_eq!(m.gaps[0].predicted_end_us, Some(s(21.2)));
        assert_eq!(m.gaps[0].anomaly, None);
        // Taken over a round late: the 21.2 s tick missed it.
        let late: Vec<Event> = events.into_iter().filter(|e| e.t_us < s(21.0)).collect();
        let mut late = late;
        late.extend([ev(21.2, 1, EventKind::HeldBy), ev(24.2, 1, EventKind::ExpiredSeen)]);
        late.push(write(24.2004, 1, EventKind::Acquired));
        let m = judge(late, 30.0);
        assert_eq!(m.gaps[0].anomaly.as_deref(), Some("taken over 1 watch interval(s) late"));
        // Killed at 25 s: visible from 34 s, after the trial's end (30 s).
        let mut open = trial(25.0);
        open.extend([fault(25.0, 0, "kill"), ev(25.001, 0, EventKind::Exit)]);
        let m = judge(open.clone(), 30.0);
        assert_eq!(
            (m.gaps[0].ended, m.gaps[0].predicted_end_us, m.gaps[0].anomaly.as_deref()),
            (false, Some(s(36.2)), None)
        );
        // A trial that went on to 40 s with nobody taking over: an anomaly.
        let m = judge(open, 40.0);
        assert_eq!(m.gaps[0].anomaly.as_deref(), Some("no takeover"));
    }

    #[test]
    fn a_pushed_expiry_is_taken_over_when_the_server_frees_it_not_at_a_tick() {
        // The same kill, on a server that revokes the lease up to 0.55 s
        // after its end and tells its subscribed watchers: the takeover is
        // due inside [19, 19.55] s, not at the 21.2 s tick.
        let pushing = CheckParams {
            server_slack_us: s(0.55),
            push: leasequake_model::settings::Push::ReleaseAndExpiry,
            ..params()
        };
        let mut events = trial(10.0);
        events.extend([fault(10.0, 0, "kill"), ev(10.001, 0, EventKind::Exit), ev(18.2, 1, EventKind::HeldBy)]);
        let pushed = |at: f64| [ev(at, 1, EventKind::Notified), write(at + 0.002, 1, EventKind::Acquired)];
        let judge = |events: &[Event]| {
            let mut events = events.to_vec();
            events.push(Event::new(s(30.0), None, EventKind::TrialEnd));
            check(&History::new(events), &pushing)
        };
        let mut told = events.clone();
        told.extend(pushed(19.3));
        let m = judge(&told);
        assert_eq!((m.gaps[0].predicted_end_us, m.gaps[0].anomaly.as_deref()), (Some(s(19.0)), None));
        // A pause: the push evicts the paused leader once the server frees
        // the lease, with no tick in between.
        let mut paused = trial(10.0);
        paused.extend([fault(10.0, 0, "stop"), ev(19.3, 1, EventKind::Notified)]);
        paused.extend([write(19.302, 1, EventKind::Acquired), fault(20.0, 0, "cont")]);
        let p = judge(&paused).evictions.pauses[0].clone();
        assert_eq!((p.takeover_tick_us, p.predicted, p.evicted), (Some(s(19.0)), Some(true), true));
        // The same without push: no tick in [19, 20), so no eviction due.
        paused.push(Event::new(s(30.0), None, EventKind::TrialEnd));
        assert_eq!(check(&History::new(paused), &params()).evictions.pauses[0].predicted, Some(false));
    }

    #[test]
    fn an_expiry_inside_an_observation_allows_either_tick() {
        // Observations of 2.5 s: the one from 18.7 to 21.2 s may compare
        // before or after the visible expiry (19 s); the next starts 21.7 s.
        let slow = |e: Event| {
            if e.kind == EventKind::HeldBy {
                e.with_detail(Detail { op_us: Some(2_500_000), ..Detail::default() })
            } else {
                e
            }
        };
        let base: Vec<Event> = trial(10.0).into_iter().map(slow).collect();
        for (end, anomaly) in [(21.2005, None), (24.2005, None), (24.8, Some("taken over 1 watch interval(s) late"))] {
            let mut events = base.clone();
            events.extend([fault(10.0, 0, "kill"), ev(10.001, 0, EventKind::Exit), write(end, 1, EventKind::Acquired)]);
            let m = judge(events, 30.0);
            let tick = if end < 21.7 { 18.7 } else { 21.7 };
            assert_eq!(m.gaps[0].predicted_end_us, Some(s(tick)), "{end}");
            assert_eq!(m.gaps[0].anomaly.as_deref(), anomaly, "{end}");
        }
    }

    #[test]
    fn an_older_paused_leader_resuming_ends_the_gap_as_predicted() {
        // Worker 2 led first and was stopped at 1 s, still believing; worker
        // 0 leads on and is stopped at 10 s. Worker 2's resume at 12 s comes
        // before any takeover (21.2 s) and ends the gap.
        let mut events = trial(10.0);
        events.extend([write(0.05, 2, EventKind::Acquired), fault(1.0, 2, "stop"), fault(10.0, 0, "stop")]);
        events.push(fault(12.0, 2, "cont"));
        let m = judge(events, 30.0);
        let gap = m.gaps.iter().find(|g| g.start_us == s(10.0)).expect("a gap at the second stop");
        assert_eq!((gap.ended_by, gap.predicted_end_us, gap.anomaly.as_deref()), (Some(2), Some(s(12.0)), None));
    }

    #[test]
    fn a_stale_leader_that_resumes_and_steps_down_watches_from_then_on() {
        // Worker 2 led first and was stopped at 1 s; worker 0 leads on and is
        // stopped at 10 s (its lease visibly expired from 19 s). Worker 2
        // resumes at 17 s, steps down at 17.05 s and watches: its first
        // tick, 20.05 s, comes before worker 1's (21.2 s) and before worker
        // 0's resume at 20.5 s. No tick of it was seen before the expiry:
        // the grid is its role's start.
        let mut events = trial(10.0);
        events.extend([write(0.05, 2, EventKind::Acquired), fault(1.0, 2, "stop"), fault(10.0, 0, "stop")]);
        events.extend([fault(17.0, 2, "cont"), ev(17.05, 2, EventKind::SteppedDown)]);
        events.extend([ev(20.05, 2, EventKind::ExpiredSeen), write(20.0505, 2, EventKind::Acquired)]);
        events.push(fault(20.5, 0, "cont"));
        let m = judge(events, 30.0);
        let p = m.evictions.pauses.iter().find(|p| p.worker == 0).expect("worker 0's pause").clone();
        assert_eq!((p.takeover_tick_us, p.predicted, p.evicted), (Some(s(20.05)), Some(true), true));
        // The gap after worker 2's step-down ends at its own tick: the lease
        // in the lock is worker 0's, visibly expired from 19 s.
        let gap = m.gaps.iter().find(|g| g.start_us == s(17.05)).expect("a gap at the step-down");
        assert_eq!((gap.predicted_end_us, gap.anomaly.as_deref()), (Some(s(20.05)), None));
    }

    #[test]
    fn a_released_lease_is_taken_at_the_next_tick_and_a_lock_fault_is_not_predicted() {
        let mut events = trial(10.0);
        events.extend([fault(10.0, 0, "term"), ev(10.0005, 0, EventKind::Released)]);
        events.extend([ev(12.2, 1, EventKind::Unreadable), write(12.2003, 1, EventKind::Acquired)]);
        let m = judge(events, 30.0);
        assert_eq!(m.gaps[0].predicted_end_us, Some(s(12.2)));
        assert_eq!(m.gaps[0].anomaly, None);

        let mut events = trial(10.0);
        events.extend([Event::new(s(10.0), None, EventKind::Fault).with_detail(Detail {
            fault: Some(0),
            action: Some("lock-empty".into()),
            ..Detail::default()
        })]);
        events.extend([ev(10.5, 0, EventKind::RenewFailed), ev(10.6, 0, EventKind::SteppedDown)]);
        let m = judge(events, 30.0);
        assert_eq!((m.gaps[0].predicted_end_us, m.gaps[0].anomaly.as_deref()), (None, None));
    }

    #[test]
    fn no_lease_until_or_no_watcher_grid_means_no_prediction() {
        let mut events: Vec<Event> = trial(10.0)
            .into_iter()
            .map(|mut e| {
                e.detail.lease_until = None;
                e
            })
            .collect();
        events.extend([fault(10.0, 0, "stop"), fault(20.0, 0, "cont")]);
        // Truncated expiry without lease_until: unknown.
        let m = judge(events, 30.0);
        assert_eq!(m.evictions.pauses[0].predicted, None);
        assert_eq!((m.evictions.predicted, m.evictions.unpredicted), (0, 1));
        // A watcher that never reported a tick: unknown too.
        let mut events: Vec<Event> = trial(10.0).into_iter().filter(|e| e.kind != EventKind::HeldBy).collect();
        events.extend([fault(10.0, 0, "stop"), fault(20.0, 0, "cont")]);
        assert_eq!(judge(events, 30.0).evictions.pauses[0].predicted, None);
    }

    #[test]
    fn a_lease_freed_at_its_holders_death_still_runs_out_while_it_lives() {
        // A file lease that also checks its holder's pid, as the blog's
        // worker does not: exact expiry, and nothing to wait out at death.
        let both = CheckParams { dropped_at_death: true, expires: true, resolution_us: 0, ..params() };
        // Killed at 10 s: free at once, taken over at the 12.2 s tick, where
        // a lease that must run out would have waited for 18.2 s.
        let mut killed = trial(10.0);
        killed.extend([fault(10.0, 0, "kill"), ev(10.001, 0, EventKind::Exit)]);
        killed.extend([ev(12.2, 1, EventKind::ExpiredSeen), write(12.2004, 1, EventKind::Acquired)]);
        killed.push(Event::new(s(30.0), None, EventKind::TrialEnd));
        let m = check(&History::new(killed.clone()), &both);
        assert_eq!((m.gaps[0].predicted_end_us, m.gaps[0].anomaly.as_deref()), (Some(s(12.2)), None));
        assert_eq!(both.crash_bound_us(), (0, s(3.0)));
        // A lease that must run out has no takeover due at 12.2 s.
        let expiring = CheckParams { resolution_us: 0, ..params() };
        let m = check(&History::new(killed), &expiring);
        assert_ne!(m.gaps[0].predicted_end_us, Some(s(12.2)), "{:?}", m.gaps[0]);
        // Paused at 10 s to 25 s: alive, so its lease runs out at 18.1 s and
        // the 18.2 s tick evicts it, where a lock held by a process stays.
        let mut paused = trial(10.0);
        paused.extend([fault(10.0, 0, "stop"), fault(25.0, 0, "cont")]);
        paused.extend([ev(18.2, 1, EventKind::ExpiredSeen), write(18.2004, 1, EventKind::Acquired)]);
        paused.push(Event::new(s(30.0), None, EventKind::TrialEnd));
        let m = check(&History::new(paused.clone()), &both);
        assert_eq!(m.evictions.pauses[0].predicted, Some(true));
        assert_eq!(m.gaps[0].anomaly, None, "{:?}", m.gaps[0]);
        let flock = CheckParams { expires: false, ..both };
        let m = check(&History::new(paused), &flock);
        assert_eq!(m.evictions.pauses[0].predicted, Some(false));
    }

    #[test]
    fn a_watcher_whose_ticks_drift_is_predicted_from_its_own_periods() {
        // Worker 1 waits 3 s from each tick and wakes 0.3 s late each time:
        // 0.2, 3.5, 6.8, then 10.1, 13.4, 16.7, 20.0 s. Killed at 10 s, the
        // lease is visibly expired from 19 s: its 20.0 s tick takes over,
        // where a fixed grid through its ticks would say 21.2 s.
        let mut events: Vec<Event> = trial(10.0).into_iter().filter(|e| e.kind != EventKind::HeldBy).collect();
        for k in 0..3 {
            events.push(ev(0.2 + 3.3 * f64::from(k), 1, EventKind::HeldBy));
        }
        events.extend([fault(10.0, 0, "kill"), ev(10.001, 0, EventKind::Exit)]);
        for t in [10.1, 13.4, 16.7] {
            events.push(ev(t, 1, EventKind::HeldBy));
        }
        events.extend([ev(20.0, 1, EventKind::ExpiredSeen), write(20.0004, 1, EventKind::Acquired)]);
        let m = judge(events, 30.0);
        assert_eq!((m.gaps[0].predicted_end_us, m.gaps[0].anomaly.as_deref()), (Some(s(20.0)), None));
        // On a grid (late wakes that do not add up), the grid it is.
        assert_eq!(super::drift(&[(s(9.25), 0), (s(6.2), 0), (s(3.21), 0)], s(3.0)), None);
        assert_eq!(super::drift(&[(s(9.9), 0), (s(6.6), 0), (s(3.3), 0)], s(3.0)), Some([s(3.3), s(3.3)]));
    }

    #[test]
    fn a_lock_dropped_at_death_is_never_lost_to_a_pause() {
        let mut events = trial(10.0);
        events.extend([fault(10.0, 0, "stop"), fault(25.0, 0, "cont")]);
        events.push(Event::new(s(30.0), None, EventKind::TrialEnd));
        let flock = CheckParams { dropped_at_death: true, expires: false, rewritten_in_place: false, ..params() };
        let m = check(&History::new(events), &flock);
        assert_eq!(m.evictions.pauses[0].predicted, Some(false));
        assert_eq!(m.gaps[0].predicted_end_us, Some(s(25.0)));
        assert_eq!(m.gaps[0].anomaly, None);
    }
}
