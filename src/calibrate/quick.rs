//! The short calibration every run records in its host.json.

use std::time::Duration;

use super::delays::event_delay;
use super::harness;
use crate::model::calibration::{Loaded, Quick};

/// Measure the short calibration for one run (about 2 s); None if no
/// scratch directory could be made.
pub fn measure_quick() -> Option<Quick> {
    let dir = tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir().ok()?;
    let spread = |n| harness::start_spread(n, 2, dir.path()).ok().and_then(harness::summarize);
    let faults = harness::fault_error(2, dir.path()).ok();
    let fault = |i: usize| faults.as_ref().and_then(|f| harness::summarize(f[i].1.clone()));
    let rtt = super::proxy::round_trips(200);
    Some(Quick {
        start_spread_3_workers: spread(3),
        start_spread_30_workers: spread(30),
        sigterm_error: fault(0),
        sigstop_error: fault(1),
        sigkill_error: fault(2),
        event_delay: event_delay(100, Duration::from_millis(1)),
        loopback_rtt: rtt.as_ref().map(|r| r.0.clone()),
        proxy_rtt: rtt.map(|r| r.1),
    })
}

/// The same with a CPU hog per core running (about 2 s more); None if the
/// hogs could not be started.
pub fn measure_quick_loaded() -> Option<Loaded> {
    let hogs = super::load::Hogs::start(super::load::default_hogs()).ok()?;
    let quick = measure_quick()?;
    Some(Loaded { cpu_hogs: hogs.count(), quick })
}
