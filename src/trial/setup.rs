//! What a trial hands its children: the built-in worker's config file, a
//! program's placeholder values.

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::worker_config::WorkerConfig;
use crate::model::{Dur, Experiment, Resource, StartMode};

/// The built-in worker's config for a trial of `exp`: `address` is the
/// lease server's (a managed server's is known only per trial).
/// Where the workers find their lease server: the server itself, or each
/// its own link through the harness's proxy.
#[derive(Clone, Debug, Default)]
pub struct Addresses {
    pub server: Option<String>,
    /// By worker index (empty without a proxy).
    pub links: Vec<String>,
}

impl Addresses {
    /// The address worker `i` is given.
    pub fn of(&self, i: usize) -> Option<&str> {
        self.links.get(i).or(self.server.as_ref()).map(String::as_str)
    }
}

fn worker_config(exp: &Experiment, lock: &Path, address: &Addresses) -> WorkerConfig {
    let needs_store = exp.worker.resource != Resource::None || exp.worker.epoch_job.is_some();
    WorkerConfig {
        lock: lock.to_path_buf(),
        timing: exp.lease,
        worker: exp.worker.clone(),
        substrate: exp.substrate.kind,
        address: address.server.clone(),
        addresses: address.links.clone(),
        lease_key: None,
        resource_dir: needs_store.then(|| lock.with_file_name("resource")),
        workers: exp.workers,
        stagger: if exp.start == StartMode::Staggered { exp.stagger } else { Dur::ZERO },
        clock_dir: exp
            .faults
            .iter()
            .any(|f| f.action == crate::model::Action::Skew)
            .then(|| super::nemesis::clock_dir(lock)),
    }
}

/// Write the workers' config into the trial directory; the arguments that
/// hand it to them.
pub fn write_worker_config(
    exp: &Experiment,
    dir: &Path,
    lock: &Path,
    address: &Addresses,
) -> std::io::Result<Vec<String>> {
    let path = dir.join("worker.json");
    let text = serde_json::to_string_pretty(&worker_config(exp, lock, address)).map_err(std::io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(vec!["worker".to_string(), "--config".to_string(), path.display().to_string()])
}

/// A program's placeholders for worker `i`: durations already scaled, in ms.
pub fn placeholder_values(
    exp: &Experiment,
    i: usize,
    dir: &Path,
    lock: &Path,
    address: Option<&str>,
) -> BTreeMap<&'static str, String> {
    let ms = |d: crate::model::Dur| {
        let v = d.as_ms_f64();
        if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.3}") }
    };
    BTreeMap::from([
        ("index", i.to_string()),
        ("workers", exp.workers.to_string()),
        ("lock", lock.display().to_string()),
        ("address", address.unwrap_or_default().to_string()),
        ("key", lock.display().to_string()),
        ("trial_dir", dir.display().to_string()),
        ("experiment_dir", exp.program.as_ref().map(|p| p.experiment_dir.clone()).unwrap_or_default()),
        ("events", "/dev/fd/3".to_string()),
        ("leasequake", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()),
        ("lease_ms", ms(exp.lease.lease)),
        ("renew_ms", ms(exp.lease.renew)),
        ("watch_ms", ms(exp.lease.watch)),
    ])
}
