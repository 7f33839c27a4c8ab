//! Whether the machine disturbed a trial: a trial whose timing the machine
//! moved further than the experiment allows measures the machine, not the
//! system, and is named as disturbed, with its cause in words, so that no
//! headline rests on it unawares.
//!
//! Everything comes from the history: the workers' operation times, the
//! start spread, the faults' own errors and the machine's counters read at
//! the barrier and the trial's end. What a fault does is the experiment,
//! not a disturbance: an operation that overlaps a fault aimed at its
//! worker, its link or its server is left out, and one that stalled at its
//! own failpoint is judged without the stall it asked for.

use std::collections::BTreeMap;

use leasequake_model::history::{Event, EventKind, Micros};

use super::latency::{Op, operation};
use super::params::CheckParams;
use super::precision::Precision;
use super::samples::Samples;

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

/// Where faults act, as the history goes. A fault with an end acts until
/// it; one without (a kill, a restart, a clock jump, a lock-file fault)
/// acts on what follows for one renew interval: reconnects and
/// retries are its doing, not the machine's. After a fault ends, each
/// worker it touched comes back with one operation that succeeds: a new
/// connection (a server forks a backend for it), the first request on a
/// link that was cut, a retry. That operation is the fault's doing too,
/// however long after the end it starts: the worker is *recovering* from
/// the end until it ends.
#[derive(Default)]
struct FaultWindows {
    /// A fault without an end acts this long.
    after: Micros,
    /// Windows whose ends are known, on every worker and on each.
    every: Starts,
    workers: Vec<Starts>,
    /// Faults acting until a later fault ends them: on whom, the ending
    /// action, since when.
    open: Vec<(Option<usize>, &'static str, Micros)>,
    /// Fault ends the history has yet to pass, and on whom.
    ending: BTreeMap<Micros, Vec<Option<usize>>>,
    /// Each worker seen, with the ends it is recovering from.
    recovering: Vec<Option<Vec<Micros>>>,
    /// The ends of faults on every worker, for a worker first seen later.
    every_ends: Vec<Micros>,
}

/// Whether a stretch of a worker's time was under a fault.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hit {
    Yes,
    No,
    /// Only if the worker recovers from a fault that ended before it: once
    /// an operation of its succeeds, it was (the recovery held it); if none
    /// does before the trial's end, there was no recovery and it was not.
    IfRecovers,
}

impl FaultWindows {
    fn seen(&mut self, w: usize) {
        if w >= self.recovering.len() {
            self.recovering.resize_with(w + 1, || None);
        }
        if self.recovering[w].is_none() {
            self.recovering[w] = Some(self.every_ends.clone());
        }
    }

    fn starts(&mut self, worker: Option<usize>) -> &mut Starts {
        match worker {
            None => &mut self.every,
            Some(w) => {
                if w >= self.workers.len() {
                    self.workers.resize_with(w + 1, Starts::default);
                }
                &mut self.workers[w]
            }
        }
    }

    /// A window from `from_us`, ending at `to_us`: in force, and a recovery
    /// once the history has passed its end.
    fn close(&mut self, worker: Option<usize>, from_us: Micros, to_us: Micros) {
        self.starts(worker).add(from_us, to_us);
        self.ending.entry(to_us).or_default().push(worker);
    }

    /// A delivered fault at `at_us`.
    fn fault(&mut self, worker: Option<usize>, action: &str, at_us: Micros) {
        match closer(action) {
            Some(end) => self.open.push((worker, end, at_us)),
            None => self.close(worker, at_us, at_us + self.after),
        }
    }

