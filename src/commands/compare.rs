//! `leasequake compare A B`: two runs, or two points of one sweep, metric
//! by metric (report/two_runs.rs), with the settings that differ. Only
//! reads: each directory is held for reading while its history is checked.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::inputs::{same_format, unit_metrics};
use crate::cli::CompareArgs;
use crate::error::Error;
use crate::experiment::{load_record, to_yaml};
use crate::model::Experiment;
use crate::report::two_runs::{ALPHA, Row, compare as compare_metrics, metrics};

/// One side as read: where, which point, its settings and its metrics.
struct Side {
    dir: PathBuf,
    point: Option<String>,
    exp: Experiment,
    trials: usize,
    /// Trials the machine disturbed, and of them those left out of the
    /// metrics (none when every trial was).
    disturbed: usize,
    left_out: usize,
    metrics: Vec<crate::report::two_runs::Metric>,
}

#[derive(Serialize)]
struct SideJson<'a> {
    dir: String,
    point: Option<&'a str>,
    trials: usize,
    /// Trials the machine disturbed; those left out of the metrics (all of
    /// them, unless every trial was).
    disturbed: usize,
    disturbed_left_out: usize,
    time_scale: f64,
}

#[derive(Serialize)]
struct Json<'a> {
    a: SideJson<'a>,
    b: SideJson<'a>,
    /// Settings whose resolved lines differ: (setting, A's, B's).
    settings_differ: Vec<(String, String, String)>,
    alpha: f64,
    metrics: &'a [Row],
}

pub fn compare(args: &CompareArgs) -> Result<(), Error> {
    let a = side(&args.a, "A")?;
    let b = side(&args.b, "B")?;
    let rows = compare_metrics(&a.metrics, &b.metrics);
    if rows.is_empty() {
        return Err(Error::Conflict(format!(
            "compare: {} and {} share no metric (A has {}; B has {})",
            args.a,
            args.b,
            names(&a),
            names(&b)
        )));
    }
    let differ = settings_differ(&a.exp, &b.exp);
    if args.json {
        let side_json = |s: &'_ Side| SideJson {
            dir: s.dir.display().to_string(),
            point: None,
            trials: s.trials,
            disturbed: s.disturbed,
            disturbed_left_out: s.left_out,
            time_scale: s.exp.time_scale,
        };
        let json = Json {
            a: SideJson { point: a.point.as_deref(), ..side_json(&a) },
            b: SideJson { point: b.point.as_deref(), ..side_json(&b) },
            settings_differ: differ,
            alpha: ALPHA,
            metrics: &rows,
        };
        let text = serde_json::to_string_pretty(&json).expect("the comparison serialises");
        crate::sayln!("{text}");
    } else {
        crate::sayln!("{}", markdown(&a, &b, &differ, &rows));
    }
    Ok(())
}

fn names(s: &Side) -> String {
    if s.metrics.is_empty() {
        return "none: no finished trial".to_string();
    }
    s.metrics.iter().map(|m| m.key.as_str()).collect::<Vec<_>>().join(", ")
}

/// `DIR` or `DIR@SETTING` (a directory whose name holds `@` is taken whole).
fn side(arg: &str, which: &str) -> Result<Side, Error> {
    let (dir, point) = match arg.rsplit_once('@') {
        Some((d, p)) if !Path::new(arg).is_dir() => (PathBuf::from(d), Some(p.to_string())),
        _ => (PathBuf::from(arg), None),
    };
    if !dir.join("experiment.yaml").is_file() {
        return Err(Error::Path {
            path: dir,
            problem: format!("{which}: not a results directory (no experiment.yaml)"),
        });
    }
    let _held = super::owner::hold(&dir, super::owner::Use::Read)?;
    same_format(&dir)?;
    let exp = load_record(&dir).map_err(|e| Error::Experiments(vec![e]))?;
    let all = exp.units();
    let unit = match &point {
        Some(p) => super::inputs::unit_named(&exp, &dir, p, &format!("{which}: {arg}"))?,
        None if all.len() == 1 => 0,
        None => {
            let labels: Vec<&str> = all.iter().map(|(_, l)| l.as_str()).collect();
            return Err(Error::Conflict(format!(
                "{which}: {arg} has {} sweep points: name one as {arg}@SETTING (its points: {})",
                all.len(),
                labels.join(", ")
            )));
        }
    };
    let unit_exp = all[unit].0.clone();
    let checked = unit_metrics(&dir, &exp, "compare", unit)?;
    let mine: Vec<&crate::check::TrialMetrics> = checked.iter().map(|(_, m)| m).collect();
    // A trial the machine disturbed measures the machine: left out of every
    // metric but the count of such trials (unless it is all there is).
    let calm: Vec<&crate::check::TrialMetrics> = mine.iter().copied().filter(|m| !m.disturbance.disturbed()).collect();
    let used = if calm.is_empty() { &mine } else { &calm };
    let mut metrics = metrics(used, unit_exp.time_scale, unit_exp.substrate.observe);
    for m in metrics.iter_mut().filter(|m| m.key == "disturbed_trials") {
        let k = mine.len() - calm.len();
        m.sample = crate::report::two_runs::Sample::Trials { k, n: mine.len() };
    }
    let disturbed = mine.len() - calm.len();
    Ok(Side { dir, point, trials: mine.len(), disturbed, left_out: mine.len() - used.len(), exp: unit_exp, metrics })
}

