//! Leadership intervals: who believed it led, who was paused, and what that
//! means for double leaders, leaderless gaps and wedges.
//!
//! The whole check is one sweep over the history in time order. Events that
//! share a timestamp form one *instant*: all of them are applied, then the
//! state is measured for the span up to the next instant. Consequences of
//! that choice:
//!
//! * A handover at the same µs (one steps down, another acquires) is neither
//!   a double leader nor a gap: nothing is measured between the two events.
//! * `max_leaders` only counts states that last a positive time, so a
//!   zero-length overlap (or a leader that appears at the very trial end) does
//!   not count. Otherwise a handover recorded in the "wrong" order at one µs
//!   would flag the trial as a double leader with 0 µs of overlap.
//! * Gaps have positive length by construction.
//!
//! Within an instant, events are applied in history order (which keeps each
//! process's own order), so "acquired then exit at the same µs" still opens
//! and closes an interval, and "the last one processed" is well defined.

use super::disturbance::DisturbanceFold;
use super::evictions::StaleBelief;
use super::fold::Fold;
use super::grants::GrantsFold;
use super::jobs::JobsFold;
use super::latency::Latency;
use super::lookback::{CONT, Lookback, STOP, delivered_action};
use super::metrics::{Gap, KILL, KILL_MID_RENEWAL, TrialMetrics};
use super::network::NetworkFold;
use super::params::CheckParams;
use super::precision::PrecisionFold;
use super::push::PushesFold;
use super::recovery::LastHeal;
use super::service::Sightings;
use super::spans::{Span, Spans};
use super::storm::StormFold;
use super::theory::Theory;
use super::writes::WritesFold;
use leasequake_model::history::{Event, EventKind};
use leasequake_model::history::{History, Micros, TRIAL_CUT};

/// Holder faults after which `gap = lease_remainder + detection_lag` holds:
/// the holder stops renewing at the fault, so the lease runs out on its own.
const DECOMPOSABLE: [&str; 3] = [KILL, STOP, "term"];

/// Judge one trial. Pure: everything comes from `history` and `params`.
pub fn check(history: &History, params: &CheckParams) -> TrialMetrics {
    let mut checker = Checker::new(params);
    for instant in history.events.chunk_by(|a, b| a.t_us == b.t_us) {
        checker.instant(instant);
    }
    checker.finish()
}

/// A trial judged as its history is read, an instant at a time: what it
/// holds is what is open (current holders, open gaps, grants still to end,
/// requests still to settle, the theory's predictions still to make), never
/// the history, so a trial's length does not make it hold more (docs/metrics.md
/// says what a silent worker holds open meanwhile).
pub struct Checker {
    params: CheckParams,
    sweep: Sweep,
    /// The trial's `trial_end` came: what follows is cleanup (SIGTERMs,
    /// exits, releases), not looked at.
    ended: bool,
    /// Its `trial_end` says it was cut at a soak's window.
    cut: bool,
    /// The last instant's time: the trial's end once the history is read
    /// (its `trial_end`, else its last event; 0 for none).
    end_us: Micros,
    writes: WritesFold,
    latency: Latency,
    pushes: PushesFold,
    precision: PrecisionFold,
    jobs: Option<JobsFold>,
    storm: StormFold,
    last_heal: LastHeal,
    sightings: Sightings,
    grants: GrantsFold,
    network: NetworkFold,
    disturbance: DisturbanceFold,
}

impl Checker {
    pub fn new(params: &CheckParams) -> Checker {
        Checker {
            params: *params,
            sweep: Sweep::new(params),
            ended: false,
            cut: false,
            end_us: 0,
            writes: WritesFold::default(),
            latency: Latency::default(),
            pushes: PushesFold::default(),
            precision: PrecisionFold::new(params.fault_budget_us),
            jobs: params.epoch_us.map(JobsFold::new),
            storm: StormFold::new(params),
            last_heal: LastHeal::default(),
            sightings: Sightings::default(),
            grants: GrantsFold::new(params),
            network: NetworkFold::new(params),
            disturbance: DisturbanceFold::new(params),
        }
    }

    /// The events of one instant (they share a µs), in the history's
    /// order; instants come in time order.
    pub fn instant(&mut self, instant: &[Event]) {
        if self.ended || instant.is_empty() {
            return;
        }
        debug_assert!(
            instant.iter().all(|e| e.t_us == instant[0].t_us) && self.sweep.last_us.is_none_or(|t| t < instant[0].t_us),
            "an instant is whole and after the one before"
        );
        // Up to and including the first `trial_end`.
        let instant = match instant.iter().position(|e| e.kind == EventKind::TrialEnd) {
            Some(i) => {
                self.ended = true;
                self.cut = instant[i].detail.reason.as_deref() == Some(TRIAL_CUT);
                &instant[..=i]
            }
            None => instant,
        };
        self.end_us = instant[0].t_us;
        self.sweep.instant(instant);
        for e in instant {
            self.disturbance.event(e);
            self.network.event(e);
            self.grants.event(e);
            self.sightings.event(e);
            self.storm.event(e);
            self.last_heal.event(e);
            self.writes.event(e);
            self.latency.event(e);
            self.pushes.event(e);
            self.precision.event(e);
            if let Some(jobs) = &mut self.jobs {
                jobs.event(e);
            }
        }
    }

    pub fn finish(self) -> TrialMetrics {
        let (params, end_us) = (&self.params, self.end_us);
        let mut metrics = self.sweep.finish(end_us, params);
        metrics.cut = self.cut;
        let (storm, last_heal) = (self.storm.finish(end_us), self.last_heal.finish(end_us));
        let sightings = self.sightings.finish(end_us);
        if let Some(jobs) = self.jobs {
            metrics.jobs = jobs.finish(end_us);
        }
        metrics.writes = self.writes.finish(end_us);
        metrics.latency = self.latency.finish(end_us);
        metrics.pushes = self.pushes.finish(end_us);
        metrics.precision = self.precision.finish(end_us);
        metrics.network = self.network.finish(end_us, &metrics.spans.tenures);
        metrics.network.storm = storm;
        let (double_grants, overlaps) = self.grants.finish(end_us);
        metrics.network.double_grants = double_grants;
        metrics.network.recovery_us = super::recovery::recovery(last_heal, &metrics.spans, &overlaps, end_us);
        metrics.network.unrecovered = usize::from(metrics.network.recovery_us.is_none() && last_heal.is_some());
        metrics.service = super::service::service(sightings, &metrics.spans.tenures, params.renew_us, end_us);
        metrics.disturbance = self.disturbance.finish(end_us, metrics.start_spread_us, &metrics.precision);
        metrics
    }
}

