//! leasequake: a chaos harness for lease-based leader election over real
//! processes. docs/architecture.md describes the layers and the data path:
//! experiment → trial → history → check → report.

pub mod calibrate;
pub mod check;
pub mod child;
pub mod cli;
pub mod commands;
pub mod console;
pub mod error;
pub mod experiment;
pub mod model;
pub mod report;
pub mod substrate;
pub mod trial;
pub mod worker;
