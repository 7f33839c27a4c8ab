//! The built-in worker: the lease state machine (`machine`), the world it
//! runs in (`env`), its own possibly skewed clock (`clock`), and the
//! process around it (`process`).

mod clock;
mod env;
mod machine;
mod process;

pub use process::{WorkerArgs, run};
