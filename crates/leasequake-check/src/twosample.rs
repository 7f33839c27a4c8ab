//! Two samples compared: did a change of setting move a metric, by how
//! much, and how sure can one be? Durations (gaps, recoveries) by the
//! Mann–Whitney U test with the Hodges–Lehmann shift and its interval;
//! rates (two-leader trials of n) by Newcombe's interval on the difference
//! of two proportions with Fisher's exact test; Holm's correction when
//! several metrics are compared at once. Rank tests because gaps are not
//! normal (a gap is a lease less a phase, bounded, often bimodal), and
//! exact forms where samples are small, as they are here (5 to 30 trials).

use crate::stats::wilson95;

/// A shift between two samples of durations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shift {
    /// The Hodges–Lehmann estimate of B − A: the median of every
    /// difference b − a.
    pub estimate: f64,
    /// Its 95 % interval (from the U distribution's quantiles); infinite
    /// ends where the samples are too small for one (3 against 3).
    pub low: f64,
    pub high: f64,
    /// How often a value of B exceeds one of A (ties a half): U / (m·n),
    /// the direction where the shift is 0 (most trials had no such time).
    pub b_above: f64,
    /// Two-sided p of the Mann–Whitney U test that neither tends larger.
    pub p: f64,
    /// Exact (no ties, small samples) or the normal approximation.
    pub exact: bool,
}

/// A difference between two rates, k1/n1 (A) and k2/n2 (B).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateDiff {
    /// p2 − p1.
    pub estimate: f64,
    /// Newcombe's hybrid score interval (his method 10) at 95 %.
    pub low: f64,
    pub high: f64,
    /// Two-sided p of Fisher's exact test.
    pub p: f64,
}

/// Up to this many values in both samples together, without ties, U's
/// distribution is counted exactly.
const EXACT_MAX: usize = 60;

/// B − A for durations; None when either sample is empty.
pub fn shift(a: &[f64], b: &[f64]) -> Option<Shift> {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mut diffs: Vec<f64> = b.iter().flat_map(|y| a.iter().map(move |x| y - x)).collect();
    diffs.sort_by(f64::total_cmp);
    let estimate = median(&diffs);
    let u = u_statistic(a, b);
    let ties = has_ties(a, b);
    let mn = (m * n) as f64;
    // The interval runs from the k-th smallest difference to the k-th
    // largest: k − 1 are left out at each end.
    let (p, k, exact) = if !ties && m + n <= EXACT_MAX {
        let counts = u_counts(m, n);
        let total: f64 = counts.iter().sum();
        let cdf = |u: usize| counts[..=u.min(counts.len() - 1)].iter().sum::<f64>() / total;
        let lower = u.min(mn - u) as usize;
        let p = (2.0 * cdf(lower)).min(1.0);
        // The largest k with P(U < k) ≤ 2.5 %.
        let k = (0..counts.len()).take_while(|&k| k == 0 || cdf(k - 1) <= 0.025).last().unwrap_or(0);
        (p, k, true)
    } else {
        let sigma = u_sigma(a, b);
        let z = if sigma > 0.0 { ((u - mn / 2.0).abs() - 0.5).max(0.0) / sigma } else { 0.0 };
        let p = if sigma > 0.0 { (2.0 * normal_sf(z)).min(1.0) } else { 1.0 };
        let k = (mn / 2.0 - Z95 * sigma).floor().max(0.0) as usize;
        (p, k, false)
    };
    let (low, high) = if k == 0 {
        // Too few values for a 95 % interval: even the whole range of the
        // differences covers less.
        (f64::NEG_INFINITY, f64::INFINITY)
    } else {
        // A spread so small the interval would cross itself: its middle.
        let k = k.min(diffs.len().div_ceil(2));
        (diffs[k - 1], diffs[diffs.len() - k])
    };
    Some(Shift { estimate, low, high, b_above: u / mn, p, exact })
}

