//! The built-in worker: the lease state machine (`machine`), the world it
//! runs in (`env`), and the process around it (`process`).

mod env;
mod machine;
mod process;

pub use process::{WorkerArgs, run};
