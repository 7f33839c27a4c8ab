//! What the checker needs to know of the settings: the scaled lease
//! timing, in µs (the wedge threshold, the crash bound, the epochs).

use leasequake_model::experiment::Experiment;
use leasequake_model::history::Micros;
use leasequake_model::settings::Expiry;

/// Scaled lease settings of the trial, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckParams {
    pub lease_us: Micros,
    pub renew_us: Micros,
    pub watch_us: Micros,
    /// Expiry resolution (1 s × time scale under `unix-seconds`, 0 if exact).
    pub resolution_us: Micros,
    /// Epoch length of the exactly-once job, if the trial runs one.
    pub epoch_us: Option<Micros>,
}

impl CheckParams {
    /// A gap longer than this at trial end, with a live unpaused worker, is a
    /// wedge: `lease + watch + resolution`.
    pub fn wedge_threshold_us(&self) -> Micros {
        self.lease_us + self.watch_us + self.resolution_us
    }

    /// The parameters of a trial of `exp`.
    pub fn of(exp: &Experiment) -> CheckParams {
        let resolution_us = match exp.worker.expiry {
            Expiry::UnixSeconds => exp.lease.resolution.as_us() as i64,
            Expiry::Exact => 0,
        };
        CheckParams {
            lease_us: exp.lease.lease.as_us() as i64,
            renew_us: exp.lease.renew.as_us() as i64,
            watch_us: exp.lease.watch.as_us() as i64,
            resolution_us,
            epoch_us: exp.worker.epoch_job.map(|j| j.epoch.as_us() as i64),
        }
    }
}
