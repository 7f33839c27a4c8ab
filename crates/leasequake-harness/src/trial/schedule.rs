//! The fault schedule: a pure state machine. From the seed, the
//! experiment's faults, the events seen so far and the time now, it says
//! what to deliver to whom, and when to wake next. No clock is read and no
//! process is touched here: `nemesis.rs` carries the orders out.
//!
//! Faults fire at absolute monotonic times (`at`, with optional seeded
//! jitter), or protocol-relative: armed at `at`, they fire `delay` after the
//! next matching event of the target (e.g. 10 ms after the leader's next
//! `renewed`). Targets are resolved at the moment of firing from `Live`,
//! which the trial keeps from the events.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::history::EventKind;
use crate::model::{Action, After, Experiment, Fault, NetParams, PauseLen, Target};

/// One trial's faults: the scripted ones, then what a campaign draws for
/// this seed (from a stream of its own, so that a campaign leaves the
/// schedule's other draws, and the start delays, as they were).
pub fn trial_faults(exp: &Experiment, seed: u64) -> Vec<Fault> {
    exp.faults_of_trial(&mut ChaCha8Rng::seed_from_u64(seed ^ RANDOM_STREAM))
}

const RANDOM_STREAM: u64 = 0x5241_4e44_4f4d;

/// The live view of the trial that targets are resolved against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// Workers that believe they lead, oldest acquisition first.
    pub leaders: Vec<usize>,
    pub alive: Vec<bool>,
    pub paused: Vec<bool>,
}

impl Live {
    pub fn new(workers: usize) -> Live {
        Live { leaders: Vec::new(), alive: vec![true; workers], paused: vec![false; workers] }
    }

