//! One trial: spawn N workers in a fresh directory, release them together,
//! inject the scheduled faults, hand every event on in time order as the
//! trial runs, clean up. The caller keeps and checks the history.
//!
//! The trial owns its children from spawn to reap. Whatever happens (an
//! error, Ctrl-C, a panic) they are SIGCONTed, SIGTERMed, given a grace
//! period, SIGKILLed and reaped before `run_trial` returns.

mod barrier;
mod clock;
mod clock_settings;
mod contain;
mod elf;
mod error;
mod event_loop;
#[cfg(test)]
mod fake_os;
mod guard;
mod lease_watch;
mod limits;
mod machine;
mod msg;
mod nemesis;
mod os;
mod outcome;
mod program;
mod record;
mod run;
mod schedule;
mod server;
mod setup;
mod spawn;
mod time_limit;
mod vdso;

// What the rest of the harness uses of a trial: running one, the servers
// and containment a run shares between its trials, the resource limits it
// checks first, the fault schedule (plan and shrink replay it), and for
// calibrate the spawner and stop detection it measures.
pub use clock::moves_program_clock;
pub use contain::{TrialGroup, finish as finish_containment};
pub use error::TrialError;
pub use guard::run as run_guard;
pub use limits::{Demand, LimitError, ensure as ensure_limits};
pub use msg::{EVENT_BACKLOG, Msg};
pub use os::{Stop, poll_stopped};
pub use run::{TrialEnv, TrialRecord, run_trial};
pub use schedule::{Live, Schedule, trial_faults};
pub use server::{ServerError, Servers, installed as server_installed};
pub use spawn::{SpawnSpec, spawn};
pub use time_limit::{run_trial_within_limit, time_limit};
