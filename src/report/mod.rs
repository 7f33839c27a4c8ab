//! Reports: CSV first (the durable result), then the terminal summary.

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
pub mod plots;
mod push;
pub mod read;
mod replicated;
pub mod rows;
pub mod suite;
pub mod summary;
pub mod terminal;
pub mod thresholds;
pub mod timeline;
pub mod two_runs;
