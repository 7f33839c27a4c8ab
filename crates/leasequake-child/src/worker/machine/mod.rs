//! The built-in system under test: the blog's lease program, step by step,
//! as a state machine over a `Substrate` (where the lease lives) and an
//! `Env` (clocks, waiting, reporting). Roles: leader (renew every `renew`)
//! and watcher (look every `watch`, take over an expired lease); shutdown
//! releases; the optional epoch job runs at every boundary.

use std::collections::BTreeSet;

use super::env::{Env, Wake};
use crate::model::Resource;
use crate::model::clock::utc;
use crate::model::expiry::ExpiryRule;
use crate::model::history::{Detail, EventKind};
use crate::model::worker_config::WorkerConfig;
use crate::model::{Belief, Dur, Mode, Unreadable, WatchBy};
use crate::substrate::lockfile::{Lease, ReadError};
use crate::substrate::resource;
use crate::substrate::{Pushed, Renewal, Seen, Substrate};

/// Consecutive failed renewals after which a leader steps down (the blog's 3).
const MAX_RENEW_FAILURES: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Leader { failures: u32 },
    Watcher,
}

pub struct Worker<E: Env> {
    env: E,
    cfg: WorkerConfig,
    index: usize,
    pid: i64,
    lease: Box<dyn Substrate>,
    rule: ExpiryRule,
    started_ns: i64,
    /// This worker's current fencing token (while it leads, with tokens on).
    token: Option<u64>,
    /// The highest token seen in the lock file.
    seen_token: u64,
    /// Time of the barrier release as this worker saw it: epoch 0 starts here.
    origin_ns: i64,
    /// Epochs whose job this worker knows is done (by itself or, as the
    /// store said, by anyone): they are not asked about again.
    known_done: BTreeSet<u64>,
    /// (epoch, token) pairs the store refused: not retried under the same
    /// grant, but a new grant may run the epoch again.
    refused: BTreeSet<(u64, u64)>,
    /// Duration of the last substrate operation, until an event carries it.
    op_us: Option<u64>,
    /// How late this tick woke, until its first event carries it.
    late_us: Option<u64>,
    /// When the last substrate operation began (monotonic ns).
    op_start_ns: i64,
    /// Under `belief: local-deadline`, when this leader stops believing
    /// unless a renewal succeeds first (monotonic ns).
    deadline_ns: Option<i64>,
    /// Under `watch_by: push`, whether a watcher should (re)subscribe
    /// before its next wait: once per role change and per watch tick, so
    /// that a server that refuses is not asked in a loop.
    subscribe_due: bool,
    /// The subscription was just made: look at it before waiting.
    new_subscription: bool,
}

impl<E: Env> Worker<E> {
    /// A worker of index `index` with process id `pid`, its lease opened.
    pub fn new(env: E, cfg: WorkerConfig, index: usize, pid: i64, lease: Box<dyn Substrate>, rule: ExpiryRule) -> Self {
        let now = env.mono_ns();
        Worker {
            env,
            cfg,
            index,
            pid,
            lease,
            rule,
            started_ns: now,
            token: None,
            seen_token: 0,
            origin_ns: now,
            known_done: BTreeSet::new(),
            refused: BTreeSet::new(),
            op_us: None,
            late_us: None,
            op_start_ns: now,
            deadline_ns: None,
            subscribe_due: true,
            new_subscription: false,
        }
    }

    /// Set up and waiting for the barrier.
    pub fn ready(&mut self) {
        self.emit(EventKind::Ready, Detail::default());
    }

    /// Released: wait out this worker's start delay, report `start`, and run
    /// the configured mode until a shutdown signal. Returns the exit code.
    pub fn begin(&mut self) -> i32 {
        self.origin_ns = self.env.mono_ns();
        let start_delay = self.cfg.start_delay(self.index);
        if start_delay > Dur::ZERO {
            let until = self.env.mono_ns() + start_delay.as_ns() as i64;
            if self.env.wait_until(until).is_some() {
                return self.shut_down(Role::Watcher);
            }
        }
        self.started_ns = self.env.mono_ns();
        // Every worker woke at the same instant, but they run one after the
        // other on few cores: step aside before reporting (a write that wakes
        // the harness) or doing any real work, so that the others take their
        // start timestamps first (the start spread).
        std::thread::yield_now();
        self.env.emit_at(self.started_ns, EventKind::Start, Detail::default());
        match self.cfg.worker.mode {
            Mode::Loop => self.lease_loop(),
            Mode::OneShot => self.one_shot(),
        }
    }

