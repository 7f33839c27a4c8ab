//! One trial: spawn N workers in a fresh directory, release them together,
//! inject the scheduled faults, collect every event into one history, clean
//! up. The history goes back to the caller, which checks it.
//!
//! The trial owns its children from spawn to reap. Whatever happens (an
//! error, Ctrl-C, a panic) they are SIGCONTed, SIGTERMed, given a grace
//! period, SIGKILLed and reaped before `run_trial` returns.

mod barrier;
pub mod clock;
pub mod contain;
mod error;
mod event_loop;
pub mod guard;
pub mod limits;
mod machine;
pub mod msg;
pub mod nemesis;
mod outcome;
pub mod program;
mod run;
pub mod schedule;
pub mod server;
mod setup;
pub mod spawn;
mod time_limit;

pub use error::TrialError;
pub use msg::EVENT_BACKLOG;
pub use run::{TrialEnv, TrialRecord, run_trial};
pub use time_limit::{run_trial_within_limit, time_limit};
