//! What the checker needs to know of the settings: the scaled lease
//! timing, in µs (the wedge threshold, the crash bound, the epochs).

use leasequake_model::duration::Dur;
use leasequake_model::experiment::Experiment;
use leasequake_model::history::Micros;
use leasequake_model::program::ProgramExpiry;
use leasequake_model::settings::{Expiry, Failpoint, Kind, Push, StartMode, WatchBy};

/// How long after a lease's end etcd may still show its key: its lessor
/// revokes expired leases in a loop that runs every 500 ms (etcd 3.4's
/// `lessor.runLoop`), then the revocation is a Raft proposal, committed and
/// applied before the key is gone; 50 ms is allowed for that on a loaded
/// machine. Real time: the server's loop does not scale.
pub const ETCD_EXPIRY_SLACK_US: Micros = 550_000;

/// How long after a key's TTL Redis may publish its `expired` event: its
/// expiry cycle runs every 1/hz (100 ms at the default hz 10) and, with
/// few keys that have a TTL, samples them all; 10 ms is allowed beside.
pub const REDIS_EXPIRE_CYCLE_US: Micros = 110_000;

/// Scaled lease settings of the trial, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckParams {
    pub lease_us: Micros,
    pub renew_us: Micros,
    pub watch_us: Micros,
    /// Expiry resolution (1 s × time scale under `unix-seconds`, 0 if exact).
    pub resolution_us: Micros,
    /// Epoch length of the exactly-once job, if the trial runs one.
    pub epoch_us: Option<Micros>,
    /// The lock goes with its holder (flock, PostgreSQL advisory locks):
    /// the kernel or the server drops it when the holder dies.
    pub dropped_at_death: bool,
    /// The lease runs out by its `lease_until` while its holder lives
    /// (every lease but a lock held by a process or a session; a file
    /// lease that also checks its holder's pid is both).
    pub expires: bool,
    /// The lease is a lock file rewritten in place (truncate, then write):
    /// a death inside a renewal leaves it empty.
    pub rewritten_in_place: bool,
    /// How much later than its `lease_until` a server may still show a
    /// lease: Redis keeps a TTL in whole milliseconds on its own clock;
    /// etcd's lessor looks for expired leases every 500 ms and then
    /// commits each revocation through Raft.
    pub server_slack_us: Micros,
    /// What the server tells subscribed watchers (`watch_by: push`).
    pub push: Push,
    /// How much later than the end of a lease that expired a subscribed
    /// watcher may be told: Redis publishes `expired` when its expiry
    /// cycle samples the key (every 1/hz) unless a client touches it first.
    pub push_slack_us: Micros,
    /// The lease service has several servers that may split: a request
    /// whose reply was lost may then have been granted beside another
    /// worker's grant (a single server grants one at a time).
    pub replicated: bool,
    /// How late a fault may take effect before the trial is flagged as
    /// taken on a machine too busy for its time scale, µs (0: no budget).
    pub fault_budget_us: Micros,
    /// How far the machine may move the trial (an operation's stall beyond
    /// its kind's median, the start spread beyond the planned one) before
    /// the trial counts as disturbed, µs (0: not judged).
    pub disturbance_budget_us: Micros,
    /// How far apart the workers are meant to start: 0 when one barrier
    /// releases them, the stagger times the later workers when staggered,
    /// None when each draws its own moment.
    pub planned_start_spread_us: Option<Micros>,
    /// Every acquisition does the same work (the built-in worker's one
    /// request or file create), so one slower than the rest is the
    /// machine's doing. A program's library decides what an acquisition
    /// does by what it finds (a dead holder's marker to break, a holder to
    /// ping and wait out): its time is not judged.
    pub uniform_acquisitions: bool,
    /// How long a worker's stall at its failpoint is the experiment's: the
    /// built-in worker's `failpoint_delay`; a program's stall is its own,
    /// of a length nothing says, so up to a renew interval after it (as
    /// long as a fault without an end acts).
    pub failpoint_delay_us: Micros,
}

impl CheckParams {
    /// A gap longer than this at trial end, with a live unpaused worker, is a
    /// wedge: `lease + watch + resolution`, and the server's slack.
    pub fn wedge_threshold_us(&self) -> Micros {
        self.lease_us + self.watch_us + self.resolution_us + self.server_slack_us
    }

    /// The theory's bound on the gap after a SIGKILL of the leader at a
    /// uniform moment (docs/metrics.md): `[lease − renew, lease + watch +
    /// resolution + server slack]` for a lease that must expire (without
    /// the watch where the server pushes the expiry to watchers); `[0, watch]` for a lock
    /// dropped at its holder's death, found free at the next watch.
    pub fn crash_bound_us(&self) -> (Micros, Micros) {
        if self.dropped_at_death {
            (0, self.watch_us)
        } else if self.push == Push::ReleaseAndExpiry {
            // Told when the server frees it: no watch interval to wait out.
            (
                self.lease_us - self.renew_us,
                self.lease_us + self.resolution_us + self.server_slack_us + self.push_slack_us,
            )
        } else {
            (self.lease_us - self.renew_us, self.wedge_threshold_us())
        }
    }

