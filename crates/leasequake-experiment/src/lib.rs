//! Experiment files: YAML in (`load`, every error naming file:line:column
//! before any process is spawned), and the resolved experiment out
//! (`to_yaml`, written next to the results), and the reference page and
//! JSON Schema of every key. The types they produce are the model's. A
//! crate of its own, so that the compiler holds it to its layer: it imports
//! the model and the edge to the user's files, nothing else of leasequake.

mod build;
mod diagnostic;
mod expect;
mod faults;
mod keys;
mod load;
mod program;
mod raw;
pub mod reference;
mod resolved;
mod substrate_rules;
mod sweep;
mod trials;
mod yaml_error;

use leasequake_io::files;
use leasequake_model as model;

pub use diagnostic::{Diagnostic, ExperimentError};
pub use load::{MAX_FILE_BYTES, load, load_record, load_str};
pub use raw::Overrides;
pub use resolved::to_yaml;
pub use sweep::{is_duration as is_duration_setting, own_label, own_value};
