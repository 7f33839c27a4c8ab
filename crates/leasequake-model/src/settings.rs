//! The settings of a lease and of the built-in worker, as experiment files
//! name them: one type per concept, shared by the experiment file, the
//! worker's config and the reports.

use serde::{Deserialize, Serialize};

use super::duration::{Dur, Offset};

/// The name of a setting's value as written in experiment files, on the
/// worker's command line and in CSVs (kebab-case: serde and clap agree).
pub fn setting_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => unreachable!("unit enums serialise to strings"),
    }
}

/// How the lock file is created (docs/metrics.md, the variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unreadable {
    /// Try an O_EXCL acquire and retry next tick (the blog: wedges on an empty file).
    Retry,
    /// Treat the file as expired once its mtime is older than the lease.
    ExpireAge,
}

/// How `leaseUntil` is written and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expiry {
    /// Whole (scaled) Unix seconds, compared with strict `<` (the blog).
    UnixSeconds,
    /// Fractional seconds, compared exactly.
    Exact,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Each worker starts at a uniform moment in `[0, stagger)` after the
    /// barrier, drawn from the trial's seed: its ticks fall at a phase of
    /// their own against the leader's, as with processes started apart.
    Random,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failpoint {
    None,
    /// Acquire (naive/excl): the file exists but is still empty.
    AfterCreate,
    /// Renewal (naive/excl): the file is truncated, the lease not yet written.
    AfterTruncate,
    /// Takeover: the lease was seen expired, the stale file not yet removed.
    BeforeRemove,
    /// Acquire (naive/rename): the lock was seen missing, not yet created.
    AfterCheck,
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
    pub resource: Resource,
    /// The exactly-once job: one run per epoch (the "nightly report").
    pub epoch_job: Option<EpochJob>,
    /// How far each worker's wall clock is off the true time (scaled).
    pub clock_offset: ClockOffset,
    /// How fast each worker's clocks run (1.001: a millisecond fast per
    /// second): its wall clock, its timers and its deadlines.
    pub clock_rate: ClockRate,
    /// How long one request to a lease server may take before it fails
    /// (scaled; default: a third of the lease, at least 20 ms for Redis and
    /// 50 ms for PostgreSQL).
    pub request_timeout: Option<Dur>,
    /// How long a leader believes it leads without hearing from the lease.
    pub belief: Belief,
    /// Under `belief: local-deadline`, step down this long before the
    /// lease would end (scaled): room for clocks that run at different rates.
    pub belief_margin: Dur,
    /// How a watcher learns that the lease is free: by looking every
    /// `watch` (poll), or told by the server as well (push).
    pub watch_by: WatchBy,
}

/// How a watcher learns that the lease became free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WatchBy {
    /// Look every `watch` (the blog).
    Poll,
    /// Also subscribe to the lease's changes and try to take over the
    /// moment the server says the lease is gone: an etcd watch on the key,
    /// a Redis keyspace notification, a PostgreSQL NOTIFY on release. The
    /// `watch` ticks go on as a safety net for a push that never comes.
    Push,
}

/// How long a leader keeps believing after its last successful renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Belief {
    /// Until renewals have failed three times in a row (the blog): a
    /// partitioned leader believes long past its grant.
    UntilRenewalFails,
    /// Until `lease − belief_margin` after the *start* of the last
    /// successful renewal, on its own monotonic clock: the grant cannot
    /// have begun before the request was sent, so it cannot end sooner.
    LocalDeadline,
}

/// A per-worker setting: one value for every worker, or one per worker
/// index (`[0s, 2s, -1s]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PerWorker<T> {
    All(T),
    PerWorker(Vec<T>),
}

/// The value a per-worker setting leaves a worker past the end of its list.
pub trait Unskewed: Copy {
    const UNSKEWED: Self;
}

impl Unskewed for Offset {
    const UNSKEWED: Offset = Offset::ZERO;
}

impl Unskewed for f64 {
    /// A clock running at the true rate.
    const UNSKEWED: f64 = 1.0;
}

