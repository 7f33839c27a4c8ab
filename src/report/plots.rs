//! Sweep plots, drawn from the CSVs alone (so `leasequake plot DIR` redraws
//! exactly what a run drew): the dial (failover gap and false-eviction rate
//! against the point) and a gap histogram per point.

use std::collections::HashMap;
use std::path::Path;

use plotters::prelude::*;

use super::read::ReadError;
use crate::check::stats::{percentile, wilson95};

const GAP: RGBColor = RGBColor(46, 110, 190);
const EVICT: RGBColor = RGBColor(200, 60, 40);

/// What the plots need of one point (or of a plain run's one setting).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointData {
    pub label: String,
    /// Ended gaps, in ms: after a kill if the run had any, else all.
    pub gaps_ms: Vec<f64>,
    pub leader_pauses: usize,
    pub false_evictions: usize,
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

/// Read summary.csv (point order), trials.csv (trial → point),
/// evictions.csv (where there is one) and gaps.csv.
pub fn load(dir: &Path) -> Result<Vec<PointData>, ReadError> {
    let (sh, summary) = table(&dir.join("summary.csv"))?;
    let (th, trials) = table(&dir.join("trials.csv"))?;
    let (gh, gaps) = table(&dir.join("gaps.csv"))?;
    let get = |h: &[String], r: &csv::StringRecord, name: &str| {
        column(h, name).and_then(|i| r.get(i)).unwrap_or("").to_string()
    };
    let mut points: Vec<PointData> =
        summary.iter().map(|r| PointData { label: get(&sh, r, "setting"), ..PointData::default() }).collect();
    let single = points.len() == 1;
    let index: HashMap<String, usize> = points.iter().enumerate().map(|(i, p)| (p.label.clone(), i)).collect();
    let mut point_of_trial = HashMap::new();
    for r in &trials {
        let point = get(&th, r, "setting");
        let Some(&i) = (if single { Some(&0) } else { index.get(&point) }) else { continue };
        point_of_trial.insert(get(&th, r, "trial"), i);
    }
    // Leader pauses, where the experiment paused workers.
    let evictions = dir.join("evictions.csv");
    if evictions.exists() {
        let (eh, rows) = table(&evictions)?;
        for r in &rows {
            let Some(&i) = point_of_trial.get(&get(&eh, r, "trial")) else { continue };
            let n = |name: &str| get(&eh, r, name).parse::<usize>().unwrap_or(0);
            points[i].leader_pauses += n("leader_pauses");
            points[i].false_evictions += n("false_evictions");
        }
    }
    let any_kill = gaps.iter().any(|g| get(&gh, g, "cause") == "kill");
    for g in &gaps {
        if get(&gh, g, "ended") != "true" || (any_kill && get(&gh, g, "cause") != "kill") {
            continue;
        }
        if let (Some(&i), Ok(ms)) = (point_of_trial.get(&get(&gh, g, "trial")), get(&gh, g, "duration_ms").parse()) {
            points[i].gaps_ms.push(ms);
        }
    }
    for p in &mut points {
        p.gaps_ms.sort_by(f64::total_cmp);
    }
    Ok(points)
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// dial.svg: gap median with its p10–p90 band (top) and the false-eviction
/// rate with its Wilson 95 % interval (bottom), one x position per point.
pub fn dial(path: &Path, title: &str, points: &[PointData]) -> PlotResult {
    let n = points.len().max(1);
    // Many or long labels do not fit under the axis: number the points and
    // print a key below the charts instead.
    let numbered = n > 6 || points.iter().any(|p| p.label.len() * n > 120);
    let key_rows = if numbered { n.div_ceil(2) } else { 0 };
    let height = 640 + 16 * key_rows as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (charts, key) = root.split_vertically(640);
    let (top, bottom) = charts.split_vertically(330);
    for (i, p) in points.iter().enumerate().filter(|_| numbered) {
        let (col, row) = (i / key_rows, i % key_rows);
        let at = (20 + 440 * col as i32, 4 + 16 * row as i32);
        key.draw(&Text::new(format!("{}: {}", i + 1, p.label), at, ("sans-serif", 12)))?;
    }
    let x_range = -0.5..(n as f64 - 0.5);
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() > 1e-6 || i < 0.0 || i as usize >= points.len() {
            String::new()
        } else if numbered {
            format!("{}", i as usize + 1)
        } else {
            points[i as usize].label.clone()
        }
    };

    let q = |p: &PointData, f: f64| percentile(&p.gaps_ms, f).map(|v| v / 1000.0);
    let max_gap = points.iter().filter_map(|p| q(p, 1.0)).fold(0.0, f64::max).max(0.001) * 1.1;
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("{title}: failover gap"), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), 0.0..max_gap)?;
    chart.configure_mesh().x_labels(n).x_label_formatter(&label).y_desc("gap (s): median, p10–p90").draw()?;
    chart.draw_series(points.iter().enumerate().filter_map(|(i, p)| {
        let (lo, hi) = (q(p, 0.1)?, q(p, 0.9)?);
        Some(Rectangle::new([(i as f64 - 0.15, lo), (i as f64 + 0.15, hi)], GAP.mix(0.25).filled()))
    }))?;
    // A polyline (plotters' line series needs a feature we do not build).
    let medians: Vec<(f64, f64)> =
        points.iter().enumerate().filter_map(|(i, p)| Some((i as f64, q(p, 0.5)?))).collect();
    chart.draw_series(std::iter::once(PathElement::new(medians, GAP.stroke_width(2))))?;
    chart.draw_series(
        points.iter().enumerate().filter_map(|(i, p)| Some(Circle::new((i as f64, q(p, 0.5)?), 4, GAP.filled()))),
    )?;

    let mut chart = ChartBuilder::on(&bottom)
        .caption("false evictions per leader pause (Wilson 95 %)", ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, 0.0..1.0)?;
    chart.configure_mesh().x_labels(n).x_label_formatter(&label).y_desc("rate").draw()?;
    let rates: Vec<(f64, f64, f64, f64)> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.leader_pauses > 0)
        .map(|(i, p)| {
            let (lo, hi) = wilson95(p.false_evictions, p.leader_pauses);
            (i as f64, p.false_evictions as f64 / p.leader_pauses as f64, lo, hi)
        })
        .collect();
    chart.draw_series(
        rates.iter().map(|&(x, _, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], EVICT.stroke_width(2))),
    )?;
    let line: Vec<(f64, f64)> = rates.iter().map(|&(x, r, _, _)| (x, r)).collect();
    chart.draw_series(std::iter::once(PathElement::new(line, EVICT.stroke_width(2))))?;
    chart.draw_series(rates.iter().map(|&(x, r, _, _)| Circle::new((x, r), 4, EVICT.filled())))?;
    root.present()?;
    Ok(())
}

