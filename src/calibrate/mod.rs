//! `leasequake calibrate`: the instrument's own error bars, measured on this
//! machine, each next to what a person would write in a shell, measured in
//! the same run (`harness`): the start spread of workers released together,
//! the error of each signal fault, and the event delay of observing a
//! program, from the moment it stamps a line (CLOCK_MONOTONIC) to the moment
//! the harness has read and parsed it, through the protocol pipe (fd 3) and
//! through log patterns (stdout); and the round trip the network proxy
//! adds. Every run records a short version in its host record
//! (`measure_quick`).

mod delays;
pub mod emit;
mod full;
pub mod harness;
pub mod load;
mod proxy;
mod quick;

pub use delays::{event_delay, summarize};
pub use full::run;
pub use quick::{measure_quick, measure_quick_loaded};
