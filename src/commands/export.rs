//! `--export-json` and `--junit`: where they may write, checked before a
//! run, and the files written from what finished.

use std::path::{Path, PathBuf};

use crate::cli::RunArgs;
use crate::error::Error;
use crate::report::export::{ExperimentResult, Exporter, JUnit, Json};
use crate::warnln;

/// Where `--export-json` and `--junit` write: a file (new or replaced) in
/// a directory that exists and takes files, checked before anything runs.
pub fn targets_ok(args: &RunArgs) -> Result<(), Error> {
    for (flag, path) in [("--export-json", &args.export_json), ("--junit", &args.junit)] {
        if let Some(path) = path {
            file_target_ok(flag, path)?;
        }
    }
    Ok(())
}

/// Whether `flag` may write the file `path` (new or replaced): not a
/// directory, in a directory that exists and takes files.
pub fn file_target_ok(flag: &str, path: &Path) -> Result<(), Error> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let problem = if path.is_dir() {
        Some("is a directory".to_string())
    } else if !parent.is_dir() {
        Some(format!("{} is not a directory", parent.display()))
    } else {
        nix::unistd::access(parent, nix::unistd::AccessFlags::W_OK)
            .err()
            .map(|e| format!("{} does not take files: {e}", parent.display()))
    };
    match problem {
        Some(problem) => Err(Error::Path { path: path.to_path_buf(), problem: format!("{flag}: {problem}") }),
        None => Ok(()),
    }
}

/// Write the exports the command line asked for, from what finished.
pub fn export(args: &RunArgs, results: &[ExperimentResult<'_>]) -> Result<(), Error> {
    let targets: [(&Option<PathBuf>, &dyn Exporter); 2] =
        [(&args.export_json, &Json { version: super::facts::BUILD.version }), (&args.junit, &JUnit)];
    for (path, exporter) in targets {
        let Some(path) = path else { continue };
        super::report::write_whole(path, &exporter.serialize(results))
            .map_err(|source| Error::Io { path: path.clone(), source })?;
        warnln!("leasequake: wrote {}", path.display());
    }
    Ok(())
}
