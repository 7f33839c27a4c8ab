use std::path::Path;

use super::exit;
use crate::check::check as check_history;
use crate::experiment::{Overrides, load};
use crate::report::csv::{ResultsWriter, Tables};
use crate::report::read::read_histories;
use crate::report::summary::{expectation_failures, summarize};
use crate::report::terminal;

/// Recompute the derived tables of a results directory from its history.
pub fn check(dir: &Path, out: Option<&Path>) -> u8 {
    let exp = match load(&dir.join("experiment.yaml"), &Overrides::default()) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let histories = match read_histories(dir) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let out = out.unwrap_or(dir);
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("error: {}: {e}", out.display());
        return exit::HARNESS;
    }
    let params = exp.check_params();
    let metrics: Vec<_> = histories.iter().map(|(t, h)| (*t, check_history(h, &params))).collect();
    let result = (|| {
        let mut w = ResultsWriter::create(out, Tables::Derived)?;
        for ((trial, history), (_, m)) in histories.iter().zip(&metrics) {
            w.append(&exp, *trial, exp.trial_seed(*trial), history, &[], m)?;
        }
        let all: Vec<_> = metrics.iter().map(|(_, m)| m).collect();
        let summary = summarize(&all);
        w.write_summary(&exp, &summary)?;
        Ok::<_, crate::report::csv::WriteError>(summary)
    })();
    match result {
        Ok(summary) => {
            print!("{}", terminal::render(&exp, &summary, out));
            // The same verdict as the run that produced the history.
            let by_trial: Vec<_> = metrics.iter().map(|(t, m)| (*t, m)).collect();
            let failures = expectation_failures(&exp, &by_trial);
            if failures.is_empty() {
                exit::OK
            } else {
                println!("  expectations:   {} failed", failures.len());
                for f in failures.iter().take(20) {
                    println!("    - {f}");
                }
                exit::EXPECT_FAILED
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::HARNESS
        }
    }
}
