//! The subcommands, each a small pipeline over the library, and the mapping
//! of their failures to exit codes.

mod check;
mod run;
mod validate;

use std::path::PathBuf;

use crate::cli::{Cli, Command};

/// Exit codes (DESIGN.md): the contract scripts rely on.
pub mod exit {
    pub const OK: u8 = 0;
    pub const EXPECT_FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HARNESS: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

/// Files as given; directories become their *.yaml files, sorted.
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            if found.is_empty() {
                return Err(format!("{}: directory holds no .yaml experiment", p.display()));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Check every history of a results directory with the settings of its
/// trial's sweep point: (trial, point index, metrics).
fn recheck(
    exp: &crate::experiment::Experiment,
    histories: &std::collections::BTreeMap<u32, crate::history::History>,
) -> Vec<(u32, usize, crate::check::TrialMetrics)> {
    let units = crate::report::summary::units(exp);
    histories
        .iter()
        .map(|(t, h)| {
            let unit = crate::report::summary::unit_of(exp, units.len(), *t);
            (*t, unit, crate::check::check(h, &units[unit].0.check_params()))
        })
        .collect()
}

/// Print whether the experiment's `expect:` held over these trials; the
/// exit code that says so.
fn verdict(exp: &crate::experiment::Experiment, trials: &[(u32, &crate::check::TrialMetrics)]) -> u8 {
    let failures = crate::report::summary::expectation_failures(exp, trials);
    if failures.is_empty() {
        if !exp.expect.is_empty() {
            println!("  expectations:   all held");
        }
        exit::OK
    } else {
        println!("  expectations:   {} failed", failures.len());
        for f in failures.iter().take(20) {
            println!("    - {f}");
        }
        exit::EXPECT_FAILED
    }
}

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
        Command::Calibrate { lines } => crate::calibrate::run(lines),
        Command::CalibrateTarget => crate::calibrate::emit::target(),
        Command::CalibrateEmit { lines, interval_us } => crate::calibrate::emit::run(lines, interval_us),
        Command::ExecProgram { argv } => crate::trial::program::exec(&argv),
        Command::Worker(args) => crate::worker::run(args).clamp(0, 255) as u8,
    }
}
