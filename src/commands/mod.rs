//! The subcommands, each a small pipeline over the library. Each returns
//! `Result<(), Error>`; the error is printed here, once, and becomes the
//! exit code.

mod calibrate;
mod check;
mod compare;
mod export;
mod facts;
mod inputs;
mod merge;
mod owner;
mod plan;
mod progress;
mod report;
mod run;
mod runner;
pub mod shard;
mod shrink;
mod validate;
mod window;
mod words;

use crate::cli::{Cli, Command};
use crate::error::{Error, exit};
use crate::{sayln, warnln};

pub fn dispatch(cli: Cli) -> u8 {
    let child = matches!(
        cli.command,
        Command::CalibrateTarget
            | Command::CalibrateHog
            | Command::CalibrateEmit { .. }
            | Command::ExecProgram { .. }
            | Command::Worker(_)
            | Command::Guard
    );
    if !child {
        survive_file_size_limit();
    }
    let result = match cli.command {
        Command::Run(args) | Command::Sweep(args) => run::run(&args),
        Command::Shrink(args) => shrink::shrink(&args),
        Command::Compare(args) => compare::compare(&args),
        Command::Validate { files, filter } => validate::validate(&files, &filter),
        Command::List { files, filter } => validate::list(&files, &filter),
        Command::Plan { files, filter, time_scale, trials, jobs, max_jobs } => {
            let overrides = crate::experiment::Overrides {
                time_scale,
                trials,
                jobs: jobs.map(|j| j as usize),
                max_jobs: max_jobs.map(|j| j as usize),
                ..Default::default()
            };
            plan::plan(&files, &filter, &overrides)
        }
        Command::Check { dir, out, in_place } => {
            let target = match (&out, in_place) {
                (Some(out), _) => check::Target::Out(out),
                (None, true) => check::Target::InPlace,
                (None, false) => check::Target::New,
            };
            check::check(&dir, target)
        }
        Command::Merge { out, dirs } => merge::merge(&out, &dirs),
        Command::Plot { dir } => plot(&dir),
        Command::Report { dir, out } => report::report(&dir, out.as_deref()),
        Command::Completions { shell } => {
            let mut cmd = crate::cli::public_command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "leasequake", &mut out);
            crate::say!("{}", String::from_utf8_lossy(&out));
            Ok(())
        }
        Command::Man { dir } => man(dir.as_deref()),
        Command::Reference { schema } => {
            use crate::experiment::reference;
            let text = if schema {
                serde_json::to_string_pretty(&reference::schema()).expect("a schema serialises") + "\n"
            } else {
                reference::markdown()
            };
            crate::say!("{text}");
            Ok(())
        }
        Command::Calibrate { lines, load, csv } => {
            calibrate::calibrate(lines, load.map(|n| n.map(|n| n as usize)), csv)
        }
        // The children's own entry points: their exit codes are their own.
        Command::CalibrateTarget => return crate::calibrate::emit::target(),
        Command::CalibrateHog => return crate::calibrate::load::spin(),
        Command::CalibrateEmit { lines, interval_us } => return crate::calibrate::emit::run(lines, interval_us),
        Command::ExecProgram { argv } => return crate::child::exec(&argv),
        Command::Guard => return crate::trial::run_guard(),
        Command::Worker(args) => return crate::worker::run(args).clamp(0, 255) as u8,
    };
    // The run's cgroup goes, and its guard is told all is well.
    crate::trial::finish_containment();
    match result {
        Ok(()) => exit::OK,
        // The run said which expectations failed, and how, as it went.
        Err(e @ Error::ExpectFailed(_)) => e.exit_code(),
        Err(e) => {
            warnln!("error: {e}");
            e.exit_code()
        }
    }
}

/// `leasequake plot DIR`: redraw the plots from the CSVs alone.
fn plot(dir: &std::path::Path) -> Result<(), Error> {
    let _held = owner::hold(dir, owner::Use::Write)?;
    inputs::same_format(dir)?;
    let title = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let drawn = crate::report::plots::draw(dir, &title)
        .map_err(|e| Error::Path { path: dir.to_path_buf(), problem: e.to_string() })?;
    for file in drawn {
        sayln!("{}", file.display());
    }
    Ok(())
}

/// A write past `ulimit -f` raises SIGXFSZ, whose default kills the process
/// without a word and mid-row. With a handler installed the write fails with
/// EFBIG instead, which is reported like any full disk. (A handler, not
/// SIG_IGN: an ignored signal would stay ignored in the children we exec.)
fn survive_file_size_limit() {
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
}

/// `man`: the main page on stdout, or every page into DIR.
fn man(dir: Option<&std::path::Path>) -> Result<(), Error> {
    let cmd = crate::cli::public_command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out).map_err(|source| Error::Io { path: "stdout".into(), source })?;
        crate::say!("{}", String::from_utf8_lossy(&out));
        return Ok(());
    };
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Path { path: dir.to_path_buf(), problem: "--dir: not a directory".into() });
    }
    let io = |source| Error::Io { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let pages = 1 + cmd.get_subcommands().count();
    clap_mangen::generate_to(cmd, dir).map_err(io)?;
    sayln!("wrote {pages} manual pages to {} (leasequake.1, leasequake-run.1, …)", dir.display());
    Ok(())
}
