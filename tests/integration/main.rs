//! Integration tests: the real binary, real worker processes, real signals.
//!
//! Every test works in its own temporary directory, so tests run in
//! parallel. Time-dependent tests use a small time scale and compare with
//! the theoretical bounds of docs/metrics.md (see `bounds.rs` for the tolerance).

mod blog;
mod bounds;
mod committed;
mod deploy;
mod disturbance;
mod errors;
mod etcd;
mod faults;
mod fencing;
mod helper;
mod interrupt;
mod jobs;
mod limits;
mod malformed;
mod network;
mod outputs;
mod plan;
mod precision;
mod programs;
mod push;
mod races;
mod recheck;
mod replicated;
mod report;
mod shard;
mod shrink;
mod signals;
mod substrates;
mod sweeps;
mod verdicts;
mod worker;