impl<T: Unskewed> Default for PerWorker<T> {
    fn default() -> Self {
        PerWorker::All(T::UNSKEWED)
    }
}

impl<T: Unskewed> PerWorker<T> {
    /// Worker `index`'s value.
    pub fn of(&self, index: usize) -> T {
        match self {
            PerWorker::All(v) => *v,
            PerWorker::PerWorker(v) => v.get(index).copied().unwrap_or(T::UNSKEWED),
        }
    }

    /// Every value written.
    pub fn all(&self) -> Vec<T> {
        match self {
            PerWorker::All(v) => vec![*v],
            PerWorker::PerWorker(v) => v.clone(),
        }
    }
}

/// A worker's wall-clock offset.
pub type ClockOffset = PerWorker<Offset>;

/// How fast a worker's clocks run (1: true time).
pub type ClockRate = PerWorker<f64>;

impl ClockOffset {
    pub fn scaled(&self, scale: f64) -> ClockOffset {
        match self {
            PerWorker::All(o) => PerWorker::All(o.scaled(scale)),
            PerWorker::PerWorker(v) => PerWorker::PerWorker(v.iter().map(|o| o.scaled(scale)).collect()),
        }
    }
}

/// How the workers try to run the epoch job exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
            resource: Resource::None,
            epoch_job: None,
            clock_offset: ClockOffset::default(),
            clock_rate: ClockRate::default(),
            request_timeout: None,
            belief: Belief::UntilRenewalFails,
            belief_margin: Dur::ZERO,
            watch_by: WatchBy::Poll,
        }
    }
}

/// Where the lease lives (the `Substrate` implementations).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubstrateSettings {
    pub kind: Kind,
    /// Server address; default: the local service.
    #[serde(default)]
    pub address: Option<String>,
    /// The harness runs the server itself (redis-server, or a PostgreSQL
    /// cluster of its own), for the run or, where server-* faults hit it,
    /// per trial.
    #[serde(default)]
    pub managed: bool,
    /// Put the harness's proxy between each worker and the server even
    /// without network faults (with them, it always is): to measure what
    /// the proxy itself costs.
    #[serde(default)]
    pub proxy: bool,
    /// Servers of a replicated lease service the harness runs (managed
    /// only): Redis as a primary and `members − 1` replicas watched by
    /// three Sentinels. 1: a single server.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub members: usize,
    /// How long a replicated service's watchers (Sentinel's
    /// `down-after-milliseconds`) wait on a silent primary before they
    /// fail it over; default a third of the lease, at least 100 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_after: Option<Dur>,
    /// After each write, wait until this many replicas have it (Redis's
    /// `WAIT`), within the request timeout; fewer, and the operation
    /// failed (though the primary keeps the write).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sync_replicas: usize,
    /// The harness reads the lease on the service itself, every few
    /// milliseconds, and records what it sees beside what the workers say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observe: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// How often the harness looks at an observed lease (`observe`), µs: a
/// change is seen at most this late, and one shorter than it may be missed.
pub const OBSERVE_PERIOD_US: i64 = 5_000;

impl Default for SubstrateSettings {
    fn default() -> Self {
        SubstrateSettings {
            kind: Kind::File,
            address: None,
            managed: false,
            proxy: false,
            members: 1,
            failover_after: None,
            sync_replicas: 0,
            observe: false,
        }
    }
}

impl SubstrateSettings {
    /// The server the harness runs for this substrate, if it runs one (a
    /// sweep over substrates may reach one without a server).
    pub fn managed_server(&self) -> Option<Server> {
        self.kind.server().filter(|_| self.managed)
    }

    /// A lease service of several servers (docs/replicated.md).
    pub fn replicated(&self) -> bool {
        self.members > 1
    }

    /// How long Sentinel waits on a silent primary (`failover_after`, by
    /// default a third of `lease`): never under its 100 ms tick.
    pub fn failover_after_of(&self, lease: Dur) -> Dur {
        self.failover_after.unwrap_or(Dur::from_us(lease.as_us() / 3)).max(Dur::from_ms(100))
    }