    /// Any fault event at `at_us` ends the faults it closes on its target.
    fn closes(&mut self, worker: Option<usize>, action: &str, at_us: Micros) {
        let (ended, open): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.open).into_iter().partition(|&(w, end, _)| w == worker && end == action);
        self.open = open;
        for (w, _, from) in ended {
            self.close(w, from, at_us);
        }
    }

    /// The history is past `before_us`: the fault ends before it start
    /// recoveries (an operation ending at the very end is no recovery).
    fn pass(&mut self, before_us: Micros) {
        while let Some(entry) = self.ending.first_entry() {
            if *entry.key() >= before_us {
                break;
            }
            let (end, whom) = entry.remove_entry();
            for worker in whom {
                match worker {
                    Some(w) => {
                        self.seen(w);
                        self.recovering[w].as_mut().expect("seen").push(end);
                    }
                    None => {
                        self.every_ends.push(end);
                        self.recovering.iter_mut().flatten().for_each(|r| r.push(end));
                    }
                }
            }
        }
    }

    /// An operation of `w` that succeeded, ending at `at_us`: it ends each
    /// recovery of the worker.
    fn recovered(&mut self, w: usize, at_us: Micros) {
        let ends = std::mem::take(self.recovering[w].as_mut().expect("seen"));
        let (done, left): (Vec<Micros>, Vec<Micros>) = ends.into_iter().partition(|&s| s < at_us);
        *self.recovering[w].as_mut().expect("seen") = left;
        for from in done {
            self.starts(Some(w)).add(from, at_us);
        }
    }

    /// Was `[from, to]` of `worker`'s time under a fault?
    fn hit(&self, worker: Option<usize>, from: Micros, to: Micros) -> Hit {
        let mine = worker.and_then(|w| self.workers.get(w));
        let open = self.open.iter().any(|&(w, _, since)| (w.is_none() || w == worker) && since <= to);
        if self.every.hit(from, to) || mine.is_some_and(|s| s.hit(from, to)) || open {
            return Hit::Yes;
        }
        let recovering = worker.and_then(|w| self.recovering.get(w)).and_then(Option::as_ref);
        if recovering.is_some_and(|r| r.iter().any(|&s| s <= to)) { Hit::IfRecovers } else { Hit::No }
    }

    /// The trial is over: faults never ended act until then.
    fn finish(&mut self, end_us: Micros) {
        for (w, _, from) in std::mem::take(&mut self.open) {
            self.starts(w).add(from, end_us);
        }
    }
}

/// Windows by start, each with the latest end among it and those before
/// it: whether a stretch overlaps one is a binary search.
#[derive(Default)]
struct Starts {
    from: Vec<Micros>,
    latest_to: Vec<Micros>,
}

impl Starts {
    /// Windows come nearly in order of their starts.
    fn add(&mut self, from: Micros, to: Micros) {
        let at = self.from.partition_point(|&f| f <= from);
        self.from.insert(at, from);
        self.latest_to.insert(at, to);
        // Each end after it is the latest before it, now with this one.
        let mut latest = if at == 0 { Micros::MIN } else { self.latest_to[at - 1] };
        for l in &mut self.latest_to[at..] {
            latest = latest.max(*l);
            *l = latest;
        }
    }

    fn hit(&self, from: Micros, to: Micros) -> bool {
        let begun = self.from.partition_point(|&f| f <= to);
        begun > 0 && self.latest_to[begun - 1] >= from
    }
}

/// An operation a worker timed (or a renewal a kill cut short), or a late
/// wake, to be judged once it is known whether a fault held it.
#[derive(Clone, Copy, Debug)]
struct Item {
    /// Its place in the history: of equal ones, the first is named.
    seq: u64,
    worker: Option<usize>,
    from_us: Micros,
    end_us: Micros,
    /// The part of it the worker stalled at its failpoint, as asked.
    asked_us: Micros,
    what: What,
}

impl Item {
    /// How long it took of the worker's own (or the machine's) time.
    fn took(&self) -> Micros {
        self.end_us - self.from_us - self.asked_us
    }
}

#[derive(Clone, Copy, Debug)]
enum What {
    /// Its kind; the worker's first operation (its start-up), judged only
    /// beside an operation done once; a renewal a kill ended: it ran at
    /// least its time, up to the kill.
    Op { op: Op, first: bool, killed: bool },
    /// A worker woken this late for its tick.
    Late,
}

