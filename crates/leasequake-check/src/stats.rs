//! The few lines of statistics the summary needs.

/// Linear-interpolated percentile of sorted values (R's type 7, numpy's
/// default), `q` in [0, 1]. None for no values.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    percentile_of(sorted.len() as u64, q, |k| sorted[k as usize])
}

/// The same over `n` values known by rank: `nth(k)` is the `k`-th smallest
/// (from 0), asked for at most twice.
pub fn percentile_of(n: u64, q: f64, nth: impl Fn(u64) -> f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    if n == 1 || q <= 0.0 {
        return Some(nth(0));
    }
    if q >= 1.0 {
        return Some(nth(n - 1));
    }
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as u64;
    let frac = pos - lo as f64;
    let a = nth(lo);
    Some(a + (nth((lo + 1).min(n - 1)) - a) * frac)
}

/// Wilson score interval for k successes in n trials at 95 %: honest for
/// small n and for k = 0, where the normal approximation says "0 ± 0".
pub fn wilson95(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 1.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 0.9), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn wilson_matches_known_values() {
        // 3/30 (the blog's naive race): 3.5 % – 25.6 %.
        let (lo, hi) = wilson95(3, 30);
        assert!((lo - 0.0346).abs() < 5e-4 && (hi - 0.2562).abs() < 5e-4, "{lo} {hi}");
        // 0/30 is not "0 %": up to 11.4 %.
        let (lo, hi) = wilson95(0, 30);
        assert!(lo == 0.0 && (hi - 0.1135).abs() < 5e-4, "{hi}");
    }
}
