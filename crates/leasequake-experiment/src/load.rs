//! YAML → validated `Experiment`: the file parsed into its raw structs
//! (`raw.rs`), a sweep taken apart into points, each built (`build.rs`).

use std::path::Path;

use serde_saphyr::Spanned;

use super::build::build;
use super::diagnostic::{Diagnostic, ExperimentError};
use super::faults::RawLen;
use super::raw::{Overrides, RawExperiment};
use super::yaml_error::explain;
use crate::model::summary_metrics::Features;
use crate::model::{Dur, Experiment, Point};

/// The most trials one run may have (trials × sweep points).
pub const MAX_TRIALS: u64 = 1_000_000;
/// An experiment file larger than this is not one.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

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
        let msg =
            "the file holds no settings: an experiment is a YAML mapping of settings, `name:` and `workers:` at least";
        return Err(at(1, 1, msg.to_string()));
    }
    let mut raw: RawExperiment = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column, message) = explain(text, &e);
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
    // A bound on a file the run never writes could only fail after every
    // trial ran: refused here, at its key.
    let metrics_at = raw.expect.as_ref().and_then(|e| e.metrics.as_ref()).map(|m| m.referenced);
    let unwritten = |exp: &Experiment| {
        let features = Features::of(exp);
        exp.expect.metrics.iter().try_for_each(|b| match features.why_not_written(b.metric.file) {
            None => Ok(()),
            Some(why) => {
                let key = b.metric.key();
                let (line, column) = super::build::metric_place(text, &key, metrics_at);
                Err(at(
                    line,
                    column,
                    format!("expect.metrics.{key}: this experiment writes no {}: {why}", b.metric.file_name()),
                ))
            }
        })
    };
    let Some(sweep) = raw.sweep.take() else {
        let exp = build(path, text, raw, overrides)?;
        too_many(&exp)?;
        unwritten(&exp)?;
        return Ok(exp);
    };

    if let Some(w) = &raw.window {
        return Err(err_at(
            &w.referenced,
            "window keeps one long trial in windows, and a sweep runs many: drop one".into(),
        ));
    }
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
    unwritten(&base)?;
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

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
