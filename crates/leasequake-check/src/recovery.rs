//! Recovery after a heal: how long after the last network fault was healed
//! the system was back to one leader and one grant, for good. Until then
//! it is in one of the states a split leaves behind: two believers, two
//! grants at once, or nobody leading.

use leasequake_model::history::{Event, EventKind, Micros};

use super::fold::Fold;
use super::spans::Spans;

/// The last heal of a network fault, as the events come.
#[derive(Default)]
pub(crate) struct LastHeal(Option<Micros>);

impl Fold for LastHeal {
    type Out = Option<Micros>;

    fn event(&mut self, e: &Event) {
        if e.kind == EventKind::Fault && e.detail.action.as_deref() == Some("heal") {
            self.0 = self.0.max(Some(e.t_us));
        }
    }

    fn finish(self, _end_us: Micros) -> Option<Micros> {
        self.0
    }
}

/// From the last heal (`last_heal`) to the start of the final stretch, up to the trial's
/// end, with exactly one believer and no double grant: `Some(0)` if it
/// was so at the heal, `None` without a heal or if it never was again.
pub(crate) fn recovery(
    last_heal: Option<Micros>,
    spans: &Spans,
    double_grants: &[(Micros, Micros)],
    end_us: Micros,
) -> Option<Micros> {
    let heal = last_heal?;
    let inside = |t: Micros, v: &[(Micros, Micros)]| v.iter().any(|&(a, b)| a <= t && t < b);
    let tenures: Vec<(Micros, Micros)> = spans.tenures.iter().map(|s| (s.start_us, s.end_us)).collect();
    let good = |t: Micros| !inside(t, &spans.double_leader) && !inside(t, double_grants) && inside(t, &tenures);
    // The state changes only at these moments.
    let mut cuts: Vec<Micros> = spans
        .tenures
        .iter()
        .flat_map(|s| [s.start_us, s.end_us])
        .chain(spans.double_leader.iter().flat_map(|&(a, b)| [a, b]))
        .chain(double_grants.iter().flat_map(|&(a, b)| [a, b]))
        .filter(|t| *t > heal && *t < end_us)
        .collect();
    cuts.push(heal);
    cuts.sort_unstable();
    cuts.dedup();
    let mut since = None;
    for &t in &cuts {
        match (good(t), since) {
            (true, None) => since = Some(t),
            (false, _) => since = None,
            _ => {}
        }
    }
    since.map(|t| t - heal)
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind};

    use super::*;
    use crate::fold::over;
    use crate::spans::Span;
    use crate::testkit::s;

    fn heal(t: f64) -> Event {
        Event::new(s(t), None, EventKind::Fault)
            .with_detail(Detail { action: Some("heal".into()), ..Detail::default() })
    }

    fn tenure(worker: usize, a: f64, b: f64) -> Span {
        Span { worker, start_us: s(a), end_us: s(b) }
    }

    #[test]
    fn the_last_heal_is_remembered() {
        let other = Event::new(s(50.0), None, EventKind::Fault)
            .with_detail(Detail { action: Some("partition".into()), ..Detail::default() });
        assert_eq!(over(LastHeal::default(), &[heal(20.0), heal(32.0), other]), Some(s(32.0)));
        assert_eq!(over(LastHeal::default(), &[]), None);
    }

    #[test]
    fn recovered_when_the_stale_holder_steps_down_for_good() {
        // Worker 0 believed from 0 to 40, worker 1 from 20 on: two
        // believers and two grants until 40; healed at 32.
        let spans = Spans {
            tenures: vec![tenure(0, 0.0, 40.0), tenure(1, 20.0, 60.0)],
            pauses: Vec::new(),
            double_leader: vec![(s(20.0), s(40.0))],
        };
        let got = recovery(Some(s(32.0)), &spans, &[(s(20.0), s(41.0))], s(60.0));
        assert_eq!(got, Some(s(41.0 - 32.0)), "the double grant outlasted the believer by a second");
        assert_eq!(recovery(None, &spans, &[], s(60.0)), None, "no heal, nothing to recover from");
    }

    #[test]
    fn nobody_leading_is_not_recovered_and_one_leader_at_the_heal_is_zero() {
        let gap = Spans { tenures: vec![tenure(0, 0.0, 10.0), tenure(1, 50.0, 60.0)], ..Spans::default() };
        assert_eq!(recovery(Some(s(30.0)), &gap, &[], s(60.0)), Some(s(20.0)));
        let fine = Spans { tenures: vec![tenure(0, 0.0, 60.0)], ..Spans::default() };
        assert_eq!(recovery(Some(s(30.0)), &fine, &[], s(60.0)), Some(0));
        let never = Spans { tenures: vec![tenure(0, 0.0, 10.0)], ..Spans::default() };
        assert_eq!(recovery(Some(s(30.0)), &never, &[], s(60.0)), None);
    }
}
