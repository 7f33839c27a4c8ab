use std::path::PathBuf;

use super::inputs::{Depth, expand, filter, wanted};
use super::words::{counted, human};
use crate::error::Error;
use crate::experiment::{Overrides, load};
use crate::sayln;

/// Load every file (a directory's whole tree) and report each; every
/// invalid one is in the error. With globs, only the experiments they name
/// are reported (every file is still loaded: a broken one is never hidden).
pub fn validate(files: &[PathBuf], globs: &[String]) -> Result<(), Error> {
    let mut errors = Vec::new();
    let mut loaded = Vec::new();
    for f in &expand(files, Depth::Deep)? {
        match load(f, &Overrides { seed: Some(0), ..Overrides::default() }) {
            Ok(e) if wanted(globs, &e.name) => {
                sayln!("ok: {} ({}: {})", f.display(), e.name, size(&e));
                loaded.push(e);
            }
            Ok(e) => loaded.push(e),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Experiments(errors));
    }
    filter(loaded, globs).map(|_| ())
}

/// `list`: one line per experiment, for a person choosing what to run.
pub fn list(files: &[PathBuf], globs: &[String]) -> Result<(), Error> {
    let files = expand(files, Depth::Deep)?;
    let exps = filter(super::inputs::load_all(&files, &Overrides { seed: Some(0), ..Overrides::default() })?, globs)?;
    let width = exps.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in &exps {
        let points = if e.points.is_empty() { String::new() } else { format!(" × {} points", e.points.len()) };
        let faults = faults_text(e);
        let what = e.program.as_ref().map_or("built-in worker", |_| "program");
        sayln!(
            "{:<width$}  {}\n{:<width$}  {}{points}, {} ({what}), {}, {faults}{}",
            e.name,
            e.source.display(),
            "",
            counted(u64::from(e.trials), "trial"),
            counted(e.workers as u64, "worker"),
            crate::model::settings::setting_name(&e.substrate.kind),
            match first_sentence(&e.description) {
                "" => String::new(),
                sentence => format!("; {sentence}"),
            },
        );
    }
    sayln!("{}", counted(exps.len() as u64, "experiment"));
    Ok(())
}

/// Up to the first full stop followed by a space, or the whole text.
fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    match text.find(". ") {
        Some(i) => &text[..=i],
        None => text,
    }
}

/// How much running it is: trials (× sweep points), workers, faults, and
/// the trials' time end to end at one trial at a time.
fn size(e: &crate::model::Experiment) -> String {
    let units = e.units();
    let trials = u64::from(e.trials) * units.len() as u64;
    let total_s: f64 = units.iter().map(|(u, _)| u.duration.as_ms_f64() / 1000.0 * f64::from(e.trials)).sum();
    let points =
        if e.points.is_empty() { String::new() } else { format!(" × {} points = {trials} trials", e.points.len()) };
    let scale = if e.time_scale == 1.0 { String::new() } else { format!(", time scale {}", e.time_scale) };
    format!(
        "{}{points} of {}, {}, {}; {} of trials{}{scale}",
        counted(u64::from(e.trials), "trial"),
        e.duration,
        counted(e.workers as u64, "worker"),
        faults_text(e),
        human(total_s),
        if e.jobs > 1 && trials > 1 {
            let jobs = (e.jobs as u64).min(trials);
            format!(" ({} with --jobs {jobs})", human(total_s / jobs as f64))
        } else {
            String::new()
        },
    )
}

/// "1 fault", "3 faults", "a campaign of 4 kinds of fault".
fn faults_text(e: &crate::model::Experiment) -> String {
    match &e.random {
        None => counted(e.faults.len() as u64, "fault"),
        Some(r) => format!("a campaign of {} kinds of fault", r.kinds.len()),
    }
}