    /// Sentinel's `failover-timeout`: ten times `failover_after`, at least
    /// 5 s (it also spaces two failovers of the same primary).
    pub fn failover_timeout_of(&self, lease: Dur) -> Dur {
        Dur::from_us(self.failover_after_of(lease).as_us() * 10).max(Dur::from_secs(5))
    }

    /// The address workers use; None for a managed server, whose address
    /// is known only once it runs.
    pub fn address(&self) -> Option<String> {
        self.kind
            .server()
            .filter(|_| !self.managed)
            .map(|s| self.address.clone().unwrap_or_else(|| s.default_address().to_string()))
    }
}

/// Lease timing, already scaled.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaseSettings {
    pub lease: Dur,
    pub renew: Dur,
    pub watch: Dur,
    /// Granularity of `leaseUntil` under `unix-seconds` (1 s × scale).
    pub resolution: Dur,
}

impl Default for LeaseSettings {
    /// The blog's: a 9 s lease renewed and watched every 3 s, in whole seconds.
    fn default() -> Self {
        LeaseSettings {
            lease: Dur::from_secs(9),
            renew: Dur::from_secs(3),
            watch: Dur::from_secs(3),
            resolution: Dur::from_secs(1),
        }
    }
}

/// The kind of substrate an experiment runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    File,
    Flock,
    Redis,
    Postgres,
    /// `pg_try_advisory_lock`: held by the holder's database session.
    PostgresAdvisory,
    /// An etcd key attached to a lease with a TTL in whole seconds, kept
    /// alive by its holder; the server revokes it when the TTL runs out.
    Etcd,
    /// Redlock: the same key on `members` independent Redis servers, held
    /// by whoever set it on a majority within its validity; no fencing
    /// token.
    Redlock,
}

impl Kind {
    /// Does a lease of this kind expire by time? flock and advisory locks
    /// last as long as their holder (process or session) lives.
    pub fn expires(self) -> bool {
        !matches!(self, Kind::Flock | Kind::PostgresAdvisory)
    }

    /// The unit a server grants leases in, where it has one: etcd's TTLs
    /// are whole seconds (and at least one).
    pub fn ttl_unit(self) -> Option<Dur> {
        (self == Kind::Etcd).then(|| Dur::from_secs(1))
    }

    /// What the server tells a subscribed watcher (`watch_by: push`).
    pub fn push(self) -> Push {
        match self {
            Kind::Etcd | Kind::Redis => Push::ReleaseAndExpiry,
            Kind::Postgres | Kind::PostgresAdvisory => Push::Release,
            _ => Push::Nothing,
        }
    }

    /// Does this substrate talk to a server?
    pub fn server(self) -> Option<Server> {
        match self {
            Kind::File | Kind::Flock => None,
            Kind::Redis | Kind::Redlock => Some(Server::Redis),
            Kind::Postgres | Kind::PostgresAdvisory => Some(Server::Postgres),
            Kind::Etcd => Some(Server::Etcd),
        }
    }
}

/// Which ends of a lease a server pushes to a subscribed watcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Push {
    /// None: watchers poll.
    Nothing,
    /// A release (PostgreSQL's NOTIFY), not an expiry, which no statement
    /// carries out.
    Release,
    /// Both: the server itself removes an expired lease and says so.
    ReleaseAndExpiry,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Redis,
    Postgres,
    Etcd,
}

impl Server {
    /// The local service a fresh machine is expected to run.
    pub fn default_address(self) -> &'static str {
        match self {
            Server::Redis => "redis://127.0.0.1:6379/",
            Server::Postgres => "postgres://postgres@127.0.0.1:5432/test",
            // Its JSON gateway, on the client port.
            Server::Etcd => "http://127.0.0.1:2379",
        }
    }
}

/// The protected resource a leader writes to (report storage).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    /// No leader work.
    None,
    /// Last writer wins.
    Unfenced,
    /// Rejects a write whose token is lower than the highest seen.
    Fenced,
}
