//! Durations counted by value: a trial's latencies in the space of the
//! distinct values they take, not of the operations, so that a history of
//! any length is summed up in memory that does not grow with it.
//!
//! Percentiles are exact while the samples take at most `EXACT` distinct
//! values (the workers time in whole µs, and an operation takes from a few
//! µs to a few seconds: a long soak or a large suite can go past it). Past that, each value
//! is kept to its 11 leading bits, within 1/1024 of itself: a percentile
//! is then off by less than 0.1 %, and the counts never hold more than
//! 1024 values per power of two.

use std::collections::HashMap;

use super::stats::percentile_of;
use std::hash::{BuildHasherDefault, Hasher};

/// How many distinct values are kept exactly.
pub const EXACT: usize = 1 << 16;

/// Significant bits a value keeps once the samples are coarse.
const BITS: u32 = 11;

/// Counted by a hash of the value, for speed (each operation of a trial
/// is counted); ordered only when a percentile is asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Samples {
    counts: HashMap<u64, u64, BuildHasherDefault<Mix>>,
    n: u64,
    coarse: bool,
}

/// A multiplicative hash of a value, all a count by value needs (no
/// adversary chooses the durations).
#[derive(Default)]
pub struct Mix(u64);

impl Hasher for Mix {
    /// The product's high bits folded down: a value's trailing zeros (a
    /// coarse value, a time in whole ms) must not all land in one bucket.
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// `v` to its `BITS` leading bits.
fn coarsen(v: u64) -> u64 {
    let shift = (64 - v.leading_zeros()).saturating_sub(BITS);
    (v >> shift) << shift
}

impl Samples {
    pub fn push(&mut self, v: u64) {
        self.add(v, 1);
    }

    fn add(&mut self, v: u64, n: u64) {
        let v = if self.coarse { coarsen(v) } else { v };
        *self.counts.entry(v).or_default() += n;
        self.n += n;
        if !self.coarse && self.counts.len() > EXACT {
            self.coarse = true;
            let exact = std::mem::take(&mut self.counts);
            for (v, n) in exact {
                *self.counts.entry(coarsen(v)).or_default() += n;
            }
        }
    }

    /// Another's samples added to these (a suite's: all its trials').
    pub fn extend(&mut self, other: &Samples) {
        if other.coarse && !self.coarse {
            self.coarse = true;
            let exact = std::mem::take(&mut self.counts);
            for (v, n) in exact {
                *self.counts.entry(coarsen(v)).or_default() += n;
            }
        }
        for (&v, &n) in &other.counts {
            self.add(v, n);
        }
    }

    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn max(&self) -> Option<u64> {
        self.counts.keys().max().copied()
    }

    /// The values and their counts, smallest first.
    fn sorted(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.counts.iter().map(|(&v, &n)| (v, n)).collect();
        v.sort_unstable();
        v
    }

    /// The `k`-th smallest (from 0) of `sorted`.
    fn nth_of(sorted: &[(u64, u64)], k: u64) -> Option<u64> {
        let mut seen = 0;
        for &(v, n) in sorted {
            seen += n;
            if seen > k {
                return Some(v);
            }
        }
        None
    }

    /// The `k`-th smallest (from 0).
    pub fn nth(&self, k: u64) -> Option<u64> {
        Samples::nth_of(&self.sorted(), k)
    }

    /// How many are above `v`.
    pub fn above(&self, v: u64) -> usize {
        self.counts.iter().filter(|(x, _)| **x > v).map(|(_, n)| *n as usize).sum()
    }

    /// The linear-interpolated percentile (R's type 7, numpy's default, as
    /// `stats::percentile`), `q` in [0, 1]; None for no samples.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        let sorted = self.sorted();
        percentile_of(self.n, q, |k| Samples::nth_of(&sorted, k).unwrap_or(0) as f64)
    }

    /// Every sample, smallest first.
    pub fn values(&self) -> impl Iterator<Item = u64> {
        self.sorted().into_iter().flat_map(|(v, n)| std::iter::repeat_n(v, n as usize))
    }
}

impl FromIterator<u64> for Samples {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Samples {
        let mut s = Samples::default();
        iter.into_iter().for_each(|v| s.push(v));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::percentile;

    #[test]
    fn percentiles_are_those_of_the_values_sorted() {
        let values = [5u64, 1, 9, 9, 3, 120, 7, 7, 7, 2];
        let s: Samples = values.iter().copied().collect();
        let mut sorted: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        sorted.sort_by(f64::total_cmp);
        for q in [0.0, 0.1, 0.25, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(s.percentile(q), percentile(&sorted, q), "q {q}");
        }
        assert_eq!((s.len(), s.max()), (10, Some(120)));
        assert_eq!(Samples::default().percentile(0.5), None);
        let mut both = s.clone();
        both.extend(&s);
        assert_eq!(both.len(), 20);
        assert_eq!(both.percentile(0.5), s.percentile(0.5));
    }

    #[test]
    fn past_the_exact_bound_a_percentile_is_within_a_thousandth() {
        let values: Vec<u64> = (0..3 * EXACT as u64).map(|k| 1_000 + k * 7).collect();
        let s: Samples = values.iter().copied().collect();
        assert!(s.coarse);
        assert!(s.counts.len() <= 64 * (1 << BITS));
        let sorted: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        for q in [0.01, 0.5, 0.99] {
            let (got, want) = (s.percentile(q).unwrap(), percentile(&sorted, q).unwrap());
            assert!((got - want).abs() <= want / 1000.0, "q {q}: {got} against {want}");
        }
    }
}