    /// The parameters of a trial of `exp`.
    pub fn of(exp: &Experiment) -> CheckParams {
        // A program's lease is judged as the experiment says it is; the
        // built-in worker's as its settings say, but a server judges expiry
        // itself, to the millisecond.
        let (truncated, dropped_at_death, expires) = match &exp.program {
            Some(p) => (
                p.expiry == ProgramExpiry::UnixSeconds,
                matches!(p.expiry, ProgramExpiry::HolderDeath | ProgramExpiry::HolderDeathOrExact),
                p.expiry != ProgramExpiry::HolderDeath,
            ),
            None => {
                let session = matches!(exp.substrate.kind, Kind::Flock | Kind::PostgresAdvisory);
                (exp.worker.expiry == Expiry::UnixSeconds && exp.substrate.kind.server().is_none(), session, !session)
            }
        };
        let resolution_us = if truncated { exp.lease.resolution.as_us() as i64 } else { 0 };
        CheckParams {
            lease_us: exp.lease.lease.as_us() as i64,
            renew_us: exp.lease.renew.as_us() as i64,
            watch_us: exp.lease.watch.as_us() as i64,
            resolution_us,
            epoch_us: exp.worker.epoch_job.map(|j| j.epoch.as_us() as i64),
            dropped_at_death,
            expires,
            // Only the built-in worker's lock file is known to be rewritten
            // in place (truncated, then written).
            rewritten_in_place: exp.program.is_none() && exp.substrate.kind == Kind::File,
            server_slack_us: match exp.substrate.kind {
                Kind::Redis => 1000,
                Kind::Etcd => ETCD_EXPIRY_SLACK_US,
                _ => 0,
            },
            // A program watches its own way: nothing is known of its pushes.
            push: if exp.program.is_none() && exp.worker.watch_by == WatchBy::Push {
                exp.substrate.kind.push()
            } else {
                Push::Nothing
            },
            push_slack_us: if exp.substrate.kind == Kind::Redis { REDIS_EXPIRE_CYCLE_US } else { 0 },
            replicated: exp.substrate.replicated(),
            fault_budget_us: fault_budget_us(exp),
            disturbance_budget_us: disturbance_budget_us(exp),
            planned_start_spread_us: match exp.start {
                StartMode::Barrier if exp.program.is_none() => Some(0),
                StartMode::Staggered if exp.program.is_none() => {
                    Some(exp.stagger.as_us() as i64 * exp.workers.saturating_sub(1) as i64)
                }
                // A program's start is the harness's spawn, not its own.
                _ => None,
            },
            uniform_acquisitions: exp.program.is_none(),
            failpoint_delay_us: match &exp.program {
                Some(_) => exp.lease.renew.as_us() as i64,
                None if exp.worker.failpoint != Failpoint::None => exp.worker.failpoint_delay.as_us() as i64,
                None => 0,
            },
        }
    }
}

/// The experiment's fault budget (`fault_budget:`), or by default 1 % of its
/// smallest scaled interval (lease, renew, watch): a fault that late moves a
/// result by about as much as that interval's own jitter.
pub fn fault_budget_us(exp: &Experiment) -> Micros {
    if let Some(b) = exp.fault_budget {
        return if b == Dur::ZERO { 0 } else { b.as_us().max(1) as i64 };
    }
    // At least 1 µs: 0 is "no budget", which only `fault_budget: 0s` says.
    let l = &exp.lease;
    (l.lease.min(l.renew).min(l.watch).as_us() / 100).max(1) as i64
}

/// Below this, in real time, an operation's stall is the operating
/// system's own jitter (a wake-up, a page fault, a syscall on an idle
/// machine), not the machine disturbing the trial; it does not shrink with
/// the time scale.
pub const DISTURBANCE_FLOOR_US: Micros = 1000;

/// The experiment's disturbance budget (`disturbance_budget:`), or by
/// default 1 % of its smallest scaled interval, as the fault budget, but
/// never below `DISTURBANCE_FLOOR_US`: a stall that long moves a phase the
/// experiment set on purpose by about as much as a late fault would.
pub fn disturbance_budget_us(exp: &Experiment) -> Micros {
    match exp.disturbance_budget {
        Some(b) if b == Dur::ZERO => 0,
        Some(b) => b.as_us().max(1) as i64,
        None => {
            let l = &exp.lease;
            ((l.lease.min(l.renew).min(l.watch).as_us() / 100) as i64).max(DISTURBANCE_FLOOR_US)
        }
    }
}

/// For the checker's tests: a lease a server judges (exact expiry, not a
/// file rewritten in place), in µs.
#[cfg(test)]
pub(crate) fn server_lease(lease_us: Micros, renew_us: Micros, watch_us: Micros) -> CheckParams {
    CheckParams { lease_us, renew_us, watch_us, resolution_us: 0, rewritten_in_place: false, ..BLOG }
}

/// The blog's lock file, unscaled: a 9 s lease renewed and watched every
/// 3 s, rewritten in place, read to the whole second (threshold 9 + 3 + 1
/// = 13 s), nothing judged of the machine. For the checker's tests.
#[cfg(test)]
pub(crate) const BLOG: CheckParams = CheckParams {
    lease_us: 9_000_000,
    renew_us: 3_000_000,
    watch_us: 3_000_000,
    resolution_us: 1_000_000,
    epoch_us: None,
    dropped_at_death: false,
    expires: true,
    rewritten_in_place: true,
    server_slack_us: 0,
    push: Push::Nothing,
    push_slack_us: 0,
    replicated: false,
    fault_budget_us: 0,
    disturbance_budget_us: 0,
    planned_start_spread_us: None,
    uniform_acquisitions: true,
    failpoint_delay_us: 0,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn params(dropped_at_death: bool) -> CheckParams {
        CheckParams {
            dropped_at_death,
            expires: !dropped_at_death,
            rewritten_in_place: !dropped_at_death,
            ..crate::testkit::BLOG
        }
    }

    #[test]
    fn a_lock_dropped_at_death_is_found_within_one_watch() {
        assert_eq!(params(false).crash_bound_us(), (6_000_000, 13_000_000));
        assert_eq!(params(true).crash_bound_us(), (0, 3_000_000));
    }
}
