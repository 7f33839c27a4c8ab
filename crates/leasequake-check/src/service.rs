//! The lease as the service held it (`substrate.observe`), beside what the
//! workers believed. The harness looked at the lease every
//! `OBSERVE_PERIOD_US` and recorded each change: `lease_held` (with the
//! grant, and its worker where the service names a process), `lease_free`,
//! `lease_unseen`. From those alone:
//!
//! * **grants**: how many times the service gave the lease (a renewal keeps
//!   its grant; a takeover is a new one), beside the acquisitions the
//!   workers reported: a program that renews inside its library and reports
//!   only `acquired` is measured all the same;
//! * **the service's longest gap**: the longest time it held no grant after
//!   its first;
//! * **unbacked beliefs**: stretches in which a worker believed it led while
//!   the service held the lease for another grant or for none, longer than
//!   a worker needs to learn of a loss (its renewal period) plus two looks.
//!   A paused holder is the classic one; a library whose renewal died
//!   silently is another: a program wrong about its own lease.
//!
//! A grant whose holder the service does not name belongs to the worker
//! whose `acquired` came first from the look before its sighting to its end
//! (the sighting trails the grant by up to the time between two looks); a
//! grant no `acquired` claims is *unclaimed*.

use leasequake_model::history::{Event, EventKind, Micros};
use leasequake_model::settings::OBSERVE_PERIOD_US;

use super::fold::Fold;
use super::spans::Span;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceView {
    /// The trial's lease was observed (any `lease_*` event).
    pub observed: bool,
    /// Grants the service gave, and acquisitions the workers reported.
    pub grants: usize,
    pub acquisitions: usize,
    /// Grants no worker's `acquired` claimed (and the service named none).
    pub unclaimed: usize,
    /// The longest time the service held no grant, after its first.
    pub free_max_us: Micros,
    /// Beliefs the service did not back, their total and longest time.
    pub unbacked: usize,
    pub unbacked_us: Micros,
    pub unbacked_max_us: Micros,
    /// Time the service could not be read.
    pub unseen_us: Micros,
}

impl std::ops::Add for ServiceView {
    type Output = ServiceView;

    fn add(self, o: ServiceView) -> ServiceView {
        ServiceView {
            observed: self.observed || o.observed,
            grants: self.grants + o.grants,
            acquisitions: self.acquisitions + o.acquisitions,
            unclaimed: self.unclaimed + o.unclaimed,
            free_max_us: self.free_max_us.max(o.free_max_us),
            unbacked: self.unbacked + o.unbacked,
            unbacked_us: self.unbacked_us + o.unbacked_us,
            unbacked_max_us: self.unbacked_max_us.max(o.unbacked_max_us),
            unseen_us: self.unseen_us + o.unseen_us,
        }
    }
}

/// What the service held from `start_us` to `end_us`.
#[derive(Clone, Debug, PartialEq)]
enum Held {
    Free,
    Unseen,
    /// A grant, and the worker it belongs to where known; `named`: the
    /// service named its holder (a process), worker or not.
    By {
        grant: String,
        worker: Option<usize>,
        named: bool,
    },
}

#[derive(Clone, Debug)]
struct Stretch {
    start_us: Micros,
    end_us: Micros,
    /// The change that began it came at most this long before.
    since_us: Micros,
    held: Held,
}

/// The service's sightings and the workers' acquisitions, as the events
/// come: the harness records a change of what the service holds, not
/// every look, so what this keeps grows with the grants, not the history.
#[derive(Default)]
pub(crate) struct Sightings {
    seen: Vec<(Micros, Micros, Held)>,
    acquired: Vec<(Micros, usize)>,
}

impl Fold for Sightings {
    type Out = Sightings;

