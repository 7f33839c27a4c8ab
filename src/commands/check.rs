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
use crate::report::host::{self, CHECKED};
use crate::report::summary::{Measured, per_unit, summarize};
use crate::report::{suite, terminal, timeline};
use crate::{say, sayln, warnln};

/// Where the recomputed tables go.
pub enum Target<'a> {
    /// `DIR/checks/<UTC timestamp>/`.
    New,
    /// A directory of the user's, which must be new or empty.
    Out(&'a Path),
    /// DIR itself: the derived tables replaced.
    InPlace,
}

/// Recompute what a results directory derives from its history, or each
/// experiment's of a suite's directory and the suite's README.md.
pub fn check(dir: &Path, target: Target<'_>) -> Result<(), Error> {
    // Whatever stands at experiment.yaml (a FIFO too) makes DIR a run's,
    // to be refused as such, not taken for a suite.
    if dir.join("experiment.yaml").symlink_metadata().is_ok() {
        return check_experiment(dir, target).and_then(|c| c.verdict);
    }
    check_suite(dir, target)
}

/// One experiment re-checked: where its files now are, what the suite's
/// README says of it, and its verdict.
struct Rechecked {
    name: String,
    exp: Experiment,
    metrics: Vec<(u32, usize, TrialMetrics)>,
    failed: Vec<String>,
    verdict: Result<(), Error>,
}

/// A run's history read and judged, its directory held meanwhile; nothing
/// written yet.
struct Judged {
    dir: std::path::PathBuf,
    exp: Experiment,
    metrics: Vec<(u32, usize, TrialMetrics)>,
    trial_one: Option<History>,
    _held: super::owner::Held,
}

fn check_experiment(dir: &Path, target: Target<'_>) -> Result<Rechecked, Error> {
    write(judge(dir, &target)?, target)
}

fn judge(dir: &Path, target: &Target<'_>) -> Result<Judged, Error> {
    // A check that writes elsewhere only reads the run's directory.
    let how = if matches!(target, Target::Out(_)) { Use::Read } else { Use::Write };
    let held = hold(dir, how)?;
    super::inputs::same_format(dir)?;
    let exp = load_record(dir).map_err(|e| Error::Experiments(vec![e]))?;
    let mut trial_one = None;
    let metrics = super::inputs::finished_metrics(dir, &exp, "check", |t, h| {
        if t == 1 {
            trial_one = Some(h);
        }
    })?;
    if metrics.is_empty() {
        return Err(Error::Path { path: dir.join("events.csv"), problem: "holds no trial; nothing to check".into() });
    }
    Ok(Judged { dir: dir.to_path_buf(), exp, metrics, trial_one, _held: held })
}

fn write(judged: Judged, target: Target<'_>) -> Result<Rechecked, Error> {
    let Judged { dir, exp, metrics, trial_one, _held } = judged;
    let dir = dir.as_path();
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
    std::fs::create_dir_all(&out).map_err(Error::io(&out))?;
    // What the run saw of each worker's output is not in the history:
    // carry it over from the run's own trials.csv.
    let outcomes = crate::report::read::worker_outcomes(dir);
    let written = write_derived(&out, &exp, &metrics, &outcomes).and_then(|()| {
        let record = out.join(CHECKED);
        std::fs::write(&record, host::to_json(&super::facts::checked(dir))).map_err(Error::io(&record))
    });
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
                std::fs::copy(dir.join(name), out.join(name)).map_err(Error::io(&out))?;
            }
        }
        out
    };
    let failed = write_pages(&shown, &exp, &metrics, trial_one.as_ref());
    let all: Vec<_> = metrics.iter().map(|(_, _, m)| m).collect();
    say!("{}", terminal::render(&exp, &summarize(&all), &shown));
    warnln!("leasequake: re-checked {} trial(s) of {} → {}", metrics.len(), dir.display(), shown.display());
    // The same verdict as the run that produced the history.
    let by_trial: Vec<_> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let verdict = super::inputs::verdict(&exp, &by_trial);
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Rechecked { name, exp, metrics, failed, verdict })
}

/// What a checked history draws beside its tables, as its run drew them:
/// trial 1's timeline, a sweep's plots and the report page. Returns the
/// expectations that failed.
pub(super) fn write_pages(
    dir: &Path,
    exp: &Experiment,
    metrics: &[(u32, usize, TrialMetrics)],
    trial_one: Option<&History>,
) -> Vec<String> {
    let units = exp.units();
    if let (Some(h), Some((_, unit, m))) = (trial_one, metrics.iter().find(|(t, _, _)| *t == 1)) {
        timeline::trial_one(dir, units[*unit].0, h, m);
    }
    if !exp.points.is_empty()
        && let Err(e) = crate::report::plots::draw(dir, &exp.name)
    {
        warnln!("warning: plots in {}: {e}", dir.display());
    }
    let by_trial: Vec<(u32, &TrialMetrics)> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let failed = crate::report::thresholds::failures(exp, &by_trial);
    if let Err(e) = super::report::experiment(dir, exp, metrics, &failed) {
        warnln!("warning: {e}");
    }
    failed
}