/// histograms.svg: one small histogram of gaps per point.
pub fn histograms(path: &Path, points: &[PointData]) -> PlotResult {
    let n = points.len().max(1);
    let cols = n.min(3);
    let rows = n.div_ceil(cols);
    let root = SVGBackend::new(path, (300 * cols as u32, 220 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, p) in root.split_evenly((rows, cols)).iter().zip(points) {
        let (Some(lo), Some(hi)) = (p.gaps_ms.first(), p.gaps_ms.last()) else {
            area.draw(&Text::new(format!("{}: no gaps", p.label), (10, 20), ("sans-serif", 12)))?;
            continue;
        };
        let (lo, hi) = (lo / 1000.0, (hi / 1000.0).max(lo / 1000.0 + 1e-3));
        let bins = 12;
        let width = (hi - lo) / bins as f64;
        let mut counts = vec![0u32; bins];
        for g in &p.gaps_ms {
            let b = (((g / 1000.0 - lo) / width) as usize).min(bins - 1);
            counts[b] += 1;
        }
        let top = *counts.iter().max().unwrap_or(&1);
        let mut chart = ChartBuilder::on(area)
            .caption(&p.label, ("sans-serif", 11))
            .margin(8)
            .x_label_area_size(22)
            .y_label_area_size(30)
            .build_cartesian_2d(lo..hi + width, 0u32..top + 1)?;
        chart.configure_mesh().x_labels(4).y_labels(4).x_desc("gap (s)").draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(b, c)| {
            let x0 = lo + b as f64 * width;
            Rectangle::new([(x0, 0), (x0 + width, *c)], GAP.mix(0.7).filled())
        }))?;
    }
    root.present()?;
    Ok(())
}

/// Draw both plots into `dir` from its CSVs.
pub fn draw(dir: &Path, title: &str) -> Result<(), Box<dyn std::error::Error>> {
    let points = load(dir)?;
    dial(&dir.join("dial.svg"), title, &points)?;
    histograms(&dir.join("histograms.svg"), &points)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plots_are_svg_documents() {
        let dir = tempfile::tempdir().unwrap();
        let points = vec![
            PointData {
                label: "lease=3s".into(),
                gaps_ms: vec![3000.0, 3500.0, 4000.0],
                leader_pauses: 10,
                false_evictions: 4,
            },
            PointData {
                label: "lease=9s".into(),
                gaps_ms: vec![9000.0, 9500.0],
                leader_pauses: 10,
                false_evictions: 0,
            },
            PointData { label: "lease=15s".into(), gaps_ms: vec![], leader_pauses: 0, false_evictions: 0 },
        ];
        dial(&dir.path().join("dial.svg"), "t", &points).unwrap();
        histograms(&dir.path().join("histograms.svg"), &points).unwrap();
        for f in ["dial.svg", "histograms.svg"] {
            let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
            let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{f} is not XML: {e}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg", "{f}");
            let count = |tag: &str| doc.descendants().filter(|n| n.tag_name().name() == tag).count();
            assert!(count("rect") >= 3 && count("text") > 5, "{f} draws bars and labels");
        }
    }
}
