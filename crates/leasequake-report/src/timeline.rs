//! timeline.svg: what really happened in one trial, drawn so it can be set
//! beside the blog's sequence diagram. One lane per worker; leader tenure as
//! bars, paused spans shaded, faults and deaths as markers, leaderless and
//! double-leader spans as bands across all lanes.

use std::path::Path;

use plotters::prelude::*;

use crate::check::TrialMetrics;
use crate::model::history::{Event, EventKind, History, Micros};

/// What a timeline draws of a history: its faults and deaths (the rest
/// comes from the trial's metrics), all a reader need keep of it.
pub fn draws(event: &Event) -> bool {
    matches!(event.kind, EventKind::Fault | EventKind::Exit)
}

const TENURE: RGBColor = RGBColor(46, 110, 190);
const PAUSED: RGBColor = RGBColor(150, 150, 150);
const GAP: RGBColor = RGBColor(235, 90, 70);
const DOUBLE: RGBColor = RGBColor(245, 170, 40);
const FAULT: RGBColor = RGBColor(180, 20, 20);

/// Draw trial `trial` of `history` into `path`, in the experiment's own
/// time (`scale` is the run's time scale).
pub fn render(
    path: &Path,
    title: &str,
    history: &History,
    m: &TrialMetrics,
    workers: usize,
    scale: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(path, svg(title, history, m, workers, scale)?)?;
    Ok(())
}

/// `dir/timeline.svg`: trial 1 of a run, to set beside the blog's diagram;
/// `exp` is the trial's sweep point (or the experiment). A plot is derived
/// output: failing to draw it loses no result, so it is only warned of.
pub fn trial_one(dir: &Path, exp: &crate::model::Experiment, history: &History, m: &TrialMetrics) {
    let title = format!("{}: trial 1 ({})", exp.name, super::terminal::describe(exp));
    let path = dir.join("timeline.svg");
    if let Err(e) = render(&path, &title, history, m, exp.workers, exp.time_scale) {
        crate::warnln!("warning: {}: {e}", path.display());
    }
}

/// The timeline as an SVG document.
pub fn svg(
    title: &str,
    history: &History,
    m: &TrialMetrics,
    workers: usize,
    scale: f64,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut out = String::new();
    draw(&mut out, title, history, m, workers, scale)?;
    Ok(out)
}

fn draw(
    out: &mut String,
    title: &str,
    history: &History,
    m: &TrialMetrics,
    workers: usize,
    scale: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let secs = |us: Micros| us as f64 / 1e6 / scale;
    let lanes = workers.max(1);
    let height = 120 + 44 * lanes as u32;
    let root = SVGBackend::with_string(out, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, legend) = root.split_vertically(height - 34);
    let end = secs(m.end_us).max(1e-3);
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..end, 0.0..lanes as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("seconds since the barrier, in the experiment's own time")
        .draw()?;

    // Worker w is drawn top-down: lane (lanes - 1 - w).
    let lane = |w: usize| (lanes - 1 - w.min(lanes - 1)) as f64;
    let band = |(a, b): (Micros, Micros), color: RGBColor| {
        Rectangle::new([(secs(a), 0.0), (secs(b), lanes as f64)], color.mix(0.18).filled())
    };
    chart.draw_series(m.gaps.iter().map(|g| band((g.start_us, g.end_us), GAP)))?;
    chart.draw_series(m.spans.double_leader.iter().map(|s| band(*s, DOUBLE)))?;
    chart.draw_series(m.spans.tenures.iter().map(|t| {
        let y = lane(t.worker);
        Rectangle::new([(secs(t.start_us), y + 0.3), (secs(t.end_us), y + 0.6)], TENURE.filled())
    }))?;
    chart.draw_series(m.spans.pauses.iter().map(|p| {
        let y = lane(p.worker);
        Rectangle::new([(secs(p.start_us), y + 0.2), (secs(p.end_us), y + 0.7)], PAUSED.mix(0.45).filled())
    }))?;
    chart.draw_series((0..lanes).map(|w| {
        let label = format!("worker {w}");
        Text::new(label, (end * 0.005, lane(w) + 0.95), ("sans-serif", 11).into_font().color(&BLACK.mix(0.7)))
    }))?;

    let in_trial = |t: Micros| t >= 0 && t <= m.end_us;
    let faults: Vec<_> = history
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Fault && e.detail.error.is_none() && in_trial(e.t_us))
        .collect();
    chart.draw_series(faults.iter().map(|e| {
        let (y0, y1) = match e.worker {
            Some(w) => (lane(w) + 0.1, lane(w) + 0.8),
            None => (0.0, lanes as f64),
        };
        PathElement::new(vec![(secs(e.t_us), y0), (secs(e.t_us), y1)], FAULT.stroke_width(2))
    }))?;
    // Labels of faults close in time (a stop and its cont) step down a row
    // in their lane instead of printing over each other.
    let px_per_s = 960.0 / end;
    let mut last_end: std::collections::HashMap<Option<usize>, Vec<f64>> = std::collections::HashMap::new();
    let labels: Vec<(String, f64, f64)> = faults
        .iter()
        .map(|e| {
            let label = format!(" {}", e.detail.action.clone().unwrap_or_default());
            let x = secs(e.t_us) * px_per_s;
            let rows = last_end.entry(e.worker).or_default();
            let row = rows.iter().position(|&free_from| x >= free_from).unwrap_or(rows.len());
            let right = x + 7.0 * label.len() as f64;
            if row == rows.len() {
                rows.push(right)
            } else {
                rows[row] = right
            }
            let top = e.worker.map_or(lanes as f64 - 0.05, |w| lane(w) + 0.8);
            (label, secs(e.t_us), top - 0.22 * row as f64)
        })
        .collect();
    chart.draw_series(
        labels.into_iter().map(|(label, x, y)| Text::new(label, (x, y), ("sans-serif", 11).into_font().color(&FAULT))),
    )?;
    chart.draw_series(
        history
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Exit && in_trial(e.t_us))
            .filter_map(|e| e.worker.map(|w| Cross::new((secs(e.t_us), lane(w) + 0.45), 6, BLACK.stroke_width(2)))),
    )?;

    // The legend in its own strip, so it never covers the lanes.
    let items: [(&str, ShapeStyle); 6] = [
        ("believes it leads", TENURE.filled()),
        ("paused (SIGSTOP)", PAUSED.mix(0.45).filled()),
        ("no active leader", GAP.mix(0.35).filled()),
        ("two or more believe they lead", DOUBLE.mix(0.45).filled()),
        ("fault", FAULT.filled()),
        ("x  process died", WHITE.filled()),
    ];
    let mut x = 20;
    for (label, style) in items {
        legend.draw(&Rectangle::new([(x, 10), (x + 14, 22)], style))?;
        legend.draw(&Text::new(label, (x + 20, 10), ("sans-serif", 12)))?;
        x += 30 + 7 * label.len() as i32;
    }
    root.present()?;
    Ok(())
}
