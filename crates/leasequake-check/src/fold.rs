//! An analysis fed a trial's events one at a time, in time order, holding
//! only what it still needs (counts, the latest of something, what is
//! open), never the history: the form every analysis is moving to, so that
//! a history longer than memory can be checked as it is read (a soak).

use leasequake_model::history::{Event, Micros};

pub(crate) trait Fold {
    type Out;
    fn event(&mut self, e: &Event);
    /// The trial ended at `end_us` (known only once the history is read).
    fn finish(self, end_us: Micros) -> Self::Out;
}

/// A whole history through one fold.
#[cfg(test)]
pub(crate) fn over<F: Fold>(mut fold: F, events: &[Event]) -> F::Out {
    for e in events {
        fold.event(e);
    }
    fold.finish(events.last().map_or(0, |e| e.t_us))
}
