use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = leasequake::cli::Cli::parse();
    ExitCode::from(leasequake::commands::dispatch(cli))
}
