//! Sweep plots, drawn from the CSVs alone (so `leasequake plot DIR` redraws
//! exactly what a run drew), in the experiment's own time:
//! * dial.svg: the dial itself. x is the swept interval (the lease, else
//!   another swept duration), one line per value of the other swept
//!   setting (the pause length); the kill gap with its p10–p90 bars beside
//!   the theory's band (where there are gaps), and a rate with its Wilson
//!   interval: false evictions per leader pause beside the rate the theory
//!   predicts where leaders were paused, else two leaders per trial, the
//!   headline of a race.
//! * histograms.svg: the gaps of each point, each on its own axis; a strip
//!   of the values themselves where there are too few for a histogram. Not
//!   drawn where no point has a gap.

use std::collections::HashMap;
use std::path::Path;

use plotters::prelude::RGBColor;

use super::read::ReadError;

mod axis;
mod dial;
mod histograms;

pub use dial::dial;
pub use histograms::histograms;

pub(super) const GAP: RGBColor = RGBColor(46, 110, 190);
pub(super) const BAND: RGBColor = RGBColor(120, 120, 120);
/// One colour per line of the dial.
pub(super) const PALETTE: [RGBColor; 8] = [
    RGBColor(46, 110, 190),
    RGBColor(200, 60, 40),
    RGBColor(40, 150, 80),
    RGBColor(150, 80, 170),
    RGBColor(220, 140, 20),
    RGBColor(20, 150, 160),
    RGBColor(120, 90, 60),
    RGBColor(90, 90, 90),
];

/// What the plots need of one point (or of a plain run's one setting),
/// durations in the experiment's own time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointData {
    /// The point's label, in own time.
    pub label: String,
    /// Its settings (those that vary across points show on the axes): name
    /// without `_ms`, and its value (ms in own time, or the text).
    pub settings: Vec<(String, Setting)>,
    /// Ended gaps, in seconds: after a kill if the run had any, else all.
    pub gaps_s: Vec<f64>,
    /// Kill gap p10, p50, p90 and the theory's bound, in seconds.
    pub crash: Option<[f64; 3]>,
    pub bound: Option<[f64; 2]>,
    pub leader_pauses: usize,
    pub false_evictions: usize,
    /// Pauses the theory called, and those it says evict.
    pub predicted_of: usize,
    pub predicted: usize,
    /// Trials, and those with two leaders at once.
    pub trials: usize,
    pub double_leader_trials: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    Number(f64),
    Text(String),
}

impl Setting {
    fn number(&self) -> Option<f64> {
        match self {
            Setting::Number(v) => Some(*v),
            Setting::Text(_) => None,
        }
    }

    fn show(&self, name: &str) -> String {
        match self {
            Setting::Number(ms) if is_duration(name) => {
                crate::model::Dur::from_us((ms * 1000.0).round() as u64).to_string()
            }
            Setting::Number(v) => format!("{v}"),
            Setting::Text(t) => t.clone(),
        }
    }
}

fn is_duration(name: &str) -> bool {
    crate::experiment::is_duration_setting(name) || matches!(name, "lease" | "renew" | "watch" | "resolution")
}

fn table(path: &Path) -> Result<(Vec<String>, Vec<csv::StringRecord>), ReadError> {
    let err = |source| ReadError::Csv { path: path.to_path_buf(), source };
    let file = crate::files::open_regular(path).map_err(|e| err(e.into()))?;
    let mut r = csv::Reader::from_reader(file);
    let headers = r.headers().map_err(err)?.iter().map(String::from).collect();
    let rows = r.records().collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok((headers, rows))
}

/// A cell's number, if it is one a run could have written: finite, and
/// within a few centuries of milliseconds. `inf`, `NaN` or 1e308 would send
/// an axis's ticks into a loop without end.
fn number(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|v| v.is_finite() && v.abs() <= 1e13)
}

/// A cell's count (0 when it is none), no more than a run could make.
fn count(text: &str) -> usize {
    text.parse::<usize>().ok().filter(|n| *n <= u32::MAX as usize).unwrap_or(0)
}

fn column(headers: &[String], name: &str) -> Option<usize> {
    headers.iter().position(|h| h == name)
}

