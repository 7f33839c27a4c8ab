//! The instrument's own error in a trial: how late each delivered fault
//! took effect (its `fault` event carries it), against the trial's budget,
//! so that a result taken on a machine too busy to place its faults says so
//! instead of silently blurring.

use super::fold::Fold;
use leasequake_model::history::{Event, EventKind, Micros};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Precision {
    /// The latest a delivered fault took effect after its moment, µs; None
    /// without a delivered fault (or in a history recorded before faults
    /// carried their error).
    pub fault_error_max_us: Option<Micros>,
    /// Faults further than the budget from their moment (none without a
    /// budget).
    pub faults_over_budget: usize,
    /// The budget it was judged by, µs (0: none).
    pub budget_us: Micros,
    /// Faults that could not be delivered (their `error`: no leader at that
    /// moment, a lock fault on a directory).
    pub undelivered: usize,
}

/// The faults' errors so far, against the trial's budget.
pub(crate) struct PrecisionFold(Precision);

impl PrecisionFold {
    pub fn new(budget_us: Micros) -> PrecisionFold {
        PrecisionFold(Precision { budget_us, ..Precision::default() })
    }
}

impl Fold for PrecisionFold {
    type Out = Precision;

    fn event(&mut self, e: &Event) {
        if e.kind != EventKind::Fault {
            return;
        }
        let p = &mut self.0;
        // The harness records an error only where lateness is its own: a
        // signal or lock fault, delivered or sent and not seen to act in time.
        if let Some(error) = e.detail.error_us {
            p.fault_error_max_us = p.fault_error_max_us.max(Some(error));
            if p.budget_us > 0 && error.abs() > p.budget_us {
                p.faults_over_budget += 1;
            }
        }
        if e.detail.error.is_some() {
            p.undelivered += 1;
        }
    }

    fn finish(self, _end_us: Micros) -> Precision {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind};

    fn fault(error_us: Option<i64>, undelivered: bool) -> Event {
        Event {
            t_us: 1000,
            worker: Some(0),
            pid: Some(1),
            kind: EventKind::Fault,
            detail: Detail {
                action: Some("kill".into()),
                error_us,
                error: undelivered.then(|| "no leader".to_string()),
                ..Detail::default()
            },
        }
    }

    #[test]
    fn delivered_faults_are_held_to_the_budget() {
        // Delivered late, never sent, and sent but not seen to act in time.
        let events = [fault(Some(120), false), fault(Some(4000), false), fault(None, true), fault(Some(9000), true)];
        let p = crate::fold::over(super::PrecisionFold::new(3000), &events);
        assert_eq!((p.fault_error_max_us, p.faults_over_budget), (Some(9000), 2));
        assert_eq!(
            crate::fold::over(super::PrecisionFold::new(0), &events).faults_over_budget,
            0,
            "no budget, nothing flagged"
        );
        assert_eq!(crate::fold::over(super::PrecisionFold::new(3000), &[]).fault_error_max_us, None);
    }
}
