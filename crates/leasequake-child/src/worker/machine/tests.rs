//! The lease state machine against a fake substrate and a fake clock: time
//! jumps to each deadline the worker waits for, and a script changes the
//! lease (another holder, a corrupt file, a shutdown) at chosen moments.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::*;
use crate::model::{Acquire, Expiry};

const S: i64 = 1_000_000_000;
/// The wall clock at mono 0: a whole second, so truncation is easy to read.
const WALL_BASE: i64 = 1_800_000_000 * S;
const OTHER: i64 = 99;
const ME: i64 = 7;

type Step = Box<dyn FnOnce(&mut World)>;

#[derive(Default)]
struct World {
    now: i64,
    /// When a SIGTERM arrives.
    term_at: Option<i64>,
    /// Changes to make when time passes their moment, in time order.
    script: Vec<(i64, Step)>,
    events: Vec<(i64, EventKind, Detail)>,
    log: Vec<String>,
    /// The fake substrate's state.
    lease: Option<Lease>,
    /// An unreadable lease (an empty lock file): acquires fail, reads error.
    corrupt: bool,
    /// How long the unreadable lease has been left alone.
    age: Option<Duration>,
    /// Renewals that fail with a read error, from now on.
    failing_renewals: u32,
    /// Takeovers lose the race.
    lose_takeovers: bool,
    released: Vec<i64>,
    /// Every budget the worker gave the substrate for its next operations.
    budgets: Vec<Option<Duration>>,
    /// From this moment, every wait for a deadline oversleeps by this much
    /// (a machine that wakes the worker late).
    oversleep: Option<(i64, i64)>,
}

impl World {
    fn wall(&self) -> i64 {
        WALL_BASE + self.now
    }

    fn advance(&mut self, to: i64) {
        self.script.sort_by_key(|(t, _)| *t);
        while self.script.first().is_some_and(|(t, _)| *t <= to) {
            let (t, step) = self.script.remove(0);
            self.now = self.now.max(t);
            step(self);
        }
        self.now = self.now.max(to);
    }
}

#[derive(Clone)]
struct Fake(Rc<RefCell<World>>);

impl Env for Fake {
    fn mono_ns(&self) -> i64 {
        self.0.borrow().now
    }

    fn wall_ns(&self) -> i64 {
        self.0.borrow().wall()
    }

    fn wait_until(&mut self, deadline_ns: i64) -> Option<Signal> {
        let mut w = self.0.borrow_mut();
        if let Some(t) = w.term_at.filter(|t| *t <= deadline_ns) {
            w.advance(t);
            w.term_at = None;
            return Some(Signal::SIGTERM);
        }
        // With nothing left to happen, a wait for ever ends the test world.
        let late = w.oversleep.filter(|(from, _)| deadline_ns >= *from).map_or(0, |(_, by)| by);
        let to = if deadline_ns == i64::MAX { w.now } else { deadline_ns + late };
        w.advance(to);
        None
    }

    fn emit_at(&mut self, t_ns: i64, event: EventKind, detail: Detail) {
        self.0.borrow_mut().events.push((t_ns, event, detail));
    }

    fn log(&mut self, line: &str) {
        self.0.borrow_mut().log.push(line.to_string());
    }
}

/// The lease as a substrate whose expiry is judged by `rule` on the fake
/// wall clock.
struct FakeLease {
    world: Rc<RefCell<World>>,
    rule: ExpiryRule,
}

impl Substrate for FakeLease {
    fn acquire(&mut self, fresh: Lease, _seen: u64) -> io::Result<Option<Lease>> {
        let mut w = self.world.borrow_mut();
        if w.corrupt || w.lease.is_some() {
            return Ok(None);
        }
        w.lease = Some(fresh);
        Ok(Some(fresh))
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        let w = self.world.borrow();
        if w.corrupt {
            return Err(ReadError::Empty);
        }
        Ok(match w.lease {
            None => Seen::Free,
            Some(l) if self.rule.expired(l.lease_until, w.wall()) => Seen::Expired(l),
            Some(l) => Seen::Held(l),
        })
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        let mut w = self.world.borrow_mut();
        if w.failing_renewals > 0 {
            w.failing_renewals -= 1;
            return Err(ReadError::Empty);
        }
        match w.lease {
            Some(l) if l.process_id == fresh.process_id => {
                w.lease = Some(fresh);
                Ok(Renewal::Renewed(fresh))
            }
            other => Ok(Renewal::Lost { holder: other.map(|l| l.process_id) }),
        }
    }

