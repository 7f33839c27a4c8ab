//! host.json: what machine a result came from, so numbers are never
//! compared without their context.

use serde::{Deserialize, Serialize};

use crate::model::Experiment;
use crate::model::calibration::{Loaded, Quick};
use crate::model::clock::utc_stamp;

#[derive(Serialize)]
pub struct Host {
    /// The machine (its keys at the top level of host.json).
    #[serde(flatten)]
    pub machine: Machine,
    pub leasequake_version: &'static str,
    /// The git commit the binary was built from (`-dirty` over uncommitted
    /// changes, `unknown` outside a checkout).
    pub build: &'static str,
    /// FNV-1a (64-bit, hex) of the experiment file's bytes as it was read:
    /// the shards of one run hold the same.
    pub experiment_hash: String,
    /// The layout of the CSV files beside this record (docs/results-format.md).
    pub results_format: u32,
    pub started_utc: String,
    pub command: Vec<String>,
    pub seed: u64,
    pub time_scale: f64,
    pub jobs: usize,
    /// The random generator behind every seeded choice.
    pub generator: &'static str,
    /// The instrument's error bars, measured on this machine just before
    /// the run (`leasequake calibrate`, short version; µs): absent with
    /// `--no-calibrate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Quick>,
    /// The same with a CPU hog per core running (absent with
    /// `--no-calibrate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration_loaded: Option<Loaded>,
    /// A replicated lease service's setup (docs/replicated.md): each
    /// trial's own addresses and ports are in its `service.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSetup>,
    /// The share of the run's units this directory holds (`run --shard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
}

/// Shard `index` of `count`: it runs unit g of the run when g mod count is
/// index; this experiment's units are numbered from `first_unit` (the
/// units of the experiments before it in the run).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub index: u64,
    pub count: u64,
    pub first_unit: u64,
}

impl ShardRecord {
    /// Whether this shard runs the experiment's trial index `i` (from 0).
    pub fn owns(&self, i: u64) -> bool {
        // In 128 bits: a first unit near the top of u64 cannot wrap.
        (u128::from(self.first_unit) + u128::from(i)) % u128::from(self.count.max(1)) == u128::from(self.index)
    }

    /// Why the record cannot be one a run wrote, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if self.count == 0 {
            Some("shard count 0: a run is split into 1 or more shards".into())
        } else if self.index >= self.count {
            Some(format!("shard index {} of {}: shards are numbered from 0 below their count", self.index, self.count))
        } else {
            None
        }
    }
}

/// What a run's host.json says of the run itself: what a merge holds its
/// shards to. Fields a run of an older layout lacks are absent.
#[derive(Debug, Deserialize)]
pub struct Recorded {
    pub build: Option<String>,
    pub experiment_hash: Option<String>,
    pub seed: Option<u64>,
    pub hostname: Option<String>,
    pub started_utc: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    pub shard: Option<ShardRecord>,
}

/// Why a run's host.json cannot be taken as its record.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{}: {source}", path.display())]
    Read { path: std::path::PathBuf, source: std::io::Error },
    #[error("{}:{}:{}: {source}", path.display(), source.line(), source.column())]
    Json { path: std::path::PathBuf, source: serde_json::Error },
    #[error("{}: {source}", path.display())]
    Record { path: std::path::PathBuf, source: serde_json::Error },
    #[error("{}: {problem}", path.display())]
    Shard { path: std::path::PathBuf, problem: String },
}

/// `dir/host.json` read back: the run's record, and the whole of it as it
/// was written (a merge keeps every shard's).
pub fn read(dir: &std::path::Path) -> Result<(Recorded, serde_json::Value), HostError> {
    let path = dir.join("host.json");
    let text = crate::files::read_text(&path, crate::files::MAX_TEXT_BYTES)
        .map_err(|source| HostError::Read { path: path.clone(), source })?;
    let whole: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| HostError::Json { path: path.clone(), source })?;
    let recorded: Recorded =
        serde_json::from_value(whole.clone()).map_err(|source| HostError::Record { path: path.clone(), source })?;
    if let Some(problem) = recorded.shard.as_ref().and_then(ShardRecord::problem) {
        return Err(HostError::Shard { path, problem });
    }
    Ok((recorded, whole))
}

