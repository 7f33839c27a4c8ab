//! Sweep expansion: `sweep:` maps settings to lists of values and runs
//! their cross product; the key `points:` holds a list of mappings for
//! settings that must move together (renew = lease / 3).

use std::collections::BTreeMap;

use serde_json::Value;
use serde_saphyr::{Location, Spanned};

use crate::model::{Experiment, WorkerSettings, setting_name};

/// Settings of the experiment itself that a sweep can vary.
const EXPERIMENT_KEYS: [&str; 8] =
    ["substrate", "lease", "renew", "watch", "duration", "expiry_resolution", "workers", "stagger"];
/// A fault's settings a sweep can vary (`pause` sets every pause's length;
/// `fault` keeps only the faults of one action, so that one experiment
/// puts its program under each fault in turn).
const FAULT_KEYS: [&str; 6] = [
    "fault",
    "pause",
    "fault.N.at",
    "fault.N.duration",
    "fault.N.jitter (or .delay)",
    "fault.N.latency (or .latency_jitter)",
];

/// Every setting a sweep can vary: the experiment's, every setting of the
/// built-in worker (by its name in `worker:`, or `worker.NAME`), the faults'.
pub fn keys() -> Vec<String> {
    let worker = worker_fields();
    EXPERIMENT_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(worker)
        .chain(FAULT_KEYS.iter().map(|k| k.to_string()))
        .collect()
}

/// The names of the built-in worker's settings, as its type writes them.
fn worker_fields() -> Vec<String> {
    worker_defaults().map(|map| map.keys().cloned().collect()).unwrap_or_default()
}