/// One kind of operation's times, outside every fault.
#[derive(Default)]
struct Times {
    /// The times (µs), counted by value (exact up to `samples::EXACT`
    /// distinct ones): what it holds grows with the distinct times, not
    /// the operations.
    counts: Samples,
    n: u64,
    /// The one operation, while there is one: when it began and ended.
    once: Option<(Micros, Micros)>,
    /// The longest, the first of the longest; and the renewals kills cut
    /// short, each with its time.
    longest: Option<(Micros, Micros, u64)>,
    killed: Vec<(Micros, Micros, u64)>,
    /// The workers' first operations of the kind.
    firsts: Samples,
}

impl Times {
    fn add(&mut self, item: &Item, killed: bool) {
        let took = item.took();
        if killed {
            self.killed.push((took, item.end_us, item.seq));
            return;
        }
        self.counts.push(took as u64);
        self.n += 1;
        self.once = (self.n == 1).then_some((item.from_us, item.end_us));
        let key = (took, std::cmp::Reverse(item.end_us), std::cmp::Reverse(item.seq));
        if self.longest.is_none_or(|(t, e, s)| key > (t, std::cmp::Reverse(e), std::cmp::Reverse(s))) {
            self.longest = Some((took, item.end_us, item.seq));
        }
    }
}

/// The machine's disturbance of one trial, as the events come.
pub(crate) struct DisturbanceFold {
    params: CheckParams,
    budget: Micros,
    seq: u64,
    now_us: Micros,
    faults: FaultWindows,
    /// Workers whose first operation came (and whether one no worker's did).
    started: Vec<bool>,
    started_none: bool,
    /// Each worker's last renewal step: a `renewing` and when.
    renewing: Vec<Option<Micros>>,
    /// When each worker last reached its failpoint.
    failpoints: Vec<Option<Micros>>,
    /// Kills of the current instant, judged once it is over.
    kills: Vec<(u64, usize, Micros)>,
    /// Items of the current instant, and each worker's items waiting to
    /// know whether it recovers.
    instant: Vec<Item>,
    waiting: Vec<Vec<Item>>,
    times: [Times; 3],
    /// The worst late wake and how many there were, over the budget.
    late: Option<(Micros, Micros, u64, Option<usize>)>,
    lates: usize,
    /// The first fault on the lease's server or network.
    system_faulted_us: Option<Micros>,
    barrier: Option<(Option<u64>, Option<u64>)>,
    trial_end: Option<(Option<u64>, Option<u64>)>,
}

fn index(op: Op) -> usize {
    match op {
        Op::Acquire => 0,
        Op::Renew => 1,
        Op::Observe => 2,
    }
}

impl DisturbanceFold {
    pub fn new(params: &CheckParams) -> DisturbanceFold {
        DisturbanceFold {
            params: *params,
            budget: params.disturbance_budget_us,
            seq: 0,
            now_us: Micros::MIN,
            faults: FaultWindows { after: params.renew_us.max(1), ..FaultWindows::default() },
            started: Vec::new(),
            started_none: false,
            renewing: Vec::new(),
            failpoints: Vec::new(),
            kills: Vec::new(),
            instant: Vec::new(),
            waiting: Vec::new(),
            times: Default::default(),
            late: None,
            lates: 0,
            system_faulted_us: None,
            barrier: None,
            trial_end: None,
        }
    }