    /// Fold one worker event (or death) into the live view.
    pub fn observe(&mut self, worker: usize, kind: EventKind) {
        match kind {
            EventKind::Acquired => {
                self.leaders.retain(|&w| w != worker);
                self.leaders.push(worker);
            }
            EventKind::SteppedDown | EventKind::Released | EventKind::Exit => {
                self.leaders.retain(|&w| w != worker);
                if kind == EventKind::Exit {
                    self.alive[worker] = false;
                    self.paused[worker] = false;
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone, Debug)]
enum When {
    /// Fire at this monotonic time.
    At(i64),
    /// Armed from this time; waiting for the trigger event.
    Armed { from: i64, after: After },
}

#[derive(Clone, Debug)]
struct Pending {
    fault: usize,
    action: Action,
    target: Target,
    /// Targets fixed in advance (the CONT of a pause, a triggered fault).
    fixed: Option<Vec<usize>>,
    when: When,
    /// Pause length, drawn when the pause fires.
    pause: Option<PauseLen>,
    /// The trigger, for re-arming a repeated `after:` fault.
    after: Option<After>,
    /// Repetition: the unjittered time of this occurrence, the period and
    /// the jitter of each occurrence (ns).
    repeat: Option<Repeat>,
    net: Option<NetParams>,
    skew: Option<crate::model::Offset>,
}

#[derive(Clone, Copy, Debug)]
struct Repeat {
    base: i64,
    every: i64,
    jitter: i64,
}

/// Why a fault found nobody to hit; its text is the fault event's `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoTarget {
    #[error("no leader at this moment")]
    Leader,
    #[error("no live watcher at this moment")]
    Watcher,
    #[error("no live worker")]
    Worker,
    #[error("no live worker but the leader")]
    ButLeader,
    #[error("worker {0} is not running")]
    NotRunning(usize),
}

/// One thing to do now.
#[derive(Clone, Debug, PartialEq)]
pub struct Order {
    /// Index of the fault in the experiment.
    pub fault: usize,
    /// What to do: a signal (`Kill`, `Term`, `Stop`, `Cont`; a pause is a
    /// `Stop` now and a `Cont` later), a lock-file fault, or a server fault.
    pub action: Action,
    /// The target as written.
    pub target: Target,
    /// When it was due (monotonic ns).
    pub scheduled_ns: i64,
    /// The workers to signal (empty for lock and server faults), or why
    /// there is nobody to signal.
    pub workers: Result<Vec<usize>, NoTarget>,
    /// A server pause: when to continue the server, once the stop worked
    /// (`Schedule::resume_server`).
    pub resume_at: Option<i64>,
    /// A network fault's parameters.
    pub net: Option<NetParams>,
    /// A skew's jump.
    pub skew: Option<crate::model::Offset>,
}

/// A fault that never fired before the trial ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Unfired {
    pub fault: usize,
    pub action: Action,
    pub target: Target,
    pub scheduled_ns: i64,
    pub why: &'static str,
}

pub struct Schedule {
    pending: Vec<Pending>,
    rng: ChaCha8Rng,
}

impl Schedule {
    /// The faults of an experiment, for a trial released at `t0`.
    pub fn new(faults: &[Fault], t0: i64, mut rng: ChaCha8Rng) -> Schedule {
        let pending = faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let jitter = f.jitter.as_ns() as i64;
                let base = t0 + f.at.as_ns() as i64;
                let at = base + if jitter > 0 { rng.random_range(0..jitter) } else { 0 };
                Pending {
                    fault: i,
                    action: f.action,
                    target: f.target,
                    fixed: None,
                    when: match f.after {
                        None => When::At(at),
                        Some(after) => When::Armed { from: at, after },
                    },
                    pause: f.duration.clone(),
                    after: f.after,
                    repeat: f.every.map(|e| Repeat { base, every: e.as_ns() as i64, jitter }),
                    net: f.net,
                    skew: f.skew,
                }
            })
            .collect();
        Schedule { pending, rng }
    }

    /// Whether no fault is waiting any more (timed or armed).
    pub fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The earliest time a timed fault is due (armed ones wait for events).
    pub fn next_due(&self) -> Option<i64> {
        self.pending
            .iter()
            .filter_map(|p| match p.when {
                When::At(t) => Some(t),
                When::Armed { .. } => None,
            })
            .min()
    }

    /// An event arrived: armed faults whose target matches fire `delay`
    /// after the event's own timestamp.
    pub fn on_event(&mut self, worker: usize, kind: EventKind, t_ns: i64, live: &Live) {
        for p in &mut self.pending {
            let When::Armed { from, after } = p.when else { continue };
            if after.event != kind || t_ns < from {
                continue;
            }
            let matches = match p.target {
                Target::Leader | Target::PrimarySide => live.leaders.contains(&worker),
                Target::Watcher => !live.leaders.contains(&worker),
                Target::Worker(i) => i == worker,
                Target::AllButLeader | Target::Majority => live.leaders.last() != Some(&worker),
                Target::All | Target::Any => true,
                Target::Lock | Target::Server | Target::Member(_) => false,
            };
            if matches {
                p.when = When::At(t_ns + after.delay.as_ns() as i64);
                if !matches!(p.target, Target::All | Target::AllButLeader | Target::Majority) {
                    p.fixed = Some(vec![worker]);
                }
            }
        }
    }

    /// The earliest order due at `now`, if any. Call again after carrying
    /// it out: the next one's targets are resolved against the live view as
    /// the previous delivery left it.
    pub fn next_order(&mut self, now: i64, live: &Live) -> Option<Order> {
        let due = self.pending.iter().enumerate().filter_map(|(i, p)| match p.when {
            When::At(t) if t <= now => Some((t, i)),
            _ => None,
        });
        let (_, idx) = due.min()?;
        let p = self.pending.remove(idx);
        Some(self.fire(p, live))
    }

    /// A server pause's stop worked: continue the server at `at`.
    pub fn resume_server(&mut self, fault: usize, at: i64) {
        self.pending.push(Pending {
            fault,
            action: Action::Cont,
            target: Target::Server,
            fixed: None,
            when: When::At(at),
            pause: None,
            after: None,
            repeat: None,
            net: None,
            skew: None,
        });
    }

    /// Every fault still waiting when the trial ends, so that a
    /// schedule cannot vanish silently.
    pub fn never_fired(&mut self) -> Vec<Unfired> {
        self.pending
            .drain(..)
            .map(|p| {
                let (scheduled_ns, why) = match p.when {
                    When::At(t) => (t, "the trial ended first"),
                    When::Armed { from, .. } => (from, "its after: event never came"),
                };
                Unfired { fault: p.fault, action: p.action, target: p.target, scheduled_ns, why }
            })
            .collect()
    }

    fn fire(&mut self, p: Pending, live: &Live) -> Order {
        let When::At(scheduled) = p.when else { unreachable!("only timed faults are due") };
        if let Some(r) = p.repeat {
            // The next occurrence, with fresh jitter (and, for a pause, a
            // fresh length when it fires).
            let base = r.base + r.every;
            let at = base + if r.jitter > 0 { self.rng.random_range(0..r.jitter) } else { 0 };
            self.pending.push(Pending {
                // A triggered fault is re-armed from `at`, but never sooner
                // than a period after this firing: a trigger that came late
                // must not leave the next one armed in the past, firing on
                // every following event.
                when: match p.after {
                    Some(after) => When::Armed { from: at.max(scheduled + r.every), after },
                    None => When::At(at),
                },
                fixed: None,
                repeat: Some(Repeat { base, ..r }),
                ..p.clone()
            });
        }
        let order = |action: Action, workers: Result<Vec<usize>, NoTarget>| Order {
            fault: p.fault,
            action,
            target: p.target,
            scheduled_ns: scheduled,
            workers,
            resume_at: None,
            net: p.net,
            skew: p.skew,
        };
        if p.action.is_server() || p.target == Target::Server {
            let mut o = order(p.action, Ok(Vec::new()));
            if let (Action::ServerPause, Some(len)) = (p.action, &p.pause) {
                o.resume_at = Some(scheduled + len.sample(&mut self.rng).as_ns() as i64);
            }
            return o;
        }
        if p.action.is_lock() {
            return order(p.action, Ok(Vec::new()));
        }
        let action = if p.action == Action::Pause { Action::Stop } else { p.action };
        let targets = match &p.fixed {
            Some(fixed) => Ok(fixed.clone()),
            None => self.resolve(p.target, p.action, live),
        };
        // A pause ends with a CONT, a network fault with a duration with a
        // heal, of the workers it hit.
        let end = match p.action {
            Action::Pause => Some(Action::Cont),
            a if a.takes_duration() => Some(Action::Heal),
            _ => None,
        };
        if let (Ok(targets), Some(end), Some(len)) = (&targets, end, &p.pause) {
            let len = len.sample(&mut self.rng);
            self.pending.push(Pending {
                fault: p.fault,
                action: end,
                target: p.target,
                fixed: Some(targets.clone()),
                when: When::At(scheduled + len.as_ns() as i64),
                pause: None,
                after: None,
                repeat: None,
                net: None,
                skew: None,
            });
        }
        order(action, targets)
    }

    fn resolve(&mut self, target: Target, action: Action, live: &Live) -> Result<Vec<usize>, NoTarget> {
        // A CONT is for a paused worker: `leader` means the paused worker
        // that believes it leads, not whoever leads now.
        let alive = |w: &usize| live.alive[*w] && (action != Action::Cont || live.paused[*w]);
        match target {
            Target::Leader => live.leaders.iter().rev().find(|w| alive(w)).map(|w| vec![*w]).ok_or(NoTarget::Leader),
            Target::Watcher => {
                let watchers: Vec<usize> =
                    (0..live.alive.len()).filter(|w| alive(w) && !live.leaders.contains(w)).collect();
                if watchers.is_empty() {
                    Err(NoTarget::Watcher)
                } else {
                    Ok(vec![watchers[self.rng.random_range(0..watchers.len())]])
                }
            }
            Target::All => {
                let all: Vec<usize> = (0..live.alive.len()).filter(alive).collect();
                if all.is_empty() { Err(NoTarget::Worker) } else { Ok(all) }
            }
            Target::Any => {
                let all: Vec<usize> = (0..live.alive.len()).filter(alive).collect();
                if all.is_empty() { Err(NoTarget::Worker) } else { Ok(vec![all[self.rng.random_range(0..all.len())]]) }
            }
            Target::AllButLeader => {
                let leader = live.leaders.iter().rev().find(|w| alive(w));
                let rest: Vec<usize> = (0..live.alive.len()).filter(|w| alive(w) && Some(w) != leader).collect();
                if rest.is_empty() { Err(NoTarget::ButLeader) } else { Ok(rest) }
            }
            // The primary's side is its primary and the leader, if there
            // is one; a member is no worker (the nemesis adds the members).
            Target::PrimarySide => {
                Ok(live.leaders.iter().rev().find(|w| alive(w)).map(|w| vec![*w]).unwrap_or_default())
            }
            Target::Member(_) => Ok(Vec::new()),
            // The workers of the majority's side: all but the leader (the
            // nemesis adds the servers).
            Target::Majority => {
                let leader = live.leaders.iter().rev().find(|w| alive(w));
                Ok((0..live.alive.len()).filter(|w| alive(w) && Some(w) != leader).collect())
            }
            Target::Worker(i) if live.alive[i] => Ok(vec![i]),
            Target::Worker(i) => Err(NoTarget::NotRunning(i)),
            Target::Lock | Target::Server => unreachable!("lock and server targets are their actions'"),
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::model::Dur;

    const MS: i64 = 1_000_000;
    const T0: i64 = 1_000 * MS;

    fn fault(at_ms: u64, target: Target, action: Action) -> Fault {
        Fault {
            at: Dur::from_ms(at_ms),
            jitter: Dur::ZERO,
            after: None,
            target,
            action,
            duration: None,
            every: None,
            net: None,
            skew: None,
        }
    }

    fn schedule(faults: &[Fault], seed: u64) -> Schedule {
        Schedule::new(faults, T0, ChaCha8Rng::seed_from_u64(seed))
    }

    /// Three workers, worker 0 leading.
    fn led_by_0() -> Live {
        let mut live = Live::new(3);
        live.observe(0, EventKind::Acquired);
        live
    }

    /// Run the schedule to `until_ms`, waking only when it asks to:
    /// (ms after t0, action, workers) of every order.
    fn drain(s: &mut Schedule, live: &mut Live, until_ms: i64) -> Vec<(i64, Action, Result<Vec<usize>, NoTarget>)> {
        let mut out = Vec::new();
        while let Some(due) = s.next_due().filter(|t| *t <= T0 + until_ms * MS) {
            while let Some(o) = s.next_order(due, live) {
                for w in o.workers.iter().flatten() {
                    match o.action {
                        Action::Stop => live.paused[*w] = true,
                        Action::Cont => live.paused[*w] = false,
                        Action::Kill => live.observe(*w, EventKind::Exit),
                        _ => {}
                    }
                }
                out.push(((o.scheduled_ns - T0) / MS, o.action, o.workers));
            }
        }
        out
    }

    #[test]
    fn a_network_fault_with_a_duration_heals_the_workers_it_hit() {
        let net = NetParams { toxicity: 0.5, ..NetParams::default() };
        let f = Fault {
            duration: Some(PauseLen::Fixed(Dur::from_ms(300))),
            net: Some(net),
            ..fault(100, Target::AllButLeader, Action::Partition)
        };
        let mut live = led_by_0();
        let mut s = schedule(&[f], 1);
        let o = s.next_order(T0 + 100 * MS, &live).unwrap();
        assert_eq!((o.action, o.workers, o.net), (Action::Partition, Ok(vec![1, 2]), Some(net)));
        // The leader changes meanwhile: the heal is still for 1 and 2.
        live.observe(1, EventKind::Acquired);
        assert_eq!(s.next_due(), Some(T0 + 400 * MS));
        let o = s.next_order(T0 + 400 * MS, &live).unwrap();
        assert_eq!((o.action, o.workers), (Action::Heal, Ok(vec![1, 2])));
        assert!(s.idle());
    }

    #[test]
    fn a_services_sides_resolve_to_their_workers_and_a_member_to_none() {
        let live = led_by_0();
        let at = |target| {
            let mut s = schedule(&[fault(100, target, Action::Partition)], 1);
            s.next_order(T0 + 100 * MS, &live).unwrap().workers
        };
        assert_eq!(at(Target::PrimarySide), Ok(vec![0]), "the primary's side holds the leader");
        assert_eq!(at(Target::Majority), Ok(vec![1, 2]), "the majority's side, the others");
        assert_eq!(at(Target::Member(1)), Ok(vec![]), "a member is no worker: the nemesis adds it");
    }

    #[test]
    fn a_network_fault_without_a_duration_lasts_until_heal() {
        let mut s = schedule(&[fault(100, Target::Leader, Action::Reset)], 1);
        let o = s.next_order(T0 + 100 * MS, &led_by_0()).unwrap();
        assert_eq!((o.action, o.workers), (Action::Reset, Ok(vec![0])));
        assert!(s.idle(), "nothing heals it but a heal");
    }

    #[test]
    fn a_timed_fault_is_due_at_its_time_and_not_before() {
        let mut s = schedule(&[fault(500, Target::Leader, Action::Kill)], 1);
        let live = led_by_0();
        assert_eq!(s.next_due(), Some(T0 + 500 * MS));
        assert_eq!(s.next_order(T0 + 499 * MS, &live), None);
        let o = s.next_order(T0 + 500 * MS, &live).unwrap();
        assert_eq!((o.action, o.workers), (Action::Kill, Ok(vec![0])));
        assert!(s.idle());
    }

    #[test]
    fn jitter_is_uniform_in_its_window_and_replays_with_the_seed() {
        let f = Fault { jitter: Dur::from_ms(100), ..fault(500, Target::Leader, Action::Kill) };
        let due = |seed| schedule(std::slice::from_ref(&f), seed).next_due().unwrap();
        let times: Vec<i64> = (0..200).map(due).collect();
        assert!(times.iter().all(|t| (T0 + 500 * MS..T0 + 600 * MS).contains(t)));
        assert_eq!(due(7), due(7), "a seed replays");
        let spread = times.iter().max().unwrap() - times.iter().min().unwrap();
        assert!(spread > 90 * MS, "200 draws cover the window: {spread}");
    }

    #[test]
    fn a_leader_with_nobody_leading_is_an_undeliverable_order() {
        let mut s = schedule(&[fault(10, Target::Leader, Action::Term)], 1);
        let o = s.next_order(T0 + 10 * MS, &Live::new(3)).unwrap();
        assert_eq!(o.workers, Err(NoTarget::Leader));
        assert_eq!(NoTarget::Leader.to_string(), "no leader at this moment", "as histories record it");
    }

    #[test]
    fn a_pause_stops_now_and_continues_the_same_worker_later() {
        let f =
            Fault { duration: Some(PauseLen::Fixed(Dur::from_ms(300))), ..fault(100, Target::Leader, Action::Pause) };
        let mut s = schedule(&[f], 1);
        let mut live = led_by_0();
        let first = drain(&mut s, &mut live, 200);
        assert_eq!(first, vec![(100, Action::Stop, Ok(vec![0]))]);
        // Leadership moves while worker 0 is stopped: the CONT still goes to 0.
        live.observe(1, EventKind::Acquired);
        assert_eq!(drain(&mut s, &mut live, 1000), vec![(400, Action::Cont, Ok(vec![0]))]);
        assert!(s.idle());
    }

    #[test]
    fn a_cont_for_the_leader_means_the_paused_one() {
        let mut s = schedule(&[fault(10, Target::Leader, Action::Stop), fault(20, Target::Leader, Action::Cont)], 1);
        let mut live = led_by_0();
        let orders = drain(&mut s, &mut live, 15);
        assert_eq!(orders, vec![(10, Action::Stop, Ok(vec![0]))]);
        live.observe(2, EventKind::Acquired);
        assert_eq!(drain(&mut s, &mut live, 30), vec![(20, Action::Cont, Ok(vec![0]))]);
    }

    #[test]
    fn an_after_fault_waits_for_its_targets_event_past_its_arming_time() {
        let after = After { event: EventKind::Renewed, delay: Dur::from_ms(5) };
        let mut s = schedule(&[Fault { after: Some(after), ..fault(100, Target::Leader, Action::Kill) }], 1);
        let live = led_by_0();
        assert_eq!(s.next_due(), None, "armed faults wait for events, not time");
        s.on_event(0, EventKind::Renewed, T0 + 50 * MS, &live); // before `at`
        s.on_event(1, EventKind::Renewed, T0 + 120 * MS, &live); // not the leader
        assert_eq!(s.next_due(), None);
        s.on_event(0, EventKind::Renewed, T0 + 130 * MS, &live);
        assert_eq!(s.next_due(), Some(T0 + 135 * MS));
        let o = s.next_order(T0 + 135 * MS, &led_by_0()).unwrap();
        assert_eq!(o.workers, Ok(vec![0]), "the worker whose event triggered it");
    }

    #[test]
    fn a_repeating_fault_fires_once_a_period_until_the_end() {
        let f = Fault { every: Some(Dur::from_ms(100)), ..fault(50, Target::Worker(2), Action::Stop) };
        let mut s = schedule(&[f], 1);
        let mut live = led_by_0();
        let times: Vec<i64> = drain(&mut s, &mut live, 460).into_iter().map(|(t, _, _)| t).collect();
        assert_eq!(times, vec![50, 150, 250, 350, 450]);
        assert_eq!(s.never_fired().len(), 1, "the next occurrence is still waiting");
    }

    #[test]
    fn a_repeating_triggered_fault_is_rearmed_no_sooner_than_a_period_after_it_fired() {
        let after = After { event: EventKind::JobStarted, delay: Dur::ZERO };
        let f = Fault { after: Some(after), every: Some(Dur::from_ms(100)), ..fault(0, Target::Any, Action::Kill) };
        let mut s = schedule(&[f], 1);
        let live = led_by_0();
        // The first trigger comes late, at 250 ms.
        s.on_event(1, EventKind::JobStarted, T0 + 250 * MS, &live);
        assert!(s.next_order(T0 + 250 * MS, &live).is_some());
        // An event 10 ms later must not fire it again (armed from 350 ms).
        s.on_event(1, EventKind::JobStarted, T0 + 260 * MS, &live);
        assert_eq!(s.next_due(), None);
        s.on_event(1, EventKind::JobStarted, T0 + 360 * MS, &live);
        assert_eq!(s.next_due(), Some(T0 + 360 * MS));
    }

    #[test]
    fn a_server_pause_continues_only_once_its_stop_worked() {
        let f = Fault {
            duration: Some(PauseLen::Fixed(Dur::from_ms(40))),
            ..fault(10, Target::Server, Action::ServerPause)
        };
        let mut s = schedule(&[f], 1);
        let o = s.next_order(T0 + 10 * MS, &Live::new(1)).unwrap();
        assert_eq!((o.action, o.resume_at), (Action::ServerPause, Some(T0 + 50 * MS)));
        assert!(s.idle(), "nothing queued until the stop is known to have worked");
        s.resume_server(o.fault, o.resume_at.unwrap());
        let cont = s.next_order(T0 + 50 * MS, &Live::new(1)).unwrap();
        assert_eq!((cont.action, cont.target), (Action::Cont, Target::Server));
    }

    #[test]
    fn a_fault_whose_trigger_never_came_is_reported_as_never_fired() {
        let after = After { event: EventKind::Renewed, delay: Dur::ZERO };
        let mut s = schedule(&[Fault { after: Some(after), ..fault(100, Target::Leader, Action::Kill) }], 1);
        let left = s.never_fired();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].scheduled_ns, left[0].why), (T0 + 100 * MS, "its after: event never came"));
    }

    #[test]
    fn watchers_and_any_are_drawn_from_the_live_workers_only() {
        let mut live = led_by_0();
        live.observe(1, EventKind::Exit);
        for seed in 0..20 {
            let mut s = schedule(&[fault(1, Target::Watcher, Action::Kill), fault(1, Target::Any, Action::Kill)], seed);
            assert_eq!(s.next_order(T0 + MS, &live).unwrap().workers, Ok(vec![2]));
            let any = s.next_order(T0 + MS, &live).unwrap().workers.unwrap();
            assert!(any == vec![0] || any == vec![2], "{any:?}");
        }
    }
}
