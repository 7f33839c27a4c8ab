//! `faults: {random: …}`: a campaign. Instead of a script, the kinds of
//! fault to mix, how many of each and how long; every trial draws its own
//! schedule from its seed. The draw is a list of ordinary faults at fixed
//! moments with fixed lengths, so a trial's schedule can be rebuilt, run
//! again and shrunk like a hand-written one.

use super::duration::Dur;
use super::faults::{Fault, PauseLen};

/// The most faults one trial of a campaign draws; a draw past it is cut
/// (the earliest are kept).
pub const MAX_RANDOM_FAULTS: usize = 1000;

/// What a campaign draws from.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomFaults {
    /// Faults fall in [from, until) after the barrier (scaled); none: the
    /// whole trial, whatever its length (a sweep may vary it).
    pub window: Option<[Dur; 2]>,
    pub kinds: Vec<RandomKind>,
}

/// One kind of fault and how many of it a trial gets.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomKind {
    /// What is done and to whom, as a scripted fault says it; its `at` is
    /// the window's start, and a drawn length is drawn again per fault.
    pub fault: Fault,
    pub count: RandomCount,
}

/// How many faults of a kind one trial gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RandomCount {
    /// Between these (inclusive), drawn per trial; each at a uniform moment
    /// of the window.
    Between(u32, u32),
    /// A Poisson process of this mean interval over the window (memoryless
    /// faults: a crash can come at any moment, independently of the last).
    MeanInterval(Dur),
}

impl RandomCount {
    /// The most faults this count can ask for in a window this long
    /// (a Poisson process: its mean).
    pub fn expected(&self, window: Dur) -> f64 {
        match self {
            RandomCount::Between(_, max) => f64::from(*max),
            RandomCount::MeanInterval(m) => window.as_us() as f64 / m.as_us().max(1) as f64,
        }
    }
}

impl RandomFaults {
    /// One trial's schedule, for a trial `end` long: every kind's faults at
    /// their drawn moments, with drawn lengths fixed, in time order.
    pub fn draw(&self, end: Dur, rng: &mut impl rand::Rng) -> Vec<Fault> {
        let [from, until] = self.window.unwrap_or([Dur::ZERO, end]);
        let (from, until) = (from.as_us(), until.as_us().max(from.as_us() + 1));
        let mut out = Vec::new();
        for kind in &self.kinds {
            let times: Vec<u64> = match kind.count {
                RandomCount::Between(min, max) => {
                    let n = if max > min { rng.random_range(min..=max) } else { min };
                    (0..n).map(|_| rng.random_range(from..until)).collect()
                }
                RandomCount::MeanInterval(mean) => {
                    let mut t = from as f64;
                    let mut times = Vec::new();
                    while times.len() < MAX_RANDOM_FAULTS {
                        let u: f64 = rng.random_range(f64::EPSILON..1.0);
                        t += -u.ln() * mean.as_us() as f64;
                        if t >= until as f64 {
                            break;
                        }
                        times.push(t as u64);
                    }
                    times
                }
            };
            for at in times {
                let duration = kind.fault.duration.as_ref().map(|len| PauseLen::Fixed(len.sample(rng)));
                out.push(Fault { at: Dur::from_us(at), jitter: Dur::ZERO, duration, ..kind.fault.clone() });
            }
        }
        out.sort_by_key(|f| f.at);
        out.truncate(MAX_RANDOM_FAULTS);
        out
    }

    pub fn scaled(&self, s: f64) -> RandomFaults {
        RandomFaults {
            window: self.window.map(|[a, b]| [a.scaled(s), b.scaled(s)]),
            kinds: self
                .kinds
                .iter()
                .map(|k| RandomKind {
                    fault: k.fault.scaled(s),
                    count: match k.count {
                        RandomCount::MeanInterval(m) => RandomCount::MeanInterval(m.scaled(s)),
                        c => c,
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::faults::{Action, Target};

    fn kind(action: Action, count: RandomCount, duration: Option<PauseLen>) -> RandomKind {
        RandomKind {
            fault: Fault {
                at: Dur::ZERO,
                jitter: Dur::ZERO,
                after: None,
                target: Target::Leader,
                action,
                duration,
                every: None,
                net: None,
                skew: None,
            },
            count,
        }
    }

    fn campaign() -> RandomFaults {
        RandomFaults {
            window: Some([Dur::from_secs(5), Dur::from_secs(50)]),
            kinds: vec![
                kind(Action::Kill, RandomCount::Between(2, 2), None),
                kind(
                    Action::Pause,
                    RandomCount::MeanInterval(Dur::from_secs(5)),
                    Some(PauseLen::Uniform([Dur::from_secs(1), Dur::from_secs(3)])),
                ),
            ],
        }
    }

    #[test]
    fn a_draw_is_the_seed_s_and_stays_in_the_window() {
        let draw = |seed| campaign().draw(Dur::from_secs(60), &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        for f in draw(3) {
            assert!(f.at >= Dur::from_secs(5) && f.at < Dur::from_secs(50), "{f:?}");
            assert_eq!(f.jitter, Dur::ZERO);
            if f.action == Action::Pause {
                let Some(PauseLen::Fixed(d)) = f.duration else { panic!("a drawn pause has a fixed length: {f:?}") };
                assert!(d >= Dur::from_secs(1) && d < Dur::from_secs(3));
            }
        }
        let d = draw(3);
        assert!(d.windows(2).all(|w| w[0].at <= w[1].at), "in time order");
        assert_eq!(d.iter().filter(|f| f.action == Action::Kill).count(), 2);
    }

    #[test]
    fn a_poisson_kind_draws_about_window_over_mean() {
        let c = campaign();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let n = 2000;
        let pauses: usize = (0..n)
            .map(|_| c.draw(Dur::from_secs(60), &mut rng).iter().filter(|f| f.action == Action::Pause).count())
            .sum();
        let mean = pauses as f64 / n as f64;
        // 45 s / 5 s = 9 per trial; the standard error of the mean is 3/√2000.
        assert!((mean - 9.0).abs() < 0.3, "mean {mean}");
    }

    #[test]
    fn a_draw_is_bounded() {
        let c = RandomFaults {
            window: None,
            kinds: vec![kind(Action::Kill, RandomCount::MeanInterval(Dur::from_ms(1)), None)],
        };
        let d = c.draw(Dur::from_secs(3600), &mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        assert_eq!(d.len(), MAX_RANDOM_FAULTS);
    }
}