    pub fn event(&mut self, e: &Event) {
        if e.kind == EventKind::Barrier && self.barrier.is_none() {
            self.barrier = Some((e.detail.cpu_pressure_us, e.detail.steal_us));
        }
        if e.kind == EventKind::TrialEnd && self.trial_end.is_none() {
            self.trial_end = Some((e.detail.cpu_pressure_us, e.detail.steal_us));
        }
        if self.budget <= 0 {
            return;
        }
        if e.t_us != self.now_us {
            self.settle();
            self.faults.pass(e.t_us);
            self.now_us = e.t_us;
        }
        self.seq += 1;
        if let Some(w) = e.worker {
            self.faults.seen(w);
            if w >= self.renewing.len() {
                self.renewing.resize(w + 1, None);
                self.waiting.resize_with(w + 1, Vec::new);
            }
        }
        self.fault(e);
        if let Some(w) = e.worker
            && matches!(e.kind, EventKind::Renewing | EventKind::Renewed | EventKind::RenewFailed | EventKind::Acquired)
        {
            self.renewing[w] = (e.kind == EventKind::Renewing).then_some(e.t_us);
        }
        if let (Some(us), Some(op)) = (e.detail.op_us, operation(e.kind)) {
            // A worker's first operation carries its own start-up (the
            // first touch of the substrate, a first connection, with more
            // workers than cores a wait for one): the start spread judges
            // the start, not this. It only stands beside an operation done
            // once.
            let started = match e.worker {
                Some(w) => {
                    if w >= self.started.len() {
                        self.started.resize(w + 1, false);
                    }
                    &mut self.started[w]
                }
                None => &mut self.started_none,
            };
            let first = !std::mem::replace(started, true);
            if let Some(w) = e.worker.filter(|_| e.detail.error.is_none()) {
                self.faults.recovered(w, e.t_us);
                for item in std::mem::take(&mut self.waiting[w]) {
                    self.judged(item, Hit::Yes);
                }
            }
            // A failed operation took as long as its failure: a timeout the
            // experiment set (the request's, a replica's acknowledgement),
            // a connection the server closed. That is the system's answer,
            // and how long it took is not the machine's. A look that read
            // a bad lease (none, empty, corrupt) did not fail: it answered.
            if e.detail.error.is_none() || e.kind == EventKind::Unreadable {
                let what = What::Op { op, first, killed: false };
                let from_us = e.t_us - us as Micros;
                self.push(e.worker, from_us, e.t_us, what);
            }
        }
        // A worker the machine woke late for a tick of its grid acts late,
        // however fast its operations: the built-in worker says by how
        // much on the tick's first event. A worker stopped, or waiting on
        // a stopped server, across its tick is the experiment.
        if let Some(by) = e.detail.late_us {
            self.push(e.worker, e.t_us - by as Micros, e.t_us, What::Late);
        }
    }

    /// An item of the current instant, `[from_us, end_us]` of `worker`.
    fn push(&mut self, worker: Option<usize>, from_us: Micros, end_us: Micros, what: What) {
        let asked_us = self.asked(worker, from_us, end_us);
        self.instant.push(Item { seq: self.seq, worker, from_us, end_us, asked_us, what });
    }

    /// How much of `[from_us, end_us]` the worker spent in the stall its
    /// last failpoint asked for: the experiment's, not the machine's. What
    /// the stall overran by is the machine's, and judged.
    fn asked(&self, worker: Option<usize>, from_us: Micros, end_us: Micros) -> Micros {
        let Some(at) = worker.and_then(|w| self.failpoints.get(w).copied().flatten()) else { return 0 };
        (end_us.min(at + self.params.failpoint_delay_us) - from_us.max(at)).max(0)
    }

    fn fault(&mut self, e: &Event) {
        if let (EventKind::Failpoint, Some(w)) = (e.kind, e.worker) {
            if w >= self.failpoints.len() {
                self.failpoints.resize(w + 1, None);
            }
            self.failpoints[w] = Some(e.t_us);
            return;
        }
        if e.kind != EventKind::Fault {
            return;
        }
        let action = e.detail.action.as_deref();
        if self.system_faulted_us.is_none() && action.is_some_and(on_the_system) {
            self.system_faulted_us = Some(e.t_us);
        }
        if let Some(action) = action {
            self.faults.closes(e.worker, action, e.t_us);
        }
        // A fault that never reached its target changed nothing.
        if e.detail.error.is_some() && e.detail.error_us.is_none() {
            return;
        }
        let Some(action) = action.filter(|a| !matches!(*a, "cont" | "heal" | "server-cont")) else { return };
        self.faults.fault(e.worker, action, e.t_us);
        if let (Some(w), "kill", None) = (e.worker, action, &e.detail.error) {
            self.kills.push((self.seq, w, e.t_us));
        }
    }