    fn event(&mut self, e: &Event) {
        let held = match e.kind {
            EventKind::Acquired => {
                self.acquired.extend(e.worker.map(|w| (e.t_us, w)));
                return;
            }
            EventKind::LeaseFree => Held::Free,
            EventKind::LeaseUnseen => Held::Unseen,
            EventKind::LeaseHeld => {
                let named = e.detail.holder.is_some();
                Held::By { grant: e.detail.grant.clone().unwrap_or_default(), worker: e.worker, named }
            }
            _ => return,
        };
        let since_us = e.detail.since_us.map_or(OBSERVE_PERIOD_US, |s| s as Micros);
        self.seen.push((e.t_us, since_us, held));
    }

    fn finish(self, _end_us: Micros) -> Sightings {
        self
    }
}

/// The service's view of one trial. Pure: its sightings (up to the trial's
/// end at `end_us`), the workers' tenures, their renewal period.
pub(crate) fn service(sightings: Sightings, tenures: &[Span], renew_us: Micros, end_us: Micros) -> ServiceView {
    let Sightings { seen, acquired } = sightings;
    let stretches = stretches(seen, end_us);
    if stretches.is_empty() {
        return ServiceView::default();
    }
    let stretches = attribute(stretches, &acquired, tenures);
    let mut view = ServiceView { observed: true, acquisitions: acquired.len(), ..ServiceView::default() };
    // A grant given again after a free stretch is a new grant.
    let mut last_grant: Option<&str> = None;
    let mut granted = false;
    let mut free_since: Option<Micros> = None;
    for s in &stretches {
        match &s.held {
            Held::By { grant, worker, .. } => {
                if last_grant != Some(grant.as_str()) {
                    view.grants += 1;
                    view.unclaimed += usize::from(worker.is_none());
                }
                last_grant = Some(grant);
                granted = true;
                if let Some(since) = free_since.take() {
                    view.free_max_us = view.free_max_us.max(s.start_us - since);
                }
            }
            Held::Free => {
                last_grant = None;
                if granted && free_since.is_none() {
                    free_since = Some(s.start_us);
                }
            }
            Held::Unseen => view.unseen_us += s.end_us - s.start_us,
        }
    }
    if let Some(since) = free_since {
        view.free_max_us = view.free_max_us.max(end_us - since);
    }
    let tolerance = renew_us + 2 * OBSERVE_PERIOD_US;
    for t in tenures {
        for (start, end) in unbacked(t, &stretches) {
            if end - start > tolerance {
                view.unbacked += 1;
                view.unbacked_us += end - start;
                view.unbacked_max_us = view.unbacked_max_us.max(end - start);
            }
        }
    }
    view
}

/// The service's history as stretches from one sighting to the next; none
/// where nothing was observed. Before the first sighting, nothing is known.
fn stretches(seen: Vec<(Micros, Micros, Held)>, end_us: Micros) -> Vec<Stretch> {
    let ends: Vec<Micros> = seen.iter().skip(1).map(|(t, _, _)| *t).chain(std::iter::once(end_us)).collect();
    seen.into_iter()
        .zip(ends)
        .map(|((start_us, since_us, held), end_us)| Stretch { start_us, end_us: end_us.max(start_us), since_us, held })
        .collect()
}

/// Give each grant whose holder the service did not name the worker whose
/// `acquired` came first within it (from the look before its sighting: a
/// watch the machine kept waiting saw it late); failing that, the worker
/// already leading when it was first seen (a library that takes its lock on
/// a thread of its own shows it after saying it acquired). A grant seen in
/// several stretches (a look that failed between) is one grant: its first
/// stretch decides; given again after a free stretch, it is a new one.
fn attribute(mut stretches: Vec<Stretch>, acquired: &[(Micros, usize)], tenures: &[Span]) -> Vec<Stretch> {
    let mut owners: Vec<(String, Option<usize>)> = Vec::new();
    for s in &mut stretches {
        let (start_us, end_us) = (s.start_us - s.since_us, s.end_us);
        let seen_us = s.start_us;
        let (grant, worker, named) = match &mut s.held {
            Held::By { grant, worker, named } => (grant, worker, *named),
            Held::Free => {
                owners.clear();
                continue;
            }
            Held::Unseen => continue,
        };
        if let Some((_, known)) = owners.iter().find(|(g, _)| g == grant) {
            *worker = worker.or(*known);
            continue;
        }
        // A holder the service names that is no worker (a dead process a
        // stale marker names) is nobody's: the grant stays unclaimed.
        if worker.is_none() && !named {
            let leading =
                || tenures.iter().filter(|t| t.start_us <= seen_us && seen_us < t.end_us).max_by_key(|t| t.start_us);
            // In time order: the first at or after the start, if before the end.
            let first = acquired.get(acquired.partition_point(|(t, _)| *t < start_us));
            *worker = first.filter(|(t, _)| *t < end_us).map(|(_, w)| *w).or_else(|| leading().map(|t| t.worker));
        }
        owners.push((grant.clone(), *worker));
    }
    stretches
}

