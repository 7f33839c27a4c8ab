//! The typed, validated experiment: what `experiment::load` returns and
//! every later layer reads. Its durations are already multiplied by the
//! time scale: nothing after loading scales anything.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::duration::Dur;
use super::faults::Fault;
use super::program::Program;
use super::random_faults::RandomFaults;
use super::settings::{InitialLock, LeaseSettings, StartMode, SubstrateSettings, WorkerSettings};

/// Conditions on the whole run; a failure makes the run exit 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// No trial may see more concurrent believers than this.
    pub max_leaders: Option<usize>,
    /// Every ended gap lasts at least this long.
    pub gap_min: Option<Dur>,
    /// Every gap (ended or not) lasts at most this long.
    pub gap_max: Option<Dur>,
    /// true: every trial wedges; false: none does.
    pub wedged: Option<bool>,
    /// At most this many trials with two leaders.
    pub double_leader_trials: Option<usize>,
    /// At most this many trials the machine disturbed.
    pub disturbed: Option<usize>,
    /// Bounds on summarised metrics (`expect: {metrics: …}`), each checked
    /// per setting.
    pub metrics: Vec<super::summary_metrics::MetricBound>,
}

impl Expect {
    pub fn is_empty(&self) -> bool {
        *self == Expect::default()
    }
}

/// What a published source reported for this experiment, so a run can be
/// set beside it (`leasequake run DIR --out OUT` writes OUT/README.md).
/// Durations here are in the source's time, never scaled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// The number as the source states it, e.g. "9.53 s leaderless".
    pub claim: String,
    /// A leaderless gap the source measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<Dur>,
    /// The source's worst case for the gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_gap: Option<Dur>,
    /// Trials with two or more leaders, as [k, n].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_leader_trials: Option<[usize; 2]>,
    /// The most leaders at once the source claims possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_leaders: Option<usize>,
    /// Whether the source saw the system wedge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wedged: Option<bool>,
    /// The theoretical bound on gaps, [min, max].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<[Dur; 2]>,
    /// Why our number may differ (written before the run, from the design).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// Enough trials, not a guessed number: stop once the 95 % interval of the
/// experiment's headline rate (false evictions per leader pause where
/// leaders are paused, else trials with two leaders) is at most `ci_width`
/// wide, after at least `min` trials; `Experiment::trials` is the cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Until {
    /// As a proportion (0.1 is ten percentage points).
    pub ci_width: f64,
    pub min: u32,
}

/// What the loader fills in where a file is silent; the reference quotes
/// these same values. (The lease's own are `LeaseSettings::default()`, the
/// built-in worker's `WorkerSettings::default()`.)
pub mod defaults {
    use super::{Dur, InitialLock, StartMode};

    pub const TRIALS: u32 = 1;
    pub const DURATION: Dur = Dur::from_secs(30);
    pub const START: StartMode = StartMode::Barrier;
    pub const INITIAL_LOCK: InitialLock = InitialLock::None;
    /// Before the time scale, and never under the least real time a worker
    /// needs to stop.
    pub const GRACE: Dur = Dur::from_secs(2);
    pub const JOBS: usize = 1;
}

#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// The file it was loaded from.
    pub source: PathBuf,
    /// Trials to run (per sweep point); with `until`, the most.
    pub trials: u32,
    /// Run trials only until the headline rate is known this well.
    pub until: Option<Until>,
    pub seed: u64,
    /// Neither the file nor the command line gave the seed: it was drawn.
    pub seed_drawn: bool,
    /// Trial duration (scaled).
    pub duration: Dur,
    pub workers: usize,
    pub lease: LeaseSettings,
    pub worker: WorkerSettings,
    pub start: StartMode,
    pub stagger: Dur,
    /// Release the barrier when the wall clock is this far past a whole
    /// (scaled) second, to put ticks at a chosen phase of the expiry
    /// resolution (worst and best cases of the whole-second truncation).
    pub align: Option<Dur>,
    pub initial_lock: InitialLock,
    /// The scripted faults (`faults: [...]`).
    pub faults: Vec<Fault>,
    /// A campaign (`faults: {random: …}`): each trial draws its own.
    pub random: Option<RandomFaults>,
    pub expect: Expect,
    /// The scale that was applied to every duration above.
    pub time_scale: f64,
    /// Time between SIGTERM and SIGKILL at cleanup (not scaled: it is about
    /// the harness, not the lease).
    pub grace: Dur,
    /// Trials run at once.
    pub jobs: usize,
    /// How late a fault may take effect before its trial is flagged (scaled);
    /// None: 1 % of the smallest of lease, renew and watch.
    pub fault_budget: Option<Dur>,
    /// How long an operation may stall beyond its kind's median, and how
    /// far the workers' starts may spread, before the machine is judged
    /// to have disturbed the trial (scaled); None: as the fault budget.
    pub disturbance_budget: Option<Dur>,
    pub reference: Option<Reference>,
    pub substrate: SubstrateSettings,
    /// A program under test instead of the built-in worker.
    pub program: Option<Program>,
    /// A sweep's points (empty for a plain experiment): each a complete
    /// experiment with some settings replaced.
    pub points: Vec<Point>,
    /// A soak (one trial) kept in windows this long (scaled): a stopped
    /// run's `--resume` keeps its trial up to the last whole window and
    /// runs the rest of the soak as the next trial.
    pub window: Option<Dur>,
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The swept settings as they run (durations scaled), e.g. lease=450ms.
    pub settings: Vec<(String, String)>,
    pub exp: Experiment,
}