    /// The instant is over: its faults are all in, so its items are judged.
    fn settle(&mut self) {
        // The renewals a kill cut short, each from its announcement to the
        // kill. A stall that ends in a kill leaves no time of its own, yet
        // it decided where the kill landed (inside the renewal's write,
        // which can wedge the lock file): it is judged as far as it went.
        for (seq, w, at) in std::mem::take(&mut self.kills) {
            if let Some(since) = self.renewing[w] {
                let what = What::Op { op: Op::Renew, first: false, killed: true };
                let asked_us = self.asked(Some(w), since, at);
                self.instant.push(Item { seq, worker: Some(w), from_us: since, end_us: at, asked_us, what });
            }
        }
        for item in std::mem::take(&mut self.instant) {
            // A cut-short renewal ran up to the kill, not through it.
            let to = if matches!(item.what, What::Op { killed: true, .. }) { item.end_us - 1 } else { item.end_us };
            match (self.faults.hit(item.worker, item.from_us, to), item.worker) {
                (Hit::IfRecovers, Some(w)) => self.waiting[w].push(item),
                (hit, _) => self.judged(item, hit),
            }
        }
    }

    fn judged(&mut self, item: Item, hit: Hit) {
        if hit == Hit::Yes {
            return;
        }
        match item.what {
            What::Op { op, first: true, killed: false } => {
                self.times[index(op)].firsts.push(item.took() as u64);
            }
            What::Op { op, killed, .. } => self.times[index(op)].add(&item, killed),
            What::Late => {
                let by = item.took();
                if by > self.budget {
                    self.lates += 1;
                    let key = (by, std::cmp::Reverse(item.end_us), std::cmp::Reverse(item.seq));
                    if self.late.is_none_or(|(b, e, s, _)| key > (b, std::cmp::Reverse(e), std::cmp::Reverse(s))) {
                        self.late = Some((by, item.end_us, item.seq, item.worker));
                    }
                }
            }
        }
    }