/// The stretches of tenure `t` in which the service held the lease for
/// another grant or for none (merged where they touch). A grant of unknown
/// holder (none named), or a look that failed, neither backs nor
/// contradicts a belief: it ends an unbacked stretch.
fn unbacked(t: &Span, stretches: &[Stretch]) -> Vec<(Micros, Micros)> {
    let mut out: Vec<(Micros, Micros)> = Vec::new();
    // Stretches follow one another: those that end after the tenure's
    // start, until one starts at its end.
    let first = stretches.partition_point(|s| s.end_us <= t.start_us);
    for s in stretches[first..].iter().take_while(|s| s.start_us < t.end_us) {
        let (start, end) = (s.start_us.max(t.start_us), s.end_us.min(t.end_us));
        if start >= end {
            continue;
        }
        let against = match &s.held {
            Held::Free => true,
            Held::By { worker: Some(w), .. } => *w != t.worker,
            // Held for a process that is no worker: against every belief.
            Held::By { worker: None, named, .. } => *named,
            _ => false,
        };
        if !against {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    fn view_of(events: &[Event], tenures: &[Span], renew_us: Micros, end_us: Micros) -> ServiceView {
        service(crate::fold::over(Sightings::default(), events), tenures, renew_us, end_us)
    }

    const MS: Micros = 1_000;

    fn held(t_ms: Micros, grant: &str, worker: Option<usize>) -> Event {
        let detail = Detail { grant: Some(grant.into()), ..Detail::default() };
        Event { t_us: t_ms * MS, worker, pid: None, kind: EventKind::LeaseHeld, detail }
    }

    fn free(t_ms: Micros) -> Event {
        Event::new(t_ms * MS, None, EventKind::LeaseFree)
    }

    fn acquired(t_ms: Micros, w: usize) -> Event {
        Event::new(t_ms * MS, Some(w), EventKind::Acquired)
    }

    fn tenure(worker: usize, from_ms: Micros, to_ms: Micros) -> Span {
        Span { worker, start_us: from_ms * MS, end_us: to_ms * MS }
    }

    fn sorted(mut events: Vec<Event>) -> Vec<Event> {
        events.sort_by_key(|e| e.t_us);
        events
    }

    #[test]
    fn nothing_observed_is_no_view() {
        let events = vec![acquired(10, 0)];
        assert_eq!(view_of(&events, &[tenure(0, 10, 100)], 30 * MS, 100 * MS), ServiceView::default());
    }

    #[test]
    fn a_kill_and_takeover_is_two_grants_each_claimed_and_a_free_stretch() {
        // Worker 0 holds key=a, is killed at 50; its lease expires at 90;
        // worker 1 acquires at 92 (seen at 91: the sighting leads by a look).
        let events = sorted(vec![
            free(0),
            held(9, "k=a", None),
            acquired(10, 0),
            free(90),
            held(91, "k=b", None),
            acquired(92, 1),
        ]);
        let view = view_of(&events, &[tenure(0, 10, 50), tenure(1, 92, 200)], 30 * MS, 200 * MS);
        assert_eq!((view.grants, view.acquisitions, view.unclaimed), (2, 2, 0));
        assert_eq!(view.free_max_us, MS);
        assert_eq!(view.unbacked, 0);
    }

    #[test]
    fn a_renewal_keeps_its_grant_and_a_grant_nobody_claims_is_unclaimed() {
        let events = sorted(vec![held(5, "k=a", None), free(20), held(30, "k=a", None), held(60, "k=c", None)]);
        let view = view_of(&events, &[], 30 * MS, 100 * MS);
        // k=a freed and given again is counted each time it is given.
        assert_eq!((view.grants, view.unclaimed), (3, 3));
        assert_eq!(view.free_max_us, 10 * MS);
    }

    #[test]
    fn a_belief_the_service_does_not_back_past_a_renewal_is_unbacked() {
        // Worker 0's library stops renewing: the key expires at 100, and
        // worker 1 holds it from 150, while worker 0 believes until 400.
        let events =
            sorted(vec![held(0, "k=a", None), acquired(1, 0), free(100), held(150, "k=b", None), acquired(151, 1)]);
        let tenures = [tenure(0, 1, 400), tenure(1, 151, 500)];
        let view = view_of(&events, &tenures, 30 * MS, 500 * MS);
        assert_eq!(view.unbacked, 1);
        assert_eq!(view.unbacked_max_us, 300 * MS);
        // Within a renewal period and two looks, a loss is not yet known.
        let short = [tenure(0, 1, 100 + 30 + 10), tenure(1, 151, 500)];
        assert_eq!(view_of(&events, &short, 30 * MS, 500 * MS).unbacked, 0);
    }

    #[test]
    fn a_holder_named_by_the_service_is_believed_over_the_first_acquired() {
        // Worker 2 holds the file (its pid in /proc/locks); worker 0 says
        // it acquired too: it believes without the service backing it.
        let events = sorted(vec![held(0, "leader.lock locked by 7", Some(2)), acquired(1, 0), acquired(2, 2)]);
        let view = view_of(&events, &[tenure(0, 1, 200), tenure(2, 2, 200)], 30 * MS, 200 * MS);
        assert_eq!((view.grants, view.unclaimed, view.unbacked), (1, 0, 1));
    }

    #[test]
    fn a_marker_naming_a_process_that_is_no_worker_is_unclaimed_and_its_leader_unbacked() {
        // Worker 0 holds the marker; at 100 it is rewritten to name a dead
        // process (a stale lock), which nobody claims; worker 0 believes on.
        let mut stale = held(100, "leader.lock of 999", None);
        stale.detail.holder = Some(999);
        let events = sorted(vec![held(0, "leader.lock of 7", Some(0)), acquired(1, 0), stale]);
        let view = view_of(&events, &[tenure(0, 1, 400)], 30 * MS, 400 * MS);
        assert_eq!((view.grants, view.acquisitions, view.unclaimed), (2, 1, 1));
        assert_eq!((view.unbacked, view.unbacked_max_us), (1, 300 * MS));
    }

    #[test]
    fn a_grant_given_again_after_a_free_stretch_belongs_to_its_new_holder() {
        // portalocker's RedisLock: the grant is a subscription to one
        // channel, the same name whoever holds it. Worker 0 dies at 50; worker
        // 1 subscribes on a thread of its own, seen after its `acquired`.
        let events = sorted(vec![
            held(0, "subscribed to k", None),
            acquired(1, 0),
            free(60),
            acquired(200, 1),
            held(230, "subscribed to k", None),
        ]);
        let view = view_of(&events, &[tenure(0, 1, 50), tenure(1, 200, 500)], 30 * MS, 500 * MS);
        assert_eq!((view.grants, view.unclaimed, view.unbacked), (2, 0, 0));
    }

    #[test]
    fn an_unseen_service_neither_backs_nor_contradicts() {
        let events = sorted(vec![
            held(0, "k=a", None),
            acquired(1, 0),
            Event::new(50 * MS, None, EventKind::LeaseUnseen),
            free(300),
        ]);
        let view = view_of(&events, &[tenure(0, 1, 310)], 30 * MS, 400 * MS);
        assert_eq!(view.unseen_us, 250 * MS);
        assert_eq!(view.unbacked, 0);
        assert_eq!(view.free_max_us, 100 * MS);
    }
}
