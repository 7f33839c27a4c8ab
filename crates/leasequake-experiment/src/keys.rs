//! Every key of an experiment file, documented once: its type, default,
//! unit, example and meaning, in the order the reference lists them. The
//! choices of every enum come from its own type (`choices`), and the keys
//! each section takes from the loader's own types (`names_of`), so the
//! table cannot drift from the code; `reference.rs` renders it.

use serde::Deserialize;

use crate::model::program::ProgramExpiry;
use crate::model::{
    Acquire, Action, Belief, Direction, Expiry, Failpoint, InitialLock, JobStrategy, Kind, Mode, Resource, StartMode,
    Unreadable, WatchBy,
};

/// The type of a key's value.
#[derive(Clone, Debug)]
pub enum Ty {
    /// A name or free text.
    Text,
    /// A whole number of at least `min`.
    Int(i64),
    Number,
    Bool,
    /// `9s`, `300ms`, `250us`, `2m`.
    Duration,
    /// One of these names.
    Choice(&'static [&'static str]),
    /// A list of values of this type.
    List(Box<Ty>),
    /// Exactly two values of this type.
    Pair(Box<Ty>),
    /// A fixed duration or a distribution.
    PauseLength,
    /// `leader`, `watcher`, `all`, `all-but-leader`, `any`, `lock`, `server` or a worker index.
    Target,
    /// A signed duration, or one per worker.
    ClockOffset,
    /// A number, or one per worker.
    ClockRate,
    /// A signed duration.
    Offset,
    /// An argv list, or one string with `shell: true`.
    Command,
    /// A mapping of names to strings (or numbers).
    Map,
    /// A mapping documented by the keys under it.
    Section,
    /// A list of mappings documented by the keys under `key[]`.
    Sections,
    /// `setting: [values]`, or `points: [{setting: value, …}]`.
    Sweep,
    /// A count, or `{until: {ci_width}, max, min}`.
    Trials,
    /// A list of faults (keys under `faults[]`), or `{random: …}`.
    Faults,
    /// A whole number, or `[min, max]`.
    Count,
    /// Summarised metrics (`file.column`) to their bounds.
    Bounds,
}

/// One documented key.
#[derive(Clone, Debug)]
pub struct Key {
    /// Dotted from the top; `[]` marks the items of a list.
    pub path: &'static str,
    pub ty: Ty,
    pub required: bool,
    /// As the loader fills it in (empty: none).
    pub default: String,
    pub unit: &'static str,
    pub example: &'static str,
    pub about: &'static str,
}

/// The names a unit enum is written with, from its own type.
pub fn choices<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    names_of::<T>()
}

/// The field (or variant) names a type's `Deserialize` asks for.
pub fn names_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = Probe(None);
    let _ = T::deserialize(&mut probe);
    probe.0.unwrap_or(&[])
}

/// A deserializer that only records the field or variant names it is asked
/// for, and fails.
struct Probe(Option<&'static [&'static str]>);

