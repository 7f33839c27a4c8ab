//! Whether the machine disturbed a trial: a trial whose timing the machine
//! moved further than the experiment allows measures the machine, not the
//! system, and is named as disturbed, with its cause in words, so that no
//! headline rests on it unawares.
//!
//! Everything comes from the history: the workers' operation times, the
//! start spread, the faults' own errors and the machine's counters read at
//! the barrier and the trial's end. What a fault does is the experiment,
//! not a disturbance: an operation that overlaps a fault aimed at its
//! worker, its link or its server (or a failpoint of its own) is left out.

use leasequake_model::history::{Event, EventKind, Micros};

use super::by_worker::{ByWorker, upto};
use super::latency::{Op, operation};
use super::params::CheckParams;
use super::precision::Precision;

/// Steal above this share of the trial (summed over CPUs) disturbs it: the
/// hypervisor ran something else instead of this machine, well beyond the
/// few percent a shared host's background takes.
pub const STEAL_SHARE: f64 = 0.10;
/// ... and above this much: steal is counted in clock ticks, so a trial of a
/// few milliseconds (a one-shot race) would be "disturbed" by one tick.
pub const STEAL_MIN_US: Micros = 100_000;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Disturbance {
    /// The budget it was judged by, µs (0: not judged).
    pub budget_us: Micros,
    /// The longest an operation outside every fault took beyond its
    /// kind's median in the trial, µs (None: no operation timed).
    pub op_stall_max_us: Option<Micros>,
    /// The machine's CPU pressure and steal during the trial, µs (None:
    /// not recorded, or a kernel without them).
    pub cpu_pressure_us: Option<Micros>,
    pub steal_us: Option<Micros>,
    /// Why the trial is disturbed, in words, the operations first; empty:
    /// undisturbed.
    pub causes: Vec<String>,
}

impl Disturbance {
    pub fn disturbed(&self) -> bool {
        !self.causes.is_empty()
    }

    /// The causes as one cell (empty when undisturbed).
    pub fn text(&self) -> String {
        self.causes.join("; ")
    }
}

/// A stretch of the trial in which a fault acts on one worker (or, with
/// none, on every worker: the server, the lock, a member of the service).
struct Window {
    worker: Option<usize>,
    from_us: Micros,
    to_us: Micros,
}

/// Fault actions that act until a later fault event ends them.
fn closer(action: &str) -> Option<&'static str> {
    match action {
        "stop" => Some("cont"),
        "partition" | "partition-replies" | "delay" | "reset" => Some("heal"),
        "server-stop" => Some("server-cont"),
        _ => None,
    }
}

/// Fault actions on the lease's server or the network to it, not on a
/// worker or the lock file: the system may take its time after them.
fn on_the_system(action: &str) -> bool {
    action.starts_with("server-") || matches!(action, "partition" | "partition-replies" | "delay" | "reset")
}

/// Where faults act. A fault with an end acts until it; one without (a
/// kill, a restart, a clock jump, a lock-file fault, a failpoint) acts on
/// what follows for one renew interval: reconnects and retries are its
/// doing, not the machine's.
fn windows(events: &[Event], params: &CheckParams, end_us: Micros) -> Vec<Window> {
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let after = params.renew_us.max(1);
        if e.kind == EventKind::Failpoint {
            out.push(Window { worker: e.worker, from_us: e.t_us, to_us: e.t_us + after });
            continue;
        }
        // A fault that never reached its target changed nothing.
        if e.kind != EventKind::Fault || (e.detail.error.is_some() && e.detail.error_us.is_none()) {
            continue;
        }
        let Some(action) = e.detail.action.as_deref() else { continue };
        if matches!(action, "cont" | "heal" | "server-cont") {
            continue;
        }
        let to_us = match closer(action) {
            Some(end) => events[i + 1..]
                .iter()
                .find(|c| c.kind == EventKind::Fault && c.worker == e.worker && c.detail.action.as_deref() == Some(end))
                .map_or(end_us, |c| c.t_us),
            None => e.t_us + after,
        };
        out.push(Window { worker: e.worker, from_us: e.t_us, to_us });
    }
    let recoveries = recoveries(events, &out);
    out.extend(recoveries);
    out
}

