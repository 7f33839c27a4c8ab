//! Shrinking: from a trial that violated something to the smallest
//! schedule that still does it. `recorded` rebuilds the trial's schedule
//! from what the run wrote, `violation` says what a trial violated,
//! `search` looks for a smaller schedule through a probe that runs
//! candidates (the command's runs real trials). docs/shrink.md.

pub mod recorded;
pub mod search;
pub mod violation;

pub use search::{Element, Outcome, Probe, Settings, Step, shrink};
pub use violation::{Violation, violations};