    /// Report an event; the first one after a substrate operation carries
    /// that operation's duration (`op_us`).
    fn emit(&mut self, event: EventKind, detail: Detail) {
        let now = self.env.mono_ns();
        self.env.emit_at(now, event, Detail { op_us: self.op_us.take(), late_us: self.late_us.take(), ..detail });
    }

    /// Time one substrate operation, for the next event.
    fn timed<T>(&mut self, op: impl FnOnce(&mut dyn Substrate) -> T) -> T {
        let start = self.env.mono_ns();
        self.op_start_ns = start;
        let out = op(self.lease.as_mut());
        self.op_us = Some(((self.env.mono_ns() - start) / 1000) as u64);
        out
    }

    /// A line in the blog's format: `12.53s [Process: 60222] [WATCHER] …`.
    fn log(&mut self, text: &str) {
        let elapsed = (self.env.mono_ns() - self.started_ns) as f64 / 1e9;
        let line = format!("{elapsed:.2}s [Process: {}] {text}", self.pid);
        self.env.log(&line);
    }

    /// Wall-clock time of a `leaseUntil`, as HH:MM:SS (with ms when scaled).
    fn clock_text(&self, wall_ns: i64) -> String {
        let (_, _, _, h, m, s) = utc(wall_ns.div_euclid(1_000_000_000));
        if self.rule.resolution_ns >= 1_000_000_000 {
            format!("{h:02}:{m:02}:{s:02}")
        } else {
            format!("{h:02}:{m:02}:{s:02}.{:03}", wall_ns.rem_euclid(1_000_000_000) / 1_000_000)
        }
    }

    fn until_text(&self, lease_until: f64) -> String {
        self.clock_text(self.rule.to_wall_ns(lease_until))
    }

    fn fresh_lease(&self) -> Lease {
        Lease { process_id: self.pid, lease_until: self.rule.lease_until(self.env.wall_ns()), token: self.token }
    }

    fn lease_detail(&self, lease: Lease) -> Detail {
        Detail {
            holder: Some(lease.process_id),
            lease_until: Some(self.rule.unix_seconds(lease.lease_until)),
            // No nominal expiry where the lease does not expire by time:
            // the checker then does not split gaps into lease + detection.
            expires_in_ms: self.cfg.substrate.expires().then(|| self.cfg.timing.lease.as_ms_f64()),
            token: lease.token,
            member: self.lease.member(),
            ..Detail::default()
        }
    }

    /// A grant (acquire or renewal) succeeded: under a local deadline, the
    /// belief now lasts `lease − margin` from the request's start, the
    /// earliest moment the server can have begun the grant.
    fn granted(&mut self) {
        if self.cfg.worker.belief == Belief::LocalDeadline {
            let lasts =
                self.cfg.timing.lease.as_ns() as i64 - self.cfg.worker.belief_margin.of(self.index).as_ns() as i64;
            self.deadline_ns = Some(self.op_start_ns + lasts);
        }
    }

    /// Remember the highest fencing token seen in the lock file.
    fn saw(&mut self, lease: &Lease) {
        self.seen_token = self.seen_token.max(lease.token.unwrap_or(0));
    }

    /// Leader work: write the report with this grant's token. A leader that
    /// was paused does this on its first tick after resuming, before it
    /// learns (at the renewal) that it lost the lease: the stale write.
    fn work(&mut self) {
        let Some(dir) = self.cfg.resource_dir.clone() else { return };
        if self.cfg.worker.resource == Resource::None {
            return;
        }
        let token = self.token.unwrap_or(0);
        let (kind, error) = match resource::write(&dir, self.cfg.worker.resource, token, self.pid) {
            Ok(true) => (EventKind::WriteAccepted, None),
            Ok(false) => (EventKind::WriteRejected, None),
            Err(e) => (EventKind::WriteRejected, Some(e.to_string())),
        };
        self.emit(kind, Detail { token: Some(token), error, ..Detail::default() });
        let verdict = if kind == EventKind::WriteAccepted { "accepted" } else { "rejected" };
        self.log(&format!("[LEADER] Wrote report with token {token}: {verdict}"));
    }

