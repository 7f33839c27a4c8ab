//! Integration tests, the fast tier: the real binary, real worker
//! processes, real signals, real servers, in seconds each. What needs long
//! real time or many trials of a race is the slow tier (tests/slow/).
//!
//! Every test works in its own temporary directory, so tests run in
//! parallel. Time-dependent tests use a small time scale and compare with
//! the theoretical bounds of docs/metrics.md (see `bounds.rs` for the
//! tolerance); those that must hold the machine alone live in an `alone`
//! module, which the test command runs one test at a time after the rest.

mod blog;
mod bounds;
mod committed;
mod compare;
mod damage;
mod deploy;
mod disturbance;
mod errors;
mod faults;
mod fencing;
// Shared with the slow tier, which uses a part of it.
#[allow(dead_code, unused_imports)]
#[path = "../helper/mod.rs"]
mod helper;
mod jobs;
mod layers;
mod limits;
mod malformed;
mod network;
mod observe;
mod outputs;
mod plan;
mod precision;
mod programs;
mod races;
mod recheck;
mod report;
mod shard;
mod shrink;
mod signals;
mod soak;
mod substrates;
mod verdicts;
mod worker;
mod writers;
