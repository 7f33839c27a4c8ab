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
use crate::model::summary_metrics::Features;
use crate::report::two_runs::{ALPHA, Row, compare as compare_metrics, family_size, metrics, p_value};

/// One side as read: where, which point, its settings and its metrics.
struct Side {
    dir: PathBuf,
    /// The sweep point, as trials.csv names it (as run), and its index.
    point: Option<String>,
    unit: usize,
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

/// A setting whose resolved text differs (a block such as `faults:` whole).
#[derive(Serialize)]
struct Differs {
    setting: String,
    a: String,
    b: String,
}

#[derive(Serialize)]
struct Json<'a> {
    a: SideJson<'a>,
    b: SideJson<'a>,
    /// Settings whose resolved lines differ, as run (scaled).
    settings_differ: Vec<Differs>,
    /// The same results directory and point on both sides.
    same_run: bool,
    alpha: f64,
    /// How many p-values Holm's correction was made across.
    holm_family: usize,
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
            settings_differ: differ.into_iter().map(|(setting, a, b)| Differs { setting, a, b }).collect(),
            same_run: same_run(&a, &b),
            alpha: ALPHA,
            holm_family: family_size(&rows),
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
    let mut metrics = metrics(used, unit_exp.time_scale, Features::of(&unit_exp));
    for m in metrics.iter_mut().filter(|m| m.key == "disturbed_trials") {
        let k = mine.len() - calm.len();
        m.sample = crate::report::two_runs::Sample::Trials { k, n: mine.len() };
    }
    let disturbed = mine.len() - calm.len();
    // The point as trials.csv names it, however it was asked for.
    let point = point.map(|_| all[unit].1.clone());
    Ok(Side {
        dir,
        point,
        unit,
        trials: mine.len(),
        disturbed,
        left_out: mine.len() - used.len(),
        exp: unit_exp,
        metrics,
    })
}

/// The settings whose resolved text differs, by top-level key (a block such
/// as `faults:` compared whole; the name, description and reference left
/// out).
fn settings_differ(a: &Experiment, b: &Experiment) -> Vec<(String, String, String)> {
    let (ya, yb) = (blocks(&to_yaml(a)), blocks(&to_yaml(b)));
    let mut keys: Vec<&String> = ya.iter().chain(&yb).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let get = |blocks: &[(String, String)], k: &str| {
        blocks.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_else(|| "(none)".into())
    };
    keys.into_iter()
        // What names and documents an experiment, and how many trials it
        // ran, change nothing a trial measures.
        .filter(|k| !matches!(k.split('.').next(), Some("name" | "description" | "reference" | "seed" | "trials")))
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
            let (k, v) = (k.trim(), v.trim());
            // A section written as one JSON line (worker, substrate): a
            // setting each, so that one changed setting is told alone.
            match serde_json::from_str::<serde_json::Value>(v) {
                Ok(serde_json::Value::Object(map)) => flatten(k, &serde_json::Value::Object(map), &mut out),
                _ => out.push((k.to_string(), v.to_string())),
            }
        }
    }
    out
}

/// `worker: {"resource": "fenced", …}` as (`worker.resource`, `fenced`), ….
fn flatten(key: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                flatten(&format!("{key}.{k}"), v, out);
            }
        }
        serde_json::Value::String(text) => out.push((key.to_string(), text.clone())),
        other => out.push((key.to_string(), other.to_string())),
    }
}

fn describe(s: &Side) -> String {
    let point = s.point.as_ref().map_or(String::new(), |p| {
        let own = crate::experiment::own_label(p, s.exp.time_scale);
        if own == *p { format!(" at {p}") } else { format!(" at {own} (as run: {p})") }
    });
    let left = match (s.left_out, s.disturbed) {
        (0, 0) => String::new(),
        (0, _) => " (⚠ every one disturbed by the machine: kept, as there is nothing else; its numbers measure the \
                   machine as much as the system)"
            .to_string(),
        (n, _) => format!(" ({n} disturbed by the machine, left out)"),
    };
    let trials = super::words::counted(s.trials as u64, "trial");
    format!("`{}`{point}, {trials}{left}, time scale {}", s.dir.display(), s.exp.time_scale)
}

/// Both sides are one run's one point: nothing can differ but by chance of
/// nothing at all.
fn same_run(a: &Side, b: &Side) -> bool {
    let canonical = |d: &Path| d.canonicalize().unwrap_or_else(|_| d.to_path_buf());
    canonical(&a.dir) == canonical(&b.dir) && a.unit == b.unit
}

