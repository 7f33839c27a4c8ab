//! The history of one trial: the contract between `trial/` (which records it)
//! and `check/` (which judges it).
//!
//! Times are integer microseconds since the trial's barrier release. Workers
//! and the harness stamp events with `CLOCK_MONOTONIC` (system-wide on Linux);
//! the runner subtracts the barrier time and rounds to µs once, so that a
//! history re-read from `events.csv` (which stores `t_ms` with three decimals)
//! is bit-for-bit the history the checker saw during the run.

use serde::{Deserialize, Serialize};

/// Microseconds since the barrier release.
pub type Micros = i64;

/// The `reason` of the `trial_end` of a soak's trial kept up to its last
/// whole window after its run was stopped: the workers still alive there
/// have no `exit` (they died with the run, later).
pub const TRIAL_CUT: &str = "cut";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    // --- recorded by the harness ---
    /// A worker process was spawned.
    Spawn,
    /// The barrier was released: t = 0 by definition.
    Barrier,
    /// A fault was delivered (detail: `fault`, `action`; `error` if it could
    /// not be, e.g. no leader to target). `stop`/`cont` open and close pauses.
    Fault,
    /// The harness observed a worker's death (detail: `code` or `signal`).
    Exit,
    /// The trial's duration elapsed; cleanup starts. The checker ignores
    /// everything after it.
    TrialEnd,
    /// The harness's proxy dropped a reply from the server to this worker
    /// (its link was losing replies): the request it answered had reached
    /// the server and taken effect there, unknown to the worker.
    ReplyLost,
    /// The harness looked at the lease on the service itself
    /// (`substrate.observe`) and found it held by a grant (`grant`; the
    /// worker, where the service names its process): recorded when what it
    /// sees changes.
    LeaseHeld,
    /// ... and found it free.
    LeaseFree,
    /// ... and could not read it (a paused server, a split service).
    LeaseUnseen,

    // --- reported by workers ---
    /// Worker is initialised and waiting on the barrier.
    Ready,
    /// Worker passed the barrier (its spread is the start spread).
    Start,
    /// Worker became leader (detail: `how` = start | takeover | retry,
    /// `lease_until`, `expires_in_ms`, `token`).
    Acquired,
    /// Worker tried to acquire and lost (initial attempt or one-shot race).
    NotAcquired,
    /// Leader begins to rewrite its lease: a `renewed` or `renew_failed`
    /// follows, unless the worker dies in between (for a lock file, between
    /// the truncate and the write that leaves it empty).
    Renewing,
    /// Leader rewrote its lease (detail: `lease_until`, `expires_in_ms`).
    Renewed,
    /// Leader could not read/parse/write its lease (detail: `count`, `error`).
    RenewFailed,
    /// Watcher saw a valid lease (detail: `holder`, `lease_until`).
    HeldBy,
    /// Watcher saw an expired lease and will try to take over.
    ExpiredSeen,
    /// Watcher's takeover create failed: another process won.
    TakeoverLost,
    /// Watcher was told by the lease server that the lease is gone
    /// (detail: `reason` = what the server said), and will try to take
    /// over at once; or its subscription failed (detail: `error`).
    Notified,
    /// Watcher could not read/parse the lock file (detail: `error`).
    Unreadable,
    /// Leader gave up leadership (detail: `reason`).
    SteppedDown,
    /// Leader removed its lock file on SIGTERM/SIGINT.
    Released,
    /// Worker is about to exit (detail: `code`).
    Exiting,
    /// Worker reached a failpoint and stalls there (detail: `reason`).
    Failpoint,
    /// The protected resource took the leader's write (detail: `token`).
    WriteAccepted,
    /// The protected resource refused it: a higher token was seen.
    WriteRejected,
    /// Worker began the epoch's job (detail: `epoch`, `token`).
    JobStarted,
    /// The store took the job's result: one execution of the epoch's job
    /// took effect (two for one epoch is a duplicate).
    JobApplied,
    /// The store already held this epoch's result and the put changed
    /// nothing (idempotent job): the job ran again, harmlessly.
    JobRepeated,
    /// The store refused the result (a lower fencing token, or a result for
    /// the epoch already created).
    JobRejected,
}

impl EventKind {
    /// Reported by a worker, not recorded by the harness.
    pub fn is_worker_event(self) -> bool {
        !matches!(
            self,
            EventKind::Spawn
                | EventKind::Barrier
                | EventKind::Fault
                | EventKind::Exit
                | EventKind::TrialEnd
                | EventKind::ReplyLost
                | EventKind::LeaseHeld
                | EventKind::LeaseFree
                | EventKind::LeaseUnseen
        )
    }

