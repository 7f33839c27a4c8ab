//! What push watches did (`watch_by: push`), from the history: how many
//! takeovers a push set off, and how often a subscription failed.

use super::fold::Fold;
use leasequake_model::history::{Event, EventKind, Micros};

/// Push watches over one trial, or summed over several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pushes {
    /// Takeovers: a watcher's acquire of a lease another held.
    pub takeovers: usize,
    /// Of those, the ones a push set off: the worker's event just before
    /// its `acquired` is a `notified` that says the lease is gone.
    pub told: usize,
    /// `notified` events with an error: a subscription that could not be
    /// made, or that broke (the watcher polls until it is made again).
    pub failed: usize,
}

impl std::ops::Add for Pushes {
    type Output = Pushes;
    fn add(self, o: Pushes) -> Pushes {
        Pushes { takeovers: self.takeovers + o.takeovers, told: self.told + o.told, failed: self.failed + o.failed }
    }
}

/// The pushes so far, and whether each worker's previous reported event
/// was a `notified` saying the lease is gone.
#[derive(Default)]
pub(crate) struct PushesFold {
    out: Pushes,
    told_last: std::collections::HashMap<usize, bool>,
}

impl Fold for PushesFold {
    type Out = Pushes;

    fn event(&mut self, e: &Event) {
        let Some(w) = e.worker else { return };
        if !e.kind.is_worker_event() {
            return;
        }
        let out = &mut self.out;
        if e.kind == EventKind::Notified && e.detail.error.is_some() {
            out.failed += 1;
        }
        if e.kind == EventKind::Acquired && matches!(e.detail.how.as_deref(), Some("takeover" | "retry")) {
            out.takeovers += 1;
            if self.told_last.get(&w).copied().unwrap_or(false) {
                out.told += 1;
            }
        }
        self.told_last.insert(w, e.kind == EventKind::Notified && e.detail.error.is_none());
    }

    fn finish(self, _end_us: Micros) -> Pushes {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    fn ev(t: i64, w: usize, kind: EventKind, detail: Detail) -> Event {
        Event::new(t, Some(w), kind).with_detail(detail)
    }

    fn how(h: &str) -> Detail {
        Detail { how: Some(h.into()), ..Detail::default() }
    }

    #[test]
    fn a_takeover_right_after_a_push_is_told_one_after_a_tick_is_not() {
        let told = Detail { reason: Some("delete".into()), ..Detail::default() };
        let broke = Detail { error: Some("closed".into()), ..Detail::default() };
        let events = [
            ev(0, 0, EventKind::Acquired, how("start")),
            ev(1, 1, EventKind::Notified, told.clone()),
            ev(2, 1, EventKind::Acquired, how("takeover")),
            ev(3, 2, EventKind::Notified, broke),
            ev(4, 2, EventKind::ExpiredSeen, Detail::default()),
            ev(5, 2, EventKind::Acquired, how("takeover")),
            // Told, but another event came between: a tick found it.
            ev(6, 0, EventKind::Notified, told),
            ev(7, 0, EventKind::HeldBy, Detail::default()),
            ev(8, 0, EventKind::Acquired, how("retry")),
        ];
        assert_eq!(crate::fold::over(PushesFold::default(), &events), Pushes { takeovers: 3, told: 1, failed: 1 });
    }
}