    fn take_over(&mut self, fresh: Lease, _seen: u64) -> io::Result<Option<Lease>> {
        let mut w = self.world.borrow_mut();
        if w.lose_takeovers {
            return Ok(None);
        }
        w.corrupt = false;
        w.lease = Some(fresh);
        Ok(Some(fresh))
    }

    fn release(&mut self, pid: i64) -> io::Result<()> {
        let mut w = self.world.borrow_mut();
        w.released.push(pid);
        if w.lease.is_some_and(|l| l.process_id == pid) {
            w.lease = None;
        }
        Ok(())
    }

    fn age(&self) -> Option<Duration> {
        self.world.borrow().age
    }

    fn set_budget(&mut self, budget: Option<Duration>) {
        self.world.borrow_mut().budgets.push(budget);
    }
}

fn rule(expiry: Expiry) -> ExpiryRule {
    ExpiryRule { expiry, resolution_ns: S, lease_ns: 9 * S }
}

/// A worker on the fake lease, with `settings` (key=value) on top of the
/// blog's defaults, and the world it lives in.
fn worker(settings: &[&str], world: World) -> (Worker<Fake>, Rc<RefCell<World>>) {
    let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
    let cfg = WorkerConfig::default().with(&settings).unwrap();
    let world = Rc::new(RefCell::new(world));
    let r = rule(cfg.worker.expiry);
    let lease = FakeLease { world: Rc::clone(&world), rule: r };
    (Worker::new(Fake(Rc::clone(&world)), cfg, 0, ME, Box::new(lease), r), world)
}

/// (seconds, event) of everything reported after `start`.
/// The events that tell the story (without `start`, and without the
/// `renewing` before each renewal, which has a test of its own).
fn story(world: &Rc<RefCell<World>>) -> Vec<(f64, EventKind)> {
    let w = world.borrow();
    w.events
        .iter()
        .filter(|(_, k, _)| !matches!(k, EventKind::Start | EventKind::Renewing))
        .map(|(t, k, _)| (*t as f64 / S as f64, *k))
        .collect()
}

#[test]
fn every_renewal_is_announced_before_it_is_written() {
    let mut world = term_at(10);
    world.script.push((4 * S, Box::new(|w: &mut World| w.failing_renewals = 1)));
    let (mut w, world) = worker(&[], world);
    w.begin();
    use EventKind::*;
    let steps: Vec<EventKind> = world
        .borrow()
        .events
        .iter()
        .map(|(_, k, _)| *k)
        .filter(|k| matches!(k, Renewing | Renewed | RenewFailed))
        .collect();
    assert_eq!(steps, vec![Renewing, Renewed, Renewing, RenewFailed, Renewing, Renewed]);
}

fn detail(world: &Rc<RefCell<World>>, kind: EventKind, n: usize) -> Detail {
    world.borrow().events.iter().filter(|(_, k, _)| *k == kind).nth(n).expect("such an event").2.clone()
}

fn term_at(secs: i64) -> World {
    World { term_at: Some(secs * S), ..World::default() }
}

/// Whole (scaled) seconds of the fake wall clock at `secs` after mono 0.
fn units(secs: i64) -> f64 {
    ((WALL_BASE + secs * S) / S) as f64
}

#[test]
fn a_leader_renews_on_its_grid_and_releases_on_sigterm() {
    let (mut w, world) = worker(&[], term_at(10));
    assert_eq!(w.begin(), 0);
    use EventKind::*;
    assert_eq!(
        story(&world),
        vec![(0.0, Acquired), (3.0, Renewed), (6.0, Renewed), (9.0, Renewed), (10.0, Released), (10.0, Exiting)]
    );
    assert_eq!(detail(&world, Acquired, 0).how.as_deref(), Some("start"));
    // The blog's Go: time.Now().Add(lease).Unix(), whole seconds.
    assert_eq!(detail(&world, Renewed, 0).lease_until, Some(units(3 + 9)));
    assert_eq!(world.borrow().released, vec![ME]);
    assert!(world.borrow().log[0].contains("[LEADER] Acquired lease at"), "{:?}", world.borrow().log);
}