/// The settings whose resolved text differs, by top-level key (a block such
/// as `faults:` compared whole; the name and description left out).
fn settings_differ(a: &Experiment, b: &Experiment) -> Vec<(String, String, String)> {
    let (ya, yb) = (blocks(&to_yaml(a)), blocks(&to_yaml(b)));
    let mut keys: Vec<&String> = ya.iter().chain(&yb).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let get = |blocks: &[(String, String)], k: &str| {
        blocks.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_else(|| "(none)".into())
    };
    keys.into_iter()
        .filter(|k| !matches!(k.as_str(), "name" | "description" | "seed" | "trials"))
        .filter_map(|k| {
            let (va, vb) = (get(&ya, k), get(&yb, k));
            (va != vb).then(|| (k.clone(), va, vb))
        })
        .collect()
}

/// (key, its value and any indented lines under it) of a resolved file.
fn blocks(yaml: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in yaml.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('-') {
            if let Some((_, v)) = out.last_mut() {
                v.push('\n');
                v.push_str(line.trim_end());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

fn describe(s: &Side) -> String {
    let point = s.point.as_ref().map_or(String::new(), |p| format!(" at {p}"));
    let left = match (s.left_out, s.disturbed) {
        (0, 0) => String::new(),
        (0, _) => " (⚠ every one disturbed by the machine: kept, as there is nothing else; its numbers measure the \
                   machine as much as the system)"
            .to_string(),
        (n, _) => format!(" ({n} disturbed by the machine, left out)"),
    };
    format!("`{}`{point}, {} trials{left}, time scale {}", s.dir.display(), s.trials, s.exp.time_scale)
}

fn markdown(a: &Side, b: &Side, differ: &[(String, String, String)], rows: &[Row]) -> String {
    let mut s = format!("# B against A\n\n- A: {}\n- B: {}\n", describe(a), describe(b));
    if a.exp.time_scale != b.exp.time_scale {
        s += &format!(
            "- Time scales differ ({} and {}): the settings below are as run, scaled; the metrics are in each \
             experiment's own time.\n",
            a.exp.time_scale, b.exp.time_scale
        );
    }
    if differ.is_empty() {
        s += "- Settings: the same (a second run of one experiment).\n";
    } else {
        let one = |v: &str| if v.contains('\n') { "(a block)".to_string() } else { format!("`{v}`") };
        let list: Vec<String> = differ.iter().map(|(k, va, vb)| format!("{k} {} → {}", one(va), one(vb))).collect();
        s += &format!("- Settings that differ: {}.\n", list.join("; "));
    }
    s += &format!(
        "\nTimes in the experiments' own time (divided by the time scale). Durations: the Hodges–Lehmann shift B − A \
         with its 95 % interval, the Mann–Whitney U test; rates: B − A with Newcombe's 95 % interval, Fisher's exact \
         test; p corrected by Holm's method across the {} metrics compared, significant below {ALPHA}.\n\n",
        rows.len()
    );
    s += "| metric | A | B | B − A (95 % CI) | p | p (Holm) | verdict |\n|---|---|---|---|---|---|---|\n";
    for r in rows {
        let diff = crate::report::two_runs::diff_text(r);
        let verdict = if r.significant { format!("**{}**", r.verdict) } else { r.verdict.clone() };
        s += &format!("| {} | {} | {} | {diff} | {:.3} | {:.3} | {verdict} |\n", r.label, r.a, r.b, r.p, r.p_holm);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolved_file_is_cut_into_its_settings_and_blocks() {
        let b = blocks("# head\nname: x\nlease: 9s\nfaults:\n  - at: 1s\n    action: kill\nworkers: 3\n");
        assert_eq!(b[1], ("lease".into(), "9s".into()));
        assert_eq!(b[2], ("faults".into(), "\n  - at: 1s\n    action: kill".into()));
        assert_eq!(b[3], ("workers".into(), "3".into()));
    }
}
