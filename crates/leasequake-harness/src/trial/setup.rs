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
    /// By worker index, a replicated service (empty without one).
    pub services: Vec<crate::model::ServiceView>,
}

impl Addresses {
    /// The address worker `i` is given.
    pub fn of(&self, i: usize) -> Option<&str> {
        self.links.get(i).or(self.server.as_ref()).map(String::as_str)
    }
}

/// Each worker's start after the barrier: i × stagger under `start:
/// staggered`, a uniform draw in `[0, stagger)` under `start: random` (from
/// the trial's seed, a stream of its own: the fault schedule's draws stay
/// those of the seed), else at once. The built-in worker is handed these in
/// its config; the harness releases each program at its own.
pub fn start_offsets(exp: &Experiment, seed: u64) -> Vec<Dur> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ START_STREAM);
    (0..exp.workers)
        .map(|i| match exp.start {
            StartMode::Barrier => Dur::ZERO,
            StartMode::Staggered => exp.stagger.scaled(i as f64),
            StartMode::Random => Dur::from_us(rng.random_range(0..exp.stagger.as_us().max(1))),
        })
        .collect()
}

/// Mixed into the trial's seed for the start delays.
const START_STREAM: u64 = 0x5354_4152_5453;

fn worker_config(exp: &Experiment, lock: &Path, address: &Addresses, seed: u64) -> WorkerConfig {
    let needs_store = exp.worker.resource != Resource::None || exp.worker.epoch_job.is_some();
    WorkerConfig {
        lock: lock.to_path_buf(),
        timing: exp.lease,
        worker: exp.worker.clone(),
        substrate: exp.substrate.kind,
        address: address.server.clone(),
        addresses: address.links.clone(),
        services: address.services.clone(),
        lease_key: None,
        resource_dir: needs_store.then(|| crate::model::worker_config::store_dir(lock)),
        workers: exp.workers,
        // Every worker's own offset: the list, not a stagger to multiply.
        stagger: Dur::ZERO,
        start_delays: start_offsets(exp, seed),
        clock_dir: exp
            .fault_kinds()
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
    seed: u64,
) -> std::io::Result<Vec<String>> {
    let path = dir.join("worker.json");
    let text = serde_json::to_string_pretty(&worker_config(exp, lock, address, seed)).map_err(std::io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(vec!["worker".to_string(), "--config".to_string(), path.display().to_string()])
}

/// A program's placeholders for worker `i`: durations already scaled, in ms.
pub fn placeholder_values(
    exp: &Experiment,
    i: usize,
    dir: &Path,
    lock: &Path,
    addresses: &Addresses,
) -> BTreeMap<&'static str, String> {
    let address = addresses.of(i);
    // A replicated service, as this worker reaches it: each member through
    // its own link, in the service's order; the Sentinels and the name
    // they know the primary by, where Redis has them.
    let service = addresses.services.get(i);
    let joined = |urls: Vec<&str>| urls.join(",");
    let members = service.map(|s| joined(s.members.iter().map(|m| m.url.as_str()).collect())).unwrap_or_default();
    let sentinels = service.map(|s| joined(s.sentinels.iter().map(String::as_str).collect())).unwrap_or_default();
    let ms = |d: crate::model::Dur| {
        let v = d.as_ms_f64();
        if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.3}") }
    };
    BTreeMap::from([
        ("index", i.to_string()),
        ("workers", exp.workers.to_string()),
        ("lock", lock.display().to_string()),
        ("address", address.unwrap_or_default().to_string()),
        ("members", members),
        ("sentinels", sentinels),
        ("service_name", service.map(|s| s.name.clone()).unwrap_or_default()),
        ("key", crate::model::worker_config::lease_key(lock)),
        ("trial_dir", dir.display().to_string()),
        ("resource", crate::model::worker_config::store_dir(lock).display().to_string()),
        ("experiment_dir", exp.program.as_ref().map(|p| p.experiment_dir.clone()).unwrap_or_default()),
        ("events", "/dev/fd/3".to_string()),
        ("leasequake", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()),
        ("lease_ms", ms(exp.lease.lease)),
        ("renew_ms", ms(exp.lease.renew)),
        ("watch_ms", ms(exp.lease.watch)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Overrides, load_str};

    fn exp(start: &str) -> Experiment {
        let yaml = format!("name: x\nworkers: 30\n{start}");
        load_str(Path::new("x.yaml"), &yaml, &Overrides::default()).expect("a valid experiment")
    }

    #[test]
    fn a_program_on_a_replicated_service_is_handed_each_member_through_its_own_link() {
        use crate::model::{MemberView, ServiceView};
        let view = |w: usize| ServiceView {
            name: "lq".into(),
            sentinels: vec!["redis://127.0.0.1:1".into(), "redis://127.0.0.1:2".into()],
            members: (0..3)
                .map(|m| MemberView {
                    index: m,
                    announced: format!("127.0.0.1:{m}"),
                    url: format!("redis://w{w}-m{m}"),
                })
                .collect(),
            sync_replicas: 0,
        };
        let addresses =
            Addresses { server: Some("redis://s".into()), links: Vec::new(), services: vec![view(0), view(1)] };
        let e = exp("");
        let values = placeholder_values(&e, 1, Path::new("/t"), Path::new("/t/lock"), &addresses);
        assert_eq!(values["members"], "redis://w1-m0,redis://w1-m1,redis://w1-m2");
        assert_eq!(values["sentinels"], "redis://127.0.0.1:1,redis://127.0.0.1:2");
        assert_eq!((values["service_name"].as_str(), values["address"].as_str()), ("lq", "redis://s"));
        assert!(values["key"].starts_with("leasequake-") && values["key"].len() == 27, "{}", values["key"]);
        // One server: nothing of a service.
        let one = Addresses { server: Some("redis://s".into()), links: Vec::new(), services: Vec::new() };
        let values = placeholder_values(&e, 0, Path::new("/t"), Path::new("/t/lock"), &one);
        assert_eq!((values["members"].as_str(), values["sentinels"].as_str()), ("", ""));
        // Every placeholder the loader accepts has a value.
        for p in crate::model::program::PLACEHOLDERS {
            assert!(values.contains_key(p), "{p}");
        }
    }

    #[test]
    fn random_starts_fall_in_the_window_and_replay_with_the_seed() {
        let random = exp("start: random\nstagger: 3s\n");
        let delays = start_offsets(&random, 7);
        assert_eq!(delays.len(), 30);
        assert!(delays.iter().all(|d| *d < Dur::from_secs(3)), "{delays:?}");
        assert_eq!(delays, start_offsets(&random, 7), "a seed replays");
        assert_ne!(delays, start_offsets(&random, 8), "another seed, other phases");
        // Spread over the window, not bunched at one end.
        assert!(delays.iter().any(|d| *d < Dur::from_secs(1)) && delays.iter().any(|d| *d >= Dur::from_secs(2)));
        let staggered = start_offsets(&exp("start: staggered\nstagger: 1s\n"), 7);
        assert_eq!(staggered[..3], [Dur::ZERO, Dur::from_secs(1), Dur::from_secs(2)]);
        assert_eq!(staggered[29], Dur::from_secs(29));
        assert!(start_offsets(&exp(""), 7).iter().all(|d| *d == Dur::ZERO), "on the barrier: all at once");
    }

    #[test]
    fn the_built_in_workers_are_handed_the_offsets_the_programs_are_released_at() {
        for yaml in ["start: staggered\nstagger: 1s\n", "start: random\nstagger: 3s\n", ""] {
            let e = exp(yaml);
            let config = worker_config(&e, Path::new("/t/lock"), &Addresses::default(), 7);
            let built_in: Vec<Dur> = (0..e.workers).map(|i| config.start_delay(i)).collect();
            assert_eq!(start_offsets(&e, 7), built_in, "{yaml}");
        }
    }
}
