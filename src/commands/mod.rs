//! The subcommands, each a small pipeline over the library, and the mapping
//! of their failures to exit codes.

mod check;
mod run;
mod validate;

use crate::cli::{Cli, Command};

/// Exit codes (DESIGN.md): the contract scripts rely on.
pub mod exit {
    pub const OK: u8 = 0;
    pub const EXPECT_FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HARNESS: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

pub fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Validate { files } => validate::validate(&files),
        Command::Check { dir, out } => check::check(&dir, out.as_deref()),
        Command::Worker(args) => crate::worker::run(args).clamp(0, 255) as u8,
    }
}