    pub fn finish(mut self, end_us: Micros, start_spread_us: Option<Micros>, precision: &Precision) -> Disturbance {
        let (params, budget) = (self.params, self.budget);
        let mut d = Disturbance { budget_us: budget, ..Disturbance::default() };
        if let (Some(b), Some(e)) = (self.barrier, self.trial_end) {
            let delta = |a: Option<u64>, z: Option<u64>| Some(z?.saturating_sub(a?) as Micros);
            (d.cpu_pressure_us, d.steal_us) = (delta(b.0, e.0), delta(b.1, e.1));
        }
        if budget <= 0 {
            return d;
        }
        self.settle();
        self.faults.pass(Micros::MAX);
        self.faults.finish(end_us);
        // No operation succeeded after them: no recovery held these.
        for item in std::mem::take(&mut self.waiting).into_iter().flatten() {
            self.judged(item, Hit::No);
        }
        // The worst stall of all kinds, its median, and how many there were.
        let mut worst: Option<Stall> = None;
        let mut stalls = 0;
        for op in [Op::Acquire, Op::Renew, Op::Observe] {
            if op == Op::Acquire && !params.uniform_acquisitions {
                continue;
            }
            let t = &self.times[index(op)];
            if t.n == 0 {
                continue;
            }
            let mut counts = t.counts.clone();
            // An operation done once in the trial (a watcher's takeover)
            // would be its own median, never a stall. Beside it stand the
            // workers' first operations of its kind, not judged: the same
            // requests with the start-up on top, a median no stricter than
            // its usual cost. Not once the lease's server or network took a
            // fault: what the system then takes (a replica catching up after
            // a heal) is its own.
            if let Some((began, _)) = t.once.filter(|_| t.n == 1)
                && self.system_faulted_us.is_none_or(|f| f > began)
            {
                counts.extend(&t.firsts);
            }
            let median = counts.nth((counts.len() as u64 - 1) / 2).unwrap_or(0) as Micros;
            let longest = t.longest.map(|(took, end, seq)| (took, end, seq, false));
            let candidates = longest.into_iter().chain(t.killed.iter().map(|&(took, end, seq)| (took, end, seq, true)));
            for (took, end_us, seq, killed) in candidates {
                let s = Stall { op, took_us: took, median_us: median, end_us, killed, seq };
                d.op_stall_max_us = Some(d.op_stall_max_us.map_or(s.stall(), |m| m.max(s.stall())));
                if s.stall() > budget && worst.as_ref().is_none_or(|w| s.rank() > w.rank()) {
                    worst = Some(s);
                }
            }
            stalls += t.counts.above((median + budget).max(0) as u64);
            stalls += t.killed.iter().filter(|&&(took, _, _)| took - median > budget).count();
        }
        if let Some(s) = worst {
            let interval = if s.op == Op::Observe { ("watch", params.watch_us) } else { ("renew", params.renew_us) };
            let more = more(stalls - 1, "operation");
            let (took, at) = (ms(s.took_us), s.end_us as f64 / 1e6);
            let what = if s.killed {
                format!("a renewal the kill at {at:.3} s cut short had run {took} ms")
            } else {
                format!("{} took {took} ms at {at:.3} s", name(s.op))
            };
            d.causes.push(format!(
                "{what} ({:.0} % of the {} interval; the median {} ms){more}",
                100.0 * s.took_us as f64 / interval.1.max(1) as f64,
                interval.0,
                ms(s.median_us),
            ));
        }
        if let Some((by, at, _, worker)) = self.late {
            let more = more(self.lates - 1, "tick");
            let worker = worker.map_or_else(|| "a worker".to_string(), |w| format!("worker {w}"));
            d.causes.push(format!("{worker} woke {} ms late for its tick at {:.3} s{more}", ms(by), at as f64 / 1e6));
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
        // workers waiting too (thirty racers on two cores are the
        // experiment), so it cannot tell the machine's load from the
        // system's.
        let length = end_us.max(1) as f64;
        if let Some(s) = d.steal_us
            && s as f64 > steal_share(&params, budget) * length
            && s > STEAL_MIN_US
        {
            d.causes.push(format!("the hypervisor took {:.0} % of the trial", 100.0 * s as f64 / length));
        }
        d
    }
}

/// An operation that took longer than the median of its kind.
struct Stall {
    op: Op,
    took_us: Micros,
    median_us: Micros,
    end_us: Micros,
    killed: bool,
    seq: u64,
}

impl Stall {
    fn stall(&self) -> Micros {
        self.took_us - self.median_us
    }

    /// The worst is the longest stall, then the earliest; of equal ones,
    /// the first kind (acquire, renewal, watch), a timed one before a
    /// renewal a kill cut short, the first in the history.
    fn rank(&self) -> impl Ord {
        use std::cmp::Reverse;
        (self.stall(), Reverse(self.end_us), Reverse(index(self.op)), !self.killed, Reverse(self.seq))
    }
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
    fn a_window_is_found_by_search_as_a_scan_of_every_window_finds_it() {
        // Nested and apart, some added after later ones.
        let spans = [(0, 100), (10, 20), (200, 210), (30, 40), (50, 60), (5, 8)];
        let mut starts = super::Starts::default();
        for (k, &(from, to)) in spans.iter().enumerate() {
            starts.add(from, to);
            for from_q in (0..230).step_by(3) {
                for to_q in (from_q..240).step_by(7) {
                    let scan = spans[..=k].iter().any(|&(a, b)| from_q <= b && a <= to_q);
                    assert_eq!(starts.hit(from_q, to_q), scan, "[{from_q}, {to_q}] after {k}");
                }
            }
        }
    }

    use super::*;
    use leasequake_model::history::Detail;

    /// The trial's disturbance, its events fed one at a time.
    fn disturbance(
        events: &[Event],
        params: &CheckParams,
        start_spread_us: Option<Micros>,
        precision: &Precision,
        end_us: Micros,
    ) -> Disturbance {
        let mut fold = DisturbanceFold::new(params);
        events.iter().for_each(|e| fold.event(e));
        fold.finish(end_us, start_spread_us, precision)
    }

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
        disturbance(events, &params(), Some(100), &Precision::default(), 30_000_000)
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
        let d = disturbance(&v, &program, Some(100), &Precision::default(), 30_000_000);
        assert_eq!(d.text(), "renewal took 740 ms at 9.000 s (25 % of the renew interval; the median 0.300 ms)");
        let only_takeover: Vec<Event> = v.iter().filter(|e| e.detail.op_us != Some(740_000)).cloned().collect();
        let d = disturbance(&only_takeover, &program, Some(100), &Precision::default(), 30_000_000);
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
    }