/// The setting columns of summary.csv worth plotting against: the lease
/// timing, the substrate, the workers, and every swept column (those
/// between the fixed settings and the statistics).
fn setting_columns(headers: &[String]) -> Vec<usize> {
    let fixed = ["substrate", "workers", "lease_ms", "renew_ms", "watch_ms", "resolution_ms"];
    let swept_from = column(headers, "unreadable").map_or(headers.len(), |i| i + 1);
    let swept_to = column(headers, "n").unwrap_or(headers.len());
    (0..headers.len())
        .filter(|&i| fixed.contains(&headers[i].as_str()) || (swept_from..swept_to).contains(&i))
        .collect()
}

/// Read summary.csv (point order, settings, kill-gap statistics and bound),
/// summary-evictions.csv (where there is one), trials.csv and gaps.csv.
pub fn load(dir: &Path) -> Result<Vec<PointData>, ReadError> {
    let (sh, summary) = table(&dir.join("summary.csv"))?;
    let (th, trials) = table(&dir.join("trials.csv"))?;
    let (gh, gaps) = table(&dir.join("gaps.csv"))?;
    let get = |h: &[String], r: &csv::StringRecord, name: &str| {
        column(h, name).and_then(|i| r.get(i)).unwrap_or("").to_string()
    };
    let num = |h: &[String], r: &csv::StringRecord, name: &str| number(&get(h, r, name));
    let columns = setting_columns(&sh);
    let mut scales = Vec::new();
    let mut points: Vec<PointData> = summary
        .iter()
        .map(|r| {
            let scale = num(&sh, r, "time_scale").filter(|s| *s > 0.0).unwrap_or(1.0);
            scales.push(scale);
            let own_s = |name: &str| num(&sh, r, name).map(|ms| ms / 1000.0 / scale);
            let settings = columns
                .iter()
                .map(|&i| {
                    let name = sh[i].strip_suffix("_ms").unwrap_or(&sh[i]).to_string();
                    let text = r.get(i).unwrap_or("");
                    let value = match number(text) {
                        Some(v) if sh[i].ends_with("_ms") => Setting::Number(v / scale),
                        Some(v) => Setting::Number(v),
                        None => Setting::Text(text.to_string()),
                    };
                    (name, value)
                })
                .collect();
            let crash = match (own_s("crash_gap_p10_ms"), own_s("crash_gap_p50_ms"), own_s("crash_gap_p90_ms")) {
                (Some(a), Some(b), Some(c)) => Some([a, b, c]),
                _ => None,
            };
            let bound = own_s("crash_gap_bound_min_ms").zip(own_s("crash_gap_bound_max_ms")).map(|(a, b)| [a, b]);
            let count = |name: &str| self::count(&get(&sh, r, name));
            PointData {
                label: crate::experiment::own_label(&get(&sh, r, "setting"), scale),
                settings,
                crash,
                bound,
                trials: count("n"),
                double_leader_trials: count("double_leader_trials"),
                ..PointData::default()
            }
        })
        .collect();
    let single = points.len() == 1;
    let index: HashMap<String, usize> = summary.iter().enumerate().map(|(i, r)| (get(&sh, r, "setting"), i)).collect();
    let evictions = dir.join("summary-evictions.csv");
    if evictions.exists() {
        let (eh, rows) = table(&evictions)?;
        for r in &rows {
            let Some(&i) = (if single { Some(&0) } else { index.get(&get(&eh, r, "setting")) }) else { continue };
            let n = |name: &str| count(&get(&eh, r, name));
            let p = &mut points[i];
            p.leader_pauses = n("leader_pauses");
            p.false_evictions = n("false_evictions");
            p.predicted = n("predicted_evictions");
            p.predicted_of = p.leader_pauses.saturating_sub(n("unpredicted_pauses"));
        }
    }
    let mut point_of_trial = HashMap::new();
    for r in &trials {
        let Some(&i) = (if single { Some(&0) } else { index.get(&get(&th, r, "setting")) }) else { continue };
        point_of_trial.insert(get(&th, r, "trial"), i);
    }
    let any_kill = gaps.iter().any(|g| get(&gh, g, "cause") == "kill");
    for g in &gaps {
        if get(&gh, g, "ended") != "true" || (any_kill && get(&gh, g, "cause") != "kill") {
            continue;
        }
        if let (Some(&i), Some(ms)) = (point_of_trial.get(&get(&gh, g, "trial")), number(&get(&gh, g, "duration_ms"))) {
            points[i].gaps_s.push(ms / 1000.0 / scales[i]);
        }
    }
    for p in &mut points {
        p.gaps_s.sort_by(f64::total_cmp);
    }
    Ok(points)
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// How the points lie on the dial: the x setting (if numeric) and the
/// lines.
struct Layout {
    /// The setting on the x axis, or None: one position per point.
    x: Option<String>,
    /// Each line's label and its points' indices, in x order.
    lines: Vec<(String, Vec<usize>)>,
}

/// The settings that differ between points.
fn varying(points: &[PointData]) -> Vec<String> {
    let Some(first) = points.first() else { return Vec::new() };
    first
        .settings
        .iter()
        .map(|(name, _)| name.clone())
        .filter(|name| {
            let values: Vec<Option<&Setting>> =
                points.iter().map(|p| p.settings.iter().find(|(n, _)| n == name).map(|(_, v)| v)).collect();
            values.windows(2).any(|w| w[0] != w[1])
        })
        .collect()
}

fn value<'a>(p: &'a PointData, name: &str) -> Option<&'a Setting> {
    p.settings.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