#[test]
fn a_tick_woken_late_says_how_late_and_keeps_its_grid() {
    const MS: i64 = 1_000_000;
    let mut world = term_at(10);
    world.oversleep = Some((5 * S, 40 * MS));
    let theirs = Lease { process_id: OTHER, lease_until: units(30), token: None };
    world.script.push((5 * S, Box::new(move |w: &mut World| w.lease = Some(theirs))));
    let (mut w, world) = worker(&[], world);
    w.begin();
    let w = world.borrow();
    let late = |kind| w.events.iter().filter(|(_, k, _)| *k == kind).map(|(_, _, d)| d.late_us).collect::<Vec<_>>();
    // Each tick's first event carries it; what follows in the tick does not.
    assert_eq!(late(EventKind::Renewing), vec![Some(0), Some(40_000)]);
    assert!(late(EventKind::SteppedDown).iter().all(Option::is_none));
    // Lost at 6.04 s (another holder): the watcher's first tick is due one
    // interval later, at 9.04 s, and is woken 40 ms late again, at 9.08 s.
    let watched: Vec<_> = w.events.iter().filter(|(t, _, _)| *t > 6 * S + 40 * MS).collect();
    assert_eq!(watched.first().map(|(t, _, d)| (*t, d.late_us)), Some((9 * S + 80 * MS, Some(40_000))), "{watched:?}");
}

#[test]
fn a_tick_the_workers_own_job_ran_past_is_not_woken_late() {
    // The job of the epoch from 20 s takes 2 s, past the renewal due at
    // 21 s: the worker renews at 22 s, late by its own work, and the wait
    // it began then ended on time.
    let store = tempfile::tempdir().unwrap();
    let job = r#"epoch_job={"epoch":"20s","duration":"2s","strategy":"lease-only"}"#;
    let resource = format!("resource_dir={}", store.path().display());
    let (mut w, world) = worker(&[job, &resource], term_at(25));
    w.begin();
    let w = world.borrow();
    let renewing: Vec<(i64, Option<u64>)> =
        w.events.iter().filter(|(_, k, _)| *k == EventKind::Renewing).map(|(t, _, d)| (*t, d.late_us)).collect();
    assert!(renewing.contains(&(18 * S, Some(0))) && renewing.contains(&(22 * S, Some(0))), "{renewing:?}");
    assert!(w.events.iter().any(|(t, k, _)| (*t, *k) == (20 * S, EventKind::JobStarted)), "{:?}", w.events);
}

#[test]
fn exact_expiry_keeps_the_fraction() {
    let world = World { now: S / 2, term_at: Some(S), ..World::default() };
    let (mut w, world) = worker(&["expiry=exact"], world);
    w.begin();
    let until = detail(&world, EventKind::Acquired, 0).lease_until.unwrap();
    assert_eq!(until, (WALL_BASE + S / 2 + 9 * S) as f64 / 1e9);
    assert_ne!(until.fract(), 0.0);
}

#[test]
fn a_watcher_sees_the_lease_held_then_expired_and_takes_over() {
    let held = Lease { process_id: OTHER, lease_until: units(4), token: None };
    let (mut w, world) = worker(&[], World { lease: Some(held), ..term_at(7) });
    w.begin();
    use EventKind::*;
    // At 3 s the lease (until second +4) is valid; at 6 s it is past.
    assert_eq!(
        story(&world),
        vec![(0.0, NotAcquired), (3.0, HeldBy), (6.0, ExpiredSeen), (6.0, Acquired), (7.0, Released), (7.0, Exiting)]
    );
    assert_eq!(detail(&world, HeldBy, 0).holder, Some(OTHER));
    assert_eq!(detail(&world, Acquired, 0).how.as_deref(), Some("takeover"));
}

#[test]
fn the_blogs_strict_comparison_keeps_a_lease_valid_through_its_last_second() {
    // leaseUntil = second +3: at 3.5 s (second +3) it is not yet `< now`.
    let held = Lease { process_id: OTHER, lease_until: units(3), token: None };
    let world = World { now: S / 2, lease: Some(held), term_at: Some(4 * S), ..World::default() };
    let (mut w, world) = worker(&[], world);
    w.begin();
    assert_eq!(story(&world)[1].1, EventKind::HeldBy);
}

