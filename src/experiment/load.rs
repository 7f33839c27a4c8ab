//! YAML → validated `Experiment`.
//!
//! The raw structs mirror the file and keep each value's location
//! (`Spanned`), so that a semantic error such as `renew >= lease` can point
//! at the exact line and column, just as a syntax error does.

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::diagnostic::{Diagnostic, ExperimentError};
use super::faults::{MAX_SKEW_REACH, RawFaults, RawLen, skew_reach, validate_fault, validate_random};
use super::yaml_error::{misindented, saphyr_message, tab_after};
use crate::model::{
    ClockOffset, Dur, EpochJob, Expect, Experiment, InitialLock, JobStrategy, LeaseSettings, Point, Reference,
    StartMode, SubstrateSettings, WorkerSettings, setting_name,
};

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
const MAX_NAME_BYTES: usize = 200;
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
struct RawExperiment {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    /// A count, or `{until: {ci_width}, max, min}` (read by `trials_of`).
    #[serde(default)]
    trials: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    duration: Option<Spanned<Dur>>,
    workers: Spanned<i64>,
    #[serde(default)]
    lease: Option<Spanned<Dur>>,
    #[serde(default)]
    renew: Option<Spanned<Dur>>,
    #[serde(default)]
    watch: Option<Spanned<Dur>>,
    #[serde(default)]
    expiry_resolution: Option<Spanned<Dur>>,
    #[serde(default)]
    time_scale: Option<Spanned<f64>>,
    /// The durations of this file are already multiplied by this time
    /// scale (a resolved experiment.yaml says so): they are not scaled
    /// again, but the experiment keeps its scale.
    #[serde(default)]
    scaled_by: Option<Spanned<f64>>,
    #[serde(default)]
    worker: WorkerSettings,
    #[serde(default)]
    start: Option<StartMode>,
    #[serde(default)]
    stagger: Option<Spanned<Dur>>,
    #[serde(default)]
    align: Option<Spanned<Dur>>,
    #[serde(default)]
    initial_lock: Option<InitialLock>,
    /// A list, or `{random: …}`.
    #[serde(default)]
    faults: RawFaults,
    #[serde(default)]
    expect: Option<RawExpect>,
    #[serde(default)]
    grace: Option<Spanned<Dur>>,
    #[serde(default)]
    fault_budget: Option<Spanned<Dur>>,
    #[serde(default)]
    disturbance_budget: Option<Spanned<Dur>>,
    #[serde(default)]
    jobs: Option<Spanned<usize>>,
    #[serde(default)]
    reference: Option<Reference>,
    #[serde(default)]
    substrate: SubstrateSettings,
    #[serde(default)]
    program: Option<super::program::RawProgram>,
    /// setting → values (cross product), or `points:` → list of mappings.
    #[serde(default)]
    sweep: Option<std::collections::BTreeMap<String, Spanned<Vec<serde_json::Value>>>>,
    /// The sweep varies the substrate (set when the sweep is taken apart).
    #[serde(skip)]
    substrate_swept: bool,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    max_leaders: Option<usize>,
    #[serde(default)]
    gap_min: Option<Dur>,
    #[serde(default)]
    gap_max: Option<Dur>,
    #[serde(default)]
    wedged: Option<bool>,
    #[serde(default)]
    double_leader_trials: Option<usize>,
    #[serde(default)]
    disturbed: Option<usize>,
    /// Bounds on any summarised metric, by `file.column`.
    #[serde(default)]
    metrics: Option<Spanned<std::collections::BTreeMap<String, RawBound>>>,
}