fn layout(points: &[PointData]) -> Layout {
    let vary = varying(points);
    let numeric = |name: &String| points.iter().all(|p| value(p, name).and_then(Setting::number).is_some());
    let preferred = ["lease", "watch", "renew"];
    let x = preferred
        .iter()
        .map(|s| s.to_string())
        .find(|name| vary.contains(name))
        .or_else(|| vary.iter().find(|n| numeric(n) && is_duration(n)).cloned())
        .or_else(|| vary.iter().find(|n| numeric(n)).cloned());
    // A setting that is a function of x (renew = lease / 3) moves with it:
    // the lines are the settings that do not.
    let follows_x = |name: &String| {
        let Some(x) = &x else { return false };
        let mut seen: Vec<(Option<&Setting>, Option<&Setting>)> = Vec::new();
        points.iter().all(|p| {
            let (a, b) = (value(p, x), value(p, name));
            match seen.iter().find(|(sx, _)| *sx == a) {
                Some((_, sb)) => *sb == b,
                None => {
                    seen.push((a, b));
                    true
                }
            }
        })
    };
    let others: Vec<String> = vary.iter().filter(|n| Some(*n) != x.as_ref() && !follows_x(n)).cloned().collect();
    let mut lines: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let key: Vec<String> =
            others.iter().map(|n| format!("{n}={}", value(p, n).map_or(String::new(), |v| v.show(n)))).collect();
        let key = if x.is_none() { String::new() } else { key.join(" ") };
        match lines.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => lines.push((key, vec![i])),
        }
    }
    if let Some(x) = &x {
        for (_, members) in &mut lines {
            members.sort_by(|&a, &b| {
                let v = |i: usize| value(&points[i], x).and_then(Setting::number).unwrap_or(0.0);
                v(a).total_cmp(&v(b))
            });
        }
    }
    Layout { x, lines }
}

/// Draw the plots into `dir` from its CSVs, and say which.
pub fn draw(dir: &Path, title: &str) -> Result<Vec<std::path::PathBuf>, Box<dyn std::error::Error>> {
    draw_points(dir, title, &load(dir)?)
}

