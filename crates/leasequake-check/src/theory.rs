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
//!
//! The prediction is made as the history is read, each part once the
//! history has reached the moment it is about: the watchers' grids when
//! the lock becomes free, their deaths and pauses once their ticks are
//! past, a paused believer's resume once its pause is over. What it holds
//! is each worker's latest phases and the predictions still open.

use std::collections::{BTreeMap, VecDeque};

use super::metrics::{Gap, KILL, KILL_MID_RENEWAL, PauseOutcome};
use super::params::CheckParams;
use super::requests::barrier_wall_us;
use super::spans::Span;
use leasequake_model::history::{Event, EventKind, Micros, ms_to_us};
use leasequake_model::settings::Push;

/// How many of a watcher's latest ticks fix its grid: the earliest-woken of
/// them is the best estimate of where the grid lies.
const GRID_TICKS: usize = 8;

/// A lease write, as the theory reads it.
#[derive(Clone, Copy, Debug)]
struct Write {
    t_us: Micros,
    op_us: Micros,
    lease_until: Option<f64>,
    expires_in_ms: Option<f64>,
}

/// One worker's phases so far.
#[derive(Debug, Default)]
struct Watcher {
    /// Its last renewal step (`acquired`, `renewed`, `renewing`,
    /// `renew_failed`), and its last lease write (`acquired`, `renewed`).
    last_step: Option<EventKind>,
    write: Option<Write>,
    /// Its last lost election, and when its last tenure ended: a new role
    /// starts a new grid.
    lost_us: Option<Micros>,
    tenure_end_us: Option<Micros>,
    /// Its latest looks, newest last: when each was reported, when it
    /// began, how long it took.
    looks: VecDeque<(Micros, Micros, Micros)>,
    exit_us: Option<Micros>,
    released_us: Option<Micros>,
    /// Its last delivered `cont`.
    cont_us: Option<Micros>,
    /// Its tenure and its pause, while they last (the sweep's).
    leading_since: Option<Micros>,
    paused_since: Option<Micros>,
    /// Its pauses that ended, and its last tenure that did.
    pauses: Vec<(Micros, Micros)>,
    last_tenure: Option<(Micros, Micros)>,
    /// Another worker began a tenure since its pause began, up to the
    /// pause's end.
    replaced: bool,
    /// Its pauses that ended in the current instant, to be judged once it
    /// is over (another worker's tenure may yet begin at that very µs).
    ended_now: Vec<Ended>,
}

/// A pause that ended: its start, place among the trial's pauses, end,
/// whether a `cont` ended it, still believing, and replaced meanwhile.
#[derive(Clone, Copy, Debug)]
struct Ended {
    start_us: Micros,
    slot: usize,
    end_us: Micros,
    resumed: bool,
    believing: bool,
    replaced: bool,
}

impl Watcher {
    fn dead_by(&self, at_us: Micros) -> bool {
        self.exit_us.is_some_and(|t| t <= at_us)
    }

    /// An `exit` in `(from_us, to_us]`.
    fn dies_within(&self, from_us: Micros, to_us: Micros) -> bool {
        self.exit_us.is_some_and(|t| from_us < t && t <= to_us)
    }