    pub const ALL: [EventKind; 31] = [
        EventKind::Spawn,
        EventKind::Barrier,
        EventKind::Fault,
        EventKind::Exit,
        EventKind::TrialEnd,
        EventKind::ReplyLost,
        EventKind::LeaseHeld,
        EventKind::LeaseFree,
        EventKind::LeaseUnseen,
        EventKind::Ready,
        EventKind::Start,
        EventKind::Acquired,
        EventKind::NotAcquired,
        EventKind::Renewing,
        EventKind::Renewed,
        EventKind::RenewFailed,
        EventKind::HeldBy,
        EventKind::ExpiredSeen,
        EventKind::TakeoverLost,
        EventKind::Notified,
        EventKind::Unreadable,
        EventKind::SteppedDown,
        EventKind::Released,
        EventKind::Exiting,
        EventKind::Failpoint,
        EventKind::WriteAccepted,
        EventKind::WriteRejected,
        EventKind::JobStarted,
        EventKind::JobApplied,
        EventKind::JobRepeated,
        EventKind::JobRejected,
    ];

    /// The name used in events.csv, the worker protocol and `after:`.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Spawn => "spawn",
            EventKind::Barrier => "barrier",
            EventKind::Fault => "fault",
            EventKind::Exit => "exit",
            EventKind::TrialEnd => "trial_end",
            EventKind::ReplyLost => "reply_lost",
            EventKind::LeaseHeld => "lease_held",
            EventKind::LeaseFree => "lease_free",
            EventKind::LeaseUnseen => "lease_unseen",
            EventKind::Ready => "ready",
            EventKind::Start => "start",
            EventKind::Acquired => "acquired",
            EventKind::NotAcquired => "not_acquired",
            EventKind::Renewing => "renewing",
            EventKind::Renewed => "renewed",
            EventKind::RenewFailed => "renew_failed",
            EventKind::HeldBy => "held_by",
            EventKind::ExpiredSeen => "expired_seen",
            EventKind::TakeoverLost => "takeover_lost",
            EventKind::Notified => "notified",
            EventKind::Unreadable => "unreadable",
            EventKind::SteppedDown => "stepped_down",
            EventKind::Released => "released",
            EventKind::Exiting => "exiting",
            EventKind::Failpoint => "failpoint",
            EventKind::WriteAccepted => "write_accepted",
            EventKind::WriteRejected => "write_rejected",
            EventKind::JobStarted => "job_started",
            EventKind::JobApplied => "job_applied",
            EventKind::JobRepeated => "job_repeated",
            EventKind::JobRejected => "job_rejected",
        }
    }

    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Kind-specific detail. Every field is optional; `events.csv` stores it as a
/// compact JSON object without the absent fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Detail {
    /// pid named in the lock file (watchers) or the holder itself (leaders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<i64>,
    /// `leaseUntil` of the lease written or read, in Unix seconds (the lock
    /// file itself counts units of the scaled second under a time scale).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<f64>,
    /// Nominal expiry of the lease just written, relative to this event
    /// (write time + lease). `lease_remainder` is measured against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<f64>,
    /// The member of a replicated lease service that served the operation
    /// (its index), where the substrate knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<usize>,
    /// Fencing token, where the substrate provides one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The barrier's CLOCK_MONOTONIC time in ns (barrier event only): to
    /// line up timestamps taken outside the history with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mono_ns: Option<i64>,
    /// The harness's wall clock at the barrier in ns since the Unix epoch
    /// (barrier event only): to place a `lease_until` on the trial's time
    /// axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ns: Option<i64>,
    /// Duration of the substrate operation behind this event (acquire,
    /// renew or observe), µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_us: Option<u64>,
    /// How late the built-in worker woke for the tick of its grid (a
    /// renewal or a watch) that this event is the first of, µs on its own
    /// clock: a worker the machine woke late acts late, which is the
    /// machine's doing, not the protocol's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_us: Option<u64>,
    /// Epoch of the exactly-once job (job_* events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The grant the service holds the lease for, as it names it
    /// (`lease_held`): a key and its value, a lock file and its holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// `lease_*`: how long before this look the last look that saw
    /// otherwise began, µs: the change came within that time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_us: Option<u64>,
    /// How leadership was obtained: start | takeover | retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// Index of the fault in the experiment's schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<usize>,
    /// Primitive fault action delivered: kill, term, stop, cont, lock-empty,
    /// lock-delete, lock-corrupt, lock-stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Exit code (normal exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Terminating signal name, e.g. SIGKILL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Consecutive failure count (renew_failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Why (stepped_down): failures | other-holder; on a `trial_end`,
    /// `cut` (TRIAL_CUT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Error text, for failed operations or undeliverable faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How late a delivered fault took effect (actual − scheduled), µs:
    /// the instrument's own error, beside the fault it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_us: Option<i64>,
    /// The machine's CPU pressure counter (`/proc/pressure/cpu`, `some
    /// total`: time in which a runnable task waited for a CPU), µs since
    /// boot, read at the barrier and at the trial's end: the checker takes
    /// the difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_us: Option<u64>,
    /// The machine's steal time (`/proc/stat`, summed over CPUs: time the
    /// hypervisor ran something else), µs since boot, read beside
    /// `cpu_pressure_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_us: Option<u64>,
}