/// After a fault ends, each worker it touched comes back with one
/// operation that succeeds: a new connection (a server forks a backend for
/// it), the first request on a link that was cut, a retry. That operation
/// is the fault's doing too, however long after the end it starts.
fn recoveries(events: &[Event], windows: &[Window]) -> Vec<Window> {
    // Each worker's successful operations' ends, in time order (the
    // history is), so that each window finds its worker's next one by a
    // binary search, not a scan of the trial per window and worker.
    let mut ok: std::collections::BTreeMap<usize, Vec<Micros>> = std::collections::BTreeMap::new();
    for e in events {
        if let Some(w) = e.worker {
            let done = e.detail.op_us.is_some() && operation(e.kind).is_some() && e.detail.error.is_none();
            let ends = ok.entry(w).or_default();
            if done {
                ends.push(e.t_us);
            }
        }
    }
    let mut out = Vec::new();
    for w in windows {
        for (&worker, ends) in ok.iter().filter(|(x, _)| w.worker.is_none_or(|y| y == **x)) {
            if let Some(&back) = ends.get(ends.partition_point(|&t| t <= w.to_us)) {
                out.push(Window { worker: Some(worker), from_us: w.to_us, to_us: back });
            }
        }
    }
    out
}

/// Does a stretch of `worker`'s time overlap a fault acting on it?
/// A window on every worker acts on it too. Asked of every operation of a
/// trial, so answered by binary search: the windows by start, each with
/// the latest end among it and those before it.
struct Faults {
    every: Starts,
    workers: Vec<Starts>,
}

#[derive(Default)]
struct Starts {
    from: Vec<Micros>,
    latest_to: Vec<Micros>,
}

impl Starts {
    fn new(mut windows: Vec<(Micros, Micros)>) -> Starts {
        windows.sort_unstable();
        let from = windows.iter().map(|w| w.0).collect();
        let latest_to = windows
            .iter()
            .scan(Micros::MIN, |latest, w| {
                *latest = (*latest).max(w.1);
                Some(*latest)
            })
            .collect();
        Starts { from, latest_to }
    }

    /// Does a window overlap [from, to]: one starting by `to` that ends at
    /// `from` or later?
    fn hit(&self, from: Micros, to: Micros) -> bool {
        let begun = self.from.partition_point(|&f| f <= to);
        begun > 0 && self.latest_to[begun - 1] >= from
    }
}

impl Faults {
    fn new(windows: &[Window]) -> Faults {
        let mut every: Vec<(Micros, Micros)> = Vec::new();
        let mut workers: Vec<Vec<(Micros, Micros)>> = Vec::new();
        for w in windows {
            match w.worker {
                None => every.push((w.from_us, w.to_us)),
                Some(i) => {
                    if workers.len() <= i {
                        workers.resize_with(i + 1, Vec::new);
                    }
                    workers[i].push((w.from_us, w.to_us));
                }
            }
        }
        Faults { every: Starts::new(every), workers: workers.into_iter().map(Starts::new).collect() }
    }
}

fn under_fault(faults: &Faults, worker: Option<usize>, from: Micros, to: Micros) -> bool {
    faults.every.hit(from, to) || worker.and_then(|w| faults.workers.get(w)).is_some_and(|s| s.hit(from, to))
}

/// ", and N more <what>s" after the worst of several causes of a kind.
fn more(n: usize, what: &str) -> String {
    match n {
        0 => String::new(),
        1 => format!(", and 1 more {what}"),
        n => format!(", and {n} more {what}s"),
    }
}

fn name(op: Op) -> &'static str {
    match op {
        Op::Acquire => "acquire",
        Op::Renew => "renewal",
        Op::Observe => "watch",
    }
}

/// One operation a worker timed, outside every fault.
struct Timed {
    op: Op,
    end_us: Micros,
    took_us: Micros,
    /// A renewal a kill ended: it ran at least `took_us`, up to the kill.
    killed: bool,
}

/// The renewals a kill cut short, each from its announcement to the kill. A
/// stall that ends in a kill leaves no time of its own, yet it decided
/// where the kill landed (inside the renewal's write, which can wedge the
/// lock file): it is judged as far as it went.
fn cut_short(events: &[Event], by_worker: &ByWorker<'_>, faults: &Faults) -> Vec<Timed> {
    let kills: Vec<&Event> = events
        .iter()
        .filter(|e| {
            e.kind == EventKind::Fault && e.detail.action.as_deref() == Some("kill") && e.detail.error.is_none()
        })
        .collect();
    kills
        .into_iter()
        .filter_map(|kill| {
            let w = kill.worker?;
            let before = upto(by_worker.of(w), kill.t_us).iter().rev();
            let last = before.into_iter().find(|e| {
                matches!(
                    e.kind,
                    EventKind::Renewing | EventKind::Renewed | EventKind::RenewFailed | EventKind::Acquired
                )
            })?;
            let ran = (last.t_us, kill.t_us - 1);
            (last.kind == EventKind::Renewing && !under_fault(faults, Some(w), ran.0, ran.1)).then_some(Timed {
                op: Op::Renew,
                end_us: kill.t_us,
                took_us: kill.t_us - last.t_us,
                killed: true,
            })
        })
        .collect()
}