fn worker_defaults() -> Option<serde_json::Map<String, Value>> {
    match serde_json::to_value(WorkerSettings::default()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// `expiry` or `worker.expiry` → "expiry", for a setting of the built-in worker.
pub fn worker_key(key: &str) -> Option<String> {
    let name = key.strip_prefix("worker.").unwrap_or(key);
    worker_fields().into_iter().find(|f| f == name)
}

/// Is this swept setting a duration (scaled by the time scale)? The
/// worker's are those its declaration calls spans of time.
pub fn is_duration(key: &str) -> bool {
    let worker_time = || {
        let path = format!("worker.{}", worker_key(key)?);
        WorkerSettings::docs().into_iter().find(|d| d.path == path).map(|d| d.ty.is_time())
    };
    matches!(key, "lease" | "renew" | "watch" | "duration" | "expiry_resolution" | "pause" | "stagger")
        || fault_key(key).is_some()
        || worker_time().unwrap_or(false)
}

/// A swept setting's value as the point runs it (durations scaled), as
/// written in an experiment file: what a point's label shows and what the
/// resolved experiment.yaml holds.
pub fn as_run(exp: &Experiment, key: &str) -> Option<String> {
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    Some(match key {
        "lease" => exp.lease.lease.to_string(),
        "renew" => exp.lease.renew.to_string(),
        "watch" => exp.lease.watch.to_string(),
        "expiry_resolution" => exp.lease.resolution.to_string(),
        "duration" => exp.duration.to_string(),
        "workers" => exp.workers.to_string(),
        "stagger" => exp.stagger.to_string(),
        "substrate" => setting_name(&exp.substrate.kind),
        "pause" => exp.faults.iter().find(|f| f.action.is_pause())?.duration.as_ref()?.to_yaml(),
        "fault" => exp.faults.first()?.action.name().to_string(),
        _ => match (worker_key(key), fault_key(key)) {
            (Some(field), _) => text(serde_json::to_value(&exp.worker).ok()?.get(&field)?.clone()),
            (None, Some((i, field))) => {
                let f = exp.faults.get(i)?;
                match field {
                    "at" => f.at.to_string(),
                    "jitter" => f.jitter.to_string(),
                    "delay" => f.after?.delay.to_string(),
                    "latency" => f.net?.latency.to_string(),
                    "latency_jitter" => f.net?.jitter.to_string(),
                    _ => f.duration.as_ref()?.to_yaml(),
                }
            }
            (None, None) => return None,
        },
    })
}

/// A swept value in the experiment's own time (`lease=150ms` at 0.1 →
/// `1500ms`).
pub fn own_value(key: &str, value: &str, scale: f64) -> String {
    if is_duration(key)
        && let Ok(d) = crate::model::Dur::parse(value)
    {
        return d.scaled(1.0 / scale).to_string();
    }
    value.to_string()
}

/// A point's label (`Point::label`, as run) in the experiment's own time.
pub fn own_label(label: &str, scale: f64) -> String {
    let pair = |kv: &str| match kv.split_once('=') {
        Some((k, v)) => format!("{k}={}", own_value(k, v, scale)),
        None => kv.to_string(),
    };
    label.split(' ').map(pair).collect::<Vec<_>>().join(" ")
}

/// `fault.2.at` → (2, "at").
pub fn fault_key(key: &str) -> Option<(usize, &str)> {
    let rest = key.strip_prefix("fault.")?;
    let (index, field) = rest.split_once('.')?;
    let index = index.parse().ok()?;
    matches!(field, "at" | "duration" | "jitter" | "delay" | "latency" | "latency_jitter").then_some((index, field))
}

/// One point: (setting, value, where the value was written).
pub type Settings = Vec<(String, Value, Location)>;

/// The most points a sweep may have.
pub const MAX_POINTS: usize = 10_000;

/// The cross product of every axis, in file order of values and key order
/// of axes. `points:` is one axis whose values are whole mappings. Within a
/// point the settings are in key order, whichever axis set them: a run's
/// resolved file writes each point as one mapping (its keys sorted), and
/// `check` must name the points as the run did.
pub fn points(sweep: &BTreeMap<String, Spanned<Vec<Value>>>) -> Result<Vec<Settings>, (Location, String)> {
    let mut axes: Vec<Vec<Settings>> = Vec::new();
    for (key, values) in sweep {
        let loc = values.referenced;
        if values.value.is_empty() {
            return Err((loc, format!("sweep {key}: needs at least one value")));
        }
        let axis = if key == "points" {
            values
                .value
                .iter()
                .map(|v| match v {
                    Value::Object(map) => Ok(map.iter().map(|(k, v)| (k.clone(), v.clone(), loc)).collect()),
                    _ => Err((loc, "sweep points: each point is a mapping, e.g. {lease: 3s, renew: 1s}".to_string())),
                })
                .collect::<Result<Vec<Settings>, _>>()?
        } else {
            values.value.iter().map(|v| vec![(key.clone(), v.clone(), loc)]).collect()
        };
        axes.push(axis);
    }
    // Counted before it is built: a product too large to hold is refused,
    // not attempted.
    let count = axes.iter().try_fold(1usize, |n, axis| n.checked_mul(axis.len())).filter(|&n| n <= MAX_POINTS);
    if count.is_none() {
        let loc = sweep.values().next().map_or(Location::UNKNOWN, |v| v.referenced);
        let shown = axes.iter().map(|a| a.len().to_string()).collect::<Vec<_>>().join(" × ");
        return Err((loc, format!("sweep has {shown} points; at most {MAX_POINTS}")));
    }
    let mut product: Vec<Settings> = vec![Vec::new()];
    for axis in axes {
        product = product
            .iter()
            .flat_map(|prefix| {
                axis.iter().map(move |s| {
                    let mut p = prefix.clone();
                    p.extend(s.iter().cloned());
                    p
                })
            })
            .collect();
    }
    for point in &mut product {
        point.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = point.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            let (key, _, loc) = &pair[1];
            return Err((
                *loc,
                format!("sweep sets {key} twice in one point (once in `points:`, once as its own axis)"),
            ));
        }
    }
    Ok(product)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{own_label, own_value};
    use crate::model::Dur;
    use crate::{Overrides, load_str};

    #[test]
    fn swept_durations_are_shown_in_the_experiments_own_time() {
        assert_eq!(own_value("lease", "150ms", 0.1), "1500ms");
        assert_eq!(own_value("fault.1.at", "1200ms", 0.1), "12s");
        assert_eq!(own_value("workers", "3", 0.1), "3");
        assert_eq!(own_label("pause=50ms lease=150ms workers=3", 0.1), "pause=500ms lease=1500ms workers=3");
    }

    #[test]
    fn a_fault_axis_runs_each_action_of_the_schedule_alone() {
        let text = "name: s\nworkers: 3\nfaults:\n  - {at: 5s, target: leader, action: kill}\n  - {at: 5s, target: leader, action: pause, duration: 12s}\n  - {at: 6s, target: leader, action: pause, duration: 1s}\nsweep:\n  fault: [kill, pause]\n  fault.0.at: [4s]\n";
        let e = load_str(Path::new("s.yaml"), text, &Overrides::default()).unwrap();
        let actions: Vec<Vec<&str>> =
            e.points.iter().map(|p| p.exp.faults.iter().map(|f| f.action.name()).collect()).collect();
        assert_eq!(actions, vec![vec!["kill"], vec!["pause", "pause"]]);
        assert_eq!(e.points[1].label(), "fault=pause fault.0.at=4s");
        // `fault.N` counts the point's own faults.
        assert_eq!(e.points[1].exp.faults[0].at, Dur::from_secs(4));
        let missing = text.replace("[kill, pause]", "[kill, term]");
        let err = load_str(Path::new("s.yaml"), &missing, &Overrides::default()).unwrap_err().to_string();
        assert!(err.contains("no fault of the schedule is a term (it has kill, pause)"), "{err}");
    }

    #[test]
    fn a_cross_product_with_coupled_points() {
        let text = "name: s\nworkers: 3\nfaults:\n  - at: 5s\n    target: leader\n    action: pause\n    duration: 1s\nsweep:\n  points:\n    - {lease: 3s, renew: 1s, watch: 1s}\n    - {lease: 9s, renew: 3s, watch: 3s}\n  pause: [0.5s, 2s]\n";
        let o = Overrides { time_scale: Some(0.1), ..Overrides::default() };
        let e = load_str(Path::new("s.yaml"), text, &o).unwrap();
        assert_eq!(e.points.len(), 4);
        let labels: Vec<String> = e.points.iter().map(|p| p.label()).collect();
        // Named in key order, as the resolved file's one `points:` axis names them.
        assert_eq!(labels[0], "lease=300ms pause=50ms renew=100ms watch=100ms");
        assert_eq!(e.points[3].exp.lease.lease, Dur::from_ms(900));
        assert_eq!(e.points[3].exp.faults[0].duration, Some(crate::model::PauseLen::Fixed(Dur::from_ms(200))));
    }

    #[test]
    fn each_point_is_validated_where_its_value_is_written() {
        let text = "name: s\nworkers: 3\nsweep:\n  renew: [1s, 9s]\n";
        let err = load_str(Path::new("s.yaml"), text, &Overrides::default()).unwrap_err().to_string();
        assert!(err.starts_with("s.yaml:4:10: renew (9s) must be shorter than lease (9s)"), "{err}");
        let text = "name: s\nworkers: 3\nsweep:\n  leese: [1s]\n";
        let err = load_str(Path::new("s.yaml"), text, &Overrides::default()).unwrap_err().to_string();
        assert!(err.contains("unknown sweep setting \"leese\""), "{err}");
        let text = "name: s\nworkers: 3\nsweep:\n  lease: [9s]\n  points:\n    - {lease: 6s, renew: 2s}\n";
        let err = load_str(Path::new("s.yaml"), text, &Overrides::default()).unwrap_err().to_string();
        assert!(err.starts_with("s.yaml:6:5: sweep sets lease twice in one point"), "{err}");
    }
}