/// host.json of a merge (`leasequake merge`): what every shard shares, and
/// each shard's own record whole, in shard order.
#[derive(Serialize)]
pub struct Merged {
    pub results_format: u32,
    pub build: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment_hash: Option<String>,
    pub seed: Option<u64>,
    /// The merge itself: when, by which command and build.
    pub merged_utc: String,
    pub command: Vec<String>,
    pub merged_by_build: &'static str,
    pub shards: Vec<serde_json::Value>,
}

impl Merged {
    /// The merge of `shards` (the first one's record `first`) by `command`
    /// of `by`, now.
    pub fn new(first: &Recorded, shards: Vec<serde_json::Value>, command: Vec<String>, by: Build) -> Merged {
        Merged {
            results_format: super::rows::RESULTS_FORMAT,
            build: first.build.clone().unwrap_or_default(),
            experiment_hash: first.experiment_hash.clone(),
            seed: first.seed,
            merged_utc: utc_stamp(crate::model::clock::wall_ns() / 1_000_000_000),
            command,
            merged_by_build: by.commit,
            shards,
        }
    }
}

/// The record a check leaves beside the tables it derived: they are this
/// build's judgement of the history, whichever build ran it (host.json).
pub const CHECKED: &str = "checked.json";

#[derive(Serialize)]
pub struct Checked {
    pub results_format: u32,
    pub checked_utc: String,
    pub command: Vec<String>,
    pub checked_by_build: &'static str,
    /// The build that ran the trials, from host.json.
    pub run_build: Option<String>,
}

/// Who ran the results in `dir`, where and when (host.json), and, where a
/// check re-derived its tables, which build judged them (checked.json).
pub fn words(dir: &std::path::Path) -> String {
    let json = |name: &str| -> serde_json::Value {
        crate::files::read_text(&dir.join(name), crate::files::MAX_TEXT_BYTES)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    };
    let host = json("host.json");
    let ran = merged_words(&host).unwrap_or_else(|| run_words(&host));
    match checked_words(&json(CHECKED)) {
        Some(checked) => format!("{ran}\n{checked}"),
        None => ran,
    }
}

/// A check's record in words (none without one).
fn checked_words(record: &serde_json::Value) -> Option<String> {
    let build = record["checked_by_build"].as_str()?;
    let command = record["command"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>());
    Some(format!(
        "Re-checked from its histories by `{}` at {} UTC (build {build}): every table and page here is that \
         build's judgement of the recorded trials (checked.json); the run's own record is host.json.",
        command.unwrap_or_default().join(" "),
        record["checked_utc"].as_str().unwrap_or("?"),
    ))
}

/// A run's words for its README, from its host.json.
pub fn run_words(host: &serde_json::Value) -> String {
    let text = |k: &str| host[k].as_str().unwrap_or("?").to_string();
    let command = host["command"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(" "));
    format!(
        "Produced by `{}` on {} ({}, {} cores, kernel {}), started at {} UTC, leasequake {}.",
        command.unwrap_or_else(|| "?".into()),
        text("hostname"),
        text("cpu"),
        host["cores"].as_u64().map_or("?".into(), |c| c.to_string()),
        text("kernel"),
        text("started_utc"),
        text("leasequake_version"),
    )
}

/// How a replicated service is laid out and fails over.
#[derive(Serialize)]
pub struct ServiceSetup {
    pub kind: &'static str,
    pub members: usize,
    pub sentinels: usize,
    pub addresses: String,
    pub links: &'static str,
    pub failover: String,
}

