//! Shrinking: from a trial that violated something to the smallest
//! schedule that still does it. `recorded` rebuilds the trial's schedule
//! from what the run wrote, `violation` says what a trial violated,
//! `search` looks for a smaller schedule through a probe that runs
//! candidates (the command's runs real trials). docs/shrink.md.

pub mod recorded;
pub mod search;
pub mod violation;

pub use search::{Candidate, Element, Outcome, Probe, Settings, Step, shrink};
pub use violation::{Violation, violations};

/// A scaled duration in the experiment's own time, as a person writes it:
/// `2.47s`, `11s`, `0.2s`.
pub fn own_time(d: crate::model::Dur, scale: f64) -> String {
    let text = format!("{:.3}", d.as_us() as f64 / 1e6 / scale);
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}
