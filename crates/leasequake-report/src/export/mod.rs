//! Machine-readable results for CI: every experiment's measurements, bounds,
//! expectations and verdict, in a file a CI system reads natively. Written
//! once the run ends, also when it was stopped: what finished is exported.

mod json;
mod junit;

use std::path::Path;

use super::summary::{ExpectCheck, Summary, SummaryRow};
use crate::model::Experiment;

pub use json::Json;
pub use junit::JUnit;

/// One experiment of the run, as the exports see it.
pub struct ExperimentResult<'a> {
    pub exp: &'a Experiment,
    pub dir: &'a Path,
    /// Over all its trials.
    pub summary: &'a Summary,
    /// Per sweep point (one row for an experiment without a sweep).
    pub points: Vec<SummaryRow<'a>>,
    /// Each `expect:` key and how it fared.
    pub checks: Vec<ExpectCheck>,
    /// What stopped it, other than a failed expectation.
    pub broke: Option<&'a str>,
    /// Wall time it took, seconds.
    pub seconds: f64,
}

impl ExperimentResult<'_> {
    /// `passed`, `failed` (an `expect:` failed) or `broken` (it could not
    /// finish).
    pub fn verdict(&self) -> &'static str {
        if self.broke.is_some() {
            "broken"
        } else if self.checks.iter().any(|c| !c.failures.is_empty()) {
            "failed"
        } else {
            "passed"
        }
    }
}

/// A format the results can be exported to.
pub trait Exporter {
    fn serialize(&self, results: &[ExperimentResult<'_>]) -> String;
}
