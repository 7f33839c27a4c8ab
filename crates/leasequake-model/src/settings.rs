//! The settings of a lease and of the built-in worker, as experiment files
//! name them: one type per concept, shared by the experiment file, the
//! worker's config and the reports.

use serde::{Deserialize, Serialize};

use super::describe::{Scale, SettingDoc, Ty, choices, unscaled};
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

/// Declares the built-in worker's settings, each once: its field, its
/// default, and its row in the reference (type, example, meaning; `shown`
/// where the default is better said in words, `below` for a section's own
/// keys). The struct, its `Default`, its time scaling and its reference
/// rows all follow from this one list; the loader reads it with serde, the
/// resolved experiment.yaml writes it with serde, and a sweep can vary any
/// of its fields by name.
macro_rules! worker_settings {
    ($(
        $(#[$note:meta])*
        $name:ident: $ty:ty = $default:expr;
        $kind:expr, $example:literal, $about:literal $(, shown $shown:literal)? $(, below $below:expr)?;
    )*) => {
        /// Settings of the built-in worker (`worker:`).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct WorkerSettings {
            $(#[doc = $about] $(#[$note])* pub $name: $ty,)*
        }

        impl Default for WorkerSettings {
            /// The blog's program.
            fn default() -> Self {
                WorkerSettings { $($name: $default,)* }
            }
        }

        impl Scale for WorkerSettings {
            fn scale(&self, by: f64) -> WorkerSettings {
                WorkerSettings { $($name: self.$name.scale(by),)* }
            }
        }

        impl WorkerSettings {
            /// The reference's rows for `worker:`, in this order.
            pub fn docs() -> Vec<SettingDoc> {
                let defaults = WorkerSettings::default();
                let mut docs = Vec::new();
                $(
                    docs.extend(std::iter::once(SettingDoc {
                        path: concat!("worker.", stringify!($name)),
                        ty: $kind,
                        default: shown(&defaults.$name, [$($shown)?]),
                        example: $example,
                        about: $about,
                    }) $(.chain($below))?);
                )*
                docs
            }
        }
    };
}

/// A default as a file would write it, unless it is better said in words.
fn shown<T: Serialize, const N: usize>(value: &T, words: [&'static str; N]) -> String {
    if let Some(w) = words.first() {
        return w.to_string();
    }
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(serde_json::Value::Null) | Err(_) => String::new(),
        Ok(other) => other.to_string(),
    }
}

fn choice<'de, T: Deserialize<'de>>() -> Ty {
    Ty::Choice(choices::<T>())
}

worker_settings! {
    acquire: Acquire = Acquire::Excl;
        choice::<Acquire>(), "naive", "How the lock file is created.";
    unreadable: Unreadable = Unreadable::Retry;
        choice::<Unreadable>(), "expire-age", "What a watcher does with a lock file it cannot read.";
    expiry: Expiry = Expiry::UnixSeconds;
        choice::<Expiry>(), "exact", "How `leaseUntil` is written and compared.";
    release_on_term: bool = true;
        Ty::Bool, "false", "Remove the lock file on SIGTERM.";
    mode: Mode = Mode::Loop;
        choice::<Mode>(), "one-shot", "The lease loop, or one election attempt held to the end.";
    failpoint: Failpoint = Failpoint::None;
        choice::<Failpoint>(), "after-truncate",
        "Where the worker stalls (with a `failpoint` event) for a fault to land inside.";
    failpoint_delay: Dur = Dur::from_ms(100);
        Ty::Duration, "50ms", "How long it stalls there.";
    failpoint_workers: Option<Vec<usize>> = None;
        Ty::List(Box::new(Ty::Int(0))), "[0]", "Only these workers get the failpoint.", shown "all";
    fencing_tokens: bool = false;
        Ty::Bool, "true", "Give every grant a fencing token.";
    resource: Resource = Resource::None;
        choice::<Resource>(), "fenced", "The protected resource the leader writes to.";
    epoch_job: Option<EpochJob> = None;
        Ty::Section, "", "The exactly-once job: one run per epoch.", below EpochJob::docs();
    clock_offset: ClockOffset = ClockOffset::default();
        Ty::PerWorker(Box::new(Ty::Offset)), "[0s, 2s, -1s]",
        "How far each worker's wall clock is off: one offset, or one per worker (a program's too, through the clock shim).";
    clock_rate: ClockRate = ClockRate::default();
        Ty::PerWorker(Box::new(Ty::Rate)), "[1, 1.01, 0.99]",
        "How fast each worker's clocks run (the built-in worker's wall clock, timers and deadlines; a program's wall clock only): one rate, or one per worker; 0.5 to 2.",
        shown "1";
    request_timeout: Option<Dur> = None;
        Ty::Duration, "500ms",
        "How long one request to a lease server may take, connecting included (at least 20 ms for Redis, 50 ms for PostgreSQL and etcd by default).",
        shown "a third of the lease";
    belief: Belief = Belief::UntilRenewalFails;
        choice::<Belief>(), "local-deadline",
        "How long a leader believes without a successful renewal: until three renewals failed (the blog), or until lease − belief_margin after the last successful renewal began.";
    belief_margin: PerWorker<Dur> = PerWorker::default();
        Ty::PerWorker(Box::new(Ty::Duration)), "[1s, 0s, 0s]",
        "With `belief: local-deadline`, step down this long before the lease would end: one margin, or one per worker.";
    watch_by: WatchBy = WatchBy::Poll;
        choice::<WatchBy>(), "push",
        "How a watcher learns the lease is free: by looking every `watch`, or also told by the server, taking over the moment it is: an etcd watch on the key, a Redis keyspace notification (`del`, `expired`), a PostgreSQL NOTIFY on release (not on expiry). The ticks go on as a safety net.";
}

unscaled!(Acquire, Unreadable, Expiry, Mode, Failpoint, Resource, Belief, WatchBy, JobStrategy);

impl WorkerSettings {
    /// What is wrong with these settings for this many workers and this
    /// lease, as (the key to point at, the message); None if nothing.
    pub fn problem(&self, workers: usize, timing: &LeaseSettings) -> Option<(&'static str, String)> {
        let w = self;
        let (lease, renew) = (timing.lease, timing.renew);
        if let Some(bad) = w.failpoint_workers.iter().flatten().find(|&&i| i >= workers) {
            return Some((
                "failpoint_workers",
                format!(
                    "failpoint_workers: worker {bad} is out of range (this experiment has workers 0..{})",
                    workers - 1
                ),
            ));
        }
        let clocks = [
            (
                "clock_offset",
                w.clock_offset.problem(workers, "offset", |o| {
                    (o.as_ns().unsigned_abs() > 86_400_000_000_000)
                        .then(|| format!("{o} is more than a day off; at most 1440m either way"))
                }),
            ),
            (
                "clock_rate",
                w.clock_rate.problem(workers, "rate", |r| {
                    (!(0.5..=2.0).contains(&r))
                        .then(|| format!("{r} is out of range: a clock runs at a rate between 0.5 and 2"))
                }),
            ),
        ];
        if let Some((key, p)) = clocks.into_iter().find_map(|(key, p)| Some((key, p?))) {
            return Some((key, format!("{key}: {p}")));
        }
        if w.request_timeout == Some(Dur::ZERO) {
            return Some(("request_timeout", "request_timeout must be longer than zero".into()));
        }
        let margin = w.belief_margin.problem(workers, "margin", |m| {
            (m >= lease).then(|| format!("{m} must be shorter than the lease ({lease})"))
        });
        if let Some(p) = margin {
            return Some(("belief_margin", format!("belief_margin: {p}")));
        }
        if w.resource != Resource::None && !w.fencing_tokens {
            let msg = "resource: the leader's writes carry fencing tokens: set fencing_tokens: true";
            return Some(("resource", msg.into()));
        }
        if let Some(job) = &w.epoch_job {
            let problem = if job.epoch == Dur::ZERO || job.duration == Dur::ZERO {
                Some("epoch and duration must be longer than zero".to_string())
            } else if job.duration >= job.epoch {
                Some(format!("the job ({}) must be shorter than its epoch ({})", job.duration, job.epoch))
            } else if Dur::from_us(renew.as_us() + job.duration.as_us()) >= lease {
                // One thread does the job and the renewals: a job this long would
                // cost its own leader the lease, with no fault at all.
                Some(format!(
                    "renew ({renew}) + job duration ({}) must be shorter than lease ({lease}): the leader renews only between jobs",
                    job.duration
                ))
            } else if job.strategy == JobStrategy::Fencing && !w.fencing_tokens {
                Some("strategy fencing needs fencing_tokens: true".to_string())
            } else {
                None
            };
            if let Some(p) = problem {
                return Some(("epoch_job", format!("epoch_job: {p}")));
            }
        }
        None
    }
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
pub trait Unset: Copy {
    const UNSET: Self;
}

impl Unset for Offset {
    const UNSET: Offset = Offset::ZERO;
}

impl Unset for Dur {
    const UNSET: Dur = Dur::ZERO;
}

impl Unset for f64 {
    /// A clock running at the true rate.
    const UNSET: f64 = 1.0;
}

impl<T: Unset> Default for PerWorker<T> {
    fn default() -> Self {
        PerWorker::All(T::UNSET)
    }
}

impl<T: Unset> PerWorker<T> {
    /// Worker `index`'s value.
    pub fn of(&self, index: usize) -> T {
        match self {
            PerWorker::All(v) => *v,
            PerWorker::PerWorker(v) => v.get(index).copied().unwrap_or(T::UNSET),
        }
    }

    /// What is wrong with it: a list that is not one `one` per worker, or
    /// the first value `bad` objects to.
    fn problem(&self, workers: usize, one: &str, bad: impl Fn(T) -> Option<String>) -> Option<String> {
        match self {
            PerWorker::PerWorker(v) if v.len() != workers => {
                Some(format!("a list gives one {one} per worker: {} for {workers} workers", v.len()))
            }
            _ => self.all().into_iter().find_map(bad),
        }
    }

    /// The least value any worker has.
    pub fn least(&self) -> T
    where
        T: Ord,
    {
        self.all().into_iter().min().unwrap_or(T::UNSET)
    }

    /// The greatest value any worker has.
    pub fn most(&self) -> T
    where
        T: Ord,
    {
        self.all().into_iter().max().unwrap_or(T::UNSET)
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

impl<T: Scale> Scale for PerWorker<T> {
    fn scale(&self, by: f64) -> PerWorker<T> {
        match self {
            PerWorker::All(v) => PerWorker::All(v.scale(by)),
            PerWorker::PerWorker(v) => PerWorker::PerWorker(v.scale(by)),
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

impl EpochJob {
    fn docs() -> [SettingDoc; 3] {
        let row = |path, ty, example, about| SettingDoc { path, ty, default: String::new(), example, about };
        [
            row("worker.epoch_job.epoch", Ty::Duration, "10s", "Length of an epoch."),
            row("worker.epoch_job.duration", Ty::Duration, "2s", "How long one run of the job takes."),
            row("worker.epoch_job.strategy", choice::<JobStrategy>(), "fencing", "How the job is kept exactly-once."),
        ]
    }
}

impl Scale for EpochJob {
    fn scale(&self, by: f64) -> EpochJob {
        EpochJob { epoch: self.epoch.scale(by), duration: self.duration.scale(by), strategy: self.strategy }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::names_of;

    #[test]
    fn every_worker_setting_has_one_reference_row_in_field_order() {
        let docs = WorkerSettings::docs();
        let top: Vec<&str> =
            docs.iter().filter_map(|d| d.path.strip_prefix("worker.")).filter(|p| !p.contains('.')).collect();
        assert_eq!(top, names_of::<WorkerSettings>());
        let job: Vec<&str> = docs.iter().filter_map(|d| d.path.strip_prefix("worker.epoch_job.")).collect();
        assert_eq!(job, names_of::<EpochJob>());
    }

    #[test]
    fn a_rows_default_is_the_value_the_loader_fills_in() {
        let docs = WorkerSettings::docs();
        let default = |name: &str| {
            docs.iter().find(|d| d.path.strip_prefix("worker.") == Some(name)).map(|d| d.default.clone()).unwrap()
        };
        assert_eq!(default("failpoint_delay"), WorkerSettings::default().failpoint_delay.to_string());
        assert_eq!(default("acquire"), "excl");
        assert_eq!(default("release_on_term"), "true");
        assert_eq!(default("clock_offset"), "0s");
        assert_eq!(default("request_timeout"), "a third of the lease", "said in words");
        assert_eq!(default("epoch_job"), "", "none");
    }

    #[test]
    fn the_time_scale_moves_every_span_of_time_and_nothing_else() {
        let w = WorkerSettings {
            failpoint_delay: Dur::from_ms(100),
            clock_offset: PerWorker::PerWorker(vec![Offset::ZERO, Offset::parse("-2s").unwrap()]),
            clock_rate: PerWorker::All(1.5),
            request_timeout: Some(Dur::from_secs(1)),
            belief_margin: PerWorker::All(Dur::from_secs(2)),
            epoch_job: Some(EpochJob {
                epoch: Dur::from_secs(10),
                duration: Dur::from_secs(2),
                strategy: JobStrategy::Unique,
            }),
            failpoint_workers: Some(vec![1]),
            ..WorkerSettings::default()
        };
        let s = w.scale(0.1);
        assert_eq!(s.failpoint_delay, Dur::from_ms(10));
        assert_eq!(s.clock_offset, PerWorker::PerWorker(vec![Offset::ZERO, Offset::parse("-200ms").unwrap()]));
        assert_eq!(s.clock_rate, PerWorker::All(1.5), "a rate is not a span of time");
        assert_eq!(s.request_timeout, Some(Dur::from_ms(100)));
        assert_eq!(s.belief_margin, PerWorker::All(Dur::from_ms(200)));
        assert_eq!(s.epoch_job.map(|j| (j.epoch, j.duration)), Some((Dur::from_secs(1), Dur::from_ms(200))));
        assert_eq!(s.failpoint_workers, Some(vec![1]), "indices are not spans of time");
        // Every row the reference calls a span of time is one the scale moved.
        let (before, after) = (serde_json::to_value(&w).unwrap(), serde_json::to_value(&s).unwrap());
        for d in WorkerSettings::docs() {
            let Some(name) = d.path.strip_prefix("worker.").filter(|n| !n.contains('.')) else { continue };
            if matches!(d.ty, Ty::Section) {
                continue; // its own keys: the epoch job's above
            }
            assert_eq!(d.ty.is_time(), before[name] != after[name], "{name}");
        }
    }
}
