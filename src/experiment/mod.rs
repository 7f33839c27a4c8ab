//! Experiment files: YAML in (`load`, every error naming file:line:column
//! before any process is spawned), and the resolved experiment out
//! (`to_yaml`, written next to the results). The types they produce are the
//! model's (`crate::model`).

mod build;
mod diagnostic;
mod expect;
mod faults;
mod keys;
mod load;
mod program;
pub mod reference;
mod resolved;
mod substrate_rules;
mod sweep;
mod trials;
mod yaml_error;

pub use diagnostic::{Diagnostic, ExperimentError};
pub use load::{MAX_FILE_BYTES, Overrides, load, load_record, load_str};
pub use resolved::to_yaml;
pub use sweep::is_duration as is_duration_setting;
