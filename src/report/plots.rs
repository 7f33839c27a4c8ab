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

use plotters::prelude::*;

use super::read::ReadError;
use crate::check::stats::wilson95;

const GAP: RGBColor = RGBColor(46, 110, 190);
const BAND: RGBColor = RGBColor(120, 120, 120);
/// One colour per line of the dial.
const PALETTE: [RGBColor; 8] = [
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
    let mut r = csv::Reader::from_path(path).map_err(err)?;
    let headers = r.headers().map_err(err)?.iter().map(String::from).collect();
    let rows = r.records().collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok((headers, rows))
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
    let num = |h: &[String], r: &csv::StringRecord, name: &str| get(h, r, name).parse::<f64>().ok();
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
                    let value = match text.parse::<f64>() {
                        Ok(v) if sh[i].ends_with("_ms") => Setting::Number(v / scale),
                        Ok(v) => Setting::Number(v),
                        Err(_) => Setting::Text(text.to_string()),
                    };
                    (name, value)
                })
                .collect();
            let crash = match (own_s("crash_gap_p10_ms"), own_s("crash_gap_p50_ms"), own_s("crash_gap_p90_ms")) {
                (Some(a), Some(b), Some(c)) => Some([a, b, c]),
                _ => None,
            };
            let bound = own_s("crash_gap_bound_min_ms").zip(own_s("crash_gap_bound_max_ms")).map(|(a, b)| [a, b]);
            let count = |name: &str| get(&sh, r, name).parse::<usize>().unwrap_or(0);
            PointData {
                label: super::suite::own_label(&get(&sh, r, "setting"), scale),
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
            let n = |name: &str| get(&eh, r, name).parse::<usize>().unwrap_or(0);
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
        if let (Some(&i), Ok(ms)) =
            (point_of_trial.get(&get(&gh, g, "trial")), get(&gh, g, "duration_ms").parse::<f64>())
        {
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

/// A unit for an axis of seconds, so that its ticks read as short numbers:
/// the largest of s, ms and µs in which `max` is at least 1.
fn unit_for(max: f64) -> (&'static str, f64) {
    if max >= 1.0 {
        ("s", 1.0)
    } else if max >= 1e-3 {
        ("ms", 1e3)
    } else {
        ("µs", 1e6)
    }
}

/// A tick label with as many decimals as the axis's span needs, and no
/// more: a tick computed as 0.1 × 4 reads `0.4`, not `0.4000000000000001`.
fn tick_label(v: f64, span: f64) -> String {
    let decimals = if span > 0.0 { (2.0 - span.log10().floor()).clamp(0.0, 6.0) as usize } else { 2 };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    if text == "-0" { "0".to_string() } else { text }
}

/// What the rate panel of the dial shows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rate {
    /// False evictions per leader pause, beside the theory's.
    Evictions,
    /// Trials with two leaders at once.
    TwoLeaders,
}

/// dial.svg: the gap (where there are gaps) and a rate against the swept
/// interval, a line per value of the other setting.
pub fn dial(path: &Path, title: &str, points: &[PointData]) -> PlotResult {
    let lay = layout(points);
    let n = points.len().max(1);
    // x: the setting in the unit its largest value reads best in, or one
    // position per point.
    // A duration is held in ms: on the axis in s, ms or µs; any other
    // number (a clock rate, a count) as it is.
    let timed = lay.x.as_deref().is_some_and(is_duration);
    let raw: Vec<Option<f64>> = points
        .iter()
        .map(|p| lay.x.as_ref().and_then(|x| value(p, x)?.number()).map(|v| if timed { v / 1000.0 } else { v }))
        .collect();
    let (unit, per_s) =
        if timed { unit_for(raw.iter().flatten().fold(0.0, |a: f64, b| a.max(b.abs()))) } else { ("", 1.0) };
    let xs: Vec<f64> = raw.iter().enumerate().map(|(i, x)| x.map_or(i as f64, |s| s * per_s)).collect();
    let by_index = lay.x.is_none();
    let (xmin, xmax) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let pad = if by_index {
        0.5
    } else if xmax > xmin {
        (xmax - xmin) * 0.05
    } else {
        xmax.abs().max(1.0) * 0.05
    };
    let x_range = (xmin - pad)..(xmax + pad);
    let x_span = x_range.end - x_range.start;
    let numbered = by_index && (n > 6 || points.iter().any(|p| p.label.len() * n > 120));
    let key_rows = if numbered { n.div_ceil(2) } else { 0 };

    // Kill gaps (or, without kills, every ended gap) against the theory.
    let kills = points.iter().any(|p| p.crash.is_some());
    let spread = |p: &PointData| -> Option<[f64; 3]> {
        if kills {
            p.crash
        } else {
            let q = |f: f64| crate::check::stats::percentile(&p.gaps_s, f);
            Some([q(0.1)?, q(0.5)?, q(0.9)?])
        }
    };
    let gaps = points.iter().any(|p| spread(p).is_some());
    let rate = if points.iter().any(|p| p.leader_pauses > 0) { Rate::Evictions } else { Rate::TwoLeaders };
    let panels = 1 + usize::from(gaps);
    let charts_h = 340 * panels as u32;
    let root = SVGBackend::new(path, (960, charts_h + 16 * key_rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let (charts, key) = root.split_vertically(charts_h);
    let (top, bottom) = if gaps { charts.split_vertically(340) } else { (charts.clone(), charts) };
    for (i, p) in points.iter().enumerate().filter(|_| numbered) {
        let (col, row) = (i / key_rows.max(1), i % key_rows.max(1));
        key.draw(&Text::new(
            format!("{}: {}", i + 1, p.label),
            (20 + 460 * col as i32, 4 + 16 * row as i32),
            ("sans-serif", 12),
        ))?;
    }
    let x_desc = match &lay.x {
        Some(x) if timed => format!("{x} ({unit}, the experiment's own time)"),
        Some(x) => x.clone(),
        None => "point".to_string(),
    };
    let tick = |x: &f64| {
        if !by_index {
            return tick_label(*x, x_span);
        }
        let i = x.round();
        if (x - i).abs() > 1e-6 || i < 0.0 || i as usize >= points.len() {
            String::new()
        } else if numbered {
            format!("{}", i as usize + 1)
        } else {
            points[i as usize].label.clone()
        }
    };
    let color = |line: usize| PALETTE[line % PALETTE.len()];
    let ticks = if by_index { n } else { 10 };

    if gaps {
        let top_max = points
            .iter()
            .flat_map(|p| spread(p).map(|s| s[2]).into_iter().chain(p.bound.filter(|_| kills).map(|b| b[1])))
            .fold(0.0, f64::max)
            .max(0.001)
            * 1.1;
        let what = if kills { "gap after a kill" } else { "leaderless gap" };
        let mut chart = ChartBuilder::on(&top)
            .caption(format!("{title}: {what}"), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(60)
            .build_cartesian_2d(x_range.clone(), 0.0..top_max)?;
        chart
            .configure_mesh()
            .x_labels(ticks)
            .x_label_formatter(&tick)
            .y_label_formatter(&|y: &f64| tick_label(*y, top_max))
            .x_desc(x_desc.clone())
            .y_desc("gap (s): median, p10–p90")
            .draw()?;
        if kills && let Some((_, first)) = lay.lines.first() {
            // The theory's bound, [lease − renew, lease + watch + resolution].
            let band: Vec<(f64, f64)> = first
                .iter()
                .filter_map(|&i| points[i].bound.map(|b| (xs[i], b[1])))
                .chain(first.iter().rev().filter_map(|&i| points[i].bound.map(|b| (xs[i], b[0]))))
                .collect();
            if band.len() >= 2 {
                chart
                    .draw_series(std::iter::once(Polygon::new(band, BAND.mix(0.15).filled())))?
                    .label("theory's bound")
                    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], BAND.mix(0.3).filled()));
            }
        }
        for (l, (name, members)) in lay.lines.iter().enumerate() {
            let c = color(l);
            let pts: Vec<(f64, [f64; 3])> =
                members.iter().filter_map(|&i| Some((xs[i], spread(&points[i])?))).collect();
            chart.draw_series(
                pts.iter().map(|&(x, s)| PathElement::new(vec![(x, s[0]), (x, s[2])], c.stroke_width(1))),
            )?;
            let line: Vec<(f64, f64)> = pts.iter().map(|&(x, s)| (x, s[1])).collect();
            let drawn = chart.draw_series(std::iter::once(PathElement::new(line.clone(), c.stroke_width(2))))?;
            if !name.is_empty() && !pts.is_empty() {
                drawn
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
            }
            chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK.mix(0.3)).draw()?;
    }

    // A rate with its Wilson interval: false evictions per leader pause
    // beside the theory's, or two leaders per trial.
    let caption = match rate {
        Rate::Evictions => {
            "false evictions per leader pause: measured (Wilson 95 %) and predicted (hollow)".to_string()
        }
        Rate::TwoLeaders if gaps => "trials with two leaders (Wilson 95 %)".to_string(),
        Rate::TwoLeaders => format!("{title}: trials with two leaders (Wilson 95 %)"),
    };
    let mut chart = ChartBuilder::on(&bottom)
        .caption(caption, ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, 0.0..1.05)?;
    chart
        .configure_mesh()
        .x_labels(ticks)
        .x_label_formatter(&tick)
        .y_label_formatter(&|y: &f64| tick_label(*y, 1.0))
        .x_desc(x_desc)
        .y_desc("rate")
        .draw()?;
    // Lines that share an x are moved apart a little, so that their
    // intervals do not hide each other.
    let lines = lay.lines.len() as f64;
    let dodge = |l: usize| (l as f64 - (lines - 1.0) / 2.0) * x_span * 0.006;
    let count = |p: &PointData| match rate {
        Rate::Evictions => (p.false_evictions, p.leader_pauses),
        Rate::TwoLeaders => (p.double_leader_trials, p.trials),
    };
    for (l, (name, members)) in lay.lines.iter().enumerate() {
        let c = color(l);
        let xs: Vec<f64> = xs.iter().map(|x| x + dodge(l)).collect();
        let rates: Vec<(f64, f64, f64, f64)> = members
            .iter()
            .map(|&i| (i, count(&points[i])))
            .filter(|(_, (_, of))| *of > 0)
            .map(|(i, (k, of))| {
                let (lo, hi) = wilson95(k, of);
                (xs[i], k as f64 / of as f64, lo, hi)
            })
            .collect();
        chart.draw_series(
            rates.iter().map(|&(x, _, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(1))),
        )?;
        let line: Vec<(f64, f64)> = rates.iter().map(|&(x, r, _, _)| (x, r)).collect();
        let drawn = chart.draw_series(std::iter::once(PathElement::new(line.clone(), c.stroke_width(2))))?;
        if !name.is_empty() && !rates.is_empty() {
            drawn
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
        }
        chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        if rate == Rate::Evictions {
            chart.draw_series(
                members
                    .iter()
                    .map(|&i| (xs[i], &points[i]))
                    .filter(|(_, p)| p.predicted_of > 0)
                    .map(|(x, p)| Circle::new((x, p.predicted as f64 / p.predicted_of as f64), 7, c.stroke_width(1))),
            )?;
        }
    }
    if lay.lines.iter().any(|(name, _)| !name.is_empty()) {
        chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK.mix(0.3)).draw()?;
    }
    root.present()?;
    Ok(())
}

