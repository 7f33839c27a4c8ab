//! leasequake: a chaos harness for lease-based leader election over real
//! processes. docs/architecture.md describes the layers and the data path:
//! experiment → trial → history → check → report.

pub mod calibrate;
pub mod child;
pub mod cli;
pub mod commands;
pub mod console;
pub mod error;
pub mod experiment;
pub mod files;
pub mod proxy;
pub mod realtime;
pub mod report;
pub mod shrink;
pub mod substrate;
pub mod trial;
pub mod worker;

// The model and the checker are crates of their own, so that the compiler
// holds them to their layer: the model imports nothing of leasequake, the
// checker only the model.
pub use leasequake_check as check;
pub use leasequake_model as model;