/// What the history tells about one worker at the current instant.
#[derive(Clone, Debug, Default)]
struct WorkerState {
    /// Start of the current believes-leader interval (its `acquired`).
    leader_since: Option<Micros>,
    /// Between a delivered `stop` and the matching `cont` (or its exit).
    paused: bool,
    /// When the current pause began (meaningful while `paused`).
    paused_since: Micros,
    /// Spawned, or heard from.
    seen: bool,
    /// Killed (a delivered SIGKILL) or seen dead by the harness, and no
    /// respawn followed.
    exited: bool,
}

impl WorkerState {
    fn active(&self) -> bool {
        self.leader_since.is_some() && !self.paused
    }

    fn alive(&self) -> bool {
        self.seen && !self.exited
    }
}

/// How an active-leader interval ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum EndedBy {
    /// The worker's own event (`stepped_down`, `released`) or its `exit`.
    Event(EventKind),
    /// A delivered `stop`: the worker still believes, but cannot act.
    Paused,
}

/// One worker's active-leader interval that just ended: a potential holder
/// whose loss opens a gap.
#[derive(Clone, Copy, Debug)]
struct Deactivation {
    worker: usize,
    /// When its believes-leader interval began: faults before that belong to
    /// an earlier leadership and cannot be the cause.
    leader_since: Micros,
    ended_by: EndedBy,
}

/// A change in a worker's active-leader status caused by one event.
enum Transition {
    Activated(usize),
    Deactivated(Deactivation),
}

struct Sweep {
    params: CheckParams,
    workers: Vec<WorkerState>,
    first_leader_us: Option<Micros>,
    max_leaders: usize,
    double_leader_us: Micros,
    double_leader_active_us: Micros,
    gaps: Vec<Gap>,
    /// Set while the last gap in `gaps` is still open.
    open_gap: Option<OpenGap>,
    spans: Spans,
    /// What a gap's cause and its takeover are found in.
    lookback: Lookback,
    /// The first and last `start`.
    starts: Option<(Micros, Micros)>,
    /// Workers believing they lead, and of those the ones not paused.
    believers: usize,
    active: usize,
    /// The last instant's time.
    last_us: Option<Micros>,
    /// The theory's predictions, and the stale believers, told of each
    /// tenure and pause as it starts and ends.
    theory: Theory,
    stale: StaleBelief,
}

/// What closing the open gap needs to know about how it opened.
#[derive(Clone, Copy, Debug)]
struct OpenGap {
    /// The worker whose loss of active leadership opened it.
    holder: Option<usize>,
    /// Nominal expiry of the holder's last lease write, when the gap
    /// decomposes; `detection_lag` is measured from it.
    expiry: Option<Micros>,
}

impl Sweep {
    fn new(params: &CheckParams) -> Sweep {
        Sweep {
            params: *params,
            workers: Vec::new(),
            first_leader_us: None,
            max_leaders: 0,
            double_leader_us: 0,
            double_leader_active_us: 0,
            gaps: Vec::new(),
            open_gap: None,
            spans: Spans::default(),
            lookback: Lookback::new(params.watch_us),
            starts: None,
            believers: 0,
            active: 0,
            last_us: None,
            theory: Theory::new(*params),
            stale: StaleBelief::default(),
        }
    }

    fn worker(&mut self, w: usize) -> &mut WorkerState {
        if w >= self.workers.len() {
            self.workers.resize_with(w + 1, WorkerState::default);
        }
        &mut self.workers[w]
    }

    /// Measure the state over the stretch since the last instant up to
    /// this one, then apply all events of this instant and update gaps.
    fn instant(&mut self, instant: &[Event]) {
        let t = instant[0].t_us;
        self.measure(t);
        // Tie-breaks: the holder is the last worker to lose active leadership
        // at this instant; the gap's ender is the first to gain it and keep it
        // (one that acquired and died within the instant ended nothing).
        let mut last_deactivated = None;
        let mut activated = Vec::new();
        self.theory.before(t);
        for event in instant {
            self.lookback.event(event);
            self.theory.event(event);
            if event.kind == EventKind::Acquired && self.first_leader_us.is_none() {
                self.first_leader_us = Some(t);
            }
            if event.kind == EventKind::Start {
                let (first, last) = self.starts.get_or_insert((t, t));
                (*first, *last) = ((*first).min(t), (*last).max(t));
            }
            match self.apply(event) {
                Some(Transition::Activated(w)) => activated.push(w),
                Some(Transition::Deactivated(d)) => last_deactivated = Some(d),
                None => {}
            }
        }

        let active = self.active;
        if self.first_leader_us.is_some() {
            if self.open_gap.is_none() && active == 0 {
                self.open_gap(t, last_deactivated);
            } else if self.open_gap.is_some() && active > 0 {
                let ended_by = activated.into_iter().find(|&w| self.workers[w].active());
                self.close_gap(instant, ended_by);
            }
        }

        self.last_us = Some(t);
        self.theory.instant_done(t);
    }

    /// The state as the last instant left it, over `[last, until_us)`.
    fn measure(&mut self, until_us: Micros) {
        let Some(from) = self.last_us else { return };
        let span = until_us - from;
        if span > 0 {
            let believers = self.believers;
            self.max_leaders = self.max_leaders.max(believers);
            if believers >= 2 {
                self.double_leader_us += span;
                match self.spans.double_leader.last_mut() {
                    Some(last) if last.1 == from => last.1 = until_us,
                    _ => self.spans.double_leader.push((from, until_us)),
                }
            }
            if self.active >= 2 {
                self.double_leader_active_us += span;
            }
        }
    }