impl Point {
    /// `lease=450ms renew=150ms`.
    pub fn label(&self) -> String {
        self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

impl Experiment {
    /// The units of a run: the experiment itself, or each point of its
    /// sweep, with the label that names it in trials.csv and summary.csv.
    pub fn units(&self) -> Vec<(&Experiment, String)> {
        if self.points.is_empty() {
            vec![(self, String::new())]
        } else {
            self.points.iter().map(|p| (&p.exp, p.label())).collect()
        }
    }

    /// The unit (sweep point) of a trial, of `units`: a run numbers point
    /// p's trials p·trials + 1 ..= (p + 1)·trials.
    pub fn unit_of(&self, units: usize, trial: u32) -> usize {
        (((trial.max(1) - 1) / self.trials.max(1)) as usize).min(units.saturating_sub(1))
    }

    /// The name of a unit in trials.csv and summary.csv: its sweep point's
    /// `label`, or the experiment's name.
    pub fn setting_label(&self, label: &str) -> String {
        if label.is_empty() { self.name.clone() } else { label.to_string() }
    }

    /// The most trials a run of it can hold: a trial per sweep point and
    /// count, or for a soak kept in windows, a trial per window (each
    /// resume starts the rest of the soak as a new trial).
    pub fn most_trials(&self) -> u32 {
        match self.window {
            Some(w) => u32::try_from(self.duration.as_us().div_ceil(w.as_us().max(1))).unwrap_or(u32::MAX),
            None => (self.units().len() as u32).saturating_mul(self.trials),
        }
    }

    /// Seed of the run's trial `trial` (numbered across the sweep's points,
    /// 1-based): the seed of its number within its point, or of a soak's
    /// own trials (its stretches), its number.
    pub fn seed_of(&self, trial: u32) -> u64 {
        match self.window {
            Some(_) => self.trial_seed(trial),
            None => self.trial_seed((trial.max(1) - 1) % self.trials.max(1) + 1),
        }
    }

    /// Seed of trial `i` (1-based): distinct, reproducible, printed in trials.csv.
    pub fn trial_seed(&self, trial: u32) -> u64 {
        self.seed.wrapping_add(u64::from(trial))
    }

    /// Do the workers reach their server through the harness's proxy?
    pub fn proxied(&self) -> bool {
        self.substrate.kind.server().is_some()
            && (self.substrate.proxy || self.fault_kinds().any(|f| f.action.is_network()))
    }

    /// Every fault the experiment may fire, as written: the scripted ones
    /// and each kind a campaign draws from. What needs to know whether a
    /// pause, a network fault or a skew can happen asks this.
    pub fn fault_kinds(&self) -> impl Iterator<Item = &Fault> {
        self.faults.iter().chain(self.random.iter().flat_map(|r| r.kinds.iter().map(|k| &k.fault)))
    }

    /// One trial's schedule: the scripted faults, then the campaign's draw
    /// (from `rng`, which the caller seeds from the trial's seed). Fault
    /// indices in faults.csv index this list.
    pub fn faults_of_trial(&self, rng: &mut impl rand::Rng) -> Vec<Fault> {
        let mut out = self.faults.clone();
        if let Some(r) = &self.random {
            out.extend(r.draw(self.duration, rng));
        }
        out
    }
}
