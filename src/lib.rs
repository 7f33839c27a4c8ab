//! leasequake: a chaos harness for lease-based leader election over real
//! processes. docs/architecture.md describes the layers and the data path:
//! experiment → trial → history → check → report.

pub mod calibrate;
pub mod cli;
pub mod commands;
pub mod error;
pub mod shrink;

// The model, the checker, the child side and the edge to the user's files
// and terminal are crates of their own, so that the compiler holds them to
// their layer: the model and the edge import nothing of leasequake, the
// checker and the child side only the model.
pub use leasequake_check as check;
pub use leasequake_child::{child, realtime, substrate, worker};
pub use leasequake_experiment as experiment;
pub use leasequake_harness::{proxy, trial};
pub use leasequake_io::{console, files, say, sayln, warnln};
pub use leasequake_model as model;
pub use leasequake_report as report;
