//! The typed, validated model of an experiment file.
//!
//! `load` turns YAML into an `Experiment`; every error (syntax, unknown key,
//! impossible setting) is found there and names file:line:column, before any
//! process is spawned. The values held here are already multiplied by the
//! time scale: the rest of the program never scales anything.

mod diagnostic;
mod duration;
mod load;
pub mod program;
mod resolved;
mod sweep;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use diagnostic::{Diagnostic, ExperimentError};
pub use duration::Dur;
pub use load::{Overrides, load, load_str};
pub use resolved::to_yaml;
pub use sweep::is_duration as is_duration_setting;

use crate::history::EventKind;

/// The name of a setting's value as written in experiment files, on the
/// worker's command line and in CSVs (kebab-case: serde and clap agree).
pub fn setting_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => unreachable!("unit enums serialise to strings"),
    }
}

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
    /// The trial ends as soon as every worker has made its attempt (or
    /// died) and no fault is pending: nothing can change after that, so
    /// `duration` is only the upper bound.
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
    /// Give every grant a fencing token (in the lease and in events).
    pub fencing_tokens: bool,
    /// Leader work against a protected resource (needs fencing tokens).
    pub resource: crate::substrate::resource::Resource,
    /// The exactly-once job: one run per epoch (the "nightly report").
    pub epoch_job: Option<EpochJob>,
}

/// How the workers try to run the epoch job exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum JobStrategy {
    /// The leader runs it; the result is stored unconditionally.
    LeaseOnly,
    /// The leader runs it; the store rejects a result whose fencing token is
    /// lower than one it has seen (the job registers its token when it starts).
    Fencing,
    /// The leader runs it; the result is a put under the epoch's key, so a
    /// repeat leaves the store as it was.
    Idempotent,
    /// The leader runs it; the store creates the epoch's result at most once
    /// (O_EXCL, a unique constraint) and refuses a second.
    Unique,
    /// No lease: worker `epoch mod workers` owns the epoch's job.
    Partitioned,
}

/// The exactly-once job: at every epoch boundary every worker wakes (two
/// instances at 02:00); whoever should run it does, for `duration`, then
/// stores the result. A leader also catches up on the current epoch when it
/// acquires, and at each renewal, if the store has no result yet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpochJob {
    /// Length of an epoch; boundaries at `epoch`, `2 × epoch`, … after the start.
    pub epoch: Dur,
    /// How long one run of the job takes (a pause can land inside it).
    pub duration: Dur,
    pub strategy: JobStrategy,
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
            fencing_tokens: false,
            resource: crate::substrate::resource::Resource::None,
            epoch_job: None,
        }
    }
}

/// Where the lease lives (DESIGN.md "Substrates").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubstrateSettings {
    pub kind: crate::substrate::Kind,
    /// Server address; default: the local service.
    #[serde(default)]
    pub address: Option<String>,
    /// Redis only: the harness runs its own redis-server per trial, which
    /// server-* faults can hit.
    #[serde(default)]
    pub managed: bool,
}

impl Default for SubstrateSettings {
    fn default() -> Self {
        SubstrateSettings { kind: crate::substrate::Kind::File, address: None, managed: false }
    }
}

impl SubstrateSettings {
    /// The address workers use (a managed server's is known per trial).
    pub fn address(&self) -> Option<String> {
        self.kind.server().map(|s| self.address.clone().unwrap_or_else(|| s.default_address().to_string()))
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
    /// The harness-managed lease server (server-* actions).
    Server,
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
            Target::Server => write!(f, "server"),
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
    /// SIGSTOP the harness-managed server, SIGCONT after `duration`.
    ServerPause,
    /// SIGKILL the server (it stays down).
    ServerKill,
    /// SIGKILL the server and start it again, empty (no persistence).
    ServerRestart,
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
            Action::ServerPause => "server-pause",
            Action::ServerKill => "server-kill",
            Action::ServerRestart => "server-restart",
        }
    }

    pub fn is_server(self) -> bool {
        matches!(self, Action::ServerPause | Action::ServerKill | Action::ServerRestart)
    }

    /// Pauses take a `duration`.
    pub fn is_pause(self) -> bool {
        matches!(self, Action::Pause | Action::ServerPause)
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
    pub duration: Option<PauseLen>,
    /// Fire again every `every` (each time with its own jitter and pause
    /// length) until the trial ends: the busy-leader workload. With
    /// `after:`, the fault is re-armed from each period's start and fires
    /// after the next matching event (e.g. a pause inside every job).
    pub every: Option<Dur>,
}

