//! The typed, validated model of an experiment file.
//!
//! `load` turns YAML into an `Experiment`; every error (syntax, unknown key,
//! impossible setting) is found there and names file:line:column, before any
//! process is spawned. The values held here are already multiplied by the
//! time scale: the rest of the program never scales anything.

mod diagnostic;
mod duration;
mod load;
mod resolved;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use diagnostic::{Diagnostic, ExperimentError};
pub use duration::Dur;
pub use load::{Overrides, load, load_str};
pub use resolved::to_yaml;

use crate::history::EventKind;

/// How the lock file is created (DESIGN.md "Variants").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Acquire {
    /// stat, then create: the blog's first, racy attempt.
    Naive,
    /// `O_CREAT|O_EXCL`, close, then a truncating write (the blog's program).
    Excl,
    /// Write a temp file, then `link(2)` it into place: atomic create-with-content.
    Link,
    /// stat, then write a temp file and `rename(2)` it into place: content is
    /// atomic, but rename silently replaces a lock created in between.
    Rename,
}

/// What a watcher does with a lock file it cannot read or parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Unreadable {
    /// Try an O_EXCL acquire and retry next tick (the blog: wedges on an empty file).
    Retry,
    /// Treat the file as expired once its mtime is older than the lease.
    ExpireAge,
}

/// How `leaseUntil` is written and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Expiry {
    /// Whole (scaled) Unix seconds, compared with strict `<` (the blog).
    UnixSeconds,
    /// Fractional seconds, compared exactly.
    Exact,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The blog's lease loop: acquire, renew, watch, take over.
    Loop,
    /// Election race: try to acquire once, report, then hold until the end.
    OneShot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartMode {
    /// All workers wait on one barrier and are released together.
    Barrier,
    /// Worker i starts `stagger × i` after the barrier.
    Staggered,
}

/// State of the lock file before the workers start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialLock {
    None,
    /// A zero-byte file: a crash between create and write.
    Empty,
    /// Garbage bytes.
    Corrupt,
    /// A well-formed lease of a dead pid, already expired.
    Stale,
}

/// A place in the worker where it can be told to stall (emitting a
/// `failpoint` event first), so a fault triggered `after: failpoint` lands
/// exactly inside a window that is otherwise microseconds wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Failpoint {
    None,
    /// Acquire (naive/excl): the file exists but is still empty.
    AfterCreate,
    /// Renewal (naive/excl): the file is truncated, the lease not yet written.
    AfterTruncate,
    /// Takeover: the lease was seen expired, the stale file not yet removed.
    BeforeRemove,
}

/// Settings of the built-in worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSettings {
    pub acquire: Acquire,
    pub unreadable: Unreadable,
    pub expiry: Expiry,
    pub release_on_term: bool,
    pub mode: Mode,
    pub failpoint: Failpoint,
    /// How long the worker stalls at the failpoint (scaled).
    pub failpoint_delay: Dur,
    /// Only these workers get the failpoint (default: all).
    pub failpoint_workers: Option<Vec<usize>>,
}

impl Default for WorkerSettings {
    /// The blog's program.
    fn default() -> Self {
        WorkerSettings {
            acquire: Acquire::Excl,
            unreadable: Unreadable::Retry,
            expiry: Expiry::UnixSeconds,
            release_on_term: true,
            mode: Mode::Loop,
            failpoint: Failpoint::None,
            failpoint_delay: Dur::from_ms(100),
            failpoint_workers: None,
        }
    }
}

/// Lease timing, already scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeaseSettings {
    pub lease: Dur,
    pub renew: Dur,
    pub watch: Dur,
    /// Granularity of `leaseUntil` under `unix-seconds` (1 s × scale).
    pub resolution: Dur,
}

