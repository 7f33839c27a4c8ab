//! Axes that read as short numbers: a unit for a span of seconds, tick
//! labels rounded to what the span needs.

/// A unit for an axis of seconds, so that its ticks read as short numbers:
/// the largest of s, ms and µs in which `max` is at least 1.
pub(super) fn unit_for(max: f64) -> (&'static str, f64) {
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
pub(super) fn tick_label(v: f64, span: f64) -> String {
    let decimals = if span > 0.0 { (2.0 - span.log10().floor()).clamp(0.0, 6.0) as usize } else { 2 };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    if text == "-0" { "0".to_string() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
