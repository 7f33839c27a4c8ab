//! How long the substrate's operations took, as the workers timed them
//! (`op_us` on the event that reports each operation's outcome).

use super::fold::Fold;
use super::samples::Samples;
use leasequake_model::history::{Event, EventKind, Micros};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Acquire and takeover attempts, won or lost.
    pub acquire_us: Samples,
    pub renew_us: Samples,
    /// A watcher's look at the lease.
    pub observe_us: Samples,
}

/// The three substrate operations a worker times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    Renew,
    Observe,
}

/// The operation whose outcome an event of this kind reports, if any.
pub(crate) fn operation(kind: EventKind) -> Option<Op> {
    match kind {
        EventKind::Acquired | EventKind::NotAcquired | EventKind::TakeoverLost => Some(Op::Acquire),
        EventKind::Renewed | EventKind::RenewFailed | EventKind::SteppedDown => Some(Op::Renew),
        EventKind::HeldBy | EventKind::ExpiredSeen | EventKind::Unreadable => Some(Op::Observe),
        _ => None,
    }
}

impl Fold for Latency {
    type Out = Latency;

    fn event(&mut self, e: &Event) {
        let (Some(us), Some(op)) = (e.detail.op_us, operation(e.kind)) else { return };
        match op {
            Op::Acquire => self.acquire_us.push(us),
            Op::Renew => self.renew_us.push(us),
            Op::Observe => self.observe_us.push(us),
        }
    }

    fn finish(self, _end_us: Micros) -> Latency {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    #[test]
    fn each_operation_is_counted_once_by_its_outcome() {
        let ev = |kind, us| Event::new(0, Some(0), kind).with_detail(Detail { op_us: us, ..Detail::default() });
        let l = crate::fold::over(
            Latency::default(),
            &[
                ev(EventKind::Acquired, Some(120)),
                ev(EventKind::TakeoverLost, Some(80)),
                ev(EventKind::Renewed, Some(40)),
                ev(EventKind::SteppedDown, Some(45)),
                ev(EventKind::HeldBy, Some(30)),
                // A step-down without an operation (e.g. after failures) has none.
                ev(EventKind::SteppedDown, None),
                ev(EventKind::WriteAccepted, Some(999)),
            ],
        );
        let got = |s: &Samples| s.values().collect::<Vec<u64>>();
        assert_eq!((got(&l.acquire_us), got(&l.renew_us), got(&l.observe_us)), (vec![80, 120], vec![40, 45], vec![30]));
    }
}
