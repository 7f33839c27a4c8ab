//! The instrument's error bars as recorded in host.json (`calibration`).

use serde::{Deserialize, Serialize};

/// Delays in µs: median, p99, max over `n` lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delay {
    pub n: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventDelay {
    pub protocol: Option<Delay>,
    pub patterns: Option<Delay>,
}

/// The short calibration recorded in every run's host.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quick {
    pub start_spread_3_workers: Option<Delay>,
    pub start_spread_30_workers: Option<Delay>,
    pub sigterm_error: Option<Delay>,
    pub sigstop_error: Option<Delay>,
    pub sigkill_error: Option<Delay>,
    pub event_delay: EventDelay,
    /// Small round trips on loopback to an echo server, directly and
    /// through one link of the harness's proxy: the proxy adds the
    /// difference per hop.
    #[serde(default)]
    pub loopback_rtt: Option<Delay>,
    #[serde(default)]
    pub proxy_rtt: Option<Delay>,
}

/// The short calibration taken again with CPU hogs of the harness's own
/// running (one per core, spinning at ordinary priority): what the
/// instrument's error bars become when the system under test loads the CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loaded {
    pub cpu_hogs: usize,
    #[serde(flatten)]
    pub quick: Quick,
}

/// A row of `calibrate --csv`: one figure, measured by the harness or by
/// the shell baseline beside it, on the machine as found (`load` "idle") or
/// with CPU hogs running ("2 hogs"), under the timing threads' scheduling
/// (`scheduling`: "real-time" or "ordinary"). A figure that could not be
/// measured has empty cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureRow {
    pub load: String,
    pub scheduling: String,
    pub figure: String,
    /// `leasequake` or `shell`.
    pub by: String,
    pub n: Option<usize>,
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
}
