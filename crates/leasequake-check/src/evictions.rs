//! False evictions: a leader that was only paused (a GC stall, a slow disk),
//! lost its lease while it could not renew, and came back still believing
//! it leads next to the worker that took over. The other side of the
//! lease-length dial from the failover gap.

use super::metrics::{Evictions, PauseOutcome};
use super::spans::Span;
use leasequake_model::history::Micros;

/// Tenures that went on after another worker was granted the lease, as the
/// sweep starts and ends them: each open tenure keeps the first start of
/// another's after its own.
#[derive(Debug, Default)]
pub(crate) struct StaleBelief {
    open: Vec<(usize, Micros, Option<Micros>)>,
    believers: usize,
    belief_us: Micros,
    belief_max_us: Micros,
}

impl StaleBelief {
    pub fn tenure_started(&mut self, w: usize, at_us: Micros) {
        for (o, start, taken) in &mut self.open {
            if *o != w && *start < at_us && taken.is_none() {
                *taken = Some(at_us);
            }
        }
        self.open.push((w, at_us, None));
    }

    pub fn tenure_ended(&mut self, t: &Span) {
        let Some(i) = self.open.iter().position(|(w, start, _)| *w == t.worker && *start == t.start_us) else { return };
        let (_, _, taken) = self.open.swap_remove(i);
        if let Some(taken) = taken.filter(|&taken| taken < t.end_us) {
            let belief = t.end_us - taken;
            self.believers += 1;
            self.belief_us += belief;
            self.belief_max_us = self.belief_max_us.max(belief);
        }
    }
}

/// The trial's leader pauses, measured beside predicted, and its stale
/// believers.
pub(crate) fn evictions(pauses: Vec<PauseOutcome>, stale: StaleBelief) -> Evictions {
    let mut out = Evictions {
        stale_believers: stale.believers,
        stale_belief_us: stale.belief_us,
        stale_belief_max_us: stale.belief_max_us,
        ..Evictions::default()
    };
    for outcome in pauses {
        out.leader_pauses += 1;
        out.false_evictions += usize::from(outcome.evicted);
        out.predicted += usize::from(outcome.predicted == Some(true));
        out.unpredicted += usize::from(outcome.predicted.is_none());
        out.anomalies += usize::from(outcome.anomaly());
        out.pauses.push(outcome);
    }
    out
}
#[cfg(test)]
mod tests {
    use super::super::intervals::check;
    use leasequake_model::history::{Detail, Event, EventKind, History};

    fn s(x: f64) -> i64 {
        (x * 1e6).round() as i64
    }

    fn ev(t: f64, w: usize, kind: EventKind) -> Event {
        Event::new(s(t), Some(w), kind)
    }

    fn lease(t: f64, w: usize, kind: EventKind) -> Event {
        ev(t, w, kind).with_detail(Detail { expires_in_ms: Some(9000.0), ..Detail::default() })
    }

    fn fault(t: f64, w: usize, action: &str) -> Event {
        ev(t, w, EventKind::Fault).with_detail(Detail {
            fault: Some(0),
            action: Some(action.into()),
            ..Detail::default()
        })
    }

    fn run(pause_len: f64) -> super::Evictions {
        run_then(pause_len, None)
    }

    /// The paused leader resumes and, if `steps_down_at`, learns at its next
    /// renewal that the lease is gone.
    fn run_then(pause_len: f64, steps_down_at: Option<f64>) -> super::Evictions {
        let mut events = vec![
            Event::new(0, None, EventKind::Barrier),
            ev(0.0, 0, EventKind::Spawn),
            ev(0.0, 1, EventKind::Spawn),
            lease(0.1, 0, EventKind::Acquired),
            lease(9.1, 0, EventKind::Renewed),
            fault(10.0, 0, "stop"),
            fault(10.0 + pause_len, 0, "cont"),
        ];
        // Expiry 18.1 s; the watcher takes over at its next tick, 21 s.
        if 10.0 + pause_len > 21.0 {
            events.push(lease(21.0, 1, EventKind::Acquired));
        }
        if let Some(t) = steps_down_at {
            events.push(ev(t, 0, EventKind::SteppedDown));
        }
        events.push(Event::new(s(30.0), None, EventKind::TrialEnd));
        let params = crate::testkit::BLOG;
        check(&History::new(events), &params).evictions
    }

    #[test]
    fn a_short_pause_is_survived_and_a_long_one_evicts() {
        // Without watcher ticks or lease_until the theory has nothing to
        // place the takeover with (theory.rs tests the predictions).
        let short = run(2.0);
        assert_eq!((short.leader_pauses, short.false_evictions, short.unpredicted), (1, 0, 1));
        let long = run(15.0);
        assert_eq!((long.leader_pauses, long.false_evictions, long.anomalies), (1, 1, 0));
        // Longer than the remainder but resumed before anyone took over.
        let close = run(9.0);
        assert_eq!((close.leader_pauses, close.false_evictions), (1, 0));
    }

    #[test]
    fn a_stale_holder_believes_from_the_newer_grant_until_it_steps_down() {
        // Taken over at 21 s; resumes at 25 s, steps down at its renewal 25.1 s.
        let e = run_then(15.0, Some(25.1));
        assert_eq!((e.stale_believers, e.stale_belief_us, e.stale_belief_max_us), (1, s(4.1), s(4.1)));
        // Never told: it believes until the trial's end (30 s).
        assert_eq!(run(15.0).stale_belief_us, s(9.0));
        // Not taken over: no stale belief.
        assert_eq!(run(2.0).stale_believers, 0);
    }
}