    /// Update one worker's state; report whether its active-leader status
    /// changed.
    fn apply(&mut self, event: &Event) -> Option<Transition> {
        let w = event.worker?;
        let state = self.worker(w);
        let was_active = state.active();
        let leader_since = state.leader_since;
        let (was_paused, paused_since) = (state.paused, state.paused_since);
        let mut ended_by = EndedBy::Event(event.kind);

        match event.kind {
            // A dead worker's report, however late it arrives (a line read
            // after its kill, stamped on receipt), leads nothing: only a
            // new process brings the worker back.
            EventKind::Acquired if state.exited => {}
            // A second `acquired` while believing is the same interval.
            EventKind::Acquired => {
                state.leader_since.get_or_insert(event.t_us);
                state.seen = true;
            }
            EventKind::SteppedDown | EventKind::Released => state.leader_since = None,
            // Death ends both believing and pausing.
            EventKind::Exit => {
                state.leader_since = None;
                state.paused = false;
                state.exited = true;
            }
            // Only a new process brings a dead worker back; a report it made
            // before dying (however late it arrives) does not.
            EventKind::Spawn => {
                state.seen = true;
                state.exited = false;
            }
            EventKind::Fault => match delivered_action(event) {
                Some(STOP) => {
                    if !state.paused {
                        state.paused_since = event.t_us;
                    }
                    state.paused = true;
                    ended_by = EndedBy::Paused;
                }
                Some(CONT) => state.paused = false,
                // A SIGKILL ends its target at once: it runs none of its
                // own code after it. Its `exit` comes later by what the
                // machine takes to tear it down and to tell the harness,
                // which is no part of the gap the kill opens.
                Some(KILL) => {
                    state.leader_since = None;
                    state.paused = false;
                    state.exited = true;
                }
                // term acts through the worker's `exit` (it may release
                // first); the rest do not change what the worker believes.
                _ => {}
            },
            // Any other report means the process existed.
            _ => state.seen = true,
        }

        let (now_leader, now_paused) = (state.leader_since.is_some(), state.paused);
        if let (Some(start_us), false) = (leader_since, now_leader) {
            self.tenure_ended(Span { worker: w, start_us, end_us: event.t_us });
        }
        if leader_since.is_none() && now_leader {
            self.theory.tenure_started(w, event.t_us);
            self.stale.tenure_started(w, event.t_us);
        }
        if !was_paused && now_paused {
            self.theory.pause_started(w, event.t_us);
        }
        if was_paused && !now_paused {
            self.pause_ended(Span { worker: w, start_us: paused_since, end_us: event.t_us }, None);
        }
        let state = &self.workers[w];
        // Kept as they change, not counted over the workers each instant.
        self.believers = self.believers + usize::from(now_leader) - usize::from(leader_since.is_some());
        self.active = self.active + usize::from(state.active()) - usize::from(was_active);
        match (was_active, state.active()) {
            (false, true) => Some(Transition::Activated(w)),
            (true, false) => Some(Transition::Deactivated(Deactivation {
                worker: w,
                leader_since: leader_since.expect("an active worker believes"),
                ended_by,
            })),
            _ => None,
        }
    }

    fn tenure_ended(&mut self, t: Span) {
        self.theory.tenure_ended(&t);
        self.stale.tenure_ended(&t);
        self.spans.tenures.push(t);
    }

    /// `trial_end_us`: a pause the trial's end cut.
    fn pause_ended(&mut self, p: Span, trial_end_us: Option<Micros>) {
        self.theory.pause_ended(&p, trial_end_us);
        self.spans.pauses.push(p);
    }

    fn open_gap(&mut self, start_us: Micros, holder: Option<Deactivation>) {
        let why = match holder {
            Some(holder) => explain(&holder, &mut self.lookback, self.params.rewritten_in_place),
            // Only reachable when the very first leader acquired while
            // already paused: no active interval ended.
            None => Explanation {
                cause: "unknown".to_string(),
                cause_fault: None,
                lease_remainder_us: None,
                expiry_us: None,
            },
        };
        self.gaps.push(Gap {
            start_us,
            end_us: start_us,
            ended: false,
            cause: why.cause,
            cause_fault: why.cause_fault,
            ended_by: None,
            lease_remainder_us: why.lease_remainder_us,
            detection_lag_us: None,
            holder: holder.map(|h| h.worker),
            predicted_end_us: None,
            takeover_us: None,
            anomaly: None,
        });
        self.open_gap = Some(OpenGap { holder: holder.map(|h| h.worker), expiry: why.expiry_us });
        let index = self.gaps.len() - 1;
        self.theory.gap_opened(index, &self.gaps[index]);
    }

    /// The gap ends at `instant`, `ended_by` the worker that leads again.
    fn close_gap(&mut self, instant: &[Event], ended_by: Option<usize>) {
        let end_us = instant[0].t_us;
        let open = self.open_gap.take().expect("an open gap exists");
        let gap = self.gaps.last_mut().expect("an open gap exists");
        gap.end_us = end_us;
        gap.ended = true;
        gap.ended_by = ended_by;
        // Detection lag is expiry → takeover. A paused holder that resumes
        // ends the gap without anyone detecting anything: no lag to report
        // (it would be negative if the lease had not yet run out).
        if ended_by != open.holder {
            gap.detection_lag_us = open.expiry.map(|expiry| end_us - expiry);
            gap.takeover_us = ended_by.and_then(|w| takeover(instant, w, &self.lookback));
        }
        let index = self.gaps.len() - 1;
        self.theory.gap_closed(index, &self.gaps[index]);
    }

    fn finish(mut self, end_us: Micros, params: &CheckParams) -> TrialMetrics {
        self.measure(end_us);
        // A gap still open at trial end lasts until then. A gap that opened
        // exactly at the trial end has no length and is no gap.
        if self.open_gap.is_some() {
            let gap = self.gaps.last_mut().expect("an open gap exists");
            gap.end_us = end_us;
            if gap.duration_us() == 0 {
                self.gaps.pop();
            }
        }

        // Someone could still act: otherwise a long gap is a dead system, not
        // a wedged one.
        let could_lead = self.workers.iter().any(|w| w.alive() && !w.paused);
        let threshold = params.wedge_threshold_us();
        let wedged = could_lead
            && match self.first_leader_us {
                // Never elected (the blog's zero-byte lock file): the wait
                // counts from the barrier.
                None => end_us > threshold,
                Some(_) => self.gaps.last().is_some_and(|g| !g.ended && g.duration_us() > threshold),
            };

        // Tenures and pauses still open at the end last until then: the
        // theory reads what it still owes before they end.
        self.theory.closing(end_us);
        let open: Vec<(Option<Micros>, Option<Micros>)> =
            self.workers.iter().map(|w| (w.leader_since, w.paused.then_some(w.paused_since))).collect();
        for (worker, (leader_since, paused_since)) in open.into_iter().enumerate() {
            if let Some(start_us) = leader_since {
                self.tenure_ended(Span { worker, start_us, end_us });
            }
            if let Some(start_us) = paused_since {
                self.pause_ended(Span { worker, start_us, end_us }, Some(end_us));
            }
        }
        let pauses = self.theory.finish(end_us, &mut self.gaps);

        TrialMetrics {
            start_spread_us: self.starts.map(|(first, last)| last - first),
            first_leader_us: self.first_leader_us,
            max_leaders: self.max_leaders,
            double_leader_us: self.double_leader_us,
            double_leader_active_us: self.double_leader_active_us,
            leaderless_us: self.gaps.iter().map(Gap::duration_us).sum(),
            gaps: self.gaps,
            wedged,
            end_us,
            cut: false,
            evictions: super::evictions::evictions(pauses, self.stale),
            writes: Default::default(),
            jobs: Default::default(),
            latency: Default::default(),
            network: Default::default(),
            pushes: Default::default(),
            precision: Default::default(),
            disturbance: Default::default(),
            service: Default::default(),
            spans: self.spans,
        }
    }
}