fn service_setup(exp: &Experiment) -> Option<ServiceSetup> {
    use crate::model::Kind;
    let s = &exp.substrate;
    if !s.replicated() {
        return None;
    }
    let lease = exp.lease.lease;
    let (kind, sentinels, failover) = match s.kind {
        Kind::Etcd => (
            "etcd cluster",
            0,
            "Raft: heartbeat 10 ms, election timeout 100 ms; a new leader gives every lease its whole TTL".to_string(),
        ),
        Kind::Redlock => (
            "Redlock over independent Redis servers",
            0,
            "none: each client needs a majority of the servers".to_string(),
        ),
        _ => (
            "Redis primary and replicas with Sentinel",
            3,
            format!(
                "Sentinel: quorum 2, down-after-milliseconds {}, failover-timeout {}, parallel-syncs 1{}",
                s.failover_after_of(lease).as_ms_f64().round(),
                s.failover_timeout_of(lease).as_ms_f64().round(),
                if s.sync_replicas > 0 {
                    format!("; WAIT {} after each write", s.sync_replicas)
                } else {
                    String::new()
                }
            ),
        ),
    };
    Some(ServiceSetup {
        kind,
        members: s.members,
        sentinels,
        addresses: "members on 127.0.0.11 and up, Sentinels on 127.0.0.21 and up, free ports per trial".to_string(),
        links: "every worker-to-server and server-to-server link through the harness's proxy",
        failover,
    })
}

/// Where a merged directory came from, in words, from its host.json (none
/// for a run's own).
pub fn merged_words(host: &serde_json::Value) -> Option<String> {
    let shards = host["shards"].as_array()?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let words = |v: &serde_json::Value| {
        v.as_array().map(|a| a.iter().filter_map(|w| w.as_str()).collect::<Vec<_>>().join(" ")).unwrap_or_default()
    };
    let hosts: std::collections::BTreeSet<String> = shards.iter().map(|s| text(&s["hostname"])).collect();
    let started = shards.iter().filter_map(|s| s["started_utc"].as_str()).min().unwrap_or("?");
    Some(format!(
        "Merged by `{}` at {} UTC from {} shards of one run (build {}, seed {}), run on {}; the first started at {} \
         UTC, shard 0 as `{}`. Every shard's own host record and calibration are in host.json.",
        words(&host["command"]),
        text(&host["merged_utc"]),
        shards.len(),
        text(&host["build"]),
        host["seed"].as_u64().map_or("?".into(), |s| s.to_string()),
        hosts.into_iter().collect::<Vec<_>>().join(", "),
        started,
        shards.first().map(|s| words(&s["command"])).unwrap_or_default(),
    ))
}

/// The generator that draws every random choice of a trial from its seed
/// (fault jitter, targets, pause lengths): a stream stable by contract, so
/// that a printed seed replays after an upgrade.
pub const GENERATOR: &str = "ChaCha8 (rand_chacha 0.9), seeded with seed_from_u64(trial seed)";

/// The machine a run is on, as commands probed it (report/ only writes
/// what it is handed). Every field is best effort: a missing fact must not
/// stop a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub os: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub load_average: [f64; 3],
    /// How the harness's timing threads were scheduled: real-time where
    /// permitted (docs/architecture.md, "Precision under load").
    pub realtime: String,
}

/// Which leasequake wrote a record: its version and the commit it was
/// built from. Handed in by the binary, which alone knows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Build {
    pub version: &'static str,
    pub commit: &'static str,
}

/// What a run knows of itself: its command line, when it began (wall
/// clock, ns), the calibration measured before it, if any, and the build
/// running it.
#[derive(Clone, Debug)]
pub struct RunFacts {
    pub build: Build,
    pub command: Vec<String>,
    pub started_ns: i64,
    pub calibration: Option<Quick>,
    pub calibration_loaded: Option<Loaded>,
}

/// The host record of a run of `exp` on `machine` (as it is when the
/// experiment starts), whose file's bytes hash to `experiment_hash`.
pub fn describe(exp: &Experiment, experiment_hash: String, machine: Machine, run: &RunFacts) -> Host {
    Host {
        machine,
        leasequake_version: run.build.version,
        build: run.build.commit,
        experiment_hash,
        results_format: super::rows::RESULTS_FORMAT,
        started_utc: utc_stamp(run.started_ns / 1_000_000_000),
        command: run.command.clone(),
        seed: exp.seed,
        time_scale: exp.time_scale,
        jobs: exp.jobs,
        generator: GENERATOR,
        calibration: run.calibration.clone(),
        calibration_loaded: run.calibration_loaded.clone(),
        service: service_setup(exp),
        shard: None,
    }
}

pub fn to_json(host: &impl Serialize) -> String {
    serde_json::to_string_pretty(host).expect("host record serialises") + "\n"
}
