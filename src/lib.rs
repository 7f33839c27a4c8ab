//! leasequake: a chaos harness for lease-based leader election over real
//! processes. docs/architecture.md describes the layers and the data path:
//! experiment → trial → history → check → report.

pub mod calibrate;
pub mod cli;
pub mod commands;
pub mod console;
pub mod error;
pub mod experiment;
pub mod files;
pub mod proxy;
pub mod report;
pub mod shrink;
pub mod trial;

// The model, the checker and the child side are crates of their own, so
// that the compiler holds them to their layer: the model imports nothing of
// leasequake, the checker and the child side only the model.
pub use leasequake_check as check;
pub use leasequake_child::{child, realtime, substrate, worker};
pub use leasequake_model as model;
