//! What a run records of itself and its machine (host.json): probed here,
//! in the commands, and handed to report/, which only writes it.

use crate::model::Experiment;
use crate::model::calibration::{Loaded, Quick};
use crate::model::clock::wall_ns;
use crate::report::host::{Build, Checked, Machine, RunFacts};

/// This binary: what every record it writes says made it.
pub const BUILD: Build = Build { version: env!("CARGO_PKG_VERSION"), commit: env!("LEASEQUAKE_GIT_COMMIT") };

/// This run's facts, now: its command line and the
/// calibration measured before it (none for a resumed run, which keeps
/// its host.json, nor for the runs another command makes).
pub fn run_facts(calibration: Option<Quick>, calibration_loaded: Option<Loaded>) -> RunFacts {
    RunFacts {
        build: BUILD,
        command: std::env::args().collect(),
        started_ns: wall_ns(),
        calibration,
        calibration_loaded,
    }
}

/// The machine, best effort: a fact that cannot be read is left empty.
pub fn machine() -> Machine {
    let (cpu, cores, memory_bytes) = match sysinfo::System::new() {
        Ok(mut sys) => {
            sys.refresh_memory();
            sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            let cpu = sys.cpus().first().map(|c| c.brand().to_string()).unwrap_or_default();
            (cpu, sys.cpus().len(), sys.total_memory())
        }
        Err(_) => (String::new(), 0, 0),
    };
    Machine {
        hostname: sysinfo::System::host_name().unwrap_or_default(),
        kernel: sysinfo::System::kernel_version().unwrap_or_default(),
        os: sysinfo::System::long_os_version().unwrap_or_default(),
        cpu,
        cores,
        memory_bytes,
        load_average: sysinfo::System::load_average().map(|l| [l.one, l.five, l.fifteen]).unwrap_or_default(),
        realtime: crate::realtime::describe(),
    }
}

/// FNV-1a (64-bit, hex) of the experiment file's bytes as they are now
/// (empty if it cannot be read): the shards of one run hold the same.
pub fn experiment_hash(exp: &Experiment) -> String {
    std::fs::read(&exp.source).map(|b| format!("{:016x}", crate::model::hash::fnv1a(&b))).unwrap_or_default()
}

/// The record of a check of the run in `dir`, now: which build judged it,
/// and which ran it (its host.json).
pub fn checked(dir: &std::path::Path) -> Checked {
    Checked {
        results_format: crate::report::rows::RESULTS_FORMAT,
        checked_utc: crate::model::clock::utc_stamp(wall_ns() / 1_000_000_000),
        command: std::env::args().collect(),
        checked_by_build: BUILD.commit,
        run_build: crate::report::host::read(dir).ok().and_then(|(r, _)| r.build),
    }
}