/// `{max: …}`, `{min: …}`, `{rate_max: 5%}`, `{rate_min: …}`: one or more.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBound {
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    rate_max: Option<super::expect::Fraction>,
    #[serde(default)]
    rate_min: Option<super::expect::Fraction>,
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
        let exp = build(path, text, raw, overrides)?;
        too_many(&exp)?;
        return Ok(exp);
    };

    raw.substrate_swept = sweep.iter().any(|(key, values)| {
        key == "substrate" || (key == "points" && values.value.iter().any(|p| p.get("substrate").is_some()))
    });
    // A sweep: the base must be valid on its own, then every point is the
    // base with some settings replaced, validated the same way (errors point
    // at the sweep's values).
    let mut base = build(path, text, raw.clone(), overrides)?;
    // One seed for the run, drawn once: every point runs the same seeds.
    let overrides = &Overrides { seed: Some(base.seed), ..overrides.clone() };
    for settings in super::sweep::points(&sweep).map_err(|(loc, msg)| err_at(&loc, msg))? {
        let mut point_raw = raw.clone();
        let mut shown = Vec::new();
        for (key, value, loc) in &settings {
            let text_value = apply(&mut point_raw, key, value, *loc).map_err(|msg| err_at(loc, msg))?;
            shown.push((key.clone(), text_value));
        }
        let exp = build(path, text, point_raw, overrides)?;
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
fn validate_substrate(raw: &RawExperiment, text: &str) -> Result<(), (u64, u64, String)> {
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
            let (line, column) = locate(text, key);
            Err((line, column, msg))
        }
        Err(super::substrate_rules::Problem::At(line, column, msg)) => Err((line, column, msg)),
    }
}