/// B's rate less A's; None when either has no trials.
pub fn rate_diff(k1: usize, n1: usize, k2: usize, n2: usize) -> Option<RateDiff> {
    if n1 == 0 || n2 == 0 || k1 > n1 || k2 > n2 {
        return None;
    }
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let (l1, u1) = wilson95(k1, n1);
    let (l2, u2) = wilson95(k2, n2);
    let estimate = p2 - p1;
    let low = estimate - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt();
    let high = estimate + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt();
    Some(RateDiff { estimate, low: low.max(-1.0), high: high.min(1.0), p: fisher(k1, n1, k2, n2) })
}

/// Holm's step-down adjustment: each p multiplied by how many are left at
/// its rank, kept monotone; the family's error stays at the level asked.
pub fn holm(ps: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|&i, &j| ps[i].total_cmp(&ps[j]));
    let mut out = vec![0.0; ps.len()];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((ps.len() - rank) as f64 * ps[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Fisher's exact test, two-sided: the probability, with both margins
/// fixed, of a table as unlikely as the one seen or less.
pub fn fisher(k1: usize, n1: usize, k2: usize, n2: usize) -> f64 {
    let (n, k) = (n1 + n2, k1 + k2);
    let lo = k.saturating_sub(n2);
    let hi = k.min(n1);
    let ln_p = |x: usize| ln_choose(n1, x) + ln_choose(n2, k - x) - ln_choose(n, k);
    let seen = ln_p(k1);
    let p: f64 = (lo..=hi).map(ln_p).filter(|&l| l <= seen + 1e-7).map(f64::exp).sum();
    p.min(1.0)
}

fn ln_choose(n: usize, k: usize) -> f64 {
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// U of B: the pairs (a, b) with b > a, a tie counting a half.
fn u_statistic(a: &[f64], b: &[f64]) -> f64 {
    b.iter()
        .map(|y| {
            a.iter()
                .map(|x| match y.total_cmp(x) {
                    std::cmp::Ordering::Greater => 1.0,
                    std::cmp::Ordering::Equal => 0.5,
                    std::cmp::Ordering::Less => 0.0,
                })
                .sum::<f64>()
        })
        .sum()
}

fn has_ties(a: &[f64], b: &[f64]) -> bool {
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    all.windows(2).any(|w| w[0] == w[1])
}

/// U's standard deviation under no difference, corrected for ties.
fn u_sigma(a: &[f64], b: &[f64]) -> f64 {
    let (m, n) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let j = all[i..].iter().take_while(|v| **v == all[i]).count();
        let t = j as f64;
        tie_term += t * t * t - t;
        i += j;
    }
    let total = m + n;
    (m * n / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)).max(1.0))).max(0.0).sqrt()
}

/// How many orderings of m A's and n B's give each U from 0 to m·n
/// (counted, not approximated: the classic recursion over the last value).
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    // c[i][j][u] by rolling over j: counts for i A's and j B's.
    let size = m * n + 1;
    let mut prev: Vec<Vec<f64>> = (0..=m).map(|_| vec![0.0; size]).collect();
    for row in prev.iter_mut() {
        row[0] = 1.0; // no B's: U = 0
    }
    for _ in 0..n {
        let mut cur: Vec<Vec<f64>> = (0..=m).map(|_| vec![0.0; size]).collect();
        cur[0][0] = 1.0; // no A's: U = 0
        for i in 1..=m {
            for u in 0..size {
                // The largest value is a B (it beats all i A's) or an A.
                let from_b = if u >= i { prev[i][u - i] } else { 0.0 };
                cur[i][u] = from_b + cur[i - 1][u];
            }
        }
        prev = cur;
    }
    prev.swap_remove(m)
}

