//! Sweep expansion: `sweep:` maps settings to lists of values and runs
//! their cross product; the key `points:` holds a list of mappings for
//! settings that must move together (renew = lease / 3).

use std::collections::BTreeMap;

use serde_json::Value;
use serde_saphyr::{Location, Spanned};

/// Settings of the experiment itself that a sweep can vary.
const EXPERIMENT_KEYS: [&str; 7] = ["substrate", "lease", "renew", "watch", "duration", "expiry_resolution", "workers"];
/// A fault's settings a sweep can vary (`pause` sets every pause's length).
const FAULT_KEYS: [&str; 4] = ["pause", "fault.N.at", "fault.N.duration", "fault.N.jitter (or .delay)"];

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
    match serde_json::to_value(crate::model::WorkerSettings::default()) {
        Ok(Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// `expiry` or `worker.expiry` → "expiry", for a setting of the built-in worker.
pub fn worker_key(key: &str) -> Option<String> {
    let name = key.strip_prefix("worker.").unwrap_or(key);
    worker_fields().into_iter().find(|f| f == name)
}

pub fn is_duration(key: &str) -> bool {
    matches!(key, "lease" | "renew" | "watch" | "duration" | "expiry_resolution" | "pause") || fault_key(key).is_some()
}

/// `fault.2.at` → (2, "at").
pub fn fault_key(key: &str) -> Option<(usize, &str)> {
    let rest = key.strip_prefix("fault.")?;
    let (index, field) = rest.split_once('.')?;
    let index = index.parse().ok()?;
    matches!(field, "at" | "duration" | "jitter" | "delay").then_some((index, field))
}

/// One point: (setting, value, where the value was written).
pub type Settings = Vec<(String, Value, Location)>;

/// The cross product of every axis, in file order of values and key order
/// of axes. `points:` is one axis whose values are whole mappings.
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
    if product.len() > 10_000 {
        let loc = sweep.values().next().map_or(Location::UNKNOWN, |v| v.referenced);
        return Err((loc, format!("sweep has {} points; at most 10000", product.len())));
    }
    Ok(product)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::experiment::{Overrides, load_str};
    use crate::model::Dur;

    #[test]
    fn a_cross_product_with_coupled_points() {
        let text = "name: s\nworkers: 3\nfaults:\n  - at: 5s\n    target: leader\n    action: pause\n    duration: 1s\nsweep:\n  points:\n    - {lease: 3s, renew: 1s, watch: 1s}\n    - {lease: 9s, renew: 3s, watch: 3s}\n  pause: [0.5s, 2s]\n";
        let o = Overrides { time_scale: Some(0.1), ..Overrides::default() };
        let e = load_str(Path::new("s.yaml"), text, &o).unwrap();
        assert_eq!(e.points.len(), 4);
        let labels: Vec<String> = e.points.iter().map(|p| p.label()).collect();
        assert_eq!(labels[0], "pause=50ms lease=300ms renew=100ms watch=100ms");
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
    }
}
