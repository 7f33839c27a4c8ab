//! Shrinking: from a trial that violated something to the smallest
//! schedule that still does it. `recorded` rebuilds the trial's schedule
//! from what the run wrote, `violation` says what a trial violated,
//! `search` looks for a smaller schedule through a probe that runs
//! candidates (the command's runs real trials). docs/shrink.md.

pub mod recorded;
pub mod search;
pub mod violation;

pub use crate::report::shrunk::Step;
pub use search::{Candidate, Element, Outcome, Probe, Settings, shrink};
pub use violation::{Violation, violations};
