//! The renewal storm: how long the substrate's operations take right after
//! a heal, when every worker cut off from the server reconnects and retries
//! at once, beside how long they took in the steady state before the first
//! network fault.
//!
//! A heal is a delivered `fault` event whose action is `heal`: an explicit
//! `heal` in the schedule (its own fault index) and the end of a network
//! fault with a `duration` (the schedule orders a `heal` of the workers it
//! hit, under that fault's index) are recorded alike, once per worker. Only
//! the rows of links that had a network fault to end count: healing a clean
//! link reconnects nobody.
//!
//! An operation starts at its outcome's time minus its `op_us`. It is
//! judged by where it starts: one sent into a partition and answered after
//! the heal measures the partition, not the storm. And it counts only if
//! its own link was clean throughout: after a partial heal, the workers
//! still cut off hang until their timeout, which is the fault's latency
//! again.

use leasequake_model::faults::Action;
use leasequake_model::history::{Event, EventKind, Micros};

use super::latency::operation;
use super::params::CheckParams;
use super::stats::percentile;

/// Operation latencies right after heals and in the steady state before the
/// first network fault. Summed over trials, the samples are concatenated:
/// the percentiles of a suite come from all its operations, never from a sum
/// of each trial's percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Storm {
    /// Heals that ended a network fault on at least one link.
    pub heals: usize,
    /// Operations that started within a lease after a heal (each once, in
    /// however many windows it falls).
    pub after_heal: WindowOps,
    /// Operations from the first `acquired` until the first network fault.
    pub baseline: WindowOps,
}

/// The operations of one kind of window (of one trial, or of many summed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowOps {
    /// Each operation's `op_us`, in the order the history reported them.
    pub op_us: Vec<u64>,
    /// Of those, the operations that failed: a renewal that failed, an
    /// observation that could not read the lease (a lease found missing is
    /// a successful read), an acquire whose request failed (one that lost
    /// the race got its answer).
    pub failed: usize,
}

impl WindowOps {
    pub fn count(&self) -> usize {
        self.op_us.len()
    }

    /// Median `op_us`, interpolated; None for no operations.
    pub fn p50(&self) -> Option<f64> {
        self.percentile(0.5)
    }

    pub fn p99(&self) -> Option<f64> {
        self.percentile(0.99)
    }

    pub fn max(&self) -> Option<u64> {
        self.op_us.iter().copied().max()
    }

    fn percentile(&self, q: f64) -> Option<f64> {
        let mut sorted: Vec<f64> = self.op_us.iter().map(|&us| us as f64).collect();
        sorted.sort_unstable_by(f64::total_cmp);
        percentile(&sorted, q)
    }

    fn push(&mut self, e: &Event, us: u64) {
        self.op_us.push(us);
        self.failed += usize::from(failed(e));
    }
}

impl std::ops::Add for WindowOps {
    type Output = WindowOps;

    fn add(mut self, o: WindowOps) -> WindowOps {
        self.op_us.extend(o.op_us);
        self.failed += o.failed;
        self
    }
}

/// Trials summed: heals and failures added, samples concatenated.
impl std::ops::Add for Storm {
    type Output = Storm;

    fn add(self, o: Storm) -> Storm {
        Storm {
            heals: self.heals + o.heals,
            after_heal: self.after_heal + o.after_heal,
            baseline: self.baseline + o.baseline,
        }
    }
}

/// What the built-in worker reports as `unreadable` when the lease is simply
/// not there (`ReadError::Missing` in the child crate's substrate/lockfile.rs): the read
/// succeeded and found the lease free.
const NO_LEASE: &str = "no lease is held";

fn failed(e: &Event) -> bool {
    match e.kind {
        EventKind::RenewFailed => true,
        EventKind::Unreadable => !e.detail.error.as_deref().is_some_and(|s| s.starts_with(NO_LEASE)),
        EventKind::NotAcquired | EventKind::TakeoverLost => e.detail.error.is_some(),
        _ => false,
    }
}

/// The network action of a delivered `fault` event on a worker's link.
fn network_action(e: &Event) -> Option<Action> {
    if e.kind != EventKind::Fault || e.detail.error.is_some() || e.worker.is_none() {
        return None;
    }
    let name = e.detail.action.as_deref()?;
    [Action::Partition, Action::PartitionReplies, Action::Delay, Action::Reset, Action::Heal]
        .into_iter()
        .find(|a| a.name() == name)
}

