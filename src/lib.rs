//! leasequake: a chaos harness for lease-based leader election over real
//! processes. See DESIGN.md for the data path:
//! experiment → trial → history → check → report.

pub mod calibrate;
pub mod check;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod experiment;
pub mod history;
pub mod report;
pub mod substrate;
pub mod trial;
pub mod worker;