impl Detail {
    pub fn to_json(&self) -> String {
        let s = serde_json::to_string(self).expect("Detail serialises");
        if s == "{}" { String::new() } else { s }
    }

    pub fn from_json(s: &str) -> Result<Detail, serde_json::Error> {
        if s.trim().is_empty() { Ok(Detail::default()) } else { serde_json::from_str(s) }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub t_us: Micros,
    /// Worker index, for worker events and harness events about a worker.
    pub worker: Option<usize>,
    pub pid: Option<i32>,
    pub kind: EventKind,
    pub detail: Detail,
}

impl Event {
    pub fn new(t_us: Micros, worker: Option<usize>, kind: EventKind) -> Event {
        Event { t_us, worker, pid: None, kind, detail: Detail::default() }
    }

    pub fn with_detail(mut self, detail: Detail) -> Event {
        self.detail = detail;
        self
    }

    pub fn with_pid(mut self, pid: i32) -> Event {
        self.pid = Some(pid);
        self
    }
}

/// No trial lasts a year: a time further from its barrier is not one a run
/// wrote (a program's own stamp from another clock).
pub const MAX_TRIAL_US: Micros = 365 * 86_400_000_000;

/// Where a trial's events go as the harness records them: in time order,
/// but for an event that reached the harness later than the events after
/// it had already gone (a sink that needs order sorts what it was given).
/// An error stops the trial: a history that cannot be kept is no
/// measurement.
pub trait EventSink: Send {
    fn event(&mut self, event: Event) -> std::io::Result<()>;
}

impl EventSink for Vec<Event> {
    fn event(&mut self, event: Event) -> std::io::Result<()> {
        self.push(event);
        Ok(())
    }
}

/// All events of one trial, ordered by time (stable for equal times, so the
/// order in which one process reported its events is kept).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    /// Events in time order; those at the same µs keep their arrival order.
    pub fn new(mut events: Vec<Event>) -> History {
        if !events.is_sorted_by_key(|e| e.t_us) {
            sort_stably_in_place(&mut events);
        }
        History { events }
    }
}

/// A stable sort by time without the stable sort's scratch copy of half the
/// events (150 B an event, a third of a big trial's peak memory): sort
/// (time, arrival) keys, then apply that permutation by following cycles.
fn sort_stably_in_place(events: &mut [Event]) {
    const DONE: u32 = u32::MAX;
    if events.len() >= DONE as usize {
        events.sort_by_key(|e| e.t_us);
        return;
    }
    let mut order: Vec<u32> = (0..events.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (events[i as usize].t_us, i));
    // Position `i` takes the event now at `order[i]`.
    for start in 0..events.len() {
        let mut cur = start;
        while order[cur] != DONE {
            let next = order[cur] as usize;
            order[cur] = DONE;
            if next == start {
                break;
            }
            events.swap(cur, next);
            cur = next;
        }
    }
}

/// Convert a millisecond value as written in CSV back to microseconds.
pub fn ms_to_us(ms: f64) -> Micros {
    (ms * 1000.0).round() as Micros
}

pub fn us_to_ms(us: Micros) -> f64 {
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_round_trips_through_json() {
        let d = Detail { holder: Some(42), lease_until: Some(1715430000.0), ..Detail::default() };
        assert_eq!(Detail::from_json(&d.to_json()).unwrap(), d);
        assert_eq!(Detail::default().to_json(), "");
    }

    #[test]
    fn history_sorts_by_time_and_keeps_arrival_order_at_equal_times() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 3, 10, 1000] {
            // Few distinct times, so that ties are common; the pid records arrival.
            let events: Vec<Event> = (0..n)
                .map(|i| Event::new(rng.random_range(0..20), None, EventKind::HeldBy).with_pid(i as i32))
                .collect();
            let mut expected = events.clone();
            expected.sort_by_key(|e| e.t_us);
            assert_eq!(History::new(events).events, expected, "n = {n}");
        }
    }

    #[test]
    fn event_kind_names_are_snake_case() {
        assert_eq!(EventKind::ExpiredSeen.name(), "expired_seen");
        for k in EventKind::ALL {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.name()));
            assert_eq!(EventKind::from_name(k.name()), Some(k));
        }
    }
}
