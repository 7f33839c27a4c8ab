//! The model: what an experiment is, what a trial records, and what the
//! harness and its children say to each other. It imports nothing else of
//! the crate; every other layer builds on it.

pub mod calibration;
pub mod clock;
pub mod describe;
pub mod duration;
pub mod experiment;
pub mod expiry;
pub mod faults;
pub mod hash;
pub mod history;
pub mod program;
pub mod protocol;
pub mod random_faults;
pub mod settings;
pub mod summary_metrics;
pub mod worker_config;

pub use duration::{Dur, Offset};
pub use experiment::{Expect, Experiment, Point, Reference, Until};
pub use faults::{Action, After, Direction, Fault, FaultRow, NetParams, PauseLen, Target};
pub use random_faults::{MAX_RANDOM_FAULTS, RandomCount, RandomFaults, RandomKind};
pub use settings::{
    Acquire, Belief, ClockOffset, ClockRate, EpochJob, Expiry, Failpoint, InitialLock, JobStrategy, Kind,
    LeaseSettings, Mode, PerWorker, Push, Resource, Server, StartMode, SubstrateSettings, Unreadable, WatchBy,
    WorkerSettings, setting_name,
};
pub use worker_config::{MemberView, ServiceView};