pub fn disturbance(
    events: &[Event],
    by_worker: &ByWorker<'_>,
    params: &CheckParams,
    start_spread_us: Option<Micros>,
    precision: &Precision,
    end_us: Micros,
) -> Disturbance {
    let budget = params.disturbance_budget_us;
    let mut d = Disturbance { budget_us: budget, ..Disturbance::default() };
    (d.cpu_pressure_us, d.steal_us) = machine(events);
    if budget <= 0 {
        return d;
    }
    let faults = Faults::new(&windows(events, params, end_us));
    // A worker's first operation carries its own start-up (the first touch
    // of the substrate, a first connection, with more workers than cores a
    // wait for one): the start spread judges the start, not this. It only
    // stands beside an operation done once (below).
    let mut started = std::collections::HashSet::new();
    let ops: Vec<(bool, Timed)> = events
        .iter()
        .filter_map(|e| {
            let (us, op) = (e.detail.op_us?, operation(e.kind)?);
            let first = started.insert(e.worker);
            // A failed operation took as long as its failure: a timeout the
            // experiment set (the request's, a replica's acknowledgement),
            // a connection the server closed. That is the system's answer,
            // and how long it took is not the machine's. A look that read
            // a bad lease (none, empty, corrupt) did not fail: it answered.
            if e.detail.error.is_some() && e.kind != EventKind::Unreadable {
                return None;
            }
            let (from, to) = (e.t_us - us as Micros, e.t_us);
            let hit = under_fault(&faults, e.worker, from, to);
            (!hit).then_some((first, Timed { op, end_us: e.t_us, took_us: us as Micros, killed: false }))
        })
        .collect();
    let (mut firsts, mut timed) = (Vec::new(), Vec::new());
    for (first, t) in ops {
        if first { firsts.push(t) } else { timed.push(t) }
    }
    let killed = cut_short(events, by_worker, &faults);
    let system_faulted_us = events
        .iter()
        .find(|e| e.kind == EventKind::Fault && e.detail.action.as_deref().is_some_and(on_the_system))
        .map(|e| e.t_us);
    let mut stalls: Vec<(Micros, &Timed, Micros)> = Vec::new();
    for op in [Op::Acquire, Op::Renew, Op::Observe] {
        if op == Op::Acquire && !params.uniform_acquisitions {
            continue;
        }
        let of_kind: Vec<&Timed> = timed.iter().filter(|t| t.op == op).collect();
        let mut times: Vec<Micros> = of_kind.iter().map(|t| t.took_us).collect();
        if times.is_empty() {
            continue;
        }
        // An operation done once in the trial (a watcher's takeover) would
        // be its own median, never a stall. Beside it stand the workers'
        // first operations of its kind, not judged: the same requests with
        // the start-up on top, a median no stricter than its usual cost.
        // Not once the lease's server or network took a fault: what the
        // system then takes (a replica catching up after a heal) is its own.
        if let [once] = of_kind[..]
            && system_faulted_us.is_none_or(|f| f > once.end_us - once.took_us)
        {
            times.extend(firsts.iter().filter(|t| t.op == op).map(|t| t.took_us));
        }
        times.sort_unstable();
        let median = times[(times.len() - 1) / 2];
        for t in timed.iter().chain(&killed).filter(|t| t.op == op) {
            let stall = t.took_us - median;
            d.op_stall_max_us = Some(d.op_stall_max_us.map_or(stall, |m| m.max(stall)));
            if stall > budget {
                stalls.push((stall, t, median));
            }
        }
    }
    stalls.sort_by_key(|(stall, t, _)| (std::cmp::Reverse(*stall), t.end_us));
    if let Some((_, t, median)) = stalls.first() {
        let interval = if t.op == Op::Observe { ("watch", params.watch_us) } else { ("renew", params.renew_us) };
        let more = more(stalls.len() - 1, "operation");
        let (took, at) = (ms(t.took_us), t.end_us as f64 / 1e6);
        let what = if t.killed {
            format!("a renewal the kill at {at:.3} s cut short had run {took} ms")
        } else {
            format!("{} took {took} ms at {at:.3} s", name(t.op))
        };
        d.causes.push(format!(
            "{what} ({:.0} % of the {} interval; the median {} ms){more}",
            100.0 * t.took_us as f64 / interval.1.max(1) as f64,
            interval.0,
            ms(*median),
        ));
    }
    // A worker the machine woke late for a tick of its grid acts late,
    // however fast its operations: the built-in worker says by how much on
    // the tick's first event. A worker stopped, or waiting on a stopped
    // server, across its tick is the experiment.
    let mut late: Vec<(Micros, &Event)> = events
        .iter()
        .filter_map(|e| {
            let by = e.detail.late_us? as Micros;
            let (from, to) = (e.t_us - by, e.t_us);
            let hit = under_fault(&faults, e.worker, from, to);
            (!hit && by > budget).then_some((by, e))
        })
        .collect();
    late.sort_by_key(|(by, e)| (std::cmp::Reverse(*by), e.t_us));
    if let Some((by, e)) = late.first() {
        let more = more(late.len() - 1, "tick");
        let worker = e.worker.map_or_else(|| "a worker".to_string(), |w| format!("worker {w}"));
        d.causes.push(format!("{worker} woke {} ms late for its tick at {:.3} s{more}", ms(*by), e.t_us as f64 / 1e6));
    }
    if let (Some(spread), Some(planned)) = (start_spread_us, params.planned_start_spread_us)
        && spread - planned > budget
    {
        d.causes.push(format!("workers started {} ms apart (planned {} ms)", ms(spread), ms(planned)));
    }
    if precision.faults_over_budget > 0 {
        let n = precision.faults_over_budget;
        d.causes.push(format!(
            "{n} fault{} took effect more than {} ms late (at most {} ms)",
            if n == 1 { "" } else { "s" },
            ms(precision.budget_us),
            ms(precision.fault_error_max_us.unwrap_or(0))
        ));
    }
    // CPU pressure is recorded, not judged: it counts the trial's own
    // workers waiting too (thirty racers on two cores are the experiment),
    // so it cannot tell the machine's load from the system's.
    let length = end_us.max(1) as f64;
    if let Some(s) = d.steal_us
        && s as f64 > steal_share(params, budget) * length
        && s > STEAL_MIN_US
    {
        d.causes.push(format!("the hypervisor took {:.0} % of the trial", 100.0 * s as f64 / length));
    }
    d
}