/// Why a gap opened.
struct Explanation {
    /// Fault action, or the holder's own closing event.
    cause: String,
    /// The cause fault's index in the schedule.
    cause_fault: Option<usize>,
    /// Cause fault → `expiry_us`, if the gap decomposes.
    lease_remainder_us: Option<Micros>,
    /// Nominal expiry of the holder's last write, if the gap decomposes.
    expiry_us: Option<Micros>,
}

/// Why a gap opened when `holder` lost active leadership, from what the
/// sweep has seen up to the gap's start instant.
fn explain(holder: &Deactivation, lookback: &mut Lookback, rewritten_in_place: bool) -> Explanation {
    let Some(fault) = lookback.cause(holder.worker, holder.leader_since, holder.ended_by == EndedBy::Paused) else {
        let cause = match holder.ended_by {
            EndedBy::Event(kind) => kind.name(),
            // A pause always comes with a `stop` fault; kept for totality.
            EndedBy::Paused => STOP,
        };
        return Explanation { cause: cause.to_string(), cause_fault: None, lease_remainder_us: None, expiry_us: None };
    };

    let action = fault.action.as_str();
    let on_holder = fault.worker == Some(holder.worker);
    let decomposable = on_holder
        && DECOMPOSABLE.contains(&action)
        // A holder that released its lease did not let it run out.
        && holder.ended_by != EndedBy::Event(EventKind::Released);
    let expiry_us = if decomposable { fault.expiry_us } else { None };
    // A renewal that is one atomic call leaves nothing half-done: a kill
    // inside it is a kill like any other.
    let mid_renewal = fault.mid_renewal && rewritten_in_place;
    let cause = if action == KILL && on_holder && mid_renewal { KILL_MID_RENEWAL } else { action };
    Explanation {
        cause: cause.to_string(),
        cause_fault: fault.fault,
        lease_remainder_us: expiry_us.map(|e| e - fault.t_us),
        expiry_us,
    }
}

