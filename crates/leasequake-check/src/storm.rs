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

use super::fold::Fold;
use super::latency::operation;
use super::params::CheckParams;
use super::samples::Samples;

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
    /// Each operation's `op_us`.
    pub op_us: Samples,
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
        self.op_us.percentile(0.5)
    }

    pub fn p99(&self) -> Option<f64> {
        self.op_us.percentile(0.99)
    }

    pub fn max(&self) -> Option<u64> {
        self.op_us.max()
    }
}

impl std::ops::Add for WindowOps {
    type Output = WindowOps;

    fn add(mut self, o: WindowOps) -> WindowOps {
        self.op_us.extend(&o.op_us);
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
/// The workers whose fault (one index of the schedule) was healed within a
/// lease of the first of them: one heal.
struct Heal {
    fault: Option<usize>,
    at_us: Micros,
    workers: Vec<usize>,
}

/// An operation, judged once its instant is over: a fault or heal recorded
/// at the same µs after it still counts.
struct Op {
    worker: Option<usize>,
    start_us: Micros,
    end_us: Micros,
    us: u64,
    failed: bool,
}

/// The storm, as the events come. It holds each worker's network faults and
/// the heals (a few per fault of the schedule), not the history.
pub(crate) struct StormFold {
    /// How long after a heal an operation belongs to its storm: a lease.
    window: Micros,
    /// Each worker's network faults, from the first action to its heal,
    /// in order; and the one still unhealed.
    faulted: Vec<Vec<(Micros, Micros)>>,
    since: Vec<Option<Micros>>,
    first_fault: Option<Micros>,
    first_leader: Option<Micros>,
    heals: Vec<Heal>,
    now_us: Micros,
    pending: Vec<Op>,
    out: Storm,
}

impl StormFold {
    pub fn new(params: &CheckParams) -> StormFold {
        StormFold {
            window: params.lease_us,
            faulted: Vec::new(),
            since: Vec::new(),
            first_fault: None,
            first_leader: None,
            heals: Vec::new(),
            now_us: 0,
            pending: Vec::new(),
            out: Storm::default(),
        }
    }

    fn fault(&mut self, e: &Event, action: Action, w: usize) {
        if w >= self.since.len() {
            self.since.resize(w + 1, None);
            self.faulted.resize_with(w + 1, Vec::new);
        }
        if action != Action::Heal {
            self.first_fault.get_or_insert(e.t_us);
            self.since[w].get_or_insert(e.t_us);
            return;
        }
        let Some(from) = self.since[w].take() else { return };
        self.faulted[w].push((from, e.t_us));
        let window = self.window;
        // Heals come in time order: one a lease old is no heal's company.
        let mut recent = self.heals.iter_mut().rev().take_while(|h| e.t_us < h.at_us + window);
        match recent.find(|h| h.fault == e.detail.fault) {
            Some(h) if !h.workers.contains(&w) => h.workers.push(w),
            _ => self.heals.push(Heal { fault: e.detail.fault, at_us: e.t_us, workers: vec![w] }),
        }
    }

    /// Whether `worker`'s link had no network fault from `start` to `end`.
    fn clean(&self, worker: Option<usize>, start: Micros, end: Micros) -> bool {
        let Some(w) = worker.filter(|w| *w < self.since.len()) else { return true };
        let done = &self.faulted[w];
        // Disjoint and in order: the first to end after `start` is the
        // only one that can have begun by `end`.
        let overlaps_done = done.get(done.partition_point(|&(_, b)| b <= start)).is_some_and(|&(a, _)| a <= end);
        !overlaps_done && self.since[w].is_none_or(|from| end < from)
    }

    /// The instant is over: judge its operations.
    fn settle(&mut self) {
        for op in std::mem::take(&mut self.pending) {
            if self.first_leader.is_some_and(|t| op.start_us >= t) && self.first_fault.is_none_or(|f| op.end_us < f) {
                self.out.baseline.op_us.push(op.us);
                self.out.baseline.failed += usize::from(op.failed);
            }
            // Heals are in time order; the latest by the operation's start
            // is the only one whose window can hold it.
            let by_start = self.heals.partition_point(|h| h.at_us <= op.start_us);
            let after_heal = by_start > 0 && op.start_us < self.heals[by_start - 1].at_us + self.window;
            if after_heal && self.clean(op.worker, op.start_us, op.end_us) {
                self.out.after_heal.op_us.push(op.us);
                self.out.after_heal.failed += usize::from(op.failed);
            }
        }
    }
}

impl Fold for StormFold {
    type Out = Option<Storm>;

    fn event(&mut self, e: &Event) {
        if e.t_us != self.now_us {
            self.settle();
            self.now_us = e.t_us;
        }
        if e.kind == EventKind::Acquired {
            self.first_leader.get_or_insert(e.t_us);
        }
        if let (Some(action), Some(w)) = (network_action(e), e.worker) {
            self.fault(e, action, w);
        }
        if let (Some(us), Some(_)) = (e.detail.op_us, operation(e.kind)) {
            let op = Op { worker: e.worker, start_us: e.t_us - us as Micros, end_us: e.t_us, us, failed: failed(e) };
            self.pending.push(op);
        }
    }

    /// None without a network fault.
    fn finish(mut self, _end_us: Micros) -> Option<Storm> {
        self.settle();
        self.first_fault?;
        Some(Storm { heals: self.heals.len(), ..self.out })
    }
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;
    use super::*;

    const LEASE: f64 = 9.0;

    /// A window's operation times, smallest first.
    fn ops(w: &WindowOps) -> Vec<u64> {
        w.op_us.values().collect()
    }

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
        assert_eq!(ops(&storm.after_heal), [50_000]);
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
        assert!(!ops(&storm.baseline).contains(&300_000));
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
        assert_eq!((ops(&storm.after_heal), storm.after_heal.failed), (vec![100_000, 200_000], 0));
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
        assert_eq!(ops(&storm.after_heal), [50_000, 100_000, 200_000, 300_000]);
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
        assert_eq!((storm.heals, ops(&storm.after_heal)), (2, vec![40_000, 60_000]));
    }

    #[test]
    fn trials_sum_by_their_samples() {
        let a = Storm {
            heals: 1,
            after_heal: WindowOps { op_us: [1, 2].into_iter().collect(), failed: 1 },
            ..Storm::default()
        };
        let b = Storm {
            heals: 2,
            after_heal: WindowOps { op_us: [3, 100].into_iter().collect(), failed: 0 },
            ..Storm::default()
        };
        let sum = a + b;
        assert_eq!((sum.heals, sum.after_heal.failed, sum.after_heal.count()), (3, 1, 4));
        assert_eq!((sum.after_heal.p50(), sum.after_heal.max()), (Some(2.5), Some(100)));
        assert_eq!((sum.baseline.p50(), sum.baseline.max()), (None, None));
    }
}
