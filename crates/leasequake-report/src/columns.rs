//! What the columns of a results directory are: the header of a row type,
//! the settings every row carries, and the columns a sweep adds.

use serde::Serialize;

use super::rows::SettingColumns;
use crate::model::{Experiment, setting_name};

/// The column names of a row type, as serde writes them.
pub fn header_of<T: Serialize + Default>() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(T::default()).expect("a default row serialises");
    let bytes = w.into_inner().expect("writing to memory");
    let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(bytes.as_slice());
    let first = r.records().next().and_then(Result::ok).unwrap_or_default();
    first.iter().map(str::to_string).collect()
}

/// The settings a sweep varies beyond those every row carries: their
/// column names (durations in ms) and each unit's values.
pub struct Swept {
    pub names: Vec<String>,
    keys: Vec<String>,
}

/// The column of a swept setting: its name (a worker setting's without
/// `worker.`), dots as underscores, `_ms` for a duration.
fn column_of(key: &str) -> String {
    let name = key.strip_prefix("worker.").unwrap_or(key).replace('.', "_");
    // The one setting whose column is named apart from its key.
    let name = if name == "expiry_resolution" { "resolution".to_string() } else { name };
    if crate::experiment::is_duration_setting(key) { format!("{name}_ms") } else { name }
}

impl Swept {
    pub fn of(exp: &Experiment) -> Swept {
        // Settings every trials.csv and summary.csv row carries anyway.
        let carried = header_of::<SettingColumns>();
        let mut keys: Vec<String> = Vec::new();
        for p in &exp.points {
            for (k, _) in &p.settings {
                if !carried.contains(&column_of(k)) && !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        Swept { names: keys.iter().map(|k| column_of(k)).collect(), keys }
    }

    /// The swept values of the point labelled `label` (empty where none is).
    pub fn values(&self, exp: &Experiment, label: &str) -> Vec<String> {
        let point = exp.points.iter().find(|p| p.label() == label);
        self.keys
            .iter()
            .map(|k| {
                let v = point.and_then(|p| p.settings.iter().find(|(key, _)| key == k)).map(|(_, v)| v.as_str());
                match (v, crate::model::Offset::parse(v.unwrap_or_default())) {
                    (Some(_), Ok(d)) if crate::experiment::is_duration_setting(k) => {
                        (d.as_ns() as f64 / 1e6).to_string()
                    }
                    (Some(v), _) => v.to_string(),
                    (None, _) => String::new(),
                }
            })
            .collect()
    }
}

/// The settings columns of a unit.
pub fn settings(exp: &Experiment) -> SettingColumns {
    SettingColumns {
        time_scale: exp.time_scale,
        workers: exp.workers,
        substrate: setting_name(&exp.substrate.kind),
        lease_ms: exp.lease.lease.as_ms_f64(),
        renew_ms: exp.lease.renew.as_ms_f64(),
        watch_ms: exp.lease.watch.as_ms_f64(),
        resolution_ms: exp.lease.resolution.as_ms_f64(),
        // A program is not the built-in worker: only its expiry is known.
        acquire: if exp.program.is_some() { String::new() } else { setting_name(&exp.worker.acquire) },
        expiry: match &exp.program {
            Some(p) => setting_name(&p.expiry),
            None => setting_name(&exp.worker.expiry),
        },
        unreadable: if exp.program.is_some() { String::new() } else { setting_name(&exp.worker.unreadable) },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_sweep_adds_a_column_for_each_setting_rows_do_not_carry() {
        let text = "name: s\nworkers: 3\nfaults:\n  - at: 5s\n    target: leader\n    action: pause\n    duration: 1s\n\
                    sweep:\n  pause: [2s]\n  release_on_term: [true, false]\n  lease: [9s]\n";
        let o = crate::experiment::Overrides { time_scale: Some(0.1), ..Default::default() };
        let exp = crate::experiment::load_str(Path::new("s.yaml"), text, &o).unwrap();
        let swept = Swept::of(&exp);
        assert_eq!(swept.names, ["pause_ms", "release_on_term"], "lease is carried by every row anyway");
        let label = exp.points[1].label();
        assert_eq!(label, "lease=900ms pause=200ms release_on_term=false", "as it ran");
        assert_eq!(swept.values(&exp, &label), ["200", "false"], "{label}: scaled ms, as it ran");
        assert_eq!(swept.values(&exp, "not a point"), ["", ""]);
        // The resolved file holds the same points, and the same values.
        let again = crate::experiment::load_str(
            Path::new("s.yaml"),
            &crate::experiment::to_yaml(&exp),
            &crate::experiment::Overrides::default(),
        )
        .unwrap();
        // The resolved file fixes the seed that was drawn.
        assert_eq!(again, crate::model::Experiment { seed_drawn: false, ..exp });
    }
}