/// One heal: the rows of one fault index, one per worker, from the first.
struct Heal {
    fault: Option<usize>,
    at_us: Micros,
    workers: Vec<usize>,
}

/// The renewal storm of one trial; None if no network fault was delivered.
pub(crate) fn storm(events: &[Event], params: &CheckParams) -> Option<Storm> {
    // A lease: after a heal every watcher observes within one watch
    // interval and the leader renews within one renew interval, and the
    // lease is longer than both (renew is held shorter at load; a watch as
    // long would let a lease expire unseen), so every worker's first
    // operations after the reconnect fall inside it, while a much longer
    // window would dilute the burst with the steady state that follows.
    let window = params.lease_us;
    let workers = events.iter().filter_map(|e| e.worker).max().map_or(0, |w| w + 1);
    // Per link, the intervals in which a network fault was on it: from a
    // delivery to the heal that ended every fault on the link.
    let mut faulted: Vec<Vec<(Micros, Micros)>> = vec![Vec::new(); workers];
    let mut since: Vec<Option<Micros>> = vec![None; workers];
    let mut first_fault: Option<Micros> = None;
    let mut heals: Vec<Heal> = Vec::new();
    for e in events {
        let (Some(action), Some(w)) = (network_action(e), e.worker) else { continue };
        if action != Action::Heal {
            first_fault.get_or_insert(e.t_us);
            since[w].get_or_insert(e.t_us);
            continue;
        }
        let Some(from) = since[w].take() else { continue };
        faulted[w].push((from, e.t_us));
        // The rows of one heal share its fault index and name each worker
        // once; a later firing of the same fault (`every`) heals the same
        // workers again and is a heal of its own.
        match heals.iter_mut().rev().find(|h| h.fault == e.detail.fault) {
            Some(h) if !h.workers.contains(&w) && e.t_us < h.at_us + window => h.workers.push(w),
            _ => heals.push(Heal { fault: e.detail.fault, at_us: e.t_us, workers: vec![w] }),
        }
    }
    let first_fault = first_fault?;
    for (w, from) in since.iter().enumerate() {
        if let Some(from) = from {
            faulted[w].push((*from, Micros::MAX));
        }
    }
    // The initial race is a burst of its own: the steady state begins with
    // the first leader.
    let first_leader = events.iter().find(|e| e.kind == EventKind::Acquired).map(|e| e.t_us);
    let clean = |w: Option<usize>, start: Micros, end: Micros| {
        w.is_none_or(|w| faulted[w].iter().all(|&(a, b)| end < a || start >= b))
    };

    let mut out = Storm { heals: heals.len(), ..Storm::default() };
    for e in events {
        let (Some(us), Some(_)) = (e.detail.op_us, operation(e.kind)) else { continue };
        let start = e.t_us - us as Micros;
        // Answered before the first fault too: one still waiting for its
        // reply when the link went bad would measure the fault.
        if first_leader.is_some_and(|t| start >= t) && e.t_us < first_fault {
            out.baseline.push(e, us);
        }
        if heals.iter().any(|h| h.at_us <= start && start < h.at_us + window) && clean(e.worker, start, e.t_us) {
            out.after_heal.push(e, us);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;
    use super::*;

    const LEASE: f64 = 9.0;

    fn s(x: f64) -> i64 {
        (x * 1e6).round() as i64
    }

    fn params() -> CheckParams {
        crate::params::server_lease(s(LEASE), s(3.0), s(3.0))
    }

    /// An operation of worker `w` answered at `t` after `ms`.
    fn op(t: f64, w: usize, kind: EventKind, ms: u64) -> Event {
        Event::new(s(t), Some(w), kind).with_detail(Detail { op_us: Some(ms * 1000), ..Detail::default() })
    }

    fn failed_op(t: f64, w: usize, kind: EventKind, ms: u64, error: &str) -> Event {
        let mut e = op(t, w, kind, ms);
        e.detail.error = Some(error.into());
        e
    }

    fn fault(t: f64, w: usize, index: usize, action: &str) -> Event {
        Event::new(s(t), Some(w), EventKind::Fault).with_detail(Detail {
            fault: Some(index),
            action: Some(action.into()),
            ..Detail::default()
        })
    }

    /// Worker 0 leads from 0 and renews every 3 s in 2 ms; workers 1 and 2
    /// watch every 3 s in 1 ms; worker 1 and 2 are partitioned at 10 s
    /// (fault 0) and healed at 20 s, one link a few µs after the other.
    fn steady_then_partition() -> Vec<Event> {
        use EventKind::*;
        let mut v = vec![Event::new(0, None, Barrier), op(0.005, 0, Acquired, 5), op(0.005, 1, NotAcquired, 5)];
        for t in [3.0, 6.0, 9.0] {
            v.extend([op(t, 0, Renewed, 2), op(t + 0.5, 1, HeldBy, 1), op(t + 0.5, 2, HeldBy, 1)]);
        }
        v.extend([fault(10.0, 1, 0, "partition"), fault(10.0, 2, 0, "partition")]);
        v.extend([fault(20.0, 1, 0, "heal"), fault(20.000_01, 2, 0, "heal")]);
        v
    }

    fn run(mut events: Vec<Event>, end: f64) -> Option<Storm> {
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        check(&History::new(events), &params()).network.storm
    }

    #[test]
    fn slow_operations_after_a_heal_are_the_storm_beside_the_steady_state() {
        use EventKind::*;
        let mut v = steady_then_partition();
        v.extend([
            op(20.3, 1, HeldBy, 300),
            failed_op(20.6, 2, Unreadable, 500, "timed out"),
            op(21.0, 0, Renewed, 100),
            op(24.0, 0, Renewed, 20),
            op(23.5, 1, HeldBy, 10),
            // A watcher that found the lease gone: a read that succeeded.
            failed_op(23.5, 2, Unreadable, 10, "no lease is held (no lock file, key or row)"),
        ]);
        let storm = run(v, 40.0).unwrap();
        assert_eq!(storm.heals, 1, "the two links' rows are one heal");
        let a = &storm.after_heal;
        assert_eq!((a.count(), a.failed, a.max()), (6, 1, Some(500_000)));
        // Sorted: 10, 10, 20, 100, 300, 500 ms.
        assert_eq!(a.p50(), Some(60_000.0));
        assert!(a.p99().is_some_and(|p| (p - 490_000.0).abs() < 1e-6), "{:?}", a.p99());
        // The baseline: three renewals of 2 ms, six observations of 1 ms,
        // from the first leader on; the initial race is left out.
        let b = &storm.baseline;
        assert_eq!((b.count(), b.failed, b.p50(), b.max()), (9, 0, Some(1000.0), Some(2000)));
    }

    #[test]
    fn operations_outside_the_window_or_started_before_the_heal_are_not_the_storm() {
        use EventKind::*;
        let mut v = steady_then_partition();
        v.extend([
            // Sent into the partition at 19.5, answered after the heal.
            op(20.5, 1, HeldBy, 1000),
            // Inside the window.
            op(28.9, 0, Renewed, 50),
            // A lease after the heal and later: the steady state again.
            op(29.001, 0, Renewed, 1),
            op(32.0, 0, Renewed, 2),
        ]);
        let storm = run(v, 40.0).unwrap();
        assert_eq!(storm.after_heal.op_us, vec![50_000]);
        // The baseline ends at the first fault.
        assert_eq!(storm.baseline.count(), 9);
    }

    #[test]
    fn a_baseline_operation_must_be_answered_before_the_first_fault() {
        use EventKind::*;
        let mut v = steady_then_partition();
        v.push(op(10.2, 0, Renewed, 300));
        let storm = run(v, 40.0).unwrap();
        assert_eq!(storm.baseline.count(), 9);
        assert!(!storm.baseline.op_us.contains(&300_000));
    }

    #[test]
    fn no_network_fault_no_storm() {
        use EventKind::*;
        let v = vec![
            Event::new(0, None, Barrier),
            op(0.005, 0, Acquired, 5),
            op(3.0, 0, Renewed, 2),
            fault(4.0, 0, 0, "kill"),
            // A heal of a link nothing was on is no network fault either.
            fault(5.0, 1, 1, "heal"),
        ];
        assert_eq!(run(v, 10.0), None);
        // A network fault that could not be delivered changed nothing.
        let mut undelivered = fault(5.0, 1, 1, "partition");
        undelivered.detail.error = Some("no proxy between this worker and its server".into());
        assert_eq!(run(vec![op(0.005, 0, Acquired, 5), undelivered], 10.0), None);
    }

    #[test]
    fn a_network_fault_never_healed_has_a_baseline_and_no_storm_window() {
        use EventKind::*;
        let mut v = steady_then_partition();
        v.retain(|e| e.detail.action.as_deref() != Some("heal"));
        v.push(op(12.0, 0, Renewed, 40));
        let storm = run(v, 40.0).unwrap();
        assert_eq!((storm.heals, storm.after_heal.count(), storm.baseline.count()), (0, 0, 9));
    }

    #[test]
    fn a_link_still_faulted_after_a_partial_heal_is_not_the_storm() {
        use EventKind::*;
        let mut v = steady_then_partition();
        // Only worker 1's link is healed at 20; worker 2's hangs until 30.
        v.retain(|e| !(e.worker == Some(2) && e.detail.action.as_deref() == Some("heal")));
        v.extend([
            op(20.1, 1, HeldBy, 100),
            failed_op(22.0, 2, Unreadable, 2000, "timed out"),
            fault(30.0, 2, 1, "heal"),
            op(30.2, 2, HeldBy, 200),
        ]);
        let storm = run(v, 40.0).unwrap();
        assert_eq!(storm.heals, 2);
        assert_eq!((storm.after_heal.op_us.clone(), storm.after_heal.failed), (vec![100_000, 200_000], 0));
    }

    #[test]
    fn two_heals_are_two_windows_and_an_operation_in_both_counts_once() {
        use EventKind::*;
        let mut v = steady_then_partition();
        v.extend([
            op(20.2, 1, HeldBy, 200),
            // The same fault again (`every`): worker 1 partitioned and
            // healed under the same index, its window overlapping the first.
            fault(25.0, 1, 0, "partition"),
            fault(26.0, 1, 0, "heal"),
            // In both windows: once.
            op(26.4, 0, Renewed, 100),
            op(26.3, 1, HeldBy, 300),
            // After the first window, inside the second.
            op(33.0, 0, Renewed, 50),
            // After both.
            op(36.0, 0, Renewed, 2),
        ]);
        let storm = run(v, 40.0).unwrap();
        assert_eq!(storm.heals, 2);
        assert_eq!(storm.after_heal.op_us, vec![200_000, 300_000, 100_000, 50_000]);
    }

    #[test]
    fn a_timed_fault_and_an_explicit_heal_are_heals_alike() {
        use EventKind::*;
        // Fault 0 on worker 1 ends by its duration (a heal under index 0);
        // fault 1 on worker 2 by an explicit heal (index 2).
        let v = vec![
            op(0.005, 0, Acquired, 5),
            fault(5.0, 1, 0, "partition-replies"),
            fault(6.0, 2, 1, "delay"),
            fault(8.0, 1, 0, "heal"),
            op(8.1, 1, HeldBy, 40),
            fault(30.0, 2, 2, "heal"),
            op(30.1, 2, HeldBy, 60),
        ];
        let storm = run(v, 40.0).unwrap();
        assert_eq!((storm.heals, storm.after_heal.op_us.clone()), (2, vec![40_000, 60_000]));
    }

    #[test]
    fn trials_sum_by_their_samples() {
        let a = Storm { heals: 1, after_heal: WindowOps { op_us: vec![1, 2], failed: 1 }, ..Storm::default() };
        let b = Storm { heals: 2, after_heal: WindowOps { op_us: vec![3, 100], failed: 0 }, ..Storm::default() };
        let sum = a + b;
        assert_eq!((sum.heals, sum.after_heal.failed, sum.after_heal.count()), (3, 1, 4));
        assert_eq!((sum.after_heal.p50(), sum.after_heal.max()), (Some(2.5), Some(100)));
        assert_eq!((sum.baseline.p50(), sum.baseline.max()), (None, None));
    }
}
