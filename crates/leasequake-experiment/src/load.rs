//! YAML → validated `Experiment`.
//!
//! The raw structs mirror the file and keep each value's location
//! (`Spanned`), so that a semantic error such as `renew >= lease` can point
//! at the exact line and column, just as a syntax error does.

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::diagnostic::{Diagnostic, ExperimentError};
use super::faults::{RawFaults, RawLen};
use super::yaml_error::{misindented, saphyr_message, tab_after};
use crate::model::{Dur, Experiment, InitialLock, Point, Reference, StartMode, SubstrateSettings, WorkerSettings};

/// The shortest lease, renew, watch or repeat interval a run may have, after
/// scaling: below it the harness's own timing is the experiment.
pub const MIN_INTERVAL: Dur = Dur::from_ms(1);
/// The longest trial, after scaling.
pub const MAX_DURATION: Dur = Dur::from_secs(7 * 86_400);
/// The most fault deliveries one trial may schedule (each is a faults.csv row).
pub const MAX_DELIVERIES: u64 = 100_000;
/// How long workers have to stop at the end of a trial, after scaling: at
/// least this much real time whatever the scale, at most the ceiling.
pub const MIN_GRACE: Dur = Dur::from_ms(500);
pub const MAX_GRACE: Dur = Dur::from_secs(60);
/// A name is a directory name.
pub(super) const MAX_NAME_BYTES: usize = 200;
/// The most trials one run may have (trials × sweep points).
pub const MAX_TRIALS: u64 = 1_000_000;
/// An experiment file larger than this is not one.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

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
    pub(super) disturbed: Option<usize>,
    /// Bounds on any summarised metric, by `file.column`.
    #[serde(default)]
    pub(super) metrics: Option<Spanned<std::collections::BTreeMap<String, RawBound>>>,
}

/// `{max: …}`, `{min: …}`, `{rate_max: 5%}`, `{rate_min: …}`: one or more.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBound {
    #[serde(default)]
    pub(super) max: Option<f64>,
    #[serde(default)]
    pub(super) min: Option<f64>,
    #[serde(default)]
    pub(super) rate_max: Option<super::expect::Fraction>,
    #[serde(default)]
    pub(super) rate_min: Option<super::expect::Fraction>,
}

/// The keys each section of a file takes, as the loader's own types name
/// them (the reference is tested against these).
#[cfg(test)]
pub(super) fn fields() -> Vec<(&'static str, &'static [&'static str])> {
    use super::keys::names_of;
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

/// Read and validate an experiment file.
pub fn load(path: &Path, overrides: &Overrides) -> Result<Experiment, ExperimentError> {
    let read = |source| ExperimentError::Read { path: path.into(), source };
    let text = crate::files::read_text(path, MAX_FILE_BYTES).map_err(read)?;
    load_str(path, &text, overrides)
}

/// The experiment a results directory records, for the commands that read
/// a run and never spawn it (check, report, compare, merge).
pub fn load_record(dir: &Path) -> Result<Experiment, ExperimentError> {
    load(&dir.join("experiment.yaml"), &Overrides { recorded: true, ..Overrides::default() })
}

/// Validate experiment text; `path` is used for messages and as `source`.
pub fn load_str(path: &Path, text: &str, overrides: &Overrides) -> Result<Experiment, ExperimentError> {
    let at = |line: u64, column: u64, message: String| {
        ExperimentError::Invalid(Box::new(Diagnostic::new(path, text, line as usize, column as usize, message)))
    };
    let err_at = |loc: &serde_saphyr::Location, message: String| at(loc.line(), loc.column(), message);

    if text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
        let msg = "the file holds no settings: an experiment is a YAML mapping of settings, `name:` at least";
        return Err(at(1, 1, msg.to_string()));
    }
    let mut raw: RawExperiment = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
        let mut message = saphyr_message(&e);
        // The parser reports the scalar it was reading, not the tab it
        // found after it: point at the tab.
        let (mut line, mut column) =
            if message.contains("found a tab") { tab_after(text, line, column) } else { (line, column) };
        // A key indented out of its mapping leaves the mapping without it:
        // point at the key, where the fix is.
        let missing =
            message.strip_prefix("missing field `").and_then(|r| r.split_once('`')).map(|(f, _)| f.to_string());
        if let Some((l, c)) = missing.as_deref().and_then(|f| misindented(text, line, f)) {
            message = format!(
                "{message}: line {l} gives `{}` at another indent than the keys beside it",
                missing.as_deref().unwrap_or_default()
            );
            (line, column) = (l, c);
        }
        at(line, column, message)
    })?;
    let trials_at = raw.trials.as_ref().filter(|_| overrides.trials.is_none()).map(|t| t.referenced);
    let too_many = |exp: &Experiment| {
        let total = u64::from(exp.trials) * exp.points.len().max(1) as u64;
        if total <= MAX_TRIALS {
            return Ok(());
        }
        let msg = format!(
            "{} trials × {} sweep point(s) is {total} trials; at most {MAX_TRIALS} in one run",
            exp.trials,
            exp.points.len().max(1)
        );
        Err(match &trials_at {
            Some(l) => err_at(l, msg),
            None => at(0, 0, format!("--trials: {msg}")),
        })
    };
    let Some(sweep) = raw.sweep.take() else {
        let exp = super::build::build(path, text, raw, overrides)?;
        too_many(&exp)?;
        return Ok(exp);
    };

    raw.substrate_swept = sweep.iter().any(|(key, values)| {
        key == "substrate" || (key == "points" && values.value.iter().any(|p| p.get("substrate").is_some()))
    });
    // A sweep: the base must be valid on its own, then every point is the
    // base with some settings replaced, validated the same way (errors point
    // at the sweep's values).
    let mut base = super::build::build(path, text, raw.clone(), overrides)?;
    // One seed for the run, drawn once: every point runs the same seeds.
    let overrides = &Overrides { seed: Some(base.seed), ..overrides.clone() };
    for settings in super::sweep::points(&sweep).map_err(|(loc, msg)| err_at(&loc, msg))? {
        let mut point_raw = raw.clone();
        let mut shown = Vec::new();
        for (key, value, loc) in &settings {
            let text_value = apply(&mut point_raw, key, value, *loc).map_err(|msg| err_at(loc, msg))?;
            shown.push((key.clone(), text_value));
        }
        let exp = super::build::build(path, text, point_raw, overrides)?;
        // As they run (durations scaled), so the resolved file reloads as is.
        let settings = shown
            .into_iter()
            .map(|(k, v)| {
                let ran = super::sweep::as_run(&exp, &k).unwrap_or(v);
                (k, ran)
            })
            .collect();
        base.points.push(Point { settings, exp });
    }
    too_many(&base)?;
    Ok(base)
}

