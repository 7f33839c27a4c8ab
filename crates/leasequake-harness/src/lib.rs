//! leasequake's harness side: `trial/` runs one trial (spawns the workers
//! in their process groups, releases them, injects the faults on time,
//! collects the history, leaves nothing behind) with the servers it
//! manages, and `proxy/` is the TCP proxy on every link to and between
//! servers, where network faults act. A crate of its own, so that the
//! compiler holds it to its layer: it imports the model, the child side's
//! substrates and real-time scheduling, and the edge to the terminal;
//! nothing of the checker, the reports or the commands.

pub mod proxy;
pub mod trial;

use leasequake_child::{realtime, substrate};
use leasequake_io::warnln;
use leasequake_model as model;

#[cfg(test)]
use leasequake_experiment as experiment;