/// The share of the trial the hypervisor may take: `STEAL_SHARE`, or, where
/// it is more, the share of its smallest interval the experiment's budget
/// lets the machine take from a worker. Steal is a total: it cannot tell
/// one long stall from many short ones (on a VM whose halted vCPUs wait to
/// be woken, any sleep-heavy load shows a steady steal of short waits), so
/// it is held to no less than what the experiment tolerates of each stall.
fn steal_share(params: &CheckParams, budget: Micros) -> f64 {
    let smallest = [params.lease_us, params.renew_us, params.watch_us].into_iter().filter(|i| *i > 0).min();
    smallest.map_or(STEAL_SHARE, |i| STEAL_SHARE.max(budget as f64 / i as f64))
}

/// The machine's counters' growth from the barrier to the trial's end.
fn machine(events: &[Event]) -> (Option<Micros>, Option<Micros>) {
    let at = |kind| events.iter().find(|e| e.kind == kind).map(|e| &e.detail);
    let (Some(b), Some(e)) = (at(EventKind::Barrier), at(EventKind::TrialEnd)) else { return (None, None) };
    let delta = |a: Option<u64>, z: Option<u64>| Some(z?.saturating_sub(a?) as Micros);
    (delta(b.cpu_pressure_us, e.cpu_pressure_us), delta(b.steal_us, e.steal_us))
}