/// A suite's directory: each experiment checked to the same target, then
/// the suite's README.md (its verdict tables) and report page rewritten
/// from what the checks found; its host.json, the run's record, kept.
fn check_suite(dir: &Path, target: Target<'_>) -> Result<(), Error> {
    let mut subs = super::inputs::experiment_dirs(dir).map_err(Error::io(dir))?;
    let readme = crate::files::read_text(&dir.join("README.md"), crate::files::MAX_TEXT_BYTES).ok();
    // In the order the run's README links them (the order it ran them in).
    if let Some(text) = &readme {
        subs.sort_by_key(|d| {
            let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            text.find(&format!("]({name})")).unwrap_or(usize::MAX)
        });
    }
    let (Some(readme), false) = (readme, subs.is_empty()) else {
        return Err(Error::Path {
            path: dir.to_path_buf(),
            problem: "neither a results directory (experiment.yaml) nor a suite's (README.md and experiment \
                      directories)"
                .into(),
        });
    };
    if readme.contains(crate::report::shrunk::SHRUNK_HEADING) {
        return Err(Error::Conflict(format!(
            "{}: was run with --shrink, and what its shrinks found comes from runs a check cannot redo: run it again",
            dir.display()
        )));
    }
    let how = if matches!(target, Target::Out(_)) { Use::Read } else { Use::Write };
    let _held = hold(dir, how)?;
    let root = match target {
        Target::New => super::inputs::new_dir(&dir.join("checks"), "")?,
        Target::Out(out) => {
            super::inputs::ensure_empty(out, "--out")?;
            out.to_path_buf()
        }
        Target::InPlace => dir.to_path_buf(),
    };
    // Every history read and judged before anything is written: a suite
    // refused (an experiment without trials, of another format) is left
    // as it was, not half rewritten.
    let judged = subs.iter().map(|sub| judge(sub, &target)).collect::<Result<Vec<_>, _>>()?;
    let mut done = Vec::new();
    for j in judged {
        let name = j.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let to = root.join(&name);
        let one = if matches!(target, Target::InPlace) { Target::InPlace } else { Target::Out(&to) };
        done.push(write(j, one)?);
    }
    if !matches!(target, Target::InPlace) {
        let from = dir.join("host.json");
        if from.exists() {
            std::fs::copy(&from, root.join("host.json")).map_err(Error::io(&root))?;
        }
    }
    let record = root.join(CHECKED);
    std::fs::write(&record, host::to_json(&super::facts::checked(dir))).map_err(Error::io(&record))?;
    let title = readme.lines().next().unwrap_or("leasequake").trim_start_matches("# ").to_string();
    let parts: Vec<SuitePart<'_>> =
        done.iter().map(|c| SuitePart { name: &c.name, exp: &c.exp, metrics: &c.metrics, failed: &c.failed }).collect();
    let path = suite_pages(&root, &title, &host::words(&root), &parts)?;
    sayln!("{}", path.display());
    done.into_iter().map(|c| c.verdict).fold(Ok(()), crate::error::worse)
}

/// One experiment of a suite, as its README shows it.
pub(super) struct SuitePart<'a> {
    pub name: &'a str,
    pub exp: &'a Experiment,
    pub metrics: &'a [(u32, usize, TrialMetrics)],
    pub failed: &'a [String],
}

/// A suite's README.md (`words` of who ran it, then its tables) and its
/// report page, in `root`, from its experiments' metrics. Returns the
/// README's path.
pub(super) fn suite_pages(
    root: &Path,
    title: &str,
    words: &str,
    parts: &[SuitePart<'_>],
) -> Result<std::path::PathBuf, Error> {
    let summaries: Vec<_> =
        parts.iter().map(|p| summarize(&p.metrics.iter().map(|(_, _, m)| m).collect::<Vec<_>>())).collect();
    let runs: Vec<Measured<'_>> = parts
        .iter()
        .zip(&summaries)
        .map(|(p, summary)| Measured {
            exp: p.exp,
            summary,
            metrics: p.metrics.iter().map(|(_, _, m)| m).collect(),
            link: p.name.to_string(),
            failed: p.failed,
        })
        .collect();
    let points: Vec<Vec<_>> = parts.iter().map(|p| per_unit(&p.exp.units(), p.metrics)).collect();
    let exps: Vec<&Experiment> = parts.iter().map(|p| p.exp).collect();
    let preamble = format!("{words}\n{}", suite::about(&exps));
    let path = root.join("README.md");
    super::report::write_whole(&path, &suite::readme(title, &preamble, &runs, &points)).map_err(Error::io(&path))?;
    let names: Vec<String> = parts.iter().map(|p| p.name.to_string()).collect();
    if let Err(e) = super::report::suite(root, &names) {
        warnln!("warning: {e}");
    }
    Ok(path)
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
    let units = exp.units();
    let mut w = ResultsWriter::create(out, exp, Tables::Derived)?;
    // The derived tables are written from the metrics alone: the history,
    // which only the history tables take, is not kept to write them.
    for (trial, unit, m) in metrics {
        let (unit_exp, label) = &units[*unit];
        let said = outcomes.get(trial).map_or("", String::as_str);
        let seed = exp.seed_of(*trial);
        let data = TrialData { trial: *trial, seed, events: None, faults: &[], metrics: m, outcomes: said };
        w.append(exp, (unit_exp, &unit_exp.setting_label(label)), data)?;
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
