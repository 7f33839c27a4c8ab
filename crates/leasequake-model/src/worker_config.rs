//! The built-in worker's whole configuration, as one typed value: the
//! harness writes it once per trial (`worker.json` in the trial directory)
//! and every worker reads it (`leasequake worker --config FILE --index I`).
//! By hand, or as a program under test, the same settings are given as
//! `key=value` words on top of the blog's defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::duration::{Dur, Offset};
use super::settings::{Kind, LeaseSettings, WorkerSettings};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// The lock file (file, flock substrates); the lease's name on a
    /// server is derived from it unless `lease_key` says otherwise.
    pub lock: PathBuf,
    pub timing: LeaseSettings,
    pub worker: WorkerSettings,
    pub substrate: Kind,
    /// Server address (redis://…, postgres://…); default: the local service.
    pub address: Option<String>,
    /// Per worker (by index), the address that replaces `address`: its own
    /// link through the harness's proxy.
    pub addresses: Vec<String>,
    /// Per worker (by index), the replicated service it reaches instead of
    /// one server (`substrate.members` > 1).
    pub services: Vec<ServiceView>,
    /// The lease's name on a server (default: `lease_key(lock)`).
    pub lease_key: Option<String>,
    /// Directory of the protected resource and the epoch job's store.
    pub resource_dir: Option<PathBuf>,
    /// Workers in the trial (the partitioned job's modulus).
    pub workers: usize,
    /// Worker i starts `stagger × i` after the barrier.
    pub stagger: Dur,
    /// Worker i starts `start_delays[i]` after the barrier instead, where
    /// there is one (`start: random`).
    pub start_delays: Vec<Dur>,
    /// Where the harness writes each worker's clock jumps (`skew` faults):
    /// a file per worker index holding the total in ns.
    pub clock_dir: Option<PathBuf>,
}

impl Default for WorkerConfig {
    /// The blog's program on `./leader.lock`.
    fn default() -> Self {
        WorkerConfig {
            lock: PathBuf::from("leader.lock"),
            timing: LeaseSettings::default(),
            worker: WorkerSettings::default(),
            substrate: Kind::File,
            address: None,
            addresses: Vec::new(),
            services: Vec::new(),
            lease_key: None,
            resource_dir: None,
            workers: 1,
            stagger: Dur::ZERO,
            start_delays: Vec::new(),
            clock_dir: None,
        }
    }
}

/// A replicated lease service as one worker reaches it: Sentinels to ask
/// where the primary is, and each member's address as the service
/// announces it beside the address this worker reaches it at (its own link
/// through the harness's proxy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceView {
    /// The name the Sentinels know the primary by.
    pub name: String,
    /// `redis://…` of each Sentinel.
    pub sentinels: Vec<String>,
    /// Each member, in the order this worker tries them.
    pub members: Vec<MemberView>,
    /// Replicas each write must reach before it counts (`WAIT`).
    #[serde(default)]
    pub sync_replicas: usize,
}

/// One member of a replicated service as a worker reaches it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberView {
    /// Its index in the service (0 the first primary).
    pub index: usize,
    /// The `host:port` the service announces it by (Sentinel's answers).
    pub announced: String,
    /// Where this worker reaches it: its own link through the proxy.
    pub url: String,
}

impl WorkerConfig {
    /// Read a config file.
    pub fn read(path: &std::path::Path) -> Result<WorkerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Apply `key=value` settings. A key is a dotted path into the config
    /// (`timing.lease`, `worker.expiry`), or its last part alone where that
    /// names one setting (`lease`, `expiry`, `lock`). A value is read as
    /// JSON where it parses (numbers, booleans, `[…]`, `{…}`), else as text
    /// (`9s`, `exact`).
    pub fn with(self, settings: &[String]) -> Result<WorkerConfig, ConfigError> {
        let mut tree = serde_json::to_value(&self).map_err(|e| ConfigError(e.to_string()))?;
        for s in settings {
            let (key, text) =
                s.split_once('=').ok_or_else(|| ConfigError(format!("{s:?}: expected key=value, e.g. lease=9s")))?;
            let path = resolve(&tree, key).map_err(ConfigError)?;
            let value = serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()));
            let mut slot = &mut tree;
            for part in &path {
                slot = slot.get_mut(part.as_str()).expect("resolve found this path");
            }
            *slot = value;
        }
        serde_json::from_value(tree).map_err(|e| ConfigError(format!("{}: {e}", settings.join(" "))))
    }

    /// Worker `index`'s start delay after the barrier.
    pub fn start_delay(&self, index: usize) -> Dur {
        self.start_delays.get(index).copied().unwrap_or_else(|| self.stagger.scaled(index as f64))
    }

    /// Does worker `index` stall at the failpoint?
    pub fn has_failpoint(&self, index: usize) -> bool {
        self.worker.failpoint_workers.as_ref().is_none_or(|ws| ws.contains(&index))
    }

    /// The server address worker `index` uses.
    pub fn address_of(&self, index: usize) -> Option<&str> {
        self.addresses.get(index).or(self.address.as_ref()).map(String::as_str)
    }

    /// The replicated service worker `index` reaches, if there is one.
    pub fn service_of(&self, index: usize) -> Option<&ServiceView> {
        self.services.get(index)
    }

    /// Worker `index`'s wall-clock offset.
    pub fn clock_offset(&self, index: usize) -> Offset {
        self.worker.clock_offset.of(index)
    }
}

