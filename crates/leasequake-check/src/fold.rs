//! An analysis fed a trial's events one at a time, in time order, holding
//! only what it still needs (counts, the latest of something, what is
//! open), never the history: the form every analysis is moving to, so that
//! a history longer than memory can be checked as it is read (a soak).

use leasequake_model::history::Event;

pub(crate) trait Fold {
    type Out;
    fn event(&mut self, e: &Event);
    fn finish(self) -> Self::Out;
}

/// A whole history through one fold.
#[cfg(test)]
pub(crate) fn over<F: Fold>(mut fold: F, events: &[Event]) -> F::Out {
    for e in events {
        fold.event(e);
    }
    fold.finish()
}
