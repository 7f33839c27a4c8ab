//! Reports: CSV first (the durable result), then the terminal summary,
//! plots, pages, the suite's README and the exports CI reads; and reading
//! them back. Pure over what it is handed (the experiment, the histories
//! and their checks, the facts a run records of itself and its machine): a
//! crate of its own, so that the compiler holds it to its layer: it imports
//! the model, the checker, the experiment files and the edge to the user's
//! files and terminal, and nothing of the harness or the commands.

mod bounds;
mod cells;
pub mod columns;
pub mod compare;
pub mod csv;
pub mod export;
pub mod host;
pub mod html;
mod libraries;
mod measures;
mod network;
pub mod plots;
mod push;
pub mod read;
mod replicated;
pub mod rows;
pub mod shrunk;
pub mod spool;
mod stretches;
pub mod suite;
pub mod summary;
pub mod terminal;
pub mod thresholds;
pub mod timeline;
pub mod two_runs;

use leasequake_check as check;
use leasequake_experiment as experiment;
use leasequake_io::{files, warnln};
use leasequake_model as model;