/// µs as ms with as many decimals as a budget of microseconds needs.
fn ms(us: Micros) -> String {
    let ms = us as f64 / 1000.0;
    if us.abs() >= 100_000 {
        format!("{ms:.0}")
    } else if us.abs() >= 1000 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fault_window_is_found_by_search_as_a_scan_of_every_window_finds_it() {
        // Windows on every worker and on some, nested and apart.
        let spans = [(None, 50, 60), (Some(0), 0, 100), (Some(0), 10, 20), (Some(1), 30, 40), (Some(1), 200, 210)];
        let windows: Vec<Window> =
            spans.iter().map(|&(worker, from_us, to_us)| Window { worker, from_us, to_us }).collect();
        let faults = Faults::new(&windows);
        for worker in [None, Some(0), Some(1), Some(2)] {
            for from in (0..230).step_by(5) {
                for to in (from..240).step_by(7) {
                    let scan = windows
                        .iter()
                        .any(|w| (w.worker.is_none() || w.worker == worker) && from <= w.to_us && w.from_us <= to);
                    assert_eq!(under_fault(&faults, worker, from, to), scan, "{worker:?} [{from}, {to}]");
                }
            }
        }
    }

    use super::*;
    use leasequake_model::history::Detail;

    fn params() -> CheckParams {
        CheckParams {
            disturbance_budget_us: 30_000,
            planned_start_spread_us: Some(0),
            ..super::super::params::server_lease(9_000_000, 3_000_000, 3_000_000)
        }
    }

    fn op(t_us: Micros, worker: usize, kind: EventKind, op_us: u64) -> Event {
        Event::new(t_us, Some(worker), kind).with_detail(Detail { op_us: Some(op_us), ..Detail::default() })
    }

    fn fault(t_us: Micros, worker: Option<usize>, action: &str) -> Event {
        Event::new(t_us, worker, EventKind::Fault).with_detail(Detail {
            action: Some(action.into()),
            fault: Some(0),
            ..Detail::default()
        })
    }

    fn judge(events: &[Event]) -> Disturbance {
        disturbance(events, &ByWorker::new(events), &params(), Some(100), &Precision::default(), 30_000_000)
    }

    /// The leader's renewals every 3 s, the watchers' looks beside them,
    /// after each one's first operation (its start-up, not judged).
    fn steady(renewal_us: impl Fn(usize) -> u64) -> Vec<Event> {
        let mut v = vec![op(100, 0, EventKind::Acquired, 90_000), op(110, 1, EventKind::NotAcquired, 80_000)];
        for k in 1..=9 {
            let t = k as Micros * 3_000_000;
            v.push(op(t, 0, EventKind::Renewed, renewal_us(k)));
            v.push(op(t + 100, 1, EventKind::HeldBy, 30));
        }
        v
    }

    #[test]
    fn a_stalled_renewal_disturbs_the_trial_and_says_how() {
        // The blog's sigkill-gap trial 6: one renewal took 740 ms.
        let d = judge(&steady(|k| if k == 3 { 740_026 } else { 300 }));
        assert!(d.disturbed());
        assert_eq!(d.op_stall_max_us, Some(739_726));
        assert_eq!(d.text(), "renewal took 740 ms at 9.000 s (25 % of the renew interval; the median 0.300 ms)");
    }

    #[test]
    fn an_operation_within_the_budget_or_slow_throughout_is_not_a_disturbance() {
        assert!(!judge(&steady(|k| if k == 3 { 30_300 } else { 300 })).disturbed(), "exactly the budget");
        assert!(judge(&steady(|k| if k == 3 { 30_301 } else { 300 })).disturbed(), "1 µs over");
        // Each worker's first operation (90 and 80 ms here) is its start-up.
        assert!(!judge(&steady(|_| 300)).disturbed());
        // A substrate that is slow every time is the system, not a stall.
        assert!(!judge(&steady(|_| 50_000)).disturbed());
    }

    #[test]
    fn a_programs_acquisitions_are_its_librarys_work_and_its_renewals_are_judged() {
        // A library's takeover breaks a dead holder's marker, or waits out a
        // ping to a holder that does not answer: 46 ms beside 0.3 ms tries.
        let mut v = steady(|k| if k == 3 { 740_000 } else { 300 });
        v[0] = op(100, 0, EventKind::Acquired, 180);
        v[1] = op(110, 1, EventKind::NotAcquired, 180);
        v.push(op(28_000_000, 1, EventKind::Acquired, 46_215));
        v.sort_by_key(|e| e.t_us);
        let program = CheckParams { uniform_acquisitions: false, ..params() };
        let d = disturbance(&v, &ByWorker::new(&v), &program, Some(100), &Precision::default(), 30_000_000);
        assert_eq!(d.text(), "renewal took 740 ms at 9.000 s (25 % of the renew interval; the median 0.300 ms)");
        let only_takeover: Vec<Event> = v.iter().filter(|e| e.detail.op_us != Some(740_000)).cloned().collect();
        let d = disturbance(
            &only_takeover,
            &ByWorker::new(&only_takeover),
            &program,
            Some(100),
            &Precision::default(),
            30_000_000,
        );
        assert!(!d.disturbed(), "{}", d.text());
        assert!(judge(&only_takeover).disturbed(), "the built-in worker's acquisitions are judged");
    }

    #[test]
    fn an_operation_done_once_is_judged_beside_the_first_operations_of_its_kind() {
        // A fresh clone's faults test: the watcher's takeover, its only
        // acquire after its first try, took 46 ms on a lock file whose every
        // other operation took under 1.3 ms, and the trial was undisturbed.
        let trial = |starts: u64, takeover: u64| {
            let mut v = steady(|_| 300);
            v[0] = op(100, 0, EventKind::Acquired, starts);
            v[1] = op(110, 1, EventKind::NotAcquired, starts);
            v.push(op(28_000_000, 1, EventKind::Acquired, takeover));
            v.sort_by_key(|e| e.t_us);
            judge(&v)
        };
        let d = trial(180, 46_215);
        assert!(d.disturbed());
        assert_eq!(d.op_stall_max_us, Some(46_035));
        assert_eq!(d.text(), "acquire took 46.2 ms at 28.000 s (2 % of the renew interval; the median 0.180 ms)");
        assert!(!trial(180, 30_180).disturbed(), "exactly the budget");
        // First operations that took as long (a first connection) leave it
        // nothing to be judged against.
        assert!(!trial(50_000, 46_215).disturbed());
        // results/replicated's redis-split-wait: after a partition and its
        // heal, an acquire waited 1.2 s for the replica, which was catching
        // up: the system's time, however long after the heal.
        let healed = |takeover: u64| {
            let mut v = steady(|_| 300);
            v[0] = op(100, 0, EventKind::Acquired, 180);
            v[1] = op(110, 1, EventKind::NotAcquired, 180);
            v.extend([fault(12_000_000, Some(0), "partition"), fault(20_000_000, Some(0), "heal")]);
            v.push(op(28_000_000, 1, EventKind::Acquired, takeover));
            v.sort_by_key(|e| e.t_us);
            judge(&v)
        };
        assert!(!healed(1_195_416).disturbed(), "{}", healed(1_195_416).text());
        // A fault on a worker (its pause, its kill) leaves the system as it was.
        let mut paused = steady(|_| 300);
        paused[0] = op(100, 0, EventKind::Acquired, 180);
        paused[1] = op(110, 1, EventKind::NotAcquired, 180);
        paused.extend([fault(12_000_000, Some(0), "stop"), fault(20_000_000, Some(0), "cont")]);
        paused.push(op(28_000_000, 1, EventKind::Acquired, 46_215));
        paused.sort_by_key(|e| e.t_us);
        assert!(judge(&paused).disturbed());
    }

    #[test]
    fn a_failed_operation_is_the_systems_answer_not_a_stall() {
        // results/replicated's redis-split-wait after the heal: an acquire
        // the promoted primary could not have acknowledged by a replica
        // fails after its WAIT timeout, 1.5 s; one whose connection the
        // demoted primary closed fails after 1 s.
        // A watcher's tries, answered in half a millisecond each.
        let tries = || {
            let mut v = steady(|_| 300);
            v.extend((0..6).map(|k| op(200 + k * 3_000_000, 2, EventKind::NotAcquired, 500)));
            v
        };
        let mut events = tries();
        for (t, took, error) in [
            (9_500_000, 1_536_692, "redis: WAIT: 0 of 1 replicas"),
            (12_500_000, 1_030_404, "redis: unexpected end of file"),
        ] {
            events.push(Event::new(t, Some(1), EventKind::NotAcquired).with_detail(Detail {
                op_us: Some(took),
                error: Some(error.into()),
                ..Detail::default()
            }));
        }
        events.sort_by_key(|e| e.t_us);
        assert!(!judge(&events).disturbed(), "{}", judge(&events).text());
        // A look that read a missing or corrupt lease answered: judged.
        let mut read = tries();
        read.push(Event::new(9_500_000, Some(1), EventKind::Unreadable).with_detail(Detail {
            op_us: Some(740_000),
            error: Some("no lease is held (no lock file, key or row)".into()),
            ..Detail::default()
        }));
        read.sort_by_key(|e| e.t_us);
        assert!(judge(&read).disturbed());
        // The same time taken by an answered acquire is a stall.
        let mut answered = tries();
        answered.push(op(9_500_000, 1, EventKind::NotAcquired, 1_536_692));
        answered.sort_by_key(|e| e.t_us);
        assert!(judge(&answered).disturbed());
    }

    #[test]
    fn operations_under_a_fault_are_the_experiment() {
        // A pause of the leader around its renewal, a partition of its
        // link, a server pause (no worker: every worker's server).
        for faults in [
            vec![fault(8_900_000, Some(0), "stop"), fault(9_500_000, Some(0), "cont")],
            vec![fault(8_900_000, Some(0), "partition"), fault(10_000_000, Some(0), "heal")],
            vec![fault(8_900_000, None, "server-stop"), fault(9_500_000, None, "server-cont")],
            // A restart without an end shadows one renew interval.
            vec![fault(8_000_000, None, "server-restart")],
        ] {
            let mut events = steady(|k| if k == 3 { 740_000 } else { 300 });
            events.extend(faults.clone());
            events.sort_by_key(|e| e.t_us);
            assert!(!judge(&events).disturbed(), "{faults:?}");
        }
        // A fault aimed at another worker, or long over, does not excuse it.
        for faults in [
            vec![fault(8_900_000, Some(1), "stop"), fault(9_500_000, Some(1), "cont")],
            vec![fault(1_000_000, None, "server-restart")],
        ] {
            let mut events = steady(|k| if k == 3 { 740_000 } else { 300 });
            events.extend(faults.clone());
            events.sort_by_key(|e| e.t_us);
            assert!(judge(&events).disturbed(), "{faults:?}");
        }
        // After a partition's heal, the worker's first operation that
        // succeeds reconnects, however late after the heal it starts;
        // the one after it is judged again.
        for (slow, disturbed) in [(2, false), (3, true)] {
            let mut events = steady(|k| if k == slow { 500_000 } else { 300 });
            events.extend([fault(1_000_000, Some(0), "partition"), fault(5_000_000, Some(0), "heal")]);
            let mut failed = op(5_100_000, 0, EventKind::RenewFailed, 20_000);
            failed.detail.error = Some("no reply within the request timeout".into());
            events.push(failed);
            events.sort_by_key(|e| e.t_us);
            assert_eq!(judge(&events).disturbed(), disturbed, "renewal {slow} took 500 ms");
        }
        // A failpoint is the worker's own, asked-for stall.
        let mut events = steady(|k| if k == 3 { 740_000 } else { 300 });
        events.push(Event::new(8_500_000, Some(0), EventKind::Failpoint));
        events.sort_by_key(|e| e.t_us);
        assert!(!judge(&events).disturbed());
    }

    #[test]
    fn a_renewal_a_kill_cut_short_is_judged_as_far_as_it_ran() {
        // The leader announces its renewal at 30 s, and is killed inside it:
        // 40 ms in, the machine stalled it (the kill meant to land 10 ms
        // clear of the renewal landed in its write); 20 ms in, within the
        // budget.
        let killed_after = |ran_us: Micros| {
            let mut events = steady(|_| 300);
            events.push(Event::new(30_000_000, Some(0), EventKind::Renewing));
            events.push(fault(30_000_000 + ran_us, Some(0), "kill"));
            judge(&events)
        };
        let d = killed_after(40_000);
        assert_eq!(
            d.text(),
            "a renewal the kill at 30.040 s cut short had run 40.0 ms (1 % of the renew interval; the median 0.300 ms)"
        );
        assert!(!killed_after(20_000).disturbed());
        // Killed between renewals, or inside its own failpoint: nothing cut short.
        let mut events = steady(|_| 300);
        events.push(fault(28_000_000, Some(0), "kill"));
        assert!(!judge(&events).disturbed());
        let mut events = steady(|_| 300);
        events.push(Event::new(30_000_000, Some(0), EventKind::Renewing));
        events.push(Event::new(30_000_100, Some(0), EventKind::Failpoint));
        events.push(fault(30_500_000, Some(0), "kill"));
        assert!(!judge(&events).disturbed());
    }

    fn tick(t_us: Micros, worker: usize, late_us: u64) -> Event {
        Event::new(t_us, Some(worker), EventKind::Renewing)
            .with_detail(Detail { late_us: Some(late_us), ..Detail::default() })
    }

    #[test]
    fn a_worker_woken_late_for_its_tick_disturbs_the_trial_unless_a_fault_held_it() {
        // The budget is 30 ms: a tick 30 ms late is within it, 128 ms not.
        let with = |ticks: Vec<Event>| {
            let mut events = steady(|_| 300);
            events.extend(ticks);
            events.sort_by_key(|e| e.t_us);
            judge(&events)
        };
        assert!(!with(vec![tick(6_030_000, 0, 30_000)]).disturbed());
        let d = with(vec![tick(6_128_000, 0, 128_000), tick(9_031_000, 0, 31_000)]);
        assert_eq!(d.text(), "worker 0 woke 128 ms late for its tick at 6.128 s, and 1 more tick");
        // Stopped across its tick: the pause is the experiment.
        let held = with(vec![
            fault(5_900_000, Some(0), "stop"),
            fault(6_500_000, Some(0), "cont"),
            tick(6_500_100, 0, 500_100),
        ]);
        assert!(!held.disturbed(), "{}", held.text());
        // Another worker's pause excuses nothing.
        let other = with(vec![
            fault(5_900_000, Some(1), "stop"),
            fault(6_500_000, Some(1), "cont"),
            tick(6_500_100, 0, 500_100),
        ]);
        assert!(other.disturbed());
    }

    #[test]
    fn a_fault_that_never_fired_excuses_nothing() {
        let mut events = steady(|k| if k == 3 { 740_000 } else { 300 });
        let mut never = fault(8_900_000, Some(0), "stop");
        never.detail.error = Some("never fired: the trial ended first".into());
        events.push(never);
        events.sort_by_key(|e| e.t_us);
        assert!(judge(&events).disturbed());
    }

    #[test]
    fn start_spread_fault_errors_and_the_machine() {
        let p = params();
        let quiet = steady(|_| 300);
        let spread = disturbance(&quiet, &ByWorker::new(&quiet), &p, Some(45_000), &Precision::default(), 30_000_000);
        assert_eq!(spread.text(), "workers started 45.0 ms apart (planned 0.000 ms)");
        let staggered = CheckParams { planned_start_spread_us: Some(40_000), ..p };
        assert!(
            !disturbance(&quiet, &ByWorker::new(&quiet), &staggered, Some(45_000), &Precision::default(), 30_000_000)
                .disturbed()
        );
        let late = Precision { fault_error_max_us: Some(4100), faults_over_budget: 2, budget_us: 3000, undelivered: 0 };
        assert_eq!(
            disturbance(&quiet, &ByWorker::new(&quiet), &p, None, &late, 30_000_000).text(),
            "2 faults took effect more than 3.0 ms late (at most 4.1 ms)"
        );
        let counters = |t_us, kind, cpu: u64, steal: u64| {
            Event::new(t_us, None, kind).with_detail(Detail {
                cpu_pressure_us: Some(cpu),
                steal_us: Some(steal),
                ..Detail::default()
            })
        };
        let mut busy = quiet.clone();
        busy.insert(0, counters(0, EventKind::Barrier, 1_000, 5_000));
        busy.push(counters(30_000_000, EventKind::TrialEnd, 29_001_000, 1_505_000));
        let d = disturbance(&busy, &ByWorker::new(&busy), &p, None, &Precision::default(), 30_000_000);
        // Pressure is reported, never judged: the trial's own workers wait too.
        assert_eq!((d.cpu_pressure_us, d.steal_us), (Some(29_000_000), Some(1_500_000)));
        assert!(!d.disturbed());
        busy.last_mut().unwrap().detail.steal_us = Some(3_005_001);
        assert_eq!(
            disturbance(&busy, &ByWorker::new(&busy), &p, None, &Precision::default(), 30_000_000).text(),
            "the hypervisor took 10 % of the trial"
        );
        // An experiment that lets the machine take a fifth of an interval
        // (a budget of 600 ms, renewals every 3 s) lets the hypervisor take
        // a fifth of the trial, and no more.
        let tolerant = CheckParams { disturbance_budget_us: 600_000, ..p };
        assert!(
            !disturbance(&busy, &ByWorker::new(&busy), &tolerant, None, &Precision::default(), 30_000_000).disturbed()
        );
        busy.last_mut().unwrap().detail.steal_us = Some(6_005_001);
        assert_eq!(
            disturbance(&busy, &ByWorker::new(&busy), &tolerant, None, &Precision::default(), 30_000_000).text(),
            "the hypervisor took 20 % of the trial"
        );
        // One 10 ms tick of steal in a 5 ms race is no disturbance.
        let race = [counters(0, EventKind::Barrier, 0, 0), counters(5_000, EventKind::TrialEnd, 5_000, 10_000)];
        assert!(!disturbance(&race, &ByWorker::new(&race), &p, None, &Precision::default(), 5_000).disturbed());
    }

    #[test]
    fn no_budget_no_judgement() {
        let p = CheckParams { disturbance_budget_us: 0, ..params() };
        let events = steady(|k| if k == 3 { 740_000 } else { 300 });
        let d = disturbance(&events, &ByWorker::new(&events), &p, None, &Precision::default(), 1);
        assert!(!d.disturbed());
    }
}
