//! Each worker's own events, in time order, gathered once per check: what
//! is asked of one worker (its grants, its requests, its ticks around a
//! gap) then costs that worker's events, not the whole history's. Asked
//! per worker, per gap and per grant, a scan of the history made a check
//! quadratic in the history's length.

use leasequake_model::history::{Event, Micros};

pub(crate) struct ByWorker<'a> {
    own: Vec<Vec<&'a Event>>,
}

impl<'a> ByWorker<'a> {
    /// `events` in time order, as a history holds them.
    pub fn new(events: &'a [Event]) -> ByWorker<'a> {
        let workers = events.iter().filter_map(|e| e.worker).max().map_or(0, |w| w + 1);
        let mut own: Vec<Vec<&'a Event>> = vec![Vec::new(); workers];
        for e in events {
            if let Some(w) = e.worker {
                own[w].push(e);
            }
        }
        ByWorker { own }
    }

    /// `worker`'s events (none for a worker no event names).
    pub fn of(&self, worker: usize) -> &[&'a Event] {
        self.own.get(worker).map_or(&[], Vec::as_slice)
    }
}

/// Of events in time order, those at or before `at_us`.
pub(crate) fn upto<'s, 'a>(events: &'s [&'a Event], at_us: Micros) -> &'s [&'a Event] {
    &events[..events.partition_point(|e| e.t_us <= at_us)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::EventKind;

    #[test]
    fn each_worker_keeps_its_events_in_order_up_to_a_moment() {
        let ev = |t: Micros, w: Option<usize>| Event::new(t, w, EventKind::HeldBy);
        let events = [ev(0, None), ev(1, Some(1)), ev(2, Some(0)), ev(2, Some(1)), ev(5, Some(1))];
        let by = ByWorker::new(&events);
        let times = |es: &[&Event]| es.iter().map(|e| e.t_us).collect::<Vec<_>>();
        assert_eq!(times(by.of(1)), [1, 2, 5]);
        assert!(by.of(7).is_empty(), "a worker no event names has none");
        assert_eq!(times(upto(by.of(1), 2)), [1, 2]);
    }
}