/// The takeover's own cost for a gap worker `w`'s acquire ended at
/// `instant`: that acquire, and the look before it (the worker's last
/// timed observation, if it ended no more than a watch interval before the
/// acquire began), start to finish.
fn takeover(instant: &[Event], w: usize, lookback: &Lookback) -> Option<Micros> {
    let acquired = instant.iter().find(|e| e.worker == Some(w) && e.kind == EventKind::Acquired)?;
    let began = acquired.t_us - acquired.detail.op_us? as Micros;
    Some(acquired.t_us - lookback.takeover_from(w, began))
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    /// The blog's defaults, unscaled: threshold = 9 + 3 + 1 = 13 s.
    const PARAMS: CheckParams = crate::testkit::BLOG;

    /// Seconds (as written in the blog) to µs.
    fn s(seconds: f64) -> Micros {
        (seconds * 1e6).round() as Micros
    }

    fn ev(t: f64, worker: usize, kind: EventKind) -> Event {
        Event::new(s(t), Some(worker), kind)
    }

    fn acquired(t: f64, worker: usize, how: &str) -> Event {
        ev(t, worker, EventKind::Acquired).with_detail(Detail {
            how: Some(how.into()),
            expires_in_ms: Some(9000.0),
            ..Detail::default()
        })
    }

    fn renewed(t: f64, worker: usize) -> Event {
        ev(t, worker, EventKind::Renewed).with_detail(Detail { expires_in_ms: Some(9000.0), ..Detail::default() })
    }

    fn fault(t: f64, worker: Option<usize>, index: usize, action: &str) -> Event {
        Event::new(s(t), worker, EventKind::Fault).with_detail(Detail {
            fault: Some(index),
            action: Some(action.into()),
            ..Detail::default()
        })
    }

    fn exit(t: f64, worker: usize, signal: Option<&str>) -> Event {
        ev(t, worker, EventKind::Exit).with_detail(Detail {
            signal: signal.map(Into::into),
            code: signal.is_none().then_some(0),
            ..Detail::default()
        })
    }

    fn trial_end(t: f64) -> Event {
        Event::new(s(t), None, EventKind::TrialEnd)
    }

    /// Spawn, barrier and start of `n` workers: spawned before the barrier,
    /// started 100, 200, … µs after it.
    fn start(n: usize) -> Vec<Event> {
        let mut events = vec![Event::new(0, None, EventKind::Barrier)];
        for w in 0..n {
            events.push(Event::new(-5_000 + w as Micros, Some(w), EventKind::Spawn));
            events.push(Event::new(100 * (w as Micros + 1), Some(w), EventKind::Start));
        }
        events
    }

    fn run(events: Vec<Event>) -> TrialMetrics {
        check(&History::new(events), &PARAMS)
    }

    #[test]
    fn a_kill_inside_the_renewal_is_named_and_its_wedge_counted() {
        let mut events = start(3);
        events.extend([
            acquired(0.53, 0, "start"),
            ev(3.53, 0, EventKind::Renewing),
            renewed(3.531, 0),
            ev(6.53, 0, EventKind::Renewing),
            fault(6.5301, Some(0), 0, "kill"),
            exit(6.5303, 0, Some("SIGKILL")),
            trial_end(30.0),
        ]);
        let m = run(events);
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].cause, KILL_MID_RENEWAL);
        assert!(!m.gaps[0].ended && m.wedged, "{m:?}");
        // The same kill just after the renewal was written is a plain kill.
        let mut events = start(3);
        events.extend([
            acquired(0.53, 0, "start"),
            ev(3.53, 0, EventKind::Renewing),
            renewed(3.531, 0),
            fault(4.0, Some(0), 0, "kill"),
            exit(4.0002, 0, Some("SIGKILL")),
            trial_end(30.0),
        ]);
        assert_eq!(run(events.clone()).gaps[0].cause, "kill");
    }

    #[test]
    fn a_kill_inside_an_atomic_renewal_is_a_plain_kill() {
        let mut events = start(2);
        events.extend([
            acquired(0.53, 0, "start"),
            ev(3.53, 0, EventKind::Renewing),
            fault(3.5301, Some(0), 0, "kill"),
            exit(3.5303, 0, Some("SIGKILL")),
            acquired(12.0, 1, "takeover"),
            trial_end(30.0),
        ]);
        let redis = CheckParams { rewritten_in_place: false, ..PARAMS };
        assert_eq!(check(&History::new(events.clone()), &redis).gaps[0].cause, "kill");
        assert_eq!(run(events).gaps[0].cause, KILL_MID_RENEWAL);
    }

    /// The blog's SIGKILL example: 9.53 s = 6.53 s + 3.00 s.
    fn blog_kill() -> Vec<Event> {
        let mut events = start(3);
        events.extend([
            acquired(0.53, 0, "start"),
            renewed(3.53, 0),
            renewed(6.53, 0),
            renewed(9.53, 0),
            fault(12.0, Some(0), 0, "kill"),
            exit(12.0002, 0, Some("SIGKILL")),
            acquired(21.53, 1, "takeover"),
            renewed(24.53, 1),
            renewed(27.53, 1),
            trial_end(30.0),
        ]);
        events
    }

    #[test]
    fn blog_kill_gap_decomposes_into_remainder_and_lag() {
        let m = run(blog_kill());
        assert_eq!(
            m.gaps,
            vec![Gap {
                // From the kill, not from the death the harness saw 0.2 ms
                // later: gap = remainder + lag exactly.
                start_us: s(12.0),
                end_us: s(21.53),
                ended: true,
                cause: "kill".into(),
                cause_fault: Some(0),
                ended_by: Some(1),
                lease_remainder_us: Some(s(6.53)),
                detection_lag_us: Some(s(3.0)),
                holder: Some(0),
                // No watcher tick and no lease_until: nothing to predict with.
                predicted_end_us: None,
                takeover_us: None,
                anomaly: None,
            }]
        );
        assert_eq!(m.first_leader_us, Some(s(0.53)));
        assert_eq!(m.max_leaders, 1);
        assert_eq!(m.double_leader_us, 0);
        assert_eq!(m.double_leader_active_us, 0);
        assert_eq!(m.leaderless_us, s(21.53) - s(12.0));
        assert!(!m.wedged);
        assert_eq!(m.end_us, s(30.0));
        assert_eq!(m.start_spread_us, Some(200));
        assert_eq!(m.outcome(), "ok");
    }

    /// Worker 0 is SIGSTOPped while leading, worker 1 takes over, worker 0
    /// resumes still believing it leads.
    fn paused_leader() -> Vec<Event> {
        let mut events = start(2);
        events.extend([
            acquired(0.5, 0, "start"),
            renewed(3.5, 0),
            renewed(6.5, 0),
            renewed(9.5, 0),
            fault(12.0, Some(0), 0, "stop"),
            acquired(21.5, 1, "takeover"),
            fault(25.0, Some(0), 1, "cont"),
            trial_end(30.0),
        ]);
        events
    }

    #[test]
    fn paused_leader_keeps_believing_and_resumes_as_second_leader() {
        let m = run(paused_leader());
        assert_eq!(m.max_leaders, 2);
        // Worker 0 believes throughout (a stopped process cannot know), so
        // two believers from the takeover at 21.5 s to the end at 30 s...
        assert_eq!(m.double_leader_us, s(8.5));
        // ...but both can act only after the resume at 25 s.
        assert_eq!(m.double_leader_active_us, s(5.0));
        assert_eq!(
            m.gaps,
            vec![Gap {
                start_us: s(12.0),
                end_us: s(21.5),
                ended: true,
                cause: "stop".into(),
                cause_fault: Some(0),
                ended_by: Some(1),
                // Last write at 9.5 s: expiry 18.5 s.
                lease_remainder_us: Some(s(6.5)),
                detection_lag_us: Some(s(3.0)),
                holder: Some(0),
                predicted_end_us: None,
                takeover_us: None,
                anomaly: None,
            }]
        );
        assert!(!m.wedged);
        assert_eq!(m.outcome(), "double_leader");
    }

    #[test]
    fn resumed_leader_that_steps_down_ends_the_double_leader() {
        let mut events = paused_leader();
        let mut step_down = ev(25.5, 0, EventKind::SteppedDown);
        step_down.detail.reason = Some("other-holder".into());
        events.push(step_down);
        let m = run(events);
        assert_eq!(m.max_leaders, 2);
        assert_eq!(m.double_leader_us, s(25.5) - s(21.5));
        assert_eq!(m.double_leader_active_us, s(0.5));
        assert_eq!(m.gaps.len(), 1);
        // The spans behind those numbers, for the timeline.
        let spans = &m.spans;
        assert_eq!(spans.double_leader, vec![(s(21.5), s(25.5))]);
        assert_eq!(spans.pauses, vec![Span { worker: 0, start_us: s(12.0), end_us: s(25.0) }]);
        let tenures: Vec<(usize, Micros, Micros)> =
            spans.tenures.iter().map(|t| (t.worker, t.start_us, t.end_us)).collect();
        assert!(tenures.iter().any(|t| t.0 == 0 && t.2 == s(25.5)), "{tenures:?}");
        assert!(tenures.iter().any(|t| t.0 == 1 && t.1 == s(21.5) && t.2 == s(30.0)), "{tenures:?}");
    }

    #[test]
    fn sigterm_with_release_is_caused_by_term_without_decomposition() {
        let mut events = start(3);
        events.extend([
            acquired(0.5, 0, "start"),
            renewed(3.5, 0),
            renewed(6.5, 0),
            renewed(9.5, 0),
            fault(12.0, Some(0), 0, "term"),
            ev(12.01, 0, EventKind::Released),
            ev(12.015, 0, EventKind::Exiting),
            exit(12.02, 0, None),
            acquired(12.32, 2, "retry"),
            trial_end(30.0),
        ]);
        let m = run(events);
        assert_eq!(
            m.gaps,
            vec![Gap {
                start_us: s(12.01),
                end_us: s(12.32),
                ended: true,
                cause: "term".into(),
                cause_fault: Some(0),
                ended_by: Some(2),
                lease_remainder_us: None,
                detection_lag_us: None,
                holder: Some(0),
                predicted_end_us: None,
                takeover_us: None,
                anomaly: None,
            }]
        );
        assert_eq!(m.leaderless_us, s(0.31));
        assert!(!m.wedged);
    }

    #[test]
    fn sigterm_without_release_decomposes() {
        let mut events = start(2);
        events.extend([
            acquired(0.5, 0, "start"),
            fault(2.0, Some(0), 0, "term"),
            exit(2.001, 0, None),
            acquired(12.5, 1, "takeover"),
            trial_end(30.0),
        ]);
        let gap = &run(events).gaps[0];
        assert_eq!(gap.cause, "term");
        assert_eq!(gap.lease_remainder_us, Some(s(7.5)));
        assert_eq!(gap.detection_lag_us, Some(s(3.0)));
    }

    /// The blog's zero-byte lock file: the creator died between create and
    /// write, so every worker reads an empty file forever.
    fn zero_byte_file(end: f64) -> Vec<Event> {
        let mut events = start(3);
        let mut t = 3.0;
        while t < end {
            for w in 0..3 {
                events.push(ev(t + w as f64 * 0.001, w, EventKind::Unreadable));
            }
            t += 3.0;
        }
        events.push(trial_end(end));
        events
    }

    #[test]
    fn never_electing_a_leader_is_a_wedge() {
        let m = run(zero_byte_file(30.0));
        assert!(m.wedged);
        assert_eq!(m.first_leader_us, None);
        assert!(m.gaps.is_empty());
        assert_eq!(m.leaderless_us, 0);
        assert_eq!(m.max_leaders, 0);
        assert_eq!(m.outcome(), "wedged");
    }

    #[test]
    fn no_leader_yet_within_the_threshold_is_not_a_wedge() {
        let m = run(zero_byte_file(5.0));
        assert!(!m.wedged);
        assert_eq!(m.first_leader_us, None);
        assert_eq!(m.outcome(), "no_leader");
    }

    #[test]
    fn no_leader_with_every_worker_dead_is_not_a_wedge() {
        let mut events = zero_byte_file(30.0);
        events.retain(|e| e.kind != EventKind::Unreadable || e.t_us < s(20.0));
        events.extend((0..3).map(|w| exit(20.0, w, Some("SIGKILL"))));
        assert!(!run(events).wedged);
    }

    /// Worker 0 leads and is killed at 12 s; the survivors never take over
    /// (their view of the lock is unreadable).
    fn killed_without_takeover() -> Vec<Event> {
        let mut events = start(3);
        events.extend([
            acquired(0.5, 0, "start"),
            fault(11.0, None, 0, "lock-empty"),
            fault(12.0, Some(0), 1, "kill"),
            exit(12.0001, 0, Some("SIGKILL")),
            ev(15.0, 1, EventKind::Unreadable),
            ev(15.0, 2, EventKind::Unreadable),
            trial_end(30.0),
        ]);
        events
    }

    #[test]
    fn gap_open_at_trial_end_beyond_threshold_is_a_wedge() {
        let m = run(killed_without_takeover());
        assert_eq!(m.gaps.len(), 1);
        let gap = &m.gaps[0];
        assert!(!gap.ended);
        assert_eq!(gap.end_us, s(30.0));
        assert_eq!(gap.ended_by, None);
        assert_eq!(gap.cause, "kill");
        assert_eq!(gap.cause_fault, Some(1));
        // Acquired at 0.5 s with a 9 s lease, never renewed: expired at 9.5 s,
        // before the kill.
        assert_eq!(gap.lease_remainder_us, Some(s(-2.5)));
        assert_eq!(gap.detection_lag_us, None);
        assert!(m.wedged);
        assert_eq!(m.outcome(), "wedged");
    }

    #[test]
    fn gap_open_at_trial_end_with_all_workers_dead_is_not_a_wedge() {
        let mut events = killed_without_takeover();
        events.push(exit(16.0, 1, Some("SIGKILL")));
        events.push(exit(16.0, 2, Some("SIGKILL")));
        let m = run(events);
        assert_eq!(m.gaps.len(), 1);
        assert!(!m.gaps[0].ended);
        assert!(!m.wedged);
    }

    #[test]
    fn gap_open_at_trial_end_with_survivors_paused_is_not_a_wedge() {
        let mut events = killed_without_takeover();
        events.push(fault(16.0, Some(1), 2, "stop"));
        events.push(fault(16.0, Some(2), 3, "stop"));
        assert!(!run(events).wedged);
    }

    #[test]
    fn gap_open_at_trial_end_within_threshold_is_not_a_wedge() {
        let mut events = killed_without_takeover();
        events.retain(|e| e.kind != EventKind::TrialEnd);
        events.push(trial_end(25.0));
        let m = run(events);
        assert_eq!(m.gaps[0].duration_us(), s(25.0) - s(12.0));
        assert!(!m.wedged);
    }

    #[test]
    fn lock_fault_is_the_cause_of_a_step_down() {
        let mut events = start(2);
        events.extend([
            acquired(0.5, 0, "start"),
            fault(2.0, None, 4, "lock-corrupt"),
            ev(3.5, 0, EventKind::RenewFailed),
            ev(6.5, 0, EventKind::RenewFailed),
            ev(9.5, 0, EventKind::RenewFailed),
            ev(9.5, 0, EventKind::SteppedDown),
            trial_end(30.0),
        ]);
        let gap = &run(events).gaps[0];
        assert_eq!(gap.start_us, s(9.5));
        assert_eq!(gap.cause, "lock-corrupt");
        assert_eq!(gap.cause_fault, Some(4));
        // Not the holder's death: the lease decomposition does not apply.
        assert_eq!(gap.lease_remainder_us, None);
    }

    #[test]
    fn a_takeover_is_timed_from_the_look_that_found_the_lease_free_to_its_acquire() {
        let timed = |e: Event, op_us: u64| {
            let detail = Detail { op_us: Some(op_us), ..e.detail.clone() };
            e.with_detail(detail)
        };
        let mut events = start(3);
        events.extend([
            acquired(0.5, 0, "start"),
            ev(5.0, 0, EventKind::Released),
            // Watcher 1 looked 3 s earlier (too long before to be this
            // takeover's look), then at 5.9996 s for 200 µs, and acquired
            // 100 µs later in 300 µs; watcher 2 acquires with no look.
            timed(ev(3.0, 1, EventKind::HeldBy), 150),
            timed(ev(5.9998, 1, EventKind::ExpiredSeen), 200),
            timed(acquired(6.0002, 1, "takeover"), 300),
            ev(9.0, 1, EventKind::Released),
            timed(acquired(9.5, 2, "takeover"), 400),
            trial_end(15.0),
        ]);
        let m = run(events);
        let takeovers: Vec<_> = m.gaps.iter().map(|g| g.takeover_us).collect();
        assert_eq!(takeovers, [Some(600), Some(400)]);
        // A gap its holder's own resume ended, or one still open, has none.
        let mut events = start(2);
        events.extend([
            acquired(0.5, 0, "start"),
            fault(2.0, Some(0), 0, "stop"),
            fault(4.0, Some(0), 1, "cont"),
            trial_end(10.0),
        ]);
        assert!(run(events).gaps.iter().all(|g| g.takeover_us.is_none()));
    }

    #[test]
    fn without_a_fault_the_cause_is_the_holders_own_event() {
        let mut events = start(2);
        events.extend([
            // A fault from the previous leadership does not count.
            fault(0.2, None, 0, "lock-corrupt"),
            acquired(0.5, 0, "start"),
            ev(5.0, 0, EventKind::SteppedDown),
            acquired(8.0, 0, "retry"),
            ev(10.0, 0, EventKind::Released),
            acquired(12.0, 1, "takeover"),
            exit(14.0, 1, Some("SIGSEGV")),
            trial_end(15.0),
        ]);
        let m = run(events);
        let causes: Vec<_> = m.gaps.iter().map(|g| g.cause.as_str()).collect();
        assert_eq!(causes, ["stepped_down", "released", "exit"]);
        assert!(m.gaps.iter().all(|g| g.cause_fault.is_none()));
        assert_eq!(m.gaps[2].end_us, s(15.0));
        assert_eq!(m.leaderless_us, s(3.0) + s(2.0) + s(1.0));
    }

    #[test]
    fn a_lifted_pause_is_not_the_cause_of_a_later_step_down() {
        let mut events = start(2);
        events.extend([
            acquired(0.5, 0, "start"),
            fault(2.0, Some(0), 0, "stop"),
            fault(4.0, Some(0), 1, "cont"),
            ev(5.0, 0, EventKind::SteppedDown),
            acquired(14.0, 1, "takeover"),
            trial_end(30.0),
        ]);
        let m = run(events);
        assert_eq!(m.gaps.len(), 2);
        assert_eq!(m.gaps[0].cause, "stop");
        assert_eq!(m.gaps[0].end_us, s(4.0));
        // Resumed by its own cont: the lease had 7.5 s left, and nobody had
        // to detect its expiry.
        assert_eq!(m.gaps[0].ended_by, Some(0));
        assert_eq!(m.gaps[0].lease_remainder_us, Some(s(7.5)));
        assert_eq!(m.gaps[0].detection_lag_us, None);
        assert_eq!(m.gaps[1].cause, "stepped_down");
        assert_eq!(m.gaps[1].lease_remainder_us, None);
    }

    #[test]
    fn undelivered_fault_is_ignored() {
        let mut events = start(2);
        let mut failed_stop = fault(5.0, Some(0), 0, "stop");
        failed_stop.detail.error = Some("ESRCH".into());
        let mut failed_kill = fault(6.0, Some(0), 1, "kill");
        failed_kill.detail.error = Some("no leader to target".into());
        events.extend([
            acquired(0.5, 0, "start"),
            failed_stop,
            failed_kill,
            ev(7.0, 0, EventKind::SteppedDown),
            acquired(7.5, 1, "takeover"),
            trial_end(30.0),
        ]);
        let m = run(events);
        // Had the stop been applied, the gap would start at 5 s.
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].start_us, s(7.0));
        assert_eq!(m.gaps[0].cause, "stepped_down");
    }

    #[test]
    fn events_after_trial_end_are_ignored() {
        let mut events = blog_kill();
        events.extend([
            // Cleanup: SIGTERM to the leader, then everyone exits.
            fault(30.0, Some(1), 9, "term"),
            ev(30.001, 1, EventKind::Released),
            exit(30.002, 1, None),
            exit(30.003, 2, None),
            // A late report that would otherwise make a double leader.
            acquired(31.0, 2, "takeover"),
        ]);
        let m = run(events);
        assert_eq!(m.end_us, s(30.0));
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.max_leaders, 1);
        assert_eq!(m, run(blog_kill()));
    }

    #[test]
    fn simultaneous_handover_is_neither_double_leader_nor_gap() {
        for handover in [
            [ev(5.0, 0, EventKind::SteppedDown), acquired(5.0, 1, "takeover")],
            // The same instant reported in the other order.
            [acquired(5.0, 1, "takeover"), ev(5.0, 0, EventKind::SteppedDown)],
        ] {
            let mut events = start(2);
            events.push(acquired(0.5, 0, "start"));
            events.extend(handover);
            events.push(trial_end(10.0));
            let m = run(events);
            assert_eq!(m.max_leaders, 1);
            assert_eq!(m.double_leader_us, 0);
            assert!(m.gaps.is_empty());
        }
    }

    #[test]
    fn naive_race_gives_two_leaders() {
        let mut events = start(2);
        events.extend([
            Event::new(100, Some(0), EventKind::Acquired),
            Event::new(150, Some(1), EventKind::Acquired),
            trial_end(30.0),
        ]);
        let m = run(events);
        assert_eq!(m.first_leader_us, Some(100));
        assert_eq!(m.max_leaders, 2);
        assert_eq!(m.double_leader_us, s(30.0) - 150);
        assert_eq!(m.double_leader_active_us, s(30.0) - 150);
        assert!(m.gaps.is_empty());
        assert_eq!(m.outcome(), "double_leader");
    }

    #[test]
    fn reacquiring_while_leader_is_one_interval() {
        let mut events = start(2);
        events.extend([
            acquired(1.0, 0, "start"),
            acquired(2.0, 0, "retry"),
            acquired(3.0, 1, "takeover"),
            ev(4.0, 0, EventKind::SteppedDown),
            trial_end(10.0),
        ]);
        let m = run(events);
        // Worker 0's interval is 1 → 4 s, not two overlapping ones.
        assert_eq!(m.max_leaders, 2);
        assert_eq!(m.double_leader_us, s(1.0));
        assert_eq!(m.first_leader_us, Some(s(1.0)));
    }

    #[test]
    fn zero_length_leadership_counts_nothing_but_opens_a_gap() {
        let mut events = start(3);
        events.extend([
            acquired(1.0, 0, "start"),
            acquired(2.0, 1, "takeover"),
            exit(2.0, 1, Some("SIGKILL")),
            acquired(2.0, 0, "retry"),
            exit(3.0, 0, Some("SIGKILL")),
            acquired(3.0, 2, "takeover"),
            ev(3.0, 2, EventKind::SteppedDown),
            trial_end(10.0),
        ]);
        let m = run(events);
        // Worker 1 believed for 0 µs at 2 s: no double leader.
        assert_eq!(m.max_leaders, 1);
        assert_eq!(m.double_leader_us, 0);
        // At 3 s worker 0 dies and worker 1 acquires and steps down: the
        // last one to lose leadership (worker 2) is the holder.
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].start_us, s(3.0));
        assert_eq!(m.gaps[0].cause, "stepped_down");
        assert!(!m.gaps[0].ended);
    }

    #[test]
    fn leader_appearing_at_trial_end_has_no_length() {
        let mut events = start(2);
        events.extend([
            acquired(1.0, 0, "start"),
            ev(2.0, 0, EventKind::SteppedDown),
            acquired(10.0, 1, "takeover"),
            trial_end(10.0),
        ]);
        let m = run(events);
        assert_eq!(m.max_leaders, 1);
        assert_eq!(m.gaps.len(), 1);
        assert!(m.gaps[0].ended);
        assert_eq!(m.gaps[0].ended_by, Some(1));
    }

    #[test]
    fn gap_opening_at_trial_end_is_no_gap() {
        let mut events = start(2);
        events.extend([
            acquired(1.0, 0, "start"),
            fault(10.0, Some(0), 0, "kill"),
            exit(10.0, 0, Some("SIGKILL")),
            trial_end(10.0),
        ]);
        let m = run(events);
        assert!(m.gaps.is_empty());
        assert_eq!(m.leaderless_us, 0);
    }

    #[test]
    fn pause_of_a_watcher_changes_nothing() {
        let mut events = blog_kill();
        events.push(fault(5.0, Some(2), 5, "stop"));
        events.push(fault(6.0, Some(2), 6, "cont"));
        let mut paused = run(events);
        // Only the timeline sees it.
        assert_eq!(paused.spans.pauses, vec![Span { worker: 2, start_us: s(5.0), end_us: s(6.0) }]);
        paused.spans.pauses.clear();
        assert_eq!(paused, run(blog_kill()));
    }

    #[test]
    fn a_report_read_after_the_kill_revives_nobody() {
        // A program observed through its output: its `acquired` line,
        // written before the kill, is read (and stamped) after it.
        let mut events = blog_kill();
        events.push(acquired(12.0001, 0, "takeover"));
        events.sort_by_key(|e| e.t_us);
        let (late, plain) = (run(events), run(blog_kill()));
        assert_eq!((late.gaps, late.spans), (plain.gaps, plain.spans));
        assert_eq!((late.max_leaders, late.double_leader_us, late.leaderless_us), (1, 0, plain.leaderless_us));
    }

    #[test]
    fn killed_while_paused_opens_no_second_gap() {
        let mut events = paused_leader();
        events.retain(|e| e.kind != EventKind::Fault || e.detail.action.as_deref() != Some("cont"));
        events.push(fault(25.0, Some(0), 1, "kill"));
        events.push(exit(25.001, 0, Some("SIGKILL")));
        let m = run(events);
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].cause, "stop");
        // Believed (though paused) until its kill.
        assert_eq!(m.double_leader_us, s(25.0) - s(21.5));
        assert_eq!(m.double_leader_active_us, 0);
    }

    #[test]
    fn first_leader_paused_before_it_reports_has_an_unknown_cause() {
        let mut events = start(2);
        events.extend([
            fault(1.0, Some(0), 0, "stop"),
            acquired(1.0, 0, "start"),
            fault(2.0, Some(0), 1, "cont"),
            trial_end(10.0),
        ]);
        let m = run(events);
        assert_eq!(m.first_leader_us, Some(s(1.0)));
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].cause, "unknown");
        assert_eq!(m.gaps[0].ended_by, Some(0));
        assert_eq!(m.gaps[0].duration_us(), s(1.0));
    }

    #[test]
    fn a_report_arriving_after_the_exit_does_not_revive_a_worker() {
        let mut events = killed_without_takeover();
        events.extend([
            exit(16.0, 1, Some("SIGKILL")),
            exit(16.0, 2, Some("SIGKILL")),
            // A report stamped after the observed death (it cannot happen
            // with one monotonic clock, but a history is data, not a proof).
            ev(16.5, 2, EventKind::Exiting),
        ]);
        assert!(!run(events).wedged);
        // A respawn does revive it.
        let mut events = killed_without_takeover();
        events.extend([exit(16.0, 2, Some("SIGKILL")), exit(16.0, 1, Some("SIGKILL")), ev(17.0, 2, EventKind::Spawn)]);
        assert!(run(events).wedged);
    }

    #[test]
    fn double_leaders_lost_at_one_instant_blame_the_last_processed() {
        let mut events = start(3);
        events.extend([
            acquired(1.0, 0, "start"),
            acquired(1.5, 1, "takeover"),
            fault(5.0, Some(0), 0, "kill"),
            exit(5.0, 0, Some("SIGKILL")),
            ev(5.0, 1, EventKind::SteppedDown),
            trial_end(10.0),
        ]);
        let m = run(events);
        assert_eq!(m.max_leaders, 2);
        assert_eq!(m.double_leader_us, s(3.5));
        assert_eq!(m.gaps.len(), 1);
        // Worker 1's step-down was processed last; the kill was not aimed at it.
        assert_eq!(m.gaps[0].cause, "stepped_down");
    }

    #[test]
    fn gap_is_ended_by_the_first_worker_that_stays_active() {
        let mut events = start(3);
        events.extend([
            acquired(1.0, 0, "start"),
            fault(2.0, Some(0), 0, "stop"),
            // At 4 s: worker 1 acquires and dies at once, worker 0 resumes,
            // worker 2 takes over.
            acquired(4.0, 1, "takeover"),
            exit(4.0, 1, Some("SIGKILL")),
            fault(4.0, Some(0), 1, "cont"),
            acquired(4.0, 2, "takeover"),
            trial_end(10.0),
        ]);
        let m = run(events);
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].end_us, s(4.0));
        assert_eq!(m.gaps[0].ended_by, Some(0));
        assert_eq!(m.double_leader_active_us, s(6.0));
    }

    #[test]
    fn decomposition_needs_expires_in_ms() {
        let mut events = start(2);
        events.extend([
            Event::new(s(0.5), Some(0), EventKind::Acquired),
            fault(2.0, Some(0), 0, "kill"),
            exit(2.0, 0, Some("SIGKILL")),
            acquired(12.0, 1, "takeover"),
            trial_end(30.0),
        ]);
        let gap = &run(events).gaps[0];
        assert_eq!(gap.cause, "kill");
        assert_eq!(gap.lease_remainder_us, None);
        assert_eq!(gap.detection_lag_us, None);
    }

    #[test]
    fn start_spread() {
        assert_eq!(run(vec![trial_end(1.0)]).start_spread_us, None);
        let one = vec![ev(0.001, 0, EventKind::Start), trial_end(1.0)];
        assert_eq!(run(one).start_spread_us, Some(0));
        let three = vec![
            ev(0.000_3, 2, EventKind::Start),
            ev(0.000_1, 0, EventKind::Start),
            ev(0.000_9, 1, EventKind::Start),
            trial_end(1.0),
        ];
        assert_eq!(run(three).start_spread_us, Some(800));
    }

    #[test]
    fn trial_end_defaults_to_the_last_event() {
        let mut events = blog_kill();
        events.retain(|e| e.kind != EventKind::TrialEnd);
        let m = run(events);
        assert_eq!(m.end_us, s(27.53));
        assert_eq!(run(Vec::new()).end_us, 0);
        assert_eq!(run(Vec::new()).outcome(), "no_leader");
    }
}
