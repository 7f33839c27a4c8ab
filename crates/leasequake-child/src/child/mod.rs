//! The child side: what runs inside the processes the harness spawns,
//! before the built-in worker or a program under test takes over.

mod exec;
mod tie;

pub use exec::exec;
pub use tie::{join_cgroup, tie_to_parent};
