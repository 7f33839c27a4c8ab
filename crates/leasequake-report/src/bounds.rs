//! A measured time against its bound, in the experiment's own time: the
//! arithmetic every verdict shares, below the tables that print it.

/// ms as ran → seconds in the experiment's own time.
pub fn own_s(ms: f64, scale: f64) -> f64 {
    ms / 1000.0 / scale
}

/// Why gaps fall outside `[lo, hi]` (ms as run), with as many decimals as
/// the difference needs: a ✗ a reader can check against the cells beside it.
pub fn outside_by(min: Option<f64>, max: Option<f64>, (lo, hi): (f64, f64), scale: f64) -> Vec<String> {
    let mut out = Vec::new();
    let say = |what: &str, v: f64, sign: &str, bound: f64| {
        // Two significant digits of the difference, at least a tenth of a
        // millisecond: the two times must differ where they are printed.
        let d = (v - bound).abs() / scale;
        let ms = ((1.0 - d.log10().floor()).max(1.0) as usize).min(6);
        let s = ms + 3;
        format!(
            "gaps {what} {:.s$} s {sign} {:.s$} s, by {d:.ms$} ms of own time",
            own_s(v, scale),
            own_s(bound, scale)
        )
    };
    if let Some(min) = min.filter(|m| *m < lo) {
        out.push(say("from", min, "<", lo));
    }
    if let Some(max) = max.filter(|m| *m > hi) {
        out.push(say("up to", max, ">", hi));
    }
    out
}
