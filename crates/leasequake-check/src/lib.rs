//! The checker: pure functions from a trial's History to its metrics.
//!
//! No clocks, no processes, no I/O. Everything it knows comes from the
//! history and from `CheckParams` (the scaled lease settings, needed only for
//! the wedge threshold). docs/metrics.md defines every metric.

pub mod adaptive;
mod disturbance;
mod evictions;
mod fold;
mod grants;
mod intervals;
mod jobs;
mod latency;
mod lookback;
mod metrics;
mod network;
mod params;
mod precision;
mod push;
mod recovery;
mod requests;
pub mod samples;
mod service;
mod spans;
pub mod stats;
mod storm;
#[cfg(test)]
mod testkit;
mod theory;
pub mod twosample;
mod writes;

pub use disturbance::{Disturbance, STEAL_MIN_US, STEAL_SHARE};
pub use grants::DoubleGrants;
pub use intervals::{Checker, check};
pub use jobs::Jobs;
pub use latency::Latency;
pub use metrics::{Evictions, Gap, KILL_MID_RENEWAL, Network, PauseOutcome, TrialMetrics};
pub use params::{CheckParams, DISTURBANCE_FLOOR_US, ETCD_EXPIRY_SLACK_US, disturbance_budget_us, fault_budget_us};
pub use precision::Precision;
pub use push::Pushes;
pub use service::ServiceView;
pub use spans::{Span, Spans};
pub use storm::{Storm, WindowOps};
pub use writes::Writes;