impl<'de> serde::Deserializer<'de> for &mut Probe {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("probe"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(serde::de::Error::custom("probe"))
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(variants);
        Err(serde::de::Error::custom("probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

fn key(path: &'static str, ty: Ty, default: &str, example: &'static str, about: &'static str) -> Key {
    let unit =
        if matches!(ty, Ty::Duration | Ty::PauseLength | Ty::ClockOffset | Ty::Offset) { "time, scaled" } else { "" };
    Key { path, ty, required: false, default: default.to_string(), unit, example, about }
}

fn required(mut k: Key) -> Key {
    k.required = true;
    k
}

fn list(ty: Ty) -> Ty {
    Ty::List(Box::new(ty))
}

/// Every key, in the order the reference lists them.
pub fn keys() -> Vec<Key> {
    use Ty::*;
    // The defaults the loader fills in, from the types that hold them.
    let lease = crate::model::LeaseSettings::default();
    vec![
        required(key(
            "name",
            Text,
            "",
            "sigkill-gap",
            "The experiment's name: its results directory and its row in a suite's README.",
        )),
        key("description", Text, "", "", "What it measures and why, for people and for the README."),
        required(key("workers", Int(1), "", "3", "Worker processes per trial.")),
        key(
            "trials",
            Trials,
            "1",
            "{until: {ci_width: 10%}, max: 500}",
            "Trials to run (per sweep point); or run until the 95 % interval of the headline rate (false evictions per leader pause where leaders are paused, else trials with two leaders) is at most `ci_width` wide, after at least `min` (default 10) and at most `max` trials.",
        ),
        key("seed", Int(0), "random, recorded", "20261129", "Base seed: trial i uses seed + i, at every sweep point."),
        key("duration", Duration, "30s", "30s", "How long each trial runs."),
        key("lease", Duration, &lease.lease.to_string(), "9s", "Lease length."),
        key("renew", Duration, &lease.renew.to_string(), "3s", "The leader renews this often; shorter than the lease."),
        key("watch", Duration, &lease.watch.to_string(), "3s", "Watchers look at the lease this often."),
        key(
            "expiry_resolution",
            Duration,
            &lease.resolution.to_string(),
            "1s",
            "The unit `leaseUntil` is truncated to under `unix-seconds` expiry.",
        ),
        key("time_scale", Number, "1", "0.1", "Multiply every duration by this (also `--time-scale`, not both)."),
        key(
            "scaled_by",
            Number,
            "",
            "0.1",
            "Written by leasequake in a resolved experiment.yaml: its durations are already scaled by this.",
        ),
        key(
            "start",
            Choice(choices::<StartMode>()),
            "barrier",
            "staggered",
            "How the workers start: together on one barrier, staggered, or each at a uniform moment in [0, stagger) drawn from the trial's seed (random).",
        ),
        key(
            "stagger",
            Duration,
            "0s",
            "1ms",
            "With `start: staggered`, worker i starts i × stagger after the barrier; with `start: random`, the window each worker's start is drawn from. A program starts when its stdin closes, at that moment.",
        ),
        key(
            "align",
            Duration,
            "",
            "530ms",
            "Release the barrier at this offset past a whole expiry-resolution unit of the wall clock.",
        ),
        key(
            "initial_lock",
            Choice(choices::<InitialLock>()),
            "none",
            "empty",
            "The lock file's state before the workers start.",
        ),
        key("grace", Duration, "2s", "2s", "After the trial: how long workers get between SIGTERM and SIGKILL."),
        key(
            "fault_budget",
            Duration,
            "",
            "5ms",
            "How late a fault may take effect (actual − scheduled) before its trial is flagged as taken on a \
             machine too busy for this time scale. Default: 1 % of the smallest of lease, renew and watch; 0s \
             turns the flag off.",
        ),
        key(
            "disturbance_budget",
            Duration,
            "",
            "5ms",
            "How far the machine may move a trial before it counts as disturbed: an operation outside every \
             fault that took this much longer than its kind's median, a built-in worker woken this late for \
             a tick, or workers released together that started this far apart. Default: 1 % of the smallest of lease, renew and watch, at least 1ms of real \
             time; 0s turns the judgement off (docs/metrics.md, \
             'Disturbed trials').",
        ),
        key("jobs", Int(1), "1", "4", "Trials to run at once (also `--jobs`)."),
        key("worker", Section, "", "", "Settings of the built-in worker (not for a program)."),
        key("worker.acquire", Choice(choices::<Acquire>()), "excl", "naive", "How the lock file is created."),
        key(
            "worker.unreadable",
            Choice(choices::<Unreadable>()),
            "retry",
            "expire-age",
            "What a watcher does with a lock file it cannot read.",
        ),
        key(
            "worker.expiry",
            Choice(choices::<Expiry>()),
            "unix-seconds",
            "exact",
            "How `leaseUntil` is written and compared.",
        ),
        key("worker.release_on_term", Bool, "true", "false", "Remove the lock file on SIGTERM."),
        key(
            "worker.mode",
            Choice(choices::<Mode>()),
            "loop",
            "one-shot",
            "The lease loop, or one election attempt held to the end.",
        ),
        key(
            "worker.failpoint",
            Choice(choices::<Failpoint>()),
            "none",
            "after-truncate",
            "Where the worker stalls (with a `failpoint` event) for a fault to land inside.",
        ),
        key("worker.failpoint_delay", Duration, "0s", "50ms", "How long it stalls there."),
        key("worker.failpoint_workers", list(Int(0)), "all", "[0]", "Only these workers get the failpoint."),
        key("worker.fencing_tokens", Bool, "false", "true", "Give every grant a fencing token."),
        key(
            "worker.resource",
            Choice(choices::<Resource>()),
            "none",
            "fenced",
            "The protected resource the leader writes to.",
        ),
        key("worker.epoch_job", Section, "", "", "The exactly-once job: one run per epoch."),
        key("worker.epoch_job.epoch", Duration, "", "10s", "Length of an epoch."),
        key("worker.epoch_job.duration", Duration, "", "2s", "How long one run of the job takes."),
        key(
            "worker.epoch_job.strategy",
            Choice(choices::<JobStrategy>()),
            "",
            "fencing",
            "How the job is kept exactly-once.",
        ),
        key(
            "worker.clock_offset",
            ClockOffset,
            "0s",
            "[0s, 2s, -1s]",
            "How far each worker's wall clock is off: one offset, or one per worker (a program's too, through the clock shim).",
        ),
        key(
            "worker.clock_rate",
            ClockRate,
            "1",
            "[1, 1.01, 0.99]",
            "How fast each worker's clocks run (the built-in worker's wall clock, timers and deadlines; a program's wall clock only): one rate, or one per worker; 0.5 to 2.",
        ),
        key(
            "worker.request_timeout",
            Duration,
            "a third of the lease",
            "500ms",
            "How long one request to a lease server may take, connecting included (at least 20 ms for Redis, 50 ms for PostgreSQL and etcd by default).",
        ),
        key(
            "worker.belief",
            Choice(choices::<Belief>()),
            "until-renewal-fails",
            "local-deadline",
            "How long a leader believes without a successful renewal: until three renewals failed (the blog), or until lease − belief_margin after the last successful renewal began.",
        ),
        key(
            "worker.belief_margin",
            Duration,
            "0s",
            "1s",
            "With `belief: local-deadline`, step down this long before the lease would end.",
        ),
        key(
            "worker.watch_by",
            Choice(choices::<WatchBy>()),
            "poll",
            "push",
            "How a watcher learns the lease is free: by looking every `watch`, or also told by the server, taking over the moment it is: an etcd watch on the key, a Redis keyspace notification (`del`, `expired`), a PostgreSQL NOTIFY on release (not on expiry). The ticks go on as a safety net.",
        ),
        key("substrate", Section, "", "", "Where the lease lives."),
        key("substrate.kind", Choice(choices::<Kind>()), "file", "redis", "The lease's substrate."),
        key("substrate.address", Text, "the local service", "redis://127.0.0.1:6379/", "A server substrate's address."),
        key(
            "substrate.managed",
            Bool,
            "false",
            "true",
            "The harness runs the server itself (redis-server; a PostgreSQL cluster made by initdb; a one-member etcd), for the run, or per trial where server-* faults hit it.",
        ),
        key(
            "substrate.proxy",
            Bool,
            "false (true with network faults)",
            "true",
            "Put the harness's TCP proxy between each worker and the server even without network faults.",
        ),
        key(
            "substrate.members",
            Int(1),
            "1",
            "2",
            "Servers of a replicated lease service the harness runs per trial (managed): Redis as a primary and `members − 1` replicas watched by three Sentinels, an etcd cluster, or Redlock's independent Redis servers (at least 3); each on a loopback address of its own, every link through the proxy (docs/replicated.md).",
        ),
        key(
            "substrate.failover_after",
            Duration,
            "a third of the lease, at least 100ms",
            "3s",
            "How long the Sentinels wait on a silent primary before they fail it over (`down-after-milliseconds`).",
        ),
        key(
            "substrate.sync_replicas",
            Int(0),
            "0",
            "1",
            "A replicated Redis: after each acquire or renewal, wait (`WAIT`, half the request timeout) until this many replicas have it; fewer, and the operation failed (the primary keeps the write).",
        ),
        key(
            "substrate.observe",
            Bool,
            "false",
            "true",
            "The harness reads the lease on the service itself every 5 ms (the lock file and its kernel locks, the Redis key, the etcd keys, PostgreSQL's advisory locks) and records what it sees (`lease_held`, `lease_free`) beside what the workers say: grants as the service gave them, beliefs it did not back.",
        ),
        key(
            "program",
            Section,
            "",
            "",
            "Put any command under test instead of the built-in worker (docs/worker-protocol.md).",
        ),
        required(key(
            "program.command",
            Command,
            "",
            "[python3, \"{experiment_dir}/w.py\", \"{lock}\"]",
            "argv with placeholders, or one string with `shell: true`.",
        )),
        key("program.shell", Bool, "false", "true", "Run `command` with /bin/sh -c."),
        key("program.env", Map, "", "{MY_LOCK: \"{lock}\"}", "Extra environment (placeholders allowed)."),
        key(
            "program.observe",
            Choice(&["protocol", "patterns"]),
            "protocol (patterns with `patterns:`)",
            "patterns",
            "How its events are read.",
        ),
        key(
            "program.timestamps",
            Choice(&["program", "receipt"]),
            "program (receipt for patterns)",
            "receipt",
            "Whose clock stamps an event.",
        ),
        key("program.patterns", Sections, "", "", "Log lines that become events; the first match wins."),
        required(key(
            "program.patterns[].regex",
            Text,
            "",
            "'acquired lease until (?P<lease_until>\\S+)'",
            "A regular expression; named groups fill the detail.",
        )),
        required(key("program.patterns[].event", Text, "", "acquired", "The event kind a matching line becomes.")),
        key(
            "program.patterns[].detail",
            Map,
            "",
            "{expires_in_ms: \"{lease_ms}\"}",
            "Fixed detail values (placeholders allowed).",
        ),
        key("program.ready", Bool, "false", "true", "Release the barrier only once every worker said `ready`."),
        key(
            "program.max_lines",
            Int(1),
            "200000",
            "1000",
            "Lines read per worker and trial; the rest are counted and dropped.",
        ),
        key(
            "program.expiry",
            Choice(choices::<ProgramExpiry>()),
            "exact",
            "unix-seconds",
            "How the program judges its lease: what the theory assumes.",
        ),
        key(
            "program.cwd",
            Text,
            "where leasequake runs",
            "\"{trial_dir}\"",
            "Its working directory (placeholders allowed; relative to the experiment file).",
        ),
        key(
            "faults",
            Faults,
            "[]",
            "",
            "What to do to the workers, the lock or the server, and when: a script, or a campaign (`random:`).",
        ),
        required(key(
            "faults[].at",
            Duration,
            "",
            "12s",
            "When (after the barrier); with `after:`, when the fault is armed.",
        )),
        key("faults[].jitter", Duration, "0s", "2.6s", "Fire at a seeded uniform moment in [at, at + jitter)."),
        key("faults[].after", Text, "", "renewed", "Fire `delay` after the target's next event of this kind."),
        key("faults[].delay", Duration, "0s", "2.47s", "With `after:`, how long after the event."),
        key("faults[].target", Target, "leader", "watcher", "Whom it hits."),
        required(key("faults[].action", Choice(choices::<Action>()), "", "kill", "What is done.")),
        key(
            "faults[].duration",
            PauseLength,
            "",
            "{exponential: 3s}",
            "A pause's length: fixed, `{uniform: [a, b]}`, `{exponential: mean}` or `{choice: [a, b]}`; a network fault's, after which it heals (without one it lasts until `heal`).",
        ),
        key("faults[].latency", Duration, "", "50ms", "`delay`: the added one-way latency."),
        key(
            "faults[].latency_jitter",
            Duration,
            "0s",
            "10ms",
            "`delay`: each chunk's latency is drawn uniformly from latency ± this (the stream keeps its order).",
        ),
        key("faults[].by", Offset, "", "-2s", "`skew`: how far the worker's clock jumps, forward or back."),
        key("faults[].direction", Choice(choices::<Direction>()), "both", "replies", "`delay`: which way it applies."),
        key(
            "faults[].toxicity",
            Number,
            "1",
            "0.5",
            "Network faults: the fraction of the link's connections hit, drawn per connection (seeded).",
        ),
        key("faults[].every", Duration, "", "15s", "Repeat at fresh moments every this long until the trial ends."),
        key(
            "faults.random",
            Section,
            "",
            "",
            "A campaign instead of a script: each trial draws its own faults from its seed (docs/shrink.md).",
        ),
        key(
            "faults.random.window",
            Pair(Box::new(Duration)),
            "the whole trial",
            "[5s, 50s]",
            "Faults fall at moments in [from, until) after the barrier.",
        ),
        required(key("faults.random.kinds", Sections, "", "", "The kinds of fault to mix.")),
        required(key("faults.random.kinds[].action", Choice(choices::<Action>()), "", "kill", "What is done.")),
        key("faults.random.kinds[].target", Target, "leader", "watcher", "Whom it hits."),
        key(
            "faults.random.kinds[].count",
            Count,
            "",
            "[0, 3]",
            "How many per trial (`[min, max]`: drawn per trial), each at a uniform moment; or `mean_interval`.",
        ),
        key(
            "faults.random.kinds[].mean_interval",
            Duration,
            "",
            "20s",
            "Instead of `count`: a Poisson process, one fault this often on average.",
        ),
        key(
            "faults.random.kinds[].duration",
            PauseLength,
            "",
            "{uniform: [1s, 12s]}",
            "As for a scripted fault; a distribution is drawn per fault.",
        ),
        key("faults.random.kinds[].latency", Duration, "", "50ms", "As for a scripted fault."),
        key("faults.random.kinds[].latency_jitter", Duration, "0s", "10ms", "As for a scripted fault."),
        key(
            "faults.random.kinds[].direction",
            Choice(choices::<Direction>()),
            "both",
            "replies",
            "As for a scripted fault.",
        ),
        key("faults.random.kinds[].toxicity", Number, "1", "0.5", "As for a scripted fault."),
        key("faults.random.kinds[].by", Offset, "", "-2s", "As for a scripted fault."),
        key("expect", Section, "", "", "What must hold, or the run exits 1 (a JUnit test case each with `--junit`)."),
        key("expect.max_leaders", Int(0), "", "1", "No trial sees more believers at once."),
        key("expect.gap_min", Duration, "", "6s", "Every ended gap lasts at least this long."),
        key("expect.gap_max", Duration, "", "13s", "Every gap lasts at most this long."),
        key("expect.wedged", Bool, "", "false", "true: every trial wedges; false: none does."),
        key("expect.double_leader_trials", Int(0), "", "0", "At most this many trials with two leaders."),
        key(
            "expect.disturbed",
            Int(0),
            "",
            "0",
            "At most this many trials the machine disturbed (`disturbed` in trials.csv): 0 fails a run a busy \
             machine spoiled.",
        ),
        key(
            "expect.metrics",
            Bounds,
            "",
            "{summary.gap_p99_ms: {max: 10000}, summary.double_leader_trials: {rate_max: 5%}}",
            "Bounds on any metric of the summary files, checked per setting (each sweep point): `max`, `min`, and \
             for a count of trials `rate_max`/`rate_min` on its 95 % interval (0/3 does not pass a 5 % ceiling); \
             durations of the experiment in its own time. The metrics: the table below.",
        ),
        key(
            "reference",
            Section,
            "",
            "",
            "What a published source reported, set beside the measurement in a suite's README.",
        ),
        required(key("reference.claim", Text, "", "\"9.53 s leaderless\"", "The number as the source states it.")),
        key("reference.gap", Duration, "", "9.53s", "A gap the source measured."),
        key("reference.worst_gap", Duration, "", "12s", "The source's worst case."),
        key(
            "reference.double_leader_trials",
            Pair(Box::new(Int(0))),
            "",
            "[3, 30]",
            "Trials with two leaders, as [k, n].",
        ),
        key("reference.max_leaders", Int(0), "", "1", "The most leaders at once the source claims possible."),
        key("reference.wedged", Bool, "", "true", "Whether the source saw the system wedge."),
        key("reference.bound", Pair(Box::new(Duration)), "", "[6s, 13s]", "The theoretical bound on gaps."),
        key("reference.note", Text, "", "", "Why our number may differ, written before the run."),
        key(
            "sweep",
            Sweep,
            "",
            "{lease: [3s, 9s], pause: [1s, 5s]}",
            "Run the cross product of these settings (`points:` moves settings together; `fault: [kill, pause]` runs each action of the `faults:` list alone).",
        ),
    ]
}