const Z95: f64 = 1.959_963_984_540_054;

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, to about 1e-7 relative (a Chebyshev
/// fit, as in Numerical Recipes' erfcc): ample for a p-value.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn a_known_shift_is_found_with_its_interval() {
        // B is A moved 2 s later: the estimate is exactly 2, the interval
        // holds it and the test finds it.
        let a: Vec<f64> = (0..20).map(|i| 5.0 + f64::from(i) * 0.13).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 2.0).collect();
        let s = shift(&a, &b).unwrap();
        assert!(close(s.estimate, 2.0, 1e-9), "{s:?}");
        assert!(s.low <= 2.0 && 2.0 <= s.high && s.high - s.low < 1.5, "{s:?}");
        assert!(s.p < 0.001 && s.exact, "{s:?}");
    }

    #[test]
    fn the_exact_u_test_matches_published_values() {
        // Wilcoxon rank-sum, m = n = 3, all B above all A: p = 2/20 = 0.1
        // (R: wilcox.test(c(1,2,3), c(4,5,6))$p.value = 0.1).
        let s = shift(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(close(s.p, 0.1, 1e-12), "{s:?}");
        // Too small for a 95 % interval: its ends are unbounded.
        assert_eq!((s.low, s.high), (f64::NEG_INFINITY, f64::INFINITY));
        assert_eq!(s.b_above, 1.0);
        // m = 4, n = 5, U of B = 4: P(U ≤ 4) = 12/126, p = 24/126
        // (R: wilcox.test(c(4,5,8,9), c(1,2,3,6,7))$p.value = 0.1905).
        let s = shift(&[4.0, 5.0, 8.0, 9.0], &[1.0, 2.0, 3.0, 6.0, 7.0]).unwrap();
        assert!(close(s.p, 24.0 / 126.0, 1e-12), "{s:?}");
        // The counts of U are symmetric and sum to C(m + n, m).
        let c = u_counts(4, 5);
        assert_eq!(c.iter().sum::<f64>(), 126.0);
        assert!(c.iter().zip(c.iter().rev()).all(|(x, y)| x == y));
    }

    #[test]
    fn two_samples_of_the_same_thing_show_no_difference() {
        let a = [5.1, 6.3, 7.7, 5.9, 8.2, 6.8, 7.1, 5.5];
        let b = [6.0, 7.4, 5.3, 8.0, 6.6, 7.9, 5.8, 6.9];
        let s = shift(&a, &b).unwrap();
        assert!(s.p > 0.5 && s.low < 0.0 && 0.0 < s.high, "{s:?}");
        // With ties: the normal approximation, still no difference.
        let s = shift(&[1.0, 1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 2.0, 3.0, 3.0]).unwrap();
        assert!(!s.exact && s.p > 0.3, "{s:?}");
    }

    #[test]
    fn rates_are_compared_by_newcombe_and_fisher() {
        // Newcombe (1998), table II, example (a): 56/70 − 48/80 = 0.2, CI
        // 0.0524–0.3339; written here as B − A with B = 56/70.
        let d = rate_diff(48, 80, 56, 70).unwrap();
        assert!(close(d.estimate, 0.2, 1e-12));
        assert!(close(d.low, 0.0524, 5e-4) && close(d.high, 0.3339, 5e-4), "{d:?}");
        // 3/30 against 0/30: not significant (R: fisher.test p = 0.2373).
        let d = rate_diff(3, 30, 0, 30).unwrap();
        assert!(close(d.p, 0.237_29, 1e-4) && d.low < 0.0 && d.high > 0.0, "{d:?}");
        // 0/30 against 30/30: p tiny.
        assert!(rate_diff(0, 30, 30, 30).unwrap().p < 1e-15);
        assert_eq!(rate_diff(1, 0, 1, 2), None);
    }

    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        assert!(close(adj[0], 0.04, 1e-12));
        assert!(close(adj[2], 0.09, 1e-12));
        assert!(close(adj[1], 0.09, 1e-12), "monotone: not below the one before");
        assert!(close(adj[3], 0.5, 1e-12));
    }

    #[test]
    fn the_normal_tail_is_right_where_it_matters() {
        assert!(close(normal_sf(0.0), 0.5, 1e-7));
        assert!(close(normal_sf(Z95), 0.025, 1e-7));
        assert!(close(normal_sf(-1.0), 0.841_344_746, 1e-7));
    }
}