/// How long a pause lasts: fixed, or drawn (seeded) per pause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseLen {
    Fixed(Dur),
    /// Uniform in [min, max).
    Uniform([Dur; 2]),
    /// Exponential with this mean (memoryless stalls: GC, swapping).
    Exponential(Dur),
    /// One of these, equally likely.
    Choice(Vec<Dur>),
}

impl PauseLen {
    pub fn scaled(&self, s: f64) -> PauseLen {
        match self {
            PauseLen::Fixed(d) => PauseLen::Fixed(d.scaled(s)),
            PauseLen::Uniform([a, b]) => PauseLen::Uniform([a.scaled(s), b.scaled(s)]),
            PauseLen::Exponential(m) => PauseLen::Exponential(m.scaled(s)),
            PauseLen::Choice(v) => PauseLen::Choice(v.iter().map(|d| d.scaled(s)).collect()),
        }
    }

    /// Draw one length.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> Dur {
        match self {
            PauseLen::Fixed(d) => *d,
            PauseLen::Uniform([a, b]) if b > a => Dur::from_us(rng.random_range(a.as_us()..b.as_us())),
            PauseLen::Uniform([a, _]) => *a,
            PauseLen::Exponential(mean) => {
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                Dur::from_us((-u.ln() * mean.as_us() as f64).round() as u64)
            }
            PauseLen::Choice(v) => v[rng.random_range(0..v.len())],
        }
    }

    /// As written in YAML: `15s`, or a one-key mapping in flow style.
    pub fn to_yaml(&self) -> String {
        match self {
            PauseLen::Fixed(d) => d.to_string(),
            PauseLen::Uniform([a, b]) => format!("{{uniform: [{a}, {b}]}}"),
            PauseLen::Exponential(m) => format!("{{exponential: {m}}}"),
            PauseLen::Choice(v) => {
                format!("{{choice: [{}]}}", v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
            }
        }
    }

    pub(crate) fn is_positive(&self) -> bool {
        match self {
            PauseLen::Fixed(d) | PauseLen::Exponential(d) => *d > Dur::ZERO,
            PauseLen::Uniform([a, b]) => b >= a && *b > Dur::ZERO,
            PauseLen::Choice(v) => !v.is_empty() && v.iter().all(|d| *d > Dur::ZERO),
        }
    }
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
    pub substrate: SubstrateSettings,
    /// A program under test instead of the built-in worker.
    pub program: Option<program::Program>,
    /// A sweep's points (empty for a plain experiment): each a complete
    /// experiment with some settings replaced.
    pub points: Vec<Point>,
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The swept settings as they run (durations scaled), e.g. lease=450ms.
    pub settings: Vec<(String, String)>,
    pub exp: Experiment,
}

impl Point {
    /// `lease=450ms renew=150ms`.
    pub fn label(&self) -> String {
        self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
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
            epoch_us: self.worker.epoch_job.map(|j| j.epoch.as_us() as i64),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn pause_lengths_are_drawn_from_their_distribution() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let n = 20_000;
        let mean = |len: &PauseLen, rng: &mut rand::rngs::StdRng| {
            (0..n).map(|_| len.sample(rng).as_ms_f64()).sum::<f64>() / n as f64
        };
        let exp = PauseLen::Exponential(Dur::from_secs(2));
        assert!((mean(&exp, &mut rng) - 2000.0).abs() < 60.0, "exponential mean");
        let uni = PauseLen::Uniform([Dur::from_secs(1), Dur::from_secs(3)]);
        assert!((mean(&uni, &mut rng) - 2000.0).abs() < 30.0, "uniform mean");
        assert!((0..1000).all(|_| {
            let d = uni.sample(&mut rng);
            d >= Dur::from_secs(1) && d < Dur::from_secs(3)
        }));
        let choice = PauseLen::Choice(vec![Dur::from_secs(1), Dur::from_secs(4)]);
        assert!((0..1000).all(|_| [Dur::from_secs(1), Dur::from_secs(4)].contains(&choice.sample(&mut rng))));
        assert_eq!(PauseLen::Fixed(Dur::from_ms(5)).sample(&mut rng), Dur::from_ms(5));
    }
}
