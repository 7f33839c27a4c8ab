//! `leasequake check DIR`: re-check a results directory's history. What the
//! run wrote is never destroyed: the recomputed tables go to a new
//! directory unless an in-place rewrite is asked for, and even then each
//! file is replaced whole, only after all of them were written.

use std::collections::BTreeMap;
use std::path::Path;

use super::owner::{Use, hold};
use crate::check::TrialMetrics;
use crate::error::Error;
use crate::experiment::load_record;
use crate::model::Experiment;
use crate::model::history::History;
use crate::report::csv::{ResultsWriter, Tables, TrialData};
use crate::report::summary::{per_unit, setting_label, summarize, units};
use crate::report::terminal;
use crate::{say, warnln};

/// Where the recomputed tables go.
pub enum Target<'a> {
    /// `DIR/checks/<UTC timestamp>/`.
    New,
    /// A directory of the user's, which must be new or empty.
    Out(&'a Path),
    /// DIR itself: the derived tables replaced.
    InPlace,
}

/// Recompute the derived tables of a results directory from its history.
pub fn check(dir: &Path, target: Target<'_>) -> Result<(), Error> {
    // A check that writes elsewhere only reads the run's directory.
    let how = if matches!(target, Target::Out(_)) { Use::Read } else { Use::Write };
    let _held = hold(dir, how)?;
    super::inputs::same_format(dir)?;
    let exp = load_record(dir).map_err(|e| Error::Experiments(vec![e]))?;
    let metrics = super::inputs::finished_metrics(dir, &exp, "check", |_, _| {})?;
    if metrics.is_empty() {
        return Err(Error::Path { path: dir.join("events.csv"), problem: "holds no trial; nothing to check".into() });
    }
    let out = match target {
        Target::New => super::inputs::new_dir(&dir.join("checks"), "")?,
        Target::Out(out) => {
            super::inputs::ensure_empty(out, "--out")?;
            out.to_path_buf()
        }
        Target::InPlace => {
            super::inputs::remove_stale(dir, ".check-", ".tmp");
            dir.join(format!(".check-{}.tmp", std::process::id()))
        }
    };
    let io = |p: &Path| {
        let path = p.to_path_buf();
        move |source: std::io::Error| Error::Io { path, source }
    };
    std::fs::create_dir_all(&out).map_err(io(&out))?;
    // What the run saw of each worker's output is not in the history:
    // carry it over from the run's own trials.csv.
    let outcomes = crate::report::read::worker_outcomes(dir);
    let written = write_derived(&out, &exp, &metrics, &outcomes);
    if let Err(e) = written {
        if matches!(target, Target::InPlace) {
            // Half a re-check is no use to anyone; the run's files are intact.
            let _ = std::fs::remove_dir_all(&out);
        }
        return Err(e);
    }
    let shown = if matches!(target, Target::InPlace) {
        replace_derived(&out, dir)?;
        dir.to_path_buf()
    } else {
        // The new directory is a results directory of its own (for `plot`).
        for name in ["experiment.yaml", "host.json"] {
            if dir.join(name).exists() {
                std::fs::copy(dir.join(name), out.join(name)).map_err(io(&out))?;
            }
        }
        out
    };
    let all: Vec<_> = metrics.iter().map(|(_, _, m)| m).collect();
    say!("{}", terminal::render(&exp, &summarize(&all), &shown));
    warnln!("leasequake: re-checked {} trial(s) of {} → {}", metrics.len(), dir.display(), shown.display());
    // The same verdict as the run that produced the history.
    let by_trial: Vec<_> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    super::inputs::verdict(&exp, &by_trial)
}

/// The tables derived from a history (trials.csv, gaps.csv, the summaries,
/// …) written into `out` from re-checked `metrics`, each trial with the
/// seed and setting the run gave it; `outcomes` is what the run saw of each
/// trial's workers (trials.csv's `worker_outcomes`), which no history holds.
pub(super) fn write_derived(
    out: &Path,
    exp: &Experiment,
    metrics: &[(u32, usize, TrialMetrics)],
    outcomes: &BTreeMap<u32, String>,
) -> Result<(), Error> {
    let units = units(exp);
    let trials_per_unit = exp.trials.max(1);
    let mut w = ResultsWriter::create(out, exp, Tables::Derived)?;
    // The derived tables are written from the metrics alone: the history,
    // which only the history tables take, is not kept to write them.
    let none = History::default();
    for (trial, unit, m) in metrics {
        let (unit_exp, label) = &units[*unit];
        let local = (trial - 1) % trials_per_unit + 1;
        let said = outcomes.get(trial).map_or("", String::as_str);
        let seed = exp.trial_seed(local);
        let data = TrialData { trial: *trial, seed, history: &none, faults: &[], metrics: m, outcomes: said };
        w.append(exp, (unit_exp, &setting_label(unit_exp, label)), data)?;
    }
    w.write_summary(exp, &per_unit(&units, metrics))?;
    Ok(w.finish()?)
}

/// Move every file of `from` over its namesake in `dir`, then remove `from`.
/// Each rename is atomic: a crash leaves every table either old or new.
fn replace_derived(from: &Path, dir: &Path) -> Result<(), Error> {
    let entries = std::fs::read_dir(from).map_err(|source| Error::Io { path: from.to_path_buf(), source })?;
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io { path: from.to_path_buf(), source })?;
        let to = dir.join(entry.file_name());
        std::fs::rename(entry.path(), &to).map_err(|source| Error::Io { path: to, source })?;
    }
    std::fs::remove_dir(from).map_err(|source| Error::Io { path: from.to_path_buf(), source })
}