/// Set one swept setting on the raw experiment; returns the value as text.
fn apply(
    raw: &mut RawExperiment,
    key: &str,
    value: &serde_json::Value,
    loc: serde_saphyr::Location,
) -> Result<String, String> {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let dur = || Dur::parse(&text).map(|d| Spanned::new(d, loc, loc));
    let len = || Dur::parse(&text).map(|d| Spanned::new(RawLen::Fixed(d), loc, loc));
    let variant = |what: &str| -> Result<serde_json::Value, String> {
        if value.is_string() { Ok(value.clone()) } else { Err(format!("{what} must be a name, not {text}")) }
    };
    match key {
        "lease" => raw.lease = Some(dur()?),
        "renew" => raw.renew = Some(dur()?),
        "watch" => raw.watch = Some(dur()?),
        "duration" => raw.duration = Some(dur()?),
        "expiry_resolution" => raw.expiry_resolution = Some(dur()?),
        "stagger" => raw.stagger = Some(dur()?),
        "workers" => {
            let n = value.as_i64().ok_or_else(|| format!("workers must be a whole number, not {text}"))?;
            raw.workers = Spanned::new(n, loc, loc);
        }
        "substrate" => raw.substrate.kind = serde_json::from_value(variant(key)?).map_err(|e| e.to_string())?,
        "fault" if raw.faults.random.is_some() => {
            return Err("sweep key `fault` picks faults of a `faults:` list; a campaign draws its own".into());
        }
        "fault" => {
            let want = variant(key)?;
            let has: Vec<&str> = raw.faults.list.iter().map(|f| f.action.value.name()).collect();
            if !has.contains(&want.as_str().unwrap_or_default()) {
                let mut names: Vec<&str> = Vec::new();
                for n in has {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
                return Err(format!("sweep fault: no fault of the schedule is a {text} (it has {})", names.join(", ")));
            }
            raw.faults.list.retain(|f| Some(f.action.value.name()) == want.as_str());
        }
        "pause" if raw.faults.random.is_some() => {
            return Err("sweep key `pause` sets the pauses of a `faults:` list; a campaign draws its own \
                        (sweep a copy of the file with another `duration` on its kinds)"
                .into());
        }
        "pause" => {
            // Every pause fault of the schedule.
            let d = len()?;
            let mut any = false;
            for f in raw.faults.list.iter_mut().filter(|f| f.action.value.is_pause()) {
                f.duration = Some(d.clone());
                any = true;
            }
            if !any {
                return Err("sweep key `pause` needs a fault with `action: pause`".into());
            }
        }
        _ if super::sweep::worker_key(key).is_some() => {
            // Any setting of the built-in worker, by its name in `worker:`.
            let field = super::sweep::worker_key(key).expect("matched");
            let mut tree = serde_json::to_value(&raw.worker).map_err(|e| e.to_string())?;
            tree[field] = value.clone();
            raw.worker = serde_json::from_value(tree).map_err(|e| format!("{key}: {e}"))?;
        }
        _ => {
            let Some((index, field)) = super::sweep::fault_key(key) else {
                return Err(format!(
                    "unknown sweep setting {key:?}: expected one of {}",
                    super::sweep::keys().join(", ")
                ));
            };
            let n = raw.faults.list.len();
            let f = raw.faults.list.get_mut(index).ok_or_else(|| format!("{key}: the schedule has {n} faults"))?;
            match field {
                "at" => f.at = dur()?,
                "duration" => f.duration = Some(len()?),
                "jitter" => f.jitter = Some(dur()?.value),
                "delay" => f.delay = Some(dur()?.value),
                "latency" => f.latency = Some(dur()?),
                "latency_jitter" => f.latency_jitter = Some(dur()?),
                _ => unreachable!("fault_key accepts these fields only"),
            }
        }
    }
    Ok(text)
}

/// What a substrate cannot do (`substrate_rules.rs`), placed in the file.
pub(super) fn validate_substrate(raw: &RawExperiment, text: &str) -> Result<(), (u64, u64, String)> {
    let uses = super::substrate_rules::Uses {
        substrate: &raw.substrate,
        worker: &raw.worker,
        initial_lock: raw.initial_lock,
        faults: &raw.faults.written(),
        swept: raw.substrate_swept,
        program: raw.program.is_some(),
    };
    match super::substrate_rules::check(&uses) {
        Ok(()) => Ok(()),
        Err(super::substrate_rules::Problem::Key(key, msg)) => {
            let (line, column) = super::build::locate(text, key);
            Err((line, column, msg))
        }
        Err(super::substrate_rules::Problem::At(line, column, msg)) => Err((line, column, msg)),
    }
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
