//! host.json: what machine a result came from, so numbers are never
//! compared without their context.

use serde::Serialize;

use crate::model::Experiment;
use crate::model::calibration::Quick;
use crate::model::clock::utc_stamp;

#[derive(Serialize)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub os: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub load_average: [f64; 3],
    pub leasequake_version: &'static str,
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
}

/// The generator that draws every random choice of a trial from its seed
/// (fault jitter, targets, pause lengths): a stream stable by contract, so
/// that a printed seed replays after an upgrade.
pub const GENERATOR: &str = "ChaCha8 (rand_chacha 0.9), seeded with seed_from_u64(trial seed)";

/// What a run knows of itself: its command line, when it began (wall
/// clock, ns), and the calibration measured before it, if any.
#[derive(Clone, Debug)]
pub struct RunFacts {
    pub command: Vec<String>,
    pub started_ns: i64,
    pub calibration: Option<Quick>,
}

/// The host record of a run of `exp`.
pub fn describe(exp: &Experiment, run: &RunFacts) -> Host {
    // Every field is best effort: a missing fact must not stop a run.
    let (cpu, cores, memory_bytes) = match sysinfo::System::new() {
        Ok(mut sys) => {
            sys.refresh_memory();
            sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            let cpu = sys.cpus().first().map(|c| c.brand().to_string()).unwrap_or_default();
            (cpu, sys.cpus().len(), sys.total_memory())
        }
        Err(_) => (String::new(), 0, 0),
    };
    let load = sysinfo::System::load_average().map(|l| [l.one, l.five, l.fifteen]).unwrap_or_default();
    Host {
        hostname: sysinfo::System::host_name().unwrap_or_default(),
        kernel: sysinfo::System::kernel_version().unwrap_or_default(),
        os: sysinfo::System::long_os_version().unwrap_or_default(),
        cpu,
        cores,
        memory_bytes,
        load_average: load,
        leasequake_version: env!("CARGO_PKG_VERSION"),
        results_format: super::rows::RESULTS_FORMAT,
        started_utc: utc_stamp(run.started_ns / 1_000_000_000),
        command: run.command.clone(),
        seed: exp.seed,
        time_scale: exp.time_scale,
        jobs: exp.jobs,
        generator: GENERATOR,
        calibration: run.calibration.clone(),
    }
}

pub fn to_json(host: &Host) -> String {
    serde_json::to_string_pretty(host).expect("host record serialises") + "\n"
}
