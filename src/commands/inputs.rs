//! What the commands share: finding experiment files, re-checking a
//! results directory's histories, and the verdict on `expect:`.

use std::path::PathBuf;

use crate::error::exit;

/// Files as given; directories become their *.yaml files, sorted.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
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
pub fn recheck(
    exp: &crate::model::Experiment,
    histories: &std::collections::BTreeMap<u32, crate::model::history::History>,
) -> Vec<(u32, usize, crate::check::TrialMetrics)> {
    let units = crate::report::summary::units(exp);
    histories
        .iter()
        .map(|(t, h)| {
            let unit = crate::report::summary::unit_of(exp, units.len(), *t);
            (*t, unit, crate::check::check(h, &crate::check::CheckParams::of(units[unit].0)))
        })
        .collect()
}

/// Print whether the experiment's `expect:` held over these trials; the
/// exit code that says so.
pub fn verdict(exp: &crate::model::Experiment, trials: &[(u32, &crate::check::TrialMetrics)]) -> u8 {
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