#[test]
fn a_lost_takeover_race_leaves_a_watcher() {
    let stale = Lease { process_id: OTHER, lease_until: units(-1), token: None };
    let world = World { lease: Some(stale), lose_takeovers: true, ..term_at(4) };
    let (mut w, world) = worker(&[], world);
    w.begin();
    use EventKind::*;
    assert_eq!(story(&world), vec![(0.0, NotAcquired), (3.0, ExpiredSeen), (3.0, TakeoverLost), (4.0, Exiting)]);
    assert!(world.borrow().released.is_empty(), "a watcher releases nothing");
}

#[test]
fn a_leader_steps_down_when_the_lease_names_another_holder() {
    let mut world = term_at(10);
    let theirs = Lease { process_id: OTHER, lease_until: units(30), token: None };
    world.script.push((4 * S, Box::new(move |w: &mut World| w.lease = Some(theirs))));
    let (mut w, world) = worker(&[], world);
    w.begin();
    use EventKind::*;
    assert_eq!(
        story(&world),
        // Stepped down at 6 s; the first watch is one interval later.
        vec![(0.0, Acquired), (3.0, Renewed), (6.0, SteppedDown), (9.0, HeldBy), (10.0, Exiting)]
    );
    assert_eq!(detail(&world, SteppedDown, 0).reason.as_deref(), Some("other-holder"));
    assert_eq!(detail(&world, SteppedDown, 0).holder, Some(OTHER));
}

#[test]
fn three_failed_renewals_in_a_row_step_down_without_deleting_the_file() {
    let mut world = term_at(11);
    world.script.push((S, Box::new(|w: &mut World| w.failing_renewals = 3)));
    let (mut w, world) = worker(&[], world);
    w.begin();
    use EventKind::*;
    assert_eq!(
        story(&world),
        vec![
            (0.0, Acquired),
            (3.0, RenewFailed),
            (6.0, RenewFailed),
            (9.0, RenewFailed),
            (9.0, SteppedDown),
            (11.0, Exiting)
        ]
    );
    assert_eq!(detail(&world, RenewFailed, 2).count, Some(3));
    assert_eq!(detail(&world, SteppedDown, 0).reason.as_deref(), Some("failures"));
    assert!(world.borrow().lease.is_some(), "the blog leaves the file");
}

#[test]
fn a_local_deadline_steps_down_a_lease_minus_the_margin_after_the_last_renewal_began() {
    // One margin for all, or this worker's (index 0) own among others'.
    for margin in ["belief_margin=1s", r#"belief_margin=["1s", "0s", "2s"]"#] {
        local_deadline_steps_down(margin);
    }
}

fn local_deadline_steps_down(margin: &str) {
    let mut world = term_at(12);
    world.script.push((S, Box::new(|w: &mut World| w.failing_renewals = 3)));
    let (mut w, world) = worker(&["belief=local-deadline", margin], world);
    w.begin();
    use EventKind::*;
    assert_eq!(
        story(&world),
        vec![
            (0.0, Acquired),
            (3.0, RenewFailed),
            (6.0, RenewFailed),
            (8.0, SteppedDown),
            (11.0, ExpiredSeen),
            (11.0, Acquired),
            (12.0, Released),
            (12.0, Exiting)
        ],
        "acquired at 0: the belief ends at 9 − 1 s, before a third failure could; its own lease, expired, is then taken like any other"
    );
    assert_eq!(detail(&world, SteppedDown, 0).reason.as_deref(), Some("deadline"));
    // No renewal may run past the deadline: each gets what is left of it.
    let budgets = world.borrow().budgets.clone();
    assert_eq!(
        budgets,
        vec![Some(Duration::from_secs(5)), None, Some(Duration::from_secs(2)), None],
        "the renewals at 3 s and 6 s"
    );
}

#[test]
fn until_renewal_fails_gives_no_budget() {
    let (mut w, world) = worker(&[], term_at(7));
    w.begin();
    assert!(world.borrow().budgets.iter().all(Option::is_none));
}

