//! The subcommands, each a small pipeline over the library, and the mapping
//! of their failures to exit codes.

mod check;
mod inputs;
mod run;
mod validate;

use crate::cli::{Cli, Command};
use crate::error::exit;

pub fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) | Command::Sweep(args) => run::run(&args),
        Command::Validate { files } => validate::validate(&files),
        Command::Check { dir, out } => check::check(&dir, out.as_deref()),
        Command::Plot { dir } => {
            let title = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            match crate::report::plots::draw(&dir, &title) {
                Ok(()) => {
                    println!("{}\n{}", dir.join("dial.svg").display(), dir.join("histograms.svg").display());
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", dir.display());
                    exit::BAD_INPUT
                }
            }
        }
        Command::Calibrate { lines } => crate::calibrate::run(lines).map_or_else(
            |e| {
                eprintln!("error: {e}");
                e.exit_code()
            },
            |()| exit::OK,
        ),
        Command::CalibrateTarget => crate::calibrate::emit::target(),
        Command::CalibrateEmit { lines, interval_us } => crate::calibrate::emit::run(lines, interval_us),
        Command::ExecProgram { argv } => crate::child::exec(&argv),
        Command::Worker(args) => crate::worker::run(args).clamp(0, 255) as u8,
    }
}
