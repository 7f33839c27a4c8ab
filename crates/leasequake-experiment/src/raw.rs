//! What a file and the command line say, before anything is checked: the
//! raw structs mirror the file and keep each value's location (`Spanned`),
//! so that a semantic error such as `renew >= lease` can point at the exact
//! line and column, just as a syntax error does.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::faults::RawFaults;
use crate::model::{Dur, InitialLock, Reference, StartMode, SubstrateSettings, WorkerSettings};

/// Command-line settings that take precedence over the file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub time_scale: Option<f64>,
    pub trials: Option<u32>,
    pub seed: Option<u64>,
    pub jobs: Option<usize>,
    /// A ceiling on the experiment's own `jobs:` (not a replacement).
    pub max_jobs: Option<usize>,
    /// The file is a run's record, read and never run: the program it
    /// names (and its directory) need not be installed on this machine.
    pub recorded: bool,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExperiment {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) description: String,
    /// A count, or `{until: {ci_width}, max, min}` (read by `trials_of`).
    #[serde(default)]
    pub(super) trials: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    pub(super) seed: Option<u64>,
    #[serde(default)]
    pub(super) duration: Option<Spanned<Dur>>,
    pub(super) workers: Spanned<i64>,
    #[serde(default)]
    pub(super) lease: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) renew: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) watch: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) expiry_resolution: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) time_scale: Option<Spanned<f64>>,
    /// The durations of this file are already multiplied by this time
    /// scale (a resolved experiment.yaml says so): they are not scaled
    /// again, but the experiment keeps its scale.
    #[serde(default)]
    pub(super) scaled_by: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) worker: WorkerSettings,
    #[serde(default)]
    pub(super) start: Option<StartMode>,
    #[serde(default)]
    pub(super) stagger: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) align: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) initial_lock: Option<InitialLock>,
    /// A list, or `{random: …}`.
    #[serde(default)]
    pub(super) faults: RawFaults,
    #[serde(default)]
    pub(super) expect: Option<RawExpect>,
    #[serde(default)]
    pub(super) grace: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) fault_budget: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) disturbance_budget: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) jobs: Option<Spanned<usize>>,
    #[serde(default)]
    pub(super) window: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) reference: Option<Reference>,
    #[serde(default)]
    pub(super) substrate: SubstrateSettings,
    #[serde(default)]
    pub(super) program: Option<super::program::RawProgram>,
    /// setting → values (cross product), or `points:` → list of mappings.
    #[serde(default)]
    pub(super) sweep: Option<std::collections::BTreeMap<String, Spanned<Vec<serde_json::Value>>>>,
    /// The sweep varies the substrate (set when the sweep is taken apart).
    #[serde(skip)]
    pub(super) substrate_swept: bool,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    #[serde(default)]
    pub(super) max_leaders: Option<usize>,
    #[serde(default)]
    pub(super) gap_min: Option<Dur>,
    #[serde(default)]
    pub(super) gap_max: Option<Dur>,
    #[serde(default)]
    pub(super) wedged: Option<bool>,
    #[serde(default)]
    pub(super) double_leader_trials: Option<usize>,
    #[serde(default)]
    pub(super) disturbed: Option<super::expect::TrialCount>,
    /// Bounds on any summarised metric, by `file.column`.
    #[serde(default)]
    pub(super) metrics: Option<Spanned<std::collections::BTreeMap<String, RawBound>>>,
}

/// `{max: …}`, `{min: …}`, `{rate_max: 5%}`, `{rate_min: …}`: one or more.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBound {
    #[serde(default)]
    pub(super) max: Option<super::expect::Number>,
    #[serde(default)]
    pub(super) min: Option<super::expect::Number>,
    #[serde(default)]
    pub(super) rate_max: Option<super::expect::Fraction>,
    #[serde(default)]
    pub(super) rate_min: Option<super::expect::Fraction>,
}

/// The keys each section of a file takes, as the loader's own types name
/// them (the reference is tested against these).
#[cfg(test)]
pub(super) fn fields() -> Vec<(&'static str, &'static [&'static str])> {
    use crate::model::describe::names_of;
    vec![
        ("", names_of::<RawExperiment>()),
        ("expect", names_of::<RawExpect>()),
        ("faults[]", names_of::<super::faults::RawFault>()),
        ("faults", names_of::<super::faults::RawCampaign>()),
        ("faults.random", names_of::<super::faults::RawRandom>()),
        ("faults.random.kinds[]", names_of::<super::faults::RawRandomKind>()),
        ("program", names_of::<super::program::RawProgram>()),
        ("program.patterns[]", names_of::<super::program::RawPattern>()),
    ]
}
