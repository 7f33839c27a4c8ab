//! Integration tests, the slow tier (`scripts/test.sh --slow`): real-time
//! runs against third-party servers, campaigns and their shrinks, and the
//! claims that need many trials of a race or long real time. The fast tier
//! (tests/integration/) covers the same code paths in seconds; these show
//! what only long runs can.
//!
//! As in the fast tier, tests that must hold the machine alone live in an
//! `alone` module, run one at a time after the rest.

mod blog;
mod clients;
mod etcd;
mod fencing;
// Shared with the fast tier, which uses a part of it.
#[allow(dead_code, unused_imports)]
#[path = "../helper/mod.rs"]
mod helper;
mod interrupt;
mod jobs;
mod programs;
mod push;
mod replicated;
mod shrink;
mod slurm;
mod sweeps;
mod verdicts;
