//! histograms.svg: each point's gaps on its own axis.

use std::path::Path;

use plotters::prelude::*;

use super::axis::tick_label;
use super::{BAND, GAP, PlotResult, PointData};

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