#[test]
fn an_unreadable_lease_under_retry_wedges_the_watcher() {
    let (mut w, world) = worker(&[], World { corrupt: true, age: Some(Duration::from_secs(60)), ..term_at(10) });
    w.begin();
    use EventKind::*;
    let kinds: Vec<EventKind> = story(&world).into_iter().map(|(_, k)| k).collect();
    assert_eq!(
        kinds,
        vec![NotAcquired, Unreadable, NotAcquired, Unreadable, NotAcquired, Unreadable, NotAcquired, Exiting]
    );
}

#[test]
fn an_unreadable_lease_older_than_the_lease_is_taken_over_under_expire_age() {
    let world = World { corrupt: true, age: Some(Duration::from_secs(10)), ..term_at(4) };
    let (mut w, world) = worker(&["unreadable=expire-age"], world);
    w.begin();
    use EventKind::*;
    assert_eq!(
        story(&world),
        vec![
            (0.0, NotAcquired),
            (3.0, Unreadable),
            (3.0, ExpiredSeen),
            (3.0, Acquired),
            (4.0, Released),
            (4.0, Exiting)
        ]
    );
}

#[test]
fn an_unreadable_lease_younger_than_the_lease_is_retried_under_expire_age() {
    let world = World { corrupt: true, age: Some(Duration::from_secs(2)), ..term_at(4) };
    let (mut w, world) = worker(&["unreadable=expire-age"], world);
    w.begin();
    use EventKind::*;
    assert_eq!(story(&world), vec![(0.0, NotAcquired), (3.0, Unreadable), (3.0, NotAcquired), (4.0, Exiting)]);
}

#[test]
fn without_release_a_leader_leaves_its_lease_on_sigterm() {
    let (mut w, world) = worker(&["release_on_term=false"], term_at(1));
    w.begin();
    use EventKind::*;
    assert_eq!(story(&world), vec![(0.0, Acquired), (1.0, Exiting)]);
    assert!(world.borrow().lease.is_some());
}

#[test]
fn a_one_shot_worker_tries_once_and_holds() {
    let (mut w, world) = worker(&["mode=one-shot"], term_at(20));
    w.begin();
    use EventKind::*;
    assert_eq!(story(&world), vec![(0.0, Acquired), (20.0, Released), (20.0, Exiting)]);
}

#[test]
fn a_staggered_worker_starts_its_delay_after_the_barrier() {
    let settings: Vec<String> = ["stagger=2s"].map(String::from).to_vec();
    let cfg = WorkerConfig::default().with(&settings).unwrap();
    let world = Rc::new(RefCell::new(term_at(5)));
    let lease = FakeLease { world: Rc::clone(&world), rule: rule(Expiry::UnixSeconds) };
    let mut w = Worker::new(Fake(Rc::clone(&world)), cfg, 2, ME, Box::new(lease), rule(Expiry::UnixSeconds));
    w.begin();
    let start = world.borrow().events.iter().find(|(_, k, _)| *k == EventKind::Start).unwrap().0;
    assert_eq!(start, 4 * S, "worker 2 of a 2 s stagger");
}

#[test]
fn every_acquire_variant_grants_a_real_lock_file_once() {
    for acquire in [Acquire::Naive, Acquire::Excl, Acquire::Link, Acquire::Rename] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leader.lock");
        let world = Rc::new(RefCell::new(World::default()));
        let mut won = Vec::new();
        for pid in [ME, OTHER] {
            let r = rule(Expiry::UnixSeconds);
            let file = crate::substrate::file::FileLease::new(
                crate::substrate::lockfile::LockFile::new(&path, acquire, Expiry::UnixSeconds),
                r,
                false,
            );
            let mut w = Worker::new(Fake(Rc::clone(&world)), WorkerConfig::default(), 0, pid, Box::new(file), r);
            won.push(w.try_acquire("start", false));
        }
        assert_eq!(won, vec![true, false], "{acquire:?}");
        let lease = crate::substrate::lockfile::read_lease(&path).unwrap();
        assert_eq!(lease.process_id, ME, "{acquire:?}");
        assert_eq!(lease.lease_until, units(9), "{acquire:?}");
    }
}
