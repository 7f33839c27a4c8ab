//! Every key of an experiment file, documented once: its type, default,
//! unit, example and meaning, in the order the reference lists them. The
//! choices of every enum come from its own type (`choices`), and the keys
//! each section takes from the loader's own types (`names_of`), so the
//! table cannot drift from the code; `reference.rs` renders it.

use crate::model::describe::SettingDoc;
pub use crate::model::describe::{Ty, choices};
use crate::model::experiment::defaults;
use crate::model::program::{ClockWay, ProgramExpiry};
use crate::model::{Action, Direction, InitialLock, Kind, StartMode, WorkerSettings, setting_name};

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

fn key(path: &'static str, ty: Ty, default: &str, example: &'static str, about: &'static str) -> Key {
    Key { path, unit: unit(&ty), ty, required: false, default: default.to_string(), example, about }
}

fn unit(ty: &Ty) -> &'static str {
    if ty.is_time() { "time, scaled" } else { "" }
}

impl From<SettingDoc> for Key {
    fn from(d: SettingDoc) -> Key {
        Key {
            path: d.path,
            unit: unit(&d.ty),
            ty: d.ty,
            required: false,
            default: d.default,
            example: d.example,
            about: d.about,
        }
    }
}

fn required(mut k: Key) -> Key {
    k.required = true;
    k
}

/// Every key, in the order the reference lists them.
pub fn keys() -> Vec<Key> {
    use Ty::*;
    // The defaults the loader fills in, from the types that hold them.
    let lease = crate::model::LeaseSettings::default();
    let mut keys = vec![
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
            &defaults::TRIALS.to_string(),
            "{until: {ci_width: 10%}, max: 500}",
            "Trials to run (per sweep point); or run until the 95 % interval of the headline rate (false evictions per leader pause where leaders are paused, else trials with two leaders) is at most `ci_width` wide, after at least `min` (default 10) and at most `max` trials.",
        ),
        key("seed", Int(0), "random, recorded", "20261129", "Base seed: trial i uses seed + i, at every sweep point."),
        key("duration", Duration, &defaults::DURATION.to_string(), "30s", "How long each trial runs."),
        key(
            "window",
            Duration,
            "",
            "1m",
            "A soak (`trials: 1`, no sweep) kept in windows this long (at least 1s as it runs, after the time scale, and a whole number of them making `duration`): a run stopped at any moment, `kill -9` included, keeps its trial up to the last whole window when `--resume` finds it, and the resume runs the rest of the soak, with fresh processes, as the next trial.",
        ),
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
            &setting_name(&defaults::START),
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
            &setting_name(&defaults::INITIAL_LOCK),
            "empty",
            "The lock file's state before the workers start.",
        ),
        key(
            "grace",
            Duration,
            &defaults::GRACE.to_string(),
            "2s",
            "After the trial: how long workers get between SIGTERM and SIGKILL.",
        ),
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
        key("jobs", Int(1), &defaults::JOBS.to_string(), "4", "Trials to run at once (also `--jobs`)."),
        key("worker", Section, "", "", "Settings of the built-in worker (not for a program)."),
    ];
    // The built-in worker's settings are documented where they are declared.
    keys.extend(WorkerSettings::docs().into_iter().map(Key::from));
    keys.extend(vec![
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
            "program.clock",
            Choice(choices::<ClockWay>()),
            "auto",
            "vdso",
            "How its wall clock is moved, where `clock_offset`, `clock_rate` or `skew` move it: `shim` preloads a library into programs that read the clock through the C library (and what they start); `vdso` writes a clock into the program's vDSO before its first instruction (x86_64, where the harness may trace its child; the program itself, Go and static ones included, and what it forks, which later skews do not reach, but not what it execs, nor a program that makes the clock's system call itself; not with `shell: true`); `auto` takes `vdso` for a static or Go executable, else `shim`.",
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
             durations of the experiment in its own time. A metric of a file the experiment never writes \
             (summary-writes.csv without a protected resource, summary-jobs.csv without an epoch job, …) is refused. The metrics: \
             the table below.",
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
    ]);
    keys
}