/// Everything after parsing: defaults, scaling, validation.
fn build(path: &Path, text: &str, raw: RawExperiment, overrides: &Overrides) -> Result<Experiment, ExperimentError> {
    let at = |line: u64, column: u64, message: String| {
        ExperimentError::Invalid(Box::new(Diagnostic::new(path, text, line as usize, column as usize, message)))
    };
    let err_at = |loc: &serde_saphyr::Location, message: String| at(loc.line(), loc.column(), message);

    let scale = match (overrides.time_scale, &raw.time_scale) {
        (Some(_), Some(s)) => {
            return Err(err_at(
                &s.referenced,
                "time_scale is set here and by --time-scale: one of them must go (they would not multiply)".into(),
            ));
        }
        (Some(s), None) => s,
        (None, Some(s)) => {
            if !(s.value > 0.0 && s.value.is_finite()) {
                return Err(err_at(&s.referenced, format!("time_scale must be a positive number, not {}", s.value)));
            }
            s.value
        }
        (None, None) => 1.0,
    };
    let applied = match &raw.scaled_by {
        Some(s) if !(s.value > 0.0 && s.value.is_finite()) => {
            return Err(err_at(&s.referenced, format!("scaled_by must be a positive number, not {}", s.value)));
        }
        Some(s) => s.value,
        None => 1.0,
    };
    let sc = |d: Dur| d.scaled(scale);
    let get = |v: &Option<Spanned<Dur>>, default: Dur| v.as_ref().map_or(default, |s| s.value);

    let name = &raw.name.value;
    if name.trim().is_empty()
        || name.contains(['/', '\\', '\0'])
        || name.chars().any(char::is_control)
        || name.starts_with('.')
        || name.len() > MAX_NAME_BYTES
    {
        return Err(err_at(
            &raw.name.referenced,
            format!(
                "name {name:?} must be usable as a directory name: non-empty, at most {MAX_NAME_BYTES} bytes, \
                 no '/', no control characters, no leading '.'"
            ),
        ));
    }

    if raw.workers.value < 1 {
        return Err(err_at(&raw.workers.referenced, format!("workers must be at least 1, not {}", raw.workers.value)));
    }
    if raw.workers.value > 1000 {
        return Err(err_at(
            &raw.workers.referenced,
            format!("workers must be at most 1000, not {}", raw.workers.value),
        ));
    }
    let workers = raw.workers.value as usize;

    // --trials fixes the count, adaptive or not.
    let (file_trials, until) = match &raw.trials {
        None => (1, None),
        Some(t) => super::trials::trials_of(&t.value).map_err(|m| err_at(&t.referenced, m))?,
    };
    let until = until.filter(|_| overrides.trials.is_none());
    let trials = overrides.trials.unwrap_or(file_trials);
    if trials == 0 {
        let msg = "trials must be at least 1".to_string();
        return Err(match &raw.trials {
            Some(t) if overrides.trials.is_none() => err_at(&t.referenced, msg),
            _ => at(0, 0, format!("--trials: {msg}")),
        });
    }

    let blog = LeaseSettings::default();
    let lease = get(&raw.lease, blog.lease);
    let renew = get(&raw.renew, blog.renew);
    let watch = get(&raw.watch, blog.watch);
    let resolution = get(&raw.expiry_resolution, blog.resolution);
    let duration = get(&raw.duration, Dur::from_secs(30));
    for (name, value, span) in [
        ("lease", lease, &raw.lease),
        ("renew", renew, &raw.renew),
        ("watch", watch, &raw.watch),
        ("expiry_resolution", resolution, &raw.expiry_resolution),
        ("duration", duration, &raw.duration),
    ] {
        if value == Dur::ZERO {
            let loc = span.as_ref().map(|s| s.referenced);
            let msg = format!("{name} must be longer than zero");
            return Err(loc.map_or_else(|| at(0, 0, msg.clone()), |l| err_at(&l, msg.clone())));
        }
    }
    if renew >= lease {
        // Point at renew if it was written, else at lease.
        let loc = raw.renew.as_ref().or(raw.lease.as_ref()).map(|s| s.referenced);
        let msg = format!("renew ({renew}) must be shorter than lease ({lease}): a leader could never renew in time");
        return Err(loc.map_or_else(|| at(0, 0, msg.clone()), |l| err_at(&l, msg.clone())));
    }

    let start = raw.start.unwrap_or(StartMode::Barrier);
    let stagger = get(&raw.stagger, Dur::ZERO);
    if let (StartMode::Barrier, Some(s)) = (start, &raw.stagger)
        && s.value != Dur::ZERO
    {
        return Err(err_at(&s.referenced, "stagger needs `start: staggered` or `start: random`".into()));
    }
    if start == StartMode::Random && stagger == Dur::ZERO {
        let msg = "start: random needs a stagger: the window each worker's start is drawn from".to_string();
        let (line, column) = locate(text, "start");
        return Err(at(line, column, msg));
    }

    if let Some(a) = &raw.align
        && a.value >= resolution
    {
        return Err(err_at(
            &a.referenced,
            format!("align ({}) must be shorter than the expiry resolution ({resolution})", a.value),
        ));
    }
    if let Some(bad) = raw.worker.failpoint_workers.iter().flatten().find(|&&w| w >= workers) {
        // WorkerSettings carries no spans: find the key in the text.
        let (line, column) = locate(text, "failpoint_workers");
        return Err(at(
            line,
            column,
            format!("failpoint_workers: worker {bad} is out of range (this experiment has workers 0..{})", workers - 1),
        ));
    }
    let offsets = raw.worker.clock_offset.all();
    let offset_problem = match &raw.worker.clock_offset {
        ClockOffset::PerWorker(v) if v.len() != workers => {
            Some(format!("a list gives one offset per worker: {} for {workers} workers", v.len()))
        }
        _ => offsets
            .iter()
            .find(|o| o.as_ns().unsigned_abs() > 86_400_000_000_000)
            .map(|o| format!("{o} is more than a day off; at most 1440m either way")),
    };
    if let Some(p) = offset_problem {
        let (line, column) = locate(text, "clock_offset");
        return Err(at(line, column, format!("clock_offset: {p}")));
    }
    let rates = raw.worker.clock_rate.all();
    let rate_problem = match &raw.worker.clock_rate {
        crate::model::ClockRate::PerWorker(v) if v.len() != workers => {
            Some(format!("a list gives one rate per worker: {} for {workers} workers", v.len()))
        }
        _ => rates
            .iter()
            .find(|r| !(0.5..=2.0).contains(*r))
            .map(|r| format!("{r} is out of range: a clock runs at a rate between 0.5 and 2")),
    };
    if let Some(p) = rate_problem {
        let (line, column) = locate(text, "clock_rate");
        return Err(at(line, column, format!("clock_rate: {p}")));
    }
    if raw.worker.request_timeout == Some(Dur::ZERO) {
        let (line, column) = locate(text, "request_timeout");
        return Err(at(line, column, "request_timeout must be longer than zero".into()));
    }
    if raw.worker.belief_margin >= lease {
        let (line, column) = locate(text, "belief_margin");
        return Err(at(
            line,
            column,
            format!("belief_margin ({}) must be shorter than the lease ({lease})", raw.worker.belief_margin),
        ));
    }
    if raw.worker.resource != crate::model::Resource::None && !raw.worker.fencing_tokens {
        let (line, column) = locate(text, "resource");
        return Err(at(
            line,
            column,
            "resource: the leader's writes carry fencing tokens: set fencing_tokens: true".into(),
        ));
    }
    if let Some(job) = &raw.worker.epoch_job {
        let (line, column) = locate(text, "epoch_job");
        let problem = if job.epoch == Dur::ZERO || job.duration == Dur::ZERO {
            Some("epoch and duration must be longer than zero".to_string())
        } else if job.duration >= job.epoch {
            Some(format!("the job ({}) must be shorter than its epoch ({})", job.duration, job.epoch))
        } else if Dur::from_us(renew.as_us() + job.duration.as_us()) >= lease {
            // One thread does the job and the renewals: a job this long would
            // cost its own leader the lease, with no fault at all.
            Some(format!(
                "renew ({renew}) + job duration ({}) must be shorter than lease ({lease}): the leader renews only between jobs",
                job.duration
            ))
        } else if job.strategy == JobStrategy::Fencing && !raw.worker.fencing_tokens {
            Some("strategy fencing needs fencing_tokens: true".to_string())
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(at(line, column, format!("epoch_job: {p}")));
        }
    }
    validate_substrate(&raw, text).map_err(|(line, column, msg)| at(line, column, msg))?;
    let program = match &raw.program {
        None => None,
        Some(p) => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            let program = p
                .validate(dir.display().to_string(), !overrides.recorded)
                .map_err(|(line, column, msg)| at(line, column, msg))?;
            // The clock is the machine's, not the worker's: it moves a
            // program's too (through the clock shim).
            let clockless = WorkerSettings {
                clock_offset: WorkerSettings::default().clock_offset,
                clock_rate: WorkerSettings::default().clock_rate,
                ..raw.worker.clone()
            };
            if clockless != WorkerSettings::default() {
                let (line, column) = locate(text, "worker");
                return Err(at(
                    line,
                    column,
                    "worker: settings belong to the built-in worker, not to a program \
                     (but clock_offset and clock_rate move a program's clock too)"
                        .into(),
                ));
            }
            Some(program)
        }
    };
    let mut faults = Vec::with_capacity(raw.faults.list.len());
    for f in &raw.faults.list {
        faults.push(validate_fault(f, workers, duration, &err_at)?);
    }
    let random = raw.faults.random.as_ref().map(|r| validate_random(r, workers, duration, &err_at)).transpose()?;

    if let Some(e) = &raw.expect
        && let (Some(min), Some(max)) = (e.gap_min, e.gap_max)
        && min > max
    {
        let (line, column) = locate(text, "gap_min");
        return Err(at(
            line,
            column,
            format!("expect: gap_min ({min}) is more than gap_max ({max}); no gap could pass"),
        ));
    }
    if let Some(s) = &raw.stagger {
        // Random starts fall inside one stagger; staggered ones one per worker.
        let later = if start == StartMode::Random { 1 } else { workers as u64 - 1 };
        let last = s.value.as_us().checked_mul(later).map(Dur::from_us);
        if last.is_none_or(|last| last >= duration) {
            return Err(err_at(
                &s.referenced,
                format!(
                    "stagger {} × {} later workers does not start them all before the trial ends (duration: {duration})",
                    s.value, later
                ),
            ));
        }
    }
    let metrics = match raw.expect.as_ref().and_then(|e| e.metrics.as_ref()) {
        Some(m) => {
            let bounds = m.value.iter().map(|(k, b)| (k.as_str(), [b.max, b.min], [b.rate_max, b.rate_min]));
            super::expect::bounds(bounds).map_err(|msg| err_at(&m.referenced, msg))?
        }
        None => Vec::new(),
    };
    let expect = raw.expect.map_or_else(Expect::default, |e| Expect {
        max_leaders: e.max_leaders,
        gap_min: e.gap_min.map(sc),
        gap_max: e.gap_max.map(sc),
        wedged: e.wedged,
        double_leader_trials: e.double_leader_trials,
        disturbed: e.disturbed,
        metrics,
    });

    let jobs = overrides.jobs.unwrap_or_else(|| raw.jobs.as_ref().map_or(1, |j| j.value));
    if jobs == 0 || jobs > 64 {
        let msg = format!("jobs must be between 1 and 64, not {jobs}");
        return Err(match &raw.jobs {
            Some(j) if overrides.jobs.is_none() => err_at(&j.referenced, msg),
            _ => at(0, 0, format!("--jobs: {msg}")),
        });
    }
    let jobs = overrides.max_jobs.map_or(jobs, |most| jobs.min(most));

    let seed_drawn = overrides.seed.or(raw.seed).is_none();
    let seed = overrides.seed.or(raw.seed).unwrap_or_else(rand::random);

    // The checks above are on the written values. These bound what the run
    // will do, after scaling: fixed floors and ceilings, so that accepted
    // input cannot make the harness spin, flood the disk or never end.
    let flag = if overrides.time_scale.is_some() { "--time-scale" } else { "time_scale" };
    let scaled_note = |d: Dur| if scale == 1.0 { String::new() } else { format!(" ({d} × {flag} {scale})") };
    let place = |span: Option<&serde_saphyr::Location>, msg: String| match (span, &raw.time_scale) {
        (Some(l), _) => err_at(l, msg),
        (None, Some(s)) if overrides.time_scale.is_none() => err_at(&s.referenced, msg),
        (None, _) => at(0, 0, msg),
    };
    for (name, value, span) in
        [("lease", lease, &raw.lease), ("renew", renew, &raw.renew), ("watch", watch, &raw.watch)]
    {
        if sc(value) < MIN_INTERVAL {
            let msg = format!("{name} is {}{}; at least {MIN_INTERVAL}", sc(value), scaled_note(value));
            return Err(place(span.as_ref().map(|s| &s.referenced), msg));
        }
    }
    let job = raw.worker.epoch_job.map_or([Dur::from_secs(1); 2], |j| [j.epoch, j.duration]);
    if [resolution, duration].iter().chain(&job).any(|d| sc(*d) == Dur::ZERO) {
        return Err(place(None, format!("{flag} {scale} makes a duration round to zero")));
    }
    if sc(renew) >= sc(lease) {
        return Err(place(None, format!("{flag} {scale} makes renew no longer shorter than lease")));
    }
    if let Some(unit) = raw.substrate.kind.ttl_unit()
        && (sc(lease) < unit || sc(lease).as_ns() % unit.as_ns() != 0)
    {
        let msg = format!(
            "the {} substrate's lease TTLs are whole multiples of {unit}; lease is {}{}: \
             choose a lease (or a time scale) that makes it one",
            setting_name(&raw.substrate.kind),
            sc(lease),
            scaled_note(lease)
        );
        return Err(place(raw.lease.as_ref().map(|s| &s.referenced), msg));
    }
    let offset_us = offsets.iter().map(|o| u128::from(o.as_us().unsigned_abs())).max().unwrap_or(0);
    let reach_us = (skew_reach(&faults, random.as_ref(), duration) + offset_us) as f64 * scale;
    if reach_us > MAX_SKEW_REACH.as_us() as f64 {
        let first_by = raw
            .faults
            .list
            .iter()
            .find_map(|f| f.by.as_ref())
            .or_else(|| raw.faults.random.as_ref().and_then(|r| r.kinds.value.iter().find_map(|k| k.by.as_ref())));
        let msg = format!(
            "the skews (each as often as it can fire) and clock_offset could move a worker's clock by {}; \
             at most {MAX_SKEW_REACH} in a trial",
            Dur::from_us(reach_us.min(u64::MAX as f64) as u64)
        );
        return Err(place(first_by.map(|b| &b.referenced), msg));
    }
    if sc(duration) > MAX_DURATION {
        let msg = format!("a trial would last {}{}; at most {MAX_DURATION}", sc(duration), scaled_note(duration));
        return Err(place(raw.duration.as_ref().map(|s| &s.referenced), msg));
    }
    let mut deliveries: u64 = 0;
    for (f, fault) in raw.faults.list.iter().zip(&faults) {
        deliveries += fault.firings(duration);
        let Some(every) = &f.every else { continue };
        if sc(every.value) < MIN_INTERVAL {
            let msg = format!(
                "every is {}{}; a fault repeats at most once a {MIN_INTERVAL}",
                sc(every.value),
                scaled_note(every.value)
            );
            return Err(err_at(&every.referenced, msg));
        }
        if deliveries > MAX_DELIVERIES {
            let msg = format!("the faults would fire more than {MAX_DELIVERIES} times in a {duration} trial");
            return Err(err_at(&every.referenced, msg));
        }
    }
    if let Some(g) = raw.grace.as_ref().filter(|g| g.value < MIN_GRACE) {
        let msg = format!(
            "grace is {}; at least {MIN_GRACE} (the real time workers get to stop after SIGTERM, which no time scale \
             shortens)",
            g.value
        );
        return Err(err_at(&g.referenced, msg));
    }
    // A scaled grace keeps the floor: a worker's exit does not speed up.
    let grace = raw.grace.as_ref().map_or(Dur::from_secs(2), |g| g.value);
    let grace = sc(grace).max(MIN_GRACE);
    if grace > MAX_GRACE {
        let msg = format!("grace is {grace}; at most {MAX_GRACE} (workers still running then are killed)");
        return Err(place(raw.grace.as_ref().map(|g| &g.referenced), msg));
    }

    Ok(Experiment {
        name: raw.name.value,
        description: raw.description.trim().to_string(),
        source: path.to_path_buf(),
        trials,
        until,
        seed,
        seed_drawn,
        duration: sc(duration),
        workers,
        lease: LeaseSettings { lease: sc(lease), renew: sc(renew), watch: sc(watch), resolution: sc(resolution) },
        worker: WorkerSettings {
            failpoint_delay: sc(raw.worker.failpoint_delay),
            clock_offset: raw.worker.clock_offset.scaled(scale),
            request_timeout: raw.worker.request_timeout.map(sc),
            belief_margin: sc(raw.worker.belief_margin),
            epoch_job: raw.worker.epoch_job.map(|j| EpochJob { epoch: sc(j.epoch), duration: sc(j.duration), ..j }),
            ..raw.worker.clone()
        },
        start,
        stagger: sc(stagger),
        align: raw.align.map(|a| sc(a.value)),
        initial_lock: raw.initial_lock.unwrap_or(InitialLock::None),
        faults: faults.iter().map(|f| f.scaled(scale)).collect(),
        random: random.map(|r| r.scaled(scale)),
        expect,
        time_scale: scale * applied,
        grace,
        jobs,
        fault_budget: raw.fault_budget.as_ref().map(|b| sc(b.value)),
        disturbance_budget: raw.disturbance_budget.as_ref().map(|b| sc(b.value)),
        substrate: SubstrateSettings { failover_after: raw.substrate.failover_after.map(sc), ..raw.substrate.clone() },
        program,
        reference: raw.reference,
        points: Vec::new(),
    })
}

/// 1-based line and column of the first occurrence of `key:` (0, 0 if absent).
fn locate(text: &str, key: &str) -> (u64, u64) {
    let needle = format!("{key}:");
    text.lines().enumerate().find_map(|(i, l)| l.find(&needle).map(|c| (i as u64 + 1, c as u64 + 1))).unwrap_or((0, 0))
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