    /// Try the configured acquire; report and log the outcome.
    fn try_acquire(&mut self, how: &str, take_over: bool) -> bool {
        self.token = None;
        let lease = self.fresh_lease();
        let seen = self.seen_token;
        let granted = self.timed(|s| if take_over { s.take_over(lease, seen) } else { s.acquire(lease, seen) });
        match granted {
            Ok(Some(lease)) => {
                self.granted();
                self.token = lease.token;
                self.seen_token = self.seen_token.max(lease.token.unwrap_or(0));
                let detail = Detail { how: Some(how.into()), ..self.lease_detail(lease) };
                self.emit(EventKind::Acquired, detail);
                let text = if how == "takeover" {
                    format!("[WATCHER] Takeover successful, now leader until {}", self.until_text(lease.lease_until))
                } else {
                    format!(
                        "[LEADER] Acquired lease at {}, valid until {}",
                        self.clock_text(self.env.wall_ns()),
                        self.until_text(lease.lease_until)
                    )
                };
                self.log(&text);
                self.work();
                true
            }
            Ok(None) => {
                let kind = if how == "takeover" { EventKind::TakeoverLost } else { EventKind::NotAcquired };
                self.emit(kind, Detail::default());
                if how == "takeover" {
                    self.log("[WATCHER] Lost the takeover race, still watching");
                }
                false
            }
            Err(e) => {
                let kind = if how == "takeover" { EventKind::TakeoverLost } else { EventKind::NotAcquired };
                self.emit(kind, Detail { error: Some(e.to_string()), ..Detail::default() });
                self.log(&format!("Could not acquire lease: {e}"));
                false
            }
        }
    }

    fn interval(&self, role: Role) -> i64 {
        match role {
            Role::Leader { .. } => self.cfg.timing.renew.as_ns() as i64,
            Role::Watcher => self.cfg.timing.watch.as_ns() as i64,
        }
    }

    fn lease_loop(&mut self) -> i32 {
        let mut role = if self.try_acquire("start", false) { Role::Leader { failures: 0 } } else { Role::Watcher };
        let mut next = self.env.mono_ns() + self.interval(role);
        let epoch_ns = self.cfg.worker.epoch_job.map(|j| j.epoch.as_ns() as i64);
        let mut boundary = epoch_ns.map_or(i64::MAX, |e| self.origin_ns + e);
        loop {
            let deadline = match role {
                Role::Leader { .. } => self.deadline_ns.unwrap_or(i64::MAX),
                Role::Watcher => i64::MAX,
            };
            let until = next.min(boundary).min(deadline);
            // A wake is late by what the machine adds to this wait: a tick
            // the worker's own work (an epoch's job) ran past is not.
            let waited_from = self.env.mono_ns();
            let woke = match self.subscription(role) {
                // A new subscription may hold news already (a lease freed
                // since the last look): read it before waiting.
                Some(_) if std::mem::take(&mut self.new_subscription) => Wake::Readable,
                Some(fd) => self.env.wait_or_readable(until, fd),
                None => self.env.wait_until(until).into(),
            };
            let pushed = match woke {
                Wake::Signal(_) => return self.shut_down(role),
                Wake::Readable => true,
                Wake::Deadline => false,
            };
            if pushed {
                // Told, not ticked: the tick grid stays where it is.
                role = self.on_push();
                if matches!(role, Role::Leader { .. }) {
                    if self.catch_up().is_some() {
                        return self.shut_down(role);
                    }
                    next = self.env.mono_ns() + self.interval(role);
                }
                continue;
            }
            if self.env.mono_ns() >= deadline {
                role = self.deadline_passed();
                next = self.env.mono_ns() + self.interval(role);
                continue;
            }
            if let Some(epoch_ns) = epoch_ns
                && self.env.mono_ns() >= boundary
            {
                // Every worker wakes at the boundary; whoever should run the
                // job does. Boundaries missed while stopped are not replayed.
                let now = self.env.mono_ns();
                while boundary <= now {
                    boundary += epoch_ns;
                }
                if self.on_boundary(role).is_some() {
                    return self.shut_down(role);
                }
                continue;
            }
            let was_leader = matches!(role, Role::Leader { .. });
            self.late_us = Some(((self.env.mono_ns() - next.max(waited_from)).max(0) / 1000) as u64);
            role = match role {
                Role::Leader { failures } => {
                    self.work();
                    match self.renew(failures) {
                        // A renewal that failed past the deadline (it
                        // blocked until its timeout) ends the belief now.
                        Role::Leader { .. } if self.env.mono_ns() >= self.deadline_ns.unwrap_or(i64::MAX) => {
                            self.deadline_passed()
                        }
                        role => role,
                    }
                }
                Role::Watcher => {
                    self.subscribe_due = true;
                    self.watch()
                }
            };
            // A tick that said nothing leaves nothing for a later event.
            self.late_us = None;
            // A leader, new or renewed, catches up on an epoch nobody ran.
            if matches!(role, Role::Leader { .. }) && self.catch_up().is_some() {
                return self.shut_down(role);
            }
            let now = self.env.mono_ns();
            if was_leader != matches!(role, Role::Leader { .. }) {
                self.subscribe_due = true;
                // First tick of a new role is one interval after the change.
                next = now + self.interval(role);
            } else {
                // Keep the grid, like Go's time.Ticker: ticks missed while
                // stopped or slow are dropped, not replayed.
                let step = self.interval(role);
                next += step;
                if next <= now {
                    next += ((now - next) / step + 1) * step;
                }
            }
        }
    }