/// histograms.svg only where some point has a gap (a plot of nothing is
/// removed: it is this command's own output, and would be read as a
/// measurement).
fn draw_points(
    dir: &Path,
    title: &str,
    points: &[PointData],
) -> Result<Vec<std::path::PathBuf>, Box<dyn std::error::Error>> {
    let mut drawn = vec![dir.join("dial.svg")];
    dial(&drawn[0], title, points)?;
    let histograms_svg = dir.join("histograms.svg");
    if points.iter().any(|p| !p.gaps_s.is_empty()) {
        histograms(&histograms_svg, points)?;
        drawn.push(histograms_svg);
    } else if histograms_svg.exists() {
        std::fs::remove_file(&histograms_svg)?;
    }
    Ok(drawn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(lease_s: f64, pause_s: f64, gaps: &[f64], pauses: usize, evicted: usize) -> PointData {
        PointData {
            label: format!("lease={lease_s}s pause={pause_s}s"),
            settings: vec![
                ("lease".into(), Setting::Number(lease_s * 1000.0)),
                ("renew".into(), Setting::Number(lease_s * 1000.0 / 3.0)),
                ("pause".into(), Setting::Number(pause_s * 1000.0)),
                ("substrate".into(), Setting::Text("file".into())),
            ],
            gaps_s: gaps.to_vec(),
            crash: Some([lease_s * 0.8, lease_s, lease_s * 1.2]),
            bound: Some([lease_s * 2.0 / 3.0, lease_s * 1.5]),
            leader_pauses: pauses,
            false_evictions: evicted,
            predicted_of: pauses,
            predicted: evicted,
            trials: 10,
            double_leader_trials: evicted,
        }
    }

    fn svg_text(path: &Path) -> (String, usize) {
        let svg = std::fs::read_to_string(path).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let text = doc.descendants().filter_map(|n| n.text()).collect::<Vec<_>>().join("|");
        let dots = doc.descendants().filter(|n| n.tag_name().name() == "circle").count();
        (text, dots)
    }

    #[test]
    fn a_race_without_gaps_or_pauses_is_drawn_as_its_two_leader_rate() {
        // naive-race-stagger: no faults, so no gaps and no pauses; its
        // headline is how often two led, against the stagger (µs).
        let points: Vec<PointData> = [0.0, 0.02, 0.05, 1.0]
            .iter()
            .enumerate()
            .map(|(i, ms)| PointData {
                label: format!("stagger={ms}ms"),
                settings: vec![("stagger".into(), Setting::Number(*ms))],
                trials: 30,
                double_leader_trials: 10 - 3 * i.min(3),
                ..PointData::default()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let drawn = draw_points(dir.path(), "race", &points).unwrap();
        assert_eq!(drawn, [dir.path().join("dial.svg")], "no histograms of nothing");
        let (text, dots) = svg_text(&dir.path().join("dial.svg"));
        assert!(text.contains("trials with two leaders"), "{text}");
        assert!(text.contains("stagger (ms, the experiment's own time)"), "{text}");
        assert_eq!(dots, 4, "a dot per point: {text}");
        assert!(!text.contains("0000000"), "{text}");
    }

    #[test]
    fn a_handful_of_gaps_is_a_strip_of_them_on_the_points_own_axis() {
        let points = vec![point(3.0, 2.0, &[2.9, 3.0, 3.0, 3.1], 0, 0), point(30.0, 2.0, &[29.0, 31.0], 0, 0)];
        let dir = tempfile::tempdir().unwrap();
        histograms(&dir.path().join("h.svg"), &points).unwrap();
        let (text, dots) = svg_text(&dir.path().join("h.svg"));
        assert_eq!(dots, 6, "a dot per gap: {text}");
        assert!(text.contains("each one"), "{text}");
    }

    #[test]
    fn the_dial_puts_the_lease_on_x_and_draws_a_line_per_pause() {
        let points = vec![
            point(3.0, 2.0, &[3.0], 10, 4),
            point(9.0, 2.0, &[9.0], 10, 0),
            point(3.0, 10.0, &[3.5], 10, 10),
            point(9.0, 10.0, &[9.2], 10, 3),
        ];
        let lay = layout(&points);
        assert_eq!(lay.x.as_deref(), Some("lease"));
        // renew moves with the lease: it is no line of its own.
        let names: Vec<&str> = lay.lines.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["pause=2s", "pause=10s"]);
        let dir = tempfile::tempdir().unwrap();
        dial(&dir.path().join("dial.svg"), "t", &points).unwrap();
        histograms(&dir.path().join("histograms.svg"), &points).unwrap();
        for f in ["dial.svg", "histograms.svg"] {
            let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
            let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{f} is not XML: {e}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg", "{f}");
            let text: String = doc.descendants().filter_map(|n| n.text()).collect();
            if f == "dial.svg" {
                assert!(text.contains("pause=10s") && text.contains("theory's bound"), "{text}");
                assert!(text.contains("lease (s, the experiment's own time)"), "{text}");
            } else {
                // One gap a point: a strip, not a histogram.
                assert!(text.contains("gap (s), each one"), "{text}");
            }
        }
    }

    #[test]
    fn a_sweep_of_names_is_one_position_per_point() {
        let mut a = point(9.0, 2.0, &[9.0], 0, 0);
        let mut b = a.clone();
        a.settings[3].1 = Setting::Text("file".into());
        b.settings[3].1 = Setting::Text("flock".into());
        let lay = layout(&[a, b]);
        assert_eq!(lay.x, None);
        assert_eq!(lay.lines.len(), 1);
    }
}
