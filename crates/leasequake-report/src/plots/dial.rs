//! dial.svg: the gap against the swept interval, and a rate with its
//! Wilson interval.

use std::path::Path;

use plotters::prelude::*;

use super::axis::{tick_label, unit_for};
use super::{BAND, PALETTE, PlotResult, PointData, is_duration, layout, value};
use crate::check::stats::wilson95;

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