    fn renew(&mut self, failures: u32) -> Role {
        let fresh = self.fresh_lease();
        // Said before the write: a death inside it is then visible as such.
        self.emit(EventKind::Renewing, Detail::default());
        // Under a local deadline the renewal may not outlast the belief.
        let budget = self.deadline_ns.map(|d| std::time::Duration::from_nanos((d - self.env.mono_ns()).max(0) as u64));
        self.lease.set_budget(budget);
        let renewed = self.timed(|s| s.renew(fresh));
        self.lease.set_budget(None);
        match renewed {
            Err(e) => self.renew_failed(failures, e.to_string()),
            Ok(Renewal::Lost { holder }) => {
                self.emit(
                    EventKind::SteppedDown,
                    Detail { reason: Some("other-holder".into()), holder, ..Detail::default() },
                );
                let who = holder.map_or_else(|| "nobody".to_string(), |h| h.to_string());
                self.log(&format!("[LEADER] Lease now held by {who}, stepping down"));
                Role::Watcher
            }
            Ok(Renewal::Renewed(lease)) => {
                self.granted();
                self.saw(&lease);
                self.emit(EventKind::Renewed, self.lease_detail(lease));
                self.log(&format!("[LEADER] Lease renewed, valid until {}", self.until_text(lease.lease_until)));
                Role::Leader { failures: 0 }
            }
        }
    }

    /// The local deadline passed with no renewal: the grant may be over,
    /// so stop believing (the lease is left to expire on the server).
    fn deadline_passed(&mut self) -> Role {
        self.deadline_ns = None;
        self.emit(EventKind::SteppedDown, Detail { reason: Some("deadline".into()), ..Detail::default() });
        self.log("[LEADER] No renewal within the lease, stepping down");
        Role::Watcher
    }

    fn renew_failed(&mut self, failures: u32, error: String) -> Role {
        let count = failures + 1;
        self.log(&format!("[LEADER] Could not renew lease ({error}), failure {count}/{MAX_RENEW_FAILURES}"));
        self.emit(EventKind::RenewFailed, Detail { count: Some(count), error: Some(error), ..Detail::default() });
        if count >= MAX_RENEW_FAILURES {
            // The blog steps down without deleting the file.
            self.emit(EventKind::SteppedDown, Detail { reason: Some("failures".into()), ..Detail::default() });
            self.log("[LEADER] Too many failed renewals, stepping down");
            Role::Watcher
        } else {
            Role::Leader { failures: count }
        }
    }

    fn watch(&mut self) -> Role {
        let (current, expired) = match self.timed(|s| s.observe()) {
            Ok(Seen::Held(l)) => (l, false),
            Ok(Seen::Expired(l)) => (l, true),
            Ok(Seen::Free) => return self.unreadable(ReadError::Missing),
            Err(e) => return self.unreadable(e),
        };
        self.saw(&current);
        let seen = Detail {
            holder: Some(current.process_id),
            lease_until: Some(self.rule.unix_seconds(current.lease_until)),
            token: current.token,
            member: self.lease.member(),
            ..Detail::default()
        };
        let (holder, until) = (current.process_id, self.until_text(current.lease_until));
        if expired {
            self.emit(EventKind::ExpiredSeen, seen);
            self.log(&format!("[WATCHER] Lease held by {holder} expired at {until}, attempting takeover"));
            self.take_over()
        } else {
            self.emit(EventKind::HeldBy, seen);
            self.log(&format!("[WATCHER] Lease held by {holder}, valid until {until}"));
            Role::Watcher
        }
    }