/// Fewer values than this are drawn as a strip of the values themselves:
/// a histogram of a handful is mostly empty bins.
const STRIP_BELOW: usize = 20;

/// histograms.svg: one panel of gaps per point, each on its own axis (one
/// shared axis made a point whose gaps sit close together a single bar),
/// kill gaps over the theory's bound for them (grey).
pub fn histograms(path: &Path, points: &[PointData]) -> PlotResult {
    let n = points.len().max(1);
    let cols = n.min(3);
    let rows = n.div_ceil(cols);
    let root = SVGBackend::new(path, (320 * cols as u32, 230 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, p) in root.split_evenly((rows, cols)).iter().zip(points) {
        let caption = format!("{} (n {})", p.label, p.gaps_s.len());
        let (Some(&lo), Some(&hi)) = (p.gaps_s.first(), p.gaps_s.last()) else {
            area.draw(&Text::new(format!("{caption}: no gaps"), (10, 10), ("sans-serif", 11)))?;
            continue;
        };
        // Kill gaps beside the theory's bound for them.
        let bound = p.bound.filter(|_| p.crash.is_some());
        let (lo, hi) = bound.map_or((lo, hi), |[a, b]| (lo.min(a), hi.max(b)));
        let pad = if hi > lo { (hi - lo) * 0.05 } else { hi.abs().max(0.001) * 0.05 };
        let (lo, hi) = (lo - pad, hi + pad);
        let span = hi - lo;
        let band =
            |top: f64| bound.map(|[a, b]| Rectangle::new([(a, 0.0), (b, top)], BAND.mix(0.12).filled())).into_iter();
        if p.gaps_s.len() < STRIP_BELOW {
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 11))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(10)
                .build_cartesian_2d(lo..hi, 0.0..1.0)?;
            chart
                .configure_mesh()
                .x_labels(5)
                .y_labels(0)
                .x_label_formatter(&|x: &f64| tick_label(*x, span))
                .x_desc("gap (s), each one")
                .draw()?;
            chart.draw_series(band(1.0))?;
            // Values that coincide are set one above the other.
            let mut seen: Vec<(f64, usize)> = Vec::new();
            let mut marks = Vec::new();
            for &g in &p.gaps_s {
                let level = match seen.iter_mut().find(|(v, _)| (v - g).abs() <= span * 0.005) {
                    Some((_, k)) => {
                        *k += 1;
                        *k
                    }
                    None => {
                        seen.push((g, 0));
                        0
                    }
                };
                marks.push(Circle::new((g, 0.2 + 0.08 * (level % 10) as f64), 4, GAP.mix(0.7).filled()));
            }
            chart.draw_series(marks)?;
            continue;
        }
        let bins = ((p.gaps_s.len() as f64).sqrt().ceil() as usize).clamp(5, 30);
        let width = span / bins as f64;
        let mut counts = vec![0u32; bins];
        for g in &p.gaps_s {
            counts[(((g - lo) / width) as usize).min(bins - 1)] += 1;
        }
        let top = counts.iter().copied().max().unwrap_or(1).max(1);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 11))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(34)
            .build_cartesian_2d(lo..hi, 0.0..top as f64 + 1.0)?;
        chart
            .configure_mesh()
            .x_labels(5)
            .y_labels(4)
            .x_label_formatter(&|x: &f64| tick_label(*x, span))
            // Counts: a tick between two whole numbers says nothing.
            .y_label_formatter(&|y: &f64| if y.fract() == 0.0 { format!("{y}") } else { String::new() })
            .x_desc("gap (s)")
            .y_desc("gaps")
            .draw()?;
        chart.draw_series(band(top as f64 + 1.0))?;
        chart.draw_series(counts.iter().enumerate().map(|(b, c)| {
            let x0 = lo + b as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, *c as f64)], GAP.mix(0.7).filled())
        }))?;
    }
    root.present()?;
    Ok(())
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

    #[test]
    fn tick_labels_have_the_decimals_their_axis_needs_and_no_more() {
        assert_eq!(tick_label(0.1 * 4.0 - 0.8, 1.0), "-0.4");
        assert_eq!(tick_label(0.30000000000000004, 1.0), "0.3");
        assert_eq!(tick_label(2.5, 30.0), "2.5");
        assert_eq!(tick_label(12.0, 30.0), "12");
        assert_eq!(tick_label(-0.0001, 1.0), "0");
        assert_eq!(tick_label(0.0125, 0.05), "0.0125");
        assert_eq!(unit_for(0.001), ("ms", 1e3));
        assert_eq!(unit_for(0.00002), ("µs", 1e6));
        assert_eq!(unit_for(9.0), ("s", 1.0));
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