    #[test]
    fn a_failpoints_stall_is_the_experiments_and_what_it_overran_by_the_machines() {
        // Renewal 3 (8.26 s to 9 s) stalls at its failpoint 100 µs in.
        let mut events = steady(|k| if k == 3 { 740_000 } else { 300 });
        events.push(Event::new(8_260_100, Some(0), EventKind::Failpoint));
        events.sort_by_key(|e| e.t_us);
        let with_delay = |failpoint_delay_us| {
            let params = CheckParams { failpoint_delay_us, ..params() };
            disturbance(&events, &params, Some(100), &Precision::default(), 30_000_000)
        };
        // Asked for 730 ms: 10 ms its own, within the budget.
        assert!(!with_delay(730_000).disturbed());
        // Asked for 700 ms, it stalled 40 ms longer: the machine's.
        let d = with_delay(700_000);
        assert_eq!(d.op_stall_max_us, Some(39_700), "{d:?}");
        assert!(d.disturbed());
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
        let params = CheckParams { failpoint_delay_us: 600_000, ..params() };
        assert!(!disturbance(&events, &params, Some(100), &Precision::default(), 30_000_000).disturbed());
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
        let spread = disturbance(&quiet, &p, Some(45_000), &Precision::default(), 30_000_000);
        assert_eq!(spread.text(), "workers started 45.0 ms apart (planned 0.000 ms)");
        let staggered = CheckParams { planned_start_spread_us: Some(40_000), ..p };
        assert!(!disturbance(&quiet, &staggered, Some(45_000), &Precision::default(), 30_000_000).disturbed());
        let late = Precision { fault_error_max_us: Some(4100), faults_over_budget: 2, budget_us: 3000, undelivered: 0 };
        assert_eq!(
            disturbance(&quiet, &p, None, &late, 30_000_000).text(),
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
        let d = disturbance(&busy, &p, None, &Precision::default(), 30_000_000);
        // Pressure is reported, never judged: the trial's own workers wait too.
        assert_eq!((d.cpu_pressure_us, d.steal_us), (Some(29_000_000), Some(1_500_000)));
        assert!(!d.disturbed());
        busy.last_mut().unwrap().detail.steal_us = Some(3_005_001);
        assert_eq!(
            disturbance(&busy, &p, None, &Precision::default(), 30_000_000).text(),
            "the hypervisor took 10 % of the trial"
        );
        // An experiment that lets the machine take a fifth of an interval
        // (a budget of 600 ms, renewals every 3 s) lets the hypervisor take
        // a fifth of the trial, and no more.
        let tolerant = CheckParams { disturbance_budget_us: 600_000, ..p };
        assert!(!disturbance(&busy, &tolerant, None, &Precision::default(), 30_000_000).disturbed());
        busy.last_mut().unwrap().detail.steal_us = Some(6_005_001);
        assert_eq!(
            disturbance(&busy, &tolerant, None, &Precision::default(), 30_000_000).text(),
            "the hypervisor took 20 % of the trial"
        );
        // One 10 ms tick of steal in a 5 ms race is no disturbance.
        let race = [counters(0, EventKind::Barrier, 0, 0), counters(5_000, EventKind::TrialEnd, 5_000, 10_000)];
        assert!(!disturbance(&race, &p, None, &Precision::default(), 5_000).disturbed());
    }

    #[test]
    fn no_budget_no_judgement() {
        let p = CheckParams { disturbance_budget_us: 0, ..params() };
        let events = steady(|k| if k == 3 { 740_000 } else { 300 });
        let d = disturbance(&events, &p, None, &Precision::default(), 1);
        assert!(!d.disturbed());
    }
}
