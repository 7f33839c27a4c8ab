use std::path::Path;

use crate::error::Error;
use crate::experiment::{Overrides, load};
use crate::report::csv::{ResultsWriter, Tables, TrialData};
use crate::report::read::read_histories;
use crate::report::summary::{per_unit, setting_label, summarize, units};
use crate::report::terminal;
use crate::say;

/// Recompute the derived tables of a results directory from its history.
pub fn check(dir: &Path, out: Option<&Path>) -> Result<(), Error> {
    super::inputs::same_format(dir)?;
    let exp = load(&dir.join("experiment.yaml"), &Overrides::default()).map_err(|e| Error::Experiments(vec![e]))?;
    let histories = read_histories(dir)?;
    let out = out.unwrap_or(dir);
    std::fs::create_dir_all(out).map_err(|source| Error::Io { path: out.to_path_buf(), source })?;
    let units = units(&exp);
    let trials_per_unit = exp.trials.max(1);
    let metrics = super::inputs::recheck(&exp, &histories);
    // What the run saw of each worker's output is not in the history:
    // carry it over from the run's own trials.csv.
    let outcomes = crate::report::read::worker_outcomes(dir);
    let mut w = ResultsWriter::create(out, &exp, Tables::Derived)?;
    for ((trial, history), (_, unit, m)) in histories.iter().zip(&metrics) {
        let (unit_exp, label) = &units[*unit];
        let local = (trial.max(&1) - 1) % trials_per_unit + 1;
        let said = outcomes.get(trial).map_or("", String::as_str);
        let data =
            TrialData { trial: *trial, seed: exp.trial_seed(local), history, faults: &[], metrics: m, outcomes: said };
        w.append(&exp, (unit_exp, &setting_label(unit_exp, label)), data)?;
    }
    w.write_summary(&exp, &per_unit(&units, &metrics))?;
    let all: Vec<_> = metrics.iter().map(|(_, _, m)| m).collect();
    say!("{}", terminal::render(&exp, &summarize(&all), out));
    // The same verdict as the run that produced the history.
    let by_trial: Vec<_> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    super::inputs::verdict(&exp, &by_trial)
}