    /// Paused at `at_us`, as far as the history has gone.
    fn paused_at(&self, at_us: Micros) -> bool {
        // Its pauses follow one another: the last to begin by then.
        let begun = self.pauses.partition_point(|&(s, _)| s <= at_us);
        self.paused_since.is_some_and(|s| s <= at_us) || begun > 0 && at_us < self.pauses[begun - 1].1
    }
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

/// The takeover of a lock free within `free`, by any worker, asked at
/// `at_us`: the watchers' grids are read once the history reaches `known`
/// (what is known before the lock becomes free says nothing of who takes
/// it), their deaths and pauses once it has passed their ticks.
#[derive(Debug)]
struct Takeover {
    at_us: Micros,
    free: Window,
    known_us: Micros,
    /// Each watcher's ticks, polled and pushed, before its deaths and
    /// pauses since `at_us` are known; and when those are.
    candidates: Option<(Vec<Candidate>, Micros)>,
    result: Option<Option<Ticks>>,
}

/// A watcher's ticks, polled and pushed.
type Candidate = (usize, Option<Ticks>, Option<Ticks>);

/// What a gap's prediction waits for.
#[derive(Debug)]
struct GapCase {
    index: usize,
    holder: usize,
    start_us: Micros,
    /// The holder was killed and its lock is dropped at death: the lock is
    /// free at its `exit`, which is yet to come.
    awaiting_death: bool,
    /// Otherwise: a phase is missing (no prediction), or the takeover of
    /// the lock as it is freed without the death (none if it never is).
    otherwise: Result<Option<Takeover>, ()>,
    /// Believers paused at the gap's start, and each one's resume once its
    /// pause is over (`Some(None)`: not by a `cont` before the trial's end).
    resumes: Vec<(usize, Option<Option<Micros>>)>,
    /// The gap was ended by a worker resumed at that very moment.
    resumed_at_end: bool,
}

/// A leader pause's prediction.
#[derive(Debug)]
struct PauseCase {
    worker: usize,
    start_us: Micros,
    visible: Option<Window>,
    takeover: Option<Takeover>,
    /// Once it has ended, and that instant is over.
    ended: Option<Ended>,
}

/// The theory of one trial, fed as the sweep goes.
pub(crate) struct Theory {
    params: CheckParams,
    barrier_wall_us: Option<i64>,
    watchers: Vec<Watcher>,
    /// The worker of the last `acquired`/`renewed`: the lease in the lock.
    last_writer: Option<usize>,
    gaps: Vec<GapCase>,
    /// Each gap's prediction, by its index: its end, the resume at its end.
    decided: BTreeMap<usize, (Option<End>, bool)>,
    pauses: Vec<PauseCase>,
    /// Pauses that began and that ended in the current instant.
    pausing: Vec<(usize, Micros)>,
    unpausing: Vec<usize>,
    /// One place per pause, in the sweep's order: a leader pause's outcome.
    outcomes: Vec<Option<PauseOutcome>>,
}

impl Theory {
    pub fn new(params: CheckParams) -> Theory {
        Theory {
            params,
            barrier_wall_us: None,
            watchers: Vec::new(),
            last_writer: None,
            gaps: Vec::new(),
            decided: BTreeMap::new(),
            pauses: Vec::new(),
            pausing: Vec::new(),
            unpausing: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    fn watcher(&mut self, w: usize) -> &mut Watcher {
        if w >= self.watchers.len() {
            self.watchers.resize_with(w + 1, Watcher::default);
        }
        &mut self.watchers[w]
    }

    /// Before the instant at `t_us` is applied: the grids asked for at an
    /// earlier moment are read now, as they stood then.
    pub fn before(&mut self, t_us: Micros) {
        self.read_grids(|known| known < t_us, Micros::MAX);
    }

    /// One event, before the sweep applies it (a pause the sweep ends is
    /// judged with the `cont` that ended it in).
    pub fn event(&mut self, e: &Event) {
        if self.barrier_wall_us.is_none() {
            self.barrier_wall_us = barrier_wall_us(e);
        }
        let Some(w) = e.worker else { return };
        if matches!(e.kind, EventKind::Acquired | EventKind::Renewed) {
            self.last_writer = Some(w);
        }
        let watcher = self.watcher(w);
        match e.kind {
            EventKind::Acquired | EventKind::Renewed => {
                watcher.write = Some(Write {
                    t_us: e.t_us,
                    op_us: e.detail.op_us.map_or(0, |us| us as i64),
                    lease_until: e.detail.lease_until,
                    expires_in_ms: e.detail.expires_in_ms,
                });
            }
            EventKind::NotAcquired => watcher.lost_us = Some(e.t_us),
            EventKind::HeldBy | EventKind::ExpiredSeen | EventKind::Unreadable => {
                let op = e.detail.op_us.map_or(0, |us| us as i64);
                watcher.looks.push_back((e.t_us, e.t_us - op, op));
                if watcher.looks.len() > GRID_TICKS {
                    watcher.looks.pop_front();
                }
            }
            EventKind::Exit if watcher.exit_us.is_none() => {
                watcher.exit_us = Some(e.t_us);
                self.died(w, e.t_us);
            }
            EventKind::Released => watcher.released_us = Some(e.t_us),
            EventKind::Fault if e.detail.error.is_none() && e.detail.action.as_deref() == Some("cont") => {
                watcher.cont_us = Some(e.t_us);
            }
            _ => {}
        }
        if matches!(e.kind, EventKind::Acquired | EventKind::Renewed | EventKind::Renewing | EventKind::RenewFailed) {
            self.watcher(w).last_step = Some(e.kind);
        }
    }

    /// `w`'s `exit` at `at_us`: a lock dropped at death is free then.
    fn died(&mut self, w: usize, at_us: Micros) {
        let mut freed = Vec::new();
        for (i, case) in self.gaps.iter_mut().enumerate() {
            if case.awaiting_death && case.holder == w && at_us >= case.start_us {
                case.awaiting_death = false;
                freed.push(i);
            }
        }
        for i in freed {
            let start = self.gaps[i].start_us;
            self.gaps[i].otherwise = Ok(Some(Takeover::new(start, Window::from(at_us, 0))));
        }
    }

    pub fn tenure_started(&mut self, w: usize, at_us: Micros) {
        self.watcher(w).leading_since = Some(at_us);
        for (_, watcher) in self.watchers.iter_mut().enumerate().filter(|(o, _)| *o != w) {
            // Paused since before, or resumed at this very instant.
            if watcher.paused_since.is_some_and(|s| s < at_us) {
                watcher.replaced = true;
            }
            for e in watcher.ended_now.iter_mut().filter(|e| e.start_us < at_us && e.end_us == at_us) {
                e.replaced = true;
            }
        }
    }

    pub fn tenure_ended(&mut self, t: &Span) {
        let watcher = self.watcher(t.worker);
        watcher.leading_since = None;
        watcher.tenure_end_us = Some(t.end_us);
        watcher.last_tenure = Some((t.start_us, t.end_us));
    }

    pub fn pause_started(&mut self, w: usize, at_us: Micros) {
        let watcher = self.watcher(w);
        watcher.paused_since = Some(at_us);
        watcher.replaced = false;
        self.pausing.push((w, at_us));
    }

    /// A pause is over (the sweep's span; at `trial_end_us` for one the
    /// trial's end cut): a leader pause takes its place among the trial's,
    /// in the sweep's order.
    pub fn pause_ended(&mut self, p: &Span, trial_end_us: Option<Micros>) {
        let w = p.worker;
        let watcher = self.watcher(w);
        watcher.paused_since = None;
        watcher.pauses.push((p.start_us, p.end_us));
        let resumed = watcher.cont_us == Some(p.end_us);
        // The tenure that covered the pause's start: still going, or over.
        let believing = match (watcher.leading_since, watcher.last_tenure) {
            (Some(s), _) if s <= p.start_us => true,
            (_, Some((s, e))) if s <= p.start_us && p.start_us < e => e >= p.end_us,
            _ => false,
        };
        let before_end = trial_end_us.is_none_or(|end| p.end_us < end);
        for case in &mut self.gaps {
            for (who, resume) in &mut case.resumes {
                if *who == w && resume.is_none() {
                    *resume = Some((before_end && resumed).then_some(p.end_us));
                }
            }
        }
        let slot = self.outcomes.len();
        self.outcomes.push(None);
        let replaced = self.watchers[w].replaced;
        let ended = Ended { start_us: p.start_us, slot, end_us: p.end_us, resumed, believing, replaced };
        self.watchers[w].ended_now.push(ended);
        if !self.unpausing.contains(&w) {
            self.unpausing.push(w);
        }
    }

    /// The instant at `t_us` is applied: the pauses it began are judged
    /// from the phases as they stand, and what was waiting for it is read.
    pub fn instant_done(&mut self, t_us: Micros) {
        self.pauses_done();
        self.settle(t_us, None);
    }

    /// The pauses that began and ended in the instant just applied.
    fn pauses_done(&mut self) {
        for (w, start) in std::mem::take(&mut self.pausing) {
            let watcher = &self.watchers[w];
            // Only a leader's pause (its tenure covers the start), as the
            // instant left it.
            let leading = watcher.leading_since.is_some_and(|s| s <= start)
                || watcher.last_tenure.is_some_and(|(s, e)| s <= start && start < e);
            if !leading {
                continue;
            }
            let visible =
                if self.params.expires { self.last_write(w).and_then(|w| self.visible_expiry(w)) } else { None };
            let takeover = visible.map(|v| Takeover::new(start, v));
            self.pauses.push(PauseCase { worker: w, start_us: start, visible, takeover, ended: None });
        }
        for w in std::mem::take(&mut self.unpausing) {
            for e in std::mem::take(&mut self.watchers[w].ended_now) {
                let case =
                    self.pauses.iter_mut().find(|c| c.worker == w && c.start_us == e.start_us && c.ended.is_none());
                if let Some(case) = case {
                    case.ended = Some(e);
                }
            }
        }
    }

    /// When the lease `write` wrote is visibly expired to a watcher: from
    /// its `lease_until` on, up to the write's own duration later (a server
    /// times the lease from when the write reached it).
    fn visible_expiry(&self, write: Write) -> Option<Window> {
        let op = write.op_us;
        if let (Some(until), Some(wall_us)) = (write.lease_until, self.barrier_wall_us) {
            let until_us = (until * 1e6).round() as i64 - wall_us;
            // `lease_until < now`: with whole units, from the next unit on.
            return Some(Window::from(until_us + self.params.resolution_us, op + self.params.server_slack_us));
        }
        // Without the wall clock, the nominal expiry is only the visible one
        // when nothing truncates it.
        if self.params.resolution_us == 0 {
            let width = op + self.params.server_slack_us;
            return write.expires_in_ms.map(|ms| Window::from(write.t_us - op + ms_to_us(ms), width));
        }
        None
    }

    /// `worker`'s last lease write so far, unless a renewal it began since
    /// was left unfinished (a lock file may then be empty).
    fn last_write(&self, worker: usize) -> Option<Write> {
        let watcher = self.watchers.get(worker)?;
        match watcher.last_step? {
            EventKind::Renewing if self.params.rewritten_in_place => None,
            _ => watcher.write,
        }
    }

    /// A gap opened (at the end of its instant: the phases as they stand).
    pub fn gap_opened(&mut self, index: usize, gap: &Gap) {
        let (Some(holder), start) = (gap.holder, gap.start_us) else { return self.decide(index, None, false) };
        if gap.cause.starts_with("lock-") || gap.cause == KILL_MID_RENEWAL {
            return self.decide(index, None, false);
        }
        let watcher = self.watcher(holder);
        let (exited_now, released_now) = (watcher.exit_us == Some(start), watcher.released_us == Some(start));
        let killed_alive = gap.cause == KILL && watcher.exit_us.is_none();
        // A paused believer (the holder, or an older leader paused before
        // it was replaced) that is resumed ends the gap.
        let resumes = self
            .watchers
            .iter()
            .enumerate()
            .filter(|(_, w)| w.paused_since.is_some_and(|s| s <= start) && w.leading_since.is_some_and(|s| s <= start))
            .map(|(w, _)| (w, None))
            .collect();
        let dropped = self.params.dropped_at_death;
        let otherwise = if released_now {
            Ok(Some(Window { released: true, ..Window::from(start, 0) }))
        } else if dropped && exited_now {
            Ok(Some(Window::from(start, 0)))
        } else if !self.params.expires {
            Ok(None)
        } else {
            // The lease in the lock is the last one anybody wrote (a
            // resumed stale leader that steps down wrote none of it).
            let write = self.last_write(holder).and(self.last_writer).and_then(|w| self.last_write(w));
            write.and_then(|w| self.visible_expiry(w)).map(Some).ok_or(())
        };
        // A kill opens its gap at once; the kernel frees a lock held by the
        // process (flock, a database session) only once it has torn the
        // process down, at its `exit`: until it comes, what the lock is
        // freed by otherwise is followed too.
        let awaiting_death = dropped && killed_alive && !released_now;
        let otherwise = otherwise.map(|free| free.map(|f| Takeover::new(start, f)));
        self.gaps.push(GapCase {
            index,
            holder,
            start_us: start,
            awaiting_death,
            otherwise,
            resumes,
            resumed_at_end: false,
        });
    }

    fn decide(&mut self, index: usize, end: Option<End>, resumed_at_end: bool) {
        self.decided.insert(index, (end, resumed_at_end));
    }

    pub fn gap_closed(&mut self, index: usize, gap: &Gap) {
        let resumed = gap.ended_by.is_some_and(|w| self.watchers.get(w).is_some_and(|x| x.cont_us == Some(gap.end_us)));
        if let Some(case) = self.gaps.iter_mut().find(|c| c.index == index) {
            case.resumed_at_end = resumed;
        } else if let Some(d) = self.decided.get_mut(&index) {
            d.1 = resumed;
        }
    }

    /// Read the grids of the takeovers whose moment `due` says has come,
    /// with the phases as they stand (`end_us`: the trial's end, past which
    /// no tenure or pause lasts).
    fn read_grids(&mut self, due: impl Fn(Micros) -> bool, end_us: Micros) {
        let mut pending: Vec<&mut Takeover> = Vec::new();
        for case in &mut self.gaps {
            if let Ok(Some(t)) = &mut case.otherwise {
                pending.push(t);
            }
        }
        pending.extend(self.pauses.iter_mut().filter_map(|c| c.takeover.as_mut()));
        let (watchers, params) = (&self.watchers, &self.params);
        for t in pending.into_iter().filter(|t| t.candidates.is_none() && due(t.known_us)) {
            t.read(watchers, params, end_us);
        }
    }

    /// Settle what the history has passed (`trial_end_us` once it is over).
    fn settle(&mut self, now_us: Micros, trial_end_us: Option<Micros>) {
        let watchers = &self.watchers;
        // What falls on the current instant waits for the next: it may be
        // the trial's end, which ends no tenure or pause before it.
        let over = |t: Micros| trial_end_us.is_some() || t < now_us;
        let mut pending: Vec<&mut Takeover> = Vec::new();
        for case in &mut self.gaps {
            if let Ok(Some(t)) = &mut case.otherwise {
                pending.push(t);
            }
        }
        pending.extend(self.pauses.iter_mut().filter_map(|c| c.takeover.as_mut()));
        for t in pending {
            if let Some((_, due)) = &t.candidates
                && t.result.is_none()
                && over(*due)
            {
                t.confirm(watchers);
            }
        }
        // Gaps whose every part is known.
        let mut i = 0;
        while i < self.gaps.len() {
            let case = &self.gaps[i];
            let ready = (trial_end_us.is_some() || !case.awaiting_death)
                && case.resumes.iter().all(|(_, r)| r.is_some_and(|r| r.is_none_or(&over)))
                && case.otherwise.as_ref().map_or(true, |t| t.as_ref().is_none_or(|t| t.result.is_some()));
            if !ready {
                i += 1;
                continue;
            }
            let case = self.gaps.swap_remove(i);
            self.decided.insert(case.index, (case.end(trial_end_us), case.resumed_at_end));
        }
        // Pauses that ended and whose takeover is known.
        let mut i = 0;
        while i < self.pauses.len() {
            let case = &self.pauses[i];
            if case.ended.is_none() || case.takeover.as_ref().is_some_and(|t| t.result.is_none()) {
                i += 1;
                continue;
            }
            let case = self.pauses.swap_remove(i);
            let (slot, outcome) = case.outcome(&self.params);
            self.outcomes[slot] = Some(outcome);
        }
    }

    /// The trial is over at `end_us`, its open tenures and pauses about to
    /// be ended: the grids still owed are read as they stand.
    pub fn closing(&mut self, end_us: Micros) {
        self.read_grids(|_| true, end_us);
    }

    /// The trial is over (its tenures and pauses ended): settle the rest.
    /// Each gap's prediction goes into `gaps`; the leader pauses come back
    /// in the sweep's order.
    pub fn finish(mut self, end_us: Micros, gaps: &mut [Gap]) -> Vec<PauseOutcome> {
        self.pauses_done();
        self.settle(end_us, Some(end_us));
        let watch = self.params.watch_us;
        for (index, (end, resumed_at_end)) in self.decided {
            if let (Some(gap), Some(end)) = (gaps.get_mut(index), end) {
                (gap.predicted_end_us, gap.anomaly) = judge(gap, end, resumed_at_end, watch, end_us);
            }
        }
        self.outcomes.into_iter().flatten().collect()
    }
}

impl GapCase {
    /// How the theory expects the gap to end, all its parts known (a
    /// resume at the trial's end, `trial_end_us`, is no resume).
    fn end(&self, trial_end_us: Option<Micros>) -> Option<End> {
        let before_end = |r: &Micros| trial_end_us.is_none_or(|end| *r < end);
        let resume = self.resumes.iter().filter_map(|(_, r)| r.flatten()).filter(before_end).min();
        let takeover = match &self.otherwise {
            Err(()) => return None,
            Ok(None) => None,
            Ok(Some(t)) => Some((t.free, t.result.flatten())),
        };
        match (takeover, resume) {
            (Some((_, Some(t))), Some(r)) if r <= t.earliest => Some(End::Resumed(r)),
            // Too close to call: the resume falls inside the takeover's
            // observations.
            (Some((_, Some(t))), Some(r)) if r <= t.sure + t.op => None,
            (Some((free, Some(ticks))), _) => Some(End::TakenOver { free, ticks }),
            (None, Some(r)) => Some(End::Resumed(r)),
            _ => None,
        }
    }
}

impl PauseCase {
    /// The theory's outcome of the pause, measured beside it: (its slot,
    /// the outcome).
    fn outcome(self, params: &CheckParams) -> (usize, PauseOutcome) {
        let Ended { slot, end_us, resumed, believing, replaced, .. } = self.ended.expect("an ended pause");
        // Resumed still believing, another worker having taken the lease
        // meanwhile: a false eviction.
        let resumed = resumed && believing;
        let evicted = resumed && replaced;
        let mut out = PauseOutcome {
            worker: self.worker,
            start_us: self.start_us,
            end_us,
            resumed,
            evicted,
            visible_expiry_us: None,
            takeover_tick_us: None,
            predicted: None,
        };
        if !params.expires {
            // The paused holder is alive: its lock stays with it.
            out.predicted = Some(false);
            return (slot, out);
        }
        let Some(visible) = self.visible else { return (slot, out) };
        out.visible_expiry_us = Some(visible.from);
        let Some(ticks) = self.takeover.and_then(|t| t.result.flatten()) else { return (slot, out) };
        out.takeover_tick_us = Some(ticks.earliest);
        out.predicted = if !resumed || ticks.earliest >= end_us {
            Some(false)
        } else if ticks.sure + ticks.op < end_us {
            Some(true)
        } else {
            // The expiry or the resume falls inside a watcher's observation:
            // either outcome keeps to the protocol.
            None
        };
        (slot, out)
    }
}

/// The theory's end of `gap`, and how the measurement disagrees with it,
/// if it does.
fn judge(
    gap: &Gap,
    predicted: End,
    resumed_at_end: bool,
    watch: Micros,
    end_us: Micros,
) -> (Option<Micros>, Option<String>) {
    let anomaly = match predicted {
        End::Resumed(at) => {
            let agrees = gap.ended && gap.end_us == at;
            (!agrees).then(|| "a paused leader's resume should have ended it".to_string())
        }
        End::TakenOver { free, ticks } => {
            if !gap.ended {
                // Still open at the trial's end: as predicted if no
                // takeover was due before then.
                (ticks.sure + ticks.op < end_us).then(|| "no takeover".to_string())
            } else if resumed_at_end {
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

impl Takeover {
    fn new(at_us: Micros, free: Window) -> Takeover {
        Takeover { at_us, free, known_us: at_us.max(free.from), candidates: None, result: None }
    }

    /// Each watcher's ticks from the phases as they stand at `known_us`:
    /// dead, paused or leading, a worker has no ticks (the holder too,
    /// once it watches again, has).
    fn read(&mut self, watchers: &[Watcher], params: &CheckParams, end_us: Micros) {
        let (at, free, known) = (self.at_us, self.free, self.known_us);
        let mut out = Vec::new();
        let mut due = known;
        for (w, watcher) in watchers.iter().enumerate() {
            let believes = watcher.leading_since.is_some_and(|s| s <= known) && known < end_us;
            let paused = watcher.paused_at(known) && known < end_us;
            if watcher.dead_by(known) || believes || paused {
                continue;
            }
            let polled = polled(watcher, params, at, free, known, end_us);
            // A subscribed watcher is told when the server frees the lease:
            // somewhere in the window itself, no tick to wait for.
            let told = free.to + if free.released { 0 } else { params.push_slack_us };
            let pushed = Some(Ticks { earliest: free.from, sure: told, op: 0 }).filter(|_| pushes(params, free));
            due = [polled, pushed].into_iter().flatten().map(|t| t.sure).fold(due, Micros::max);
            out.push((w, polled, pushed));
        }
        self.candidates = Some((out, due));
    }

    /// The deaths and pauses of the watchers up to their ticks are known.
    fn confirm(&mut self, watchers: &[Watcher]) {
        let Some((candidates, _)) = &self.candidates else { return };
        let at = self.at_us;
        let live = |w: usize, t: &Ticks| !watchers[w].dies_within(at, t.sure) && !watchers[w].paused_at(t.earliest);
        let each: Vec<Ticks> = candidates
            .iter()
            .filter_map(|&(w, polled, pushed)| match (polled.filter(|t| live(w, t)), pushed.filter(|t| live(w, t))) {
                (Some(p), Some(q)) => Some(Ticks {
                    earliest: p.earliest.min(q.earliest),
                    sure: p.sure.min(q.sure),
                    op: if q.sure <= p.sure { q.op } else { p.op },
                }),
                (p, q) => p.or(q),
            })
            .collect();
        self.result = Some(each.iter().map(|t| t.earliest).min().and_then(|earliest| {
            let sure = each.iter().min_by_key(|t| t.sure)?;
            Some(Ticks { earliest, sure: sure.sure, op: sure.op })
        }));
    }
}

/// Does the server push the end of a lease freed within `free` to its
/// subscribed watchers?
fn pushes(params: &CheckParams, free: Window) -> bool {
    match params.push {
        Push::Nothing => false,
        Push::Release => free.released,
        Push::ReleaseAndExpiry => true,
    }
}

/// A watcher's polling ticks around the free moment, from the grid its
/// observations up to `known` show (before its deaths and pauses since;
/// `end_us`: the trial's end, which ends a tenure still going).
fn polled(
    watcher: &Watcher,
    params: &CheckParams,
    at_us: Micros,
    free: Window,
    known: Micros,
    end_us: Micros,
) -> Option<Ticks> {
    let watch = params.watch_us;
    if watch <= 0 {
        return None;
    }
    // A new role starts a new grid, its first tick one interval after the
    // change: when the worker last stopped leading, or lost its election.
    let ended_by_trial = (watcher.leading_since.is_some() && end_us <= known).then_some(end_us);
    let role_start = watcher.tenure_end_us.max(watcher.lost_us).max(ended_by_trial);
    let observed: Vec<(Micros, Micros)> = watcher
        .looks
        .iter()
        .rev()
        .filter(|(t, _, _)| role_start.is_none_or(|r| *t >= r))
        .map(|&(_, start, op)| (start, op))
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
    Some(ticks)
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