/// A config that cannot be read, or a setting that does not fit it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// The path of `key` in the config's tree: dotted, or a last part that
/// names exactly one setting.
fn resolve(tree: &serde_json::Value, key: &str) -> Result<Vec<String>, String> {
    let dotted: Vec<String> = key.split('.').map(str::to_string).collect();
    let mut node = Some(tree);
    for part in &dotted {
        node = node.and_then(|n| n.get(part.as_str()));
    }
    if node.is_some() {
        return Ok(dotted);
    }
    let mut found = Vec::new();
    leaves(tree, &mut Vec::new(), &mut found);
    let matching: Vec<&Vec<String>> = found.iter().filter(|p| p.last().is_some_and(|l| l == key)).collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "unknown worker setting {key:?}: expected one of {}",
            found.iter().map(|p| p.join(".")).collect::<Vec<_>>().join(", ")
        )),
        many => {
            Err(format!("{key:?} is ambiguous: {}", many.iter().map(|p| p.join(".")).collect::<Vec<_>>().join(", ")))
        }
    }
}

/// Every setting's path (objects are descended, anything else is a leaf).
fn leaves(node: &serde_json::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match node {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                prefix.push(k.clone());
                leaves(v, prefix, out);
                prefix.pop();
            }
        }
        _ => out.push(prefix.clone()),
    }
}

/// The lease's name on a server for the trial whose lock path is `lock`:
/// `leasequake-` and 16 hex digits of the path, unique to the trial (the
/// path holds the results directory and the trial's number) and the same
/// for a rerun of it, whose first act is to remove what the interrupted
/// attempt left under that name. The built-in worker and a program's
/// `{key}` use it alike.
pub fn lease_key(lock: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!("leasequake-{:016x}", super::hash::fnv1a(lock.as_os_str().as_bytes()))
}

/// The protected resource of the trial whose lock is `lock`: the built-in
/// worker's store, and a program's `{resource}`.
pub fn store_dir(lock: &std::path::Path) -> std::path::PathBuf {
    lock.with_file_name("resource")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Expiry;

    #[test]
    fn settings_by_short_or_dotted_name() {
        let args: Vec<String> =
            ["lock=/t/l", "lease=4s", "worker.expiry=exact", "fencing_tokens=true", "clock_offset=[\"0s\", \"-1s\"]"]
                .map(String::from)
                .to_vec();
        let c = WorkerConfig::default().with(&args).unwrap();
        assert_eq!(c.lock, PathBuf::from("/t/l"));
        assert_eq!(c.timing.lease, Dur::from_secs(4));
        assert_eq!(c.timing.renew, Dur::from_secs(3), "the rest stays the blog's");
        assert_eq!(c.worker.expiry, Expiry::Exact);
        assert!(c.worker.fencing_tokens);
        assert_eq!(c.clock_offset(1), Offset::parse("-1s").unwrap());
        assert_eq!(c.clock_offset(5), Offset::ZERO);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = WorkerConfig::default().with(&["leese=9s".to_string()]).unwrap_err().to_string();
        assert!(err.contains("unknown worker setting \"leese\"") && err.contains("timing.lease"), "{err}");
        let err = WorkerConfig::default().with(&["lease=9".to_string()]).unwrap_err().to_string();
        assert!(err.contains("lease=9"), "{err}");
        assert!(WorkerConfig::default().with(&["lease".to_string()]).unwrap_err().to_string().contains("key=value"));
    }

    #[test]
    fn the_file_round_trips() {
        let c = WorkerConfig::default().with(&["expiry=exact".to_string(), "stagger=5ms".to_string()]).unwrap();
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<WorkerConfig>(&text).unwrap(), c);
    }
}