fn markdown(a: &Side, b: &Side, differ: &[(String, String, String)], rows: &[Row]) -> String {
    let mut s = format!("# B against A\n\n- A: {}\n- B: {}\n", describe(a), describe(b));
    if same_run(a, b) {
        s += "- ⚠ A and B are the same run: every difference below is 0 by construction.\n";
    }
    let (sa, sb) = (a.exp.time_scale, b.exp.time_scale);
    if sa != sb {
        s += &format!(
            "- Time scales differ ({sa} and {sb}): the settings below are as run, scaled; the metrics are in each \
             experiment's own time.\n"
        );
    } else if sa != 1.0 {
        s += &format!(
            "- Both ran at time scale {sa}: the settings below are as run (scaled); the metrics are in the \
             experiment's own time (divided by {sa}).\n"
        );
    }
    if differ.is_empty() {
        s += "- Settings: the same (a second run of one experiment).\n";
    } else {
        let list: Vec<String> = differ.iter().map(|(k, va, vb)| setting_change(k, va, vb)).collect();
        s += &format!("- Settings that differ: {}.\n", list.join("; "));
    }
    s += &format!(
        "\nTimes in the experiments' own time (divided by the time scale). Durations: the Hodges–Lehmann shift B − A \
         with its 95 % interval, the Mann–Whitney U test; rates: B − A with Newcombe's 95 % interval, Fisher's exact \
         test; p corrected by Holm's method across the {} metrics of the system compared (the machine's \
         disturbances judged apart), significant below {ALPHA}.\n\n",
        family_size(rows)
    );
    s += "| metric | A | B | B − A (95 % CI) | p | p (Holm) | verdict |\n|---|---|---|---|---|---|---|\n";
    for r in rows {
        let diff = crate::report::two_runs::diff_text(r);
        let verdict = if r.significant { format!("**{}**", r.verdict) } else { r.verdict.clone() };
        s += &format!(
            "| {} | {} | {} | {diff} | {} | {} | {verdict} |\n",
            r.label,
            r.a,
            r.b,
            p_value(r.p),
            p_value(r.p_holm)
        );
    }
    s
}

/// "lease `850ms` → `1050ms`"; a block by the lines only one side has:
/// "faults: A's `after: renewed`, B's `at: 0s`".
fn setting_change(key: &str, a: &str, b: &str) -> String {
    if !a.contains('\n') && !b.contains('\n') {
        return format!("{key} `{a}` → `{b}`");
    }
    let lines = |v: &str| -> Vec<String> {
        v.lines().map(|l| l.trim().trim_start_matches("- ").to_string()).filter(|l| !l.is_empty()).collect()
    };
    let (la, lb) = (lines(a), lines(b));
    let only = |mine: &[String], other: &[String]| -> String {
        let mut rest = other.to_vec();
        let own: Vec<String> = mine
            .iter()
            .filter(|l| match rest.iter().position(|r| r == *l) {
                Some(i) => {
                    rest.remove(i);
                    false
                }
                None => true,
            })
            .map(|l| format!("`{l}`"))
            .collect();
        if own.is_empty() { "nothing more".to_string() } else { super::inputs::abbreviate(&own) }
    };
    format!("{key}: A's {}, B's {}", only(&la, &lb), only(&lb, &la))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_that_differs_is_told_by_the_lines_only_one_side_has() {
        assert_eq!(setting_change("lease", "850ms", "1050ms"), "lease `850ms` → `1050ms`");
        let a = "\n  - at: 8500ms\n    after: renewed\n    target: leader";
        let b = "\n  - at: 8500ms\n    target: leader";
        assert_eq!(setting_change("faults", a, b), "faults: A's `after: renewed`, B's nothing more");
    }

    #[test]
    fn a_resolved_file_is_cut_into_its_settings_and_blocks() {
        let b = blocks("# head\nname: x\nlease: 9s\nfaults:\n  - at: 1s\n    action: kill\nworkers: 3\n");
        assert_eq!(b[1], ("lease".into(), "9s".into()));
        assert_eq!(b[2], ("faults".into(), "\n  - at: 1s\n    action: kill".into()));
        assert_eq!(b[3], ("workers".into(), "3".into()));
        let w =
            blocks("worker: {\"resource\":\"fenced\",\"epoch_job\":{\"epoch\":\"1s\"},\"failpoint_workers\":null}\n");
        assert_eq!(w[0], ("worker.epoch_job.epoch".into(), "1s".into()));
        assert_eq!(w[1], ("worker.failpoint_workers".into(), "null".into()));
        assert_eq!(w[2], ("worker.resource".into(), "fenced".into()));
    }
}