/// Whom a fault hits. Resolved at the moment of firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The worker that currently believes it leads (the latest to acquire).
    Leader,
    /// A seeded random live worker that does not believe it leads.
    Watcher,
    /// Every live worker.
    All,
    /// With `after:`, the worker whose event triggered the fault; otherwise
    /// a seeded random live worker.
    Any,
    /// The lock file itself (lock-* actions).
    Lock,
    /// Worker by index.
    Worker(usize),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Leader => write!(f, "leader"),
            Target::Watcher => write!(f, "watcher"),
            Target::All => write!(f, "all"),
            Target::Any => write!(f, "any"),
            Target::Lock => write!(f, "lock"),
            Target::Worker(i) => write!(f, "{i}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// SIGKILL.
    Kill,
    /// SIGTERM.
    Term,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
    /// SIGSTOP, then SIGCONT after `duration`.
    Pause,
    LockEmpty,
    LockDelete,
    LockCorrupt,
    LockStale,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Kill => "kill",
            Action::Term => "term",
            Action::Stop => "stop",
            Action::Cont => "cont",
            Action::Pause => "pause",
            Action::LockEmpty => "lock-empty",
            Action::LockDelete => "lock-delete",
            Action::LockCorrupt => "lock-corrupt",
            Action::LockStale => "lock-stale",
        }
    }

    pub fn is_lock(self) -> bool {
        matches!(self, Action::LockEmpty | Action::LockDelete | Action::LockCorrupt | Action::LockStale)
    }
}

/// Fire a fault relative to the protocol instead of the clock: `delay` after
/// the next `event` of a matching target at or after the fault's `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct After {
    pub event: EventKind,
    pub delay: Dur,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub at: Dur,
    /// Fire at a seeded uniform moment in `[at, at + jitter)` instead (the
    /// "kill at a uniform moment" of the theoretical bounds).
    pub jitter: Dur,
    pub after: Option<After>,
    pub target: Target,
    pub action: Action,
    /// Pause length (pause only).
    pub duration: Option<Dur>,
}

/// Conditions on the whole run; a failure makes the run exit 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// No trial may see more concurrent believers than this.
    pub max_leaders: Option<usize>,
    /// Every ended gap lasts at least this long.
    pub gap_min: Option<Dur>,
    /// Every gap (ended or not) lasts at most this long.
    pub gap_max: Option<Dur>,
    /// true: every trial wedges; false: none does.
    pub wedged: Option<bool>,
    /// At most this many trials with two leaders.
    pub double_leader_trials: Option<usize>,
}

impl Expect {
    pub fn is_empty(&self) -> bool {
        *self == Expect::default()
    }
}

/// What a published source reported for this experiment, so a run can be
/// set beside it (`leasequake run DIR --out OUT` writes OUT/README.md).
/// Durations here are in the source's time, never scaled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// The number as the source states it, e.g. "9.53 s leaderless".
    pub claim: String,
    /// A leaderless gap the source measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<Dur>,
    /// The source's worst case for the gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_gap: Option<Dur>,
    /// Trials with two or more leaders, as [k, n].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_leader_trials: Option<[usize; 2]>,
    /// The most leaders at once the source claims possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_leaders: Option<usize>,
    /// Whether the source saw the system wedge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wedged: Option<bool>,
    /// The theoretical bound on gaps, [min, max].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<[Dur; 2]>,
    /// Why our number may differ (written before the run, from the design).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// The file it was loaded from.
    pub source: PathBuf,
    pub trials: u32,
    pub seed: u64,
    /// Trial duration (scaled).
    pub duration: Dur,
    pub workers: usize,
    pub lease: LeaseSettings,
    pub worker: WorkerSettings,
    pub start: StartMode,
    pub stagger: Dur,
    /// Release the barrier when the wall clock is this far past a whole
    /// (scaled) second, to put ticks at a chosen phase of the expiry
    /// resolution (worst and best cases of the whole-second truncation).
    pub align: Option<Dur>,
    pub initial_lock: InitialLock,
    pub faults: Vec<Fault>,
    pub expect: Expect,
    /// The scale that was applied to every duration above.
    pub time_scale: f64,
    /// Time between SIGTERM and SIGKILL at cleanup (not scaled: it is about
    /// the harness, not the lease).
    pub grace: Dur,
    /// Trials run at once.
    pub jobs: usize,
    pub reference: Option<Reference>,
}

impl Experiment {
    /// Seed of trial `i` (1-based): distinct, reproducible, printed in trials.csv.
    pub fn trial_seed(&self, trial: u32) -> u64 {
        self.seed.wrapping_add(u64::from(trial))
    }

    pub fn check_params(&self) -> crate::check::CheckParams {
        let resolution_us = match self.worker.expiry {
            Expiry::UnixSeconds => self.lease.resolution.as_us() as i64,
            Expiry::Exact => 0,
        };
        crate::check::CheckParams {
            lease_us: self.lease.lease.as_us() as i64,
            renew_us: self.lease.renew.as_us() as i64,
            watch_us: self.lease.watch.as_us() as i64,
            resolution_us,
        }
    }
}