    /// Under `watch_by: push`, a watcher's subscription: made (or made
    /// again after it broke) when due, dropped by a leader. None: wait for
    /// the tick alone.
    fn subscription(&mut self, role: Role) -> Option<std::os::fd::RawFd> {
        if self.cfg.worker.watch_by != WatchBy::Push {
            return None;
        }
        if matches!(role, Role::Leader { .. }) {
            self.lease.unsubscribe();
            return None;
        }
        if self.lease.subscribed().is_none() && std::mem::take(&mut self.subscribe_due) {
            match self.lease.subscribe() {
                Ok(()) => self.new_subscription = self.lease.subscribed().is_some(),
                Err(e) => {
                    self.emit(EventKind::Notified, Detail { error: Some(e.to_string()), ..Detail::default() });
                    self.log(&format!("[WATCHER] Could not subscribe to the lease ({e}), polling until the next tick"));
                }
            }
        }
        self.lease.subscribed()
    }

    /// The server pushed something to a watcher: if it says the lease is
    /// gone, take over at once.
    fn on_push(&mut self) -> Role {
        match self.lease.pushed() {
            Ok(Pushed::Nothing) => Role::Watcher,
            Ok(Pushed::Gone(reason)) => {
                self.emit(EventKind::Notified, Detail { reason: Some(reason.into()), ..Detail::default() });
                self.log(&format!("[WATCHER] The server says the lease is gone ({reason}), attempting takeover"));
                self.take_over()
            }
            Err(e) => {
                self.emit(EventKind::Notified, Detail { error: Some(e.to_string()), ..Detail::default() });
                self.log(&format!("[WATCHER] The subscription ended ({e}), polling until the next tick"));
                Role::Watcher
            }
        }
    }

    fn take_over(&mut self) -> Role {
        if self.try_acquire("takeover", true) { Role::Leader { failures: 0 } } else { Role::Watcher }
    }

    fn unreadable(&mut self, error: ReadError) -> Role {
        let missing = matches!(error, ReadError::Missing);
        self.emit(EventKind::Unreadable, Detail { error: Some(error.to_string()), ..Detail::default() });
        if !missing && self.cfg.worker.unreadable == Unreadable::ExpireAge {
            let lease = self.cfg.timing.lease.as_std();
            if let Some(age) = self.lease.age()
                && age > lease
            {
                self.emit(EventKind::ExpiredSeen, Detail { error: Some(error.to_string()), ..Detail::default() });
                self.log("[WATCHER] Unreadable lease file is older than the lease, attempting takeover");
                return self.take_over();
            }
        }
        if !missing {
            self.log("[WATCHER] Could not read lease file, will retry");
        }
        // The blog treats any read error as a chance to acquire; with an
        // empty file O_EXCL fails here forever.
        if self.try_acquire("retry", false) { Role::Leader { failures: 0 } } else { Role::Watcher }
    }

    fn one_shot(&mut self) -> i32 {
        let role = if self.try_acquire("start", false) { Role::Leader { failures: 0 } } else { Role::Watcher };
        if role == Role::Watcher {
            self.log("Did not become leader");
        }
        // Hold (or not) until the harness ends the trial.
        let _ = self.env.wait_until(i64::MAX);
        self.shut_down(role)
    }

    fn shut_down(&mut self, role: Role) -> i32 {
        if matches!(role, Role::Leader { .. }) && self.cfg.worker.release_on_term {
            // Leadership ends when the release begins, not when it is
            // done: a watcher may take the lease the moment it is gone,
            // before this worker could report it.
            let began = self.env.mono_ns();
            self.log("Received shutdown signal, releasing lease");
            let detail = match self.lease.release(self.pid) {
                Ok(()) => Detail::default(),
                Err(e) => Detail { error: Some(e.to_string()), ..Detail::default() },
            };
            self.env.emit_at(began, EventKind::Released, detail);
            self.log("Lease released");
        } else {
            self.log("Received shutdown signal, exiting");
        }
        self.emit(EventKind::Exiting, Detail { code: Some(0), ..Detail::default() });
        0
    }
}

mod job;

#[cfg(test)]
mod tests;
