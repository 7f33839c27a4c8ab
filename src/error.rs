//! One error type for everything a command can fail with, and the exit
//! code of each: the contract scripts rely on. Commands return
//! `Result<(), Error>`; `commands::dispatch` prints the error once and
//! exits with `exit_code()`.

use std::path::PathBuf;

use crate::experiment::ExperimentError;
use crate::report::csv::WriteError;
use crate::report::read::ReadError;
use crate::trial::LimitError;
use crate::trial::TrialError;

/// Exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const EXPECT_FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HARNESS: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Experiment files that do not load, each naming file:line:column.
    #[error("{}", join(.0))]
    Experiments(Vec<ExperimentError>),
    /// A path given on the command line that cannot be used as asked.
    #[error("{}: {problem}", path.display())]
    Path { path: PathBuf, problem: String },
    /// Inputs that are valid one by one but not together.
    #[error("{0}")]
    Conflict(String),
    /// A results directory that cannot be read back.
    #[error(transparent)]
    Results(#[from] ReadError),
    /// A results directory written in another layout than this version's.
    #[error(
        "{}: written in results format {found}; this leasequake reads format {wanted} \
         (run the experiment again, or use the leasequake that wrote it)",
        dir.display()
    )]
    Format { dir: PathBuf, found: u32, wanted: u32 },
    /// The machine cannot hold the run as asked.
    #[error("{}: {source}", experiment.display())]
    Limits { experiment: PathBuf, source: LimitError },
    /// A lease server or a program the run needs is not there.
    #[error("{}: {problem}", experiment.display())]
    Missing { experiment: PathBuf, problem: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A server the harness runs would not start.
    #[error("{}: {source}", experiment.display())]
    Server { experiment: PathBuf, source: crate::trial::ServerError },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("trial {trial}: {source}")]
    Trial { trial: u32, source: TrialError },
    #[error("cannot create a scratch directory: {0}")]
    Scratch(std::io::Error),
    /// The harness could not start a thread of its own.
    #[error("cannot start a thread ({what}): {source} (see `ulimit -u`)")]
    Thread { what: &'static str, source: std::io::Error },
    /// The run finished, and some `expect:` did not hold.
    #[error("expectations failed in {}", .0.join(", "))]
    ExpectFailed(Vec<String>),
    /// A shrink whose trial's schedule did not fail the same way again.
    #[error("{what} (every run is kept in {})", dir.display())]
    NotReproduced { what: String, dir: PathBuf },
    #[error("interrupted: {done} of {total} trials completed and kept in {}", dir.display())]
    Interrupted { done: usize, total: u32, dir: PathBuf },
    #[error("interrupted before the first trial (during the calibration): nothing was written")]
    InterruptedBeforeStart,
    /// A command that runs no trial, stopped by a signal: what it left.
    #[error("interrupted: {0}")]
    Stopped(String),
}

fn join(errors: &[ExperimentError]) -> String {
    errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\nerror: ")
}

impl Error {
    /// What `map_err` turns an I/O failure on `path` into.
    pub fn io(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
        move |source| Error::Io { path: path.to_path_buf(), source }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Experiments(_)
            | Error::Path { .. }
            | Error::Conflict(_)
            | Error::Results(_)
            | Error::Format { .. } => exit::BAD_INPUT,
            Error::Limits { .. }
            | Error::Missing { .. }
            | Error::Server { .. }
            | Error::Io { .. }
            | Error::Write(_)
            | Error::Trial { .. }
            | Error::Scratch(_)
            | Error::Thread { .. } => exit::HARNESS,
            Error::ExpectFailed(_) | Error::NotReproduced { .. } => exit::EXPECT_FAILED,
            Error::Interrupted { .. } | Error::InterruptedBeforeStart | Error::Stopped(_) => exit::INTERRUPTED,
        }
    }

    /// How bad, for keeping the worst of several: interrupted, then a broken
    /// harness, then bad input, then a failed expectation.
    pub fn severity(&self) -> u8 {
        match self.exit_code() {
            exit::EXPECT_FAILED => 1,
            exit::BAD_INPUT => 2,
            exit::HARNESS => 3,
            _ => 4,
        }
    }
}

/// The worse of two outcomes (an error beats success).
pub fn worse(a: Result<(), Error>, b: Result<(), Error>) -> Result<(), Error> {
    match (a, b) {
        (Ok(()), b) => b,
        (a, Ok(())) => a,
        (Err(Error::ExpectFailed(mut a)), Err(Error::ExpectFailed(b))) => {
            a.extend(b);
            Err(Error::ExpectFailed(a))
        }
        (Err(a), Err(b)) => {
            // The worse one is returned (and printed by the caller); the
            // other is not lost.
            let (kept, dropped) = if b.severity() > a.severity() { (b, a) } else { (a, b) };
            crate::warnln!("error: {dropped}");
            Err(kept)
        }
    }
}
