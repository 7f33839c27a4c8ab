//! When an adaptive run (`trials: {until: {ci_width}}`) has run enough:
//! the rule that stops it, pure over the counts its trials gave. The run
//! applies it between trials; the reports only say where it stands.

use leasequake_model::{Action, Experiment, Until};

use crate::stats::wilson95;

/// The rate an adaptive run watches: false evictions per leader pause where
/// the experiment pauses leaders, else trials with two leaders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headline {
    pub what: &'static str,
    pub k: usize,
    pub n: usize,
}

/// What the trials so far counted that a headline can be.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub trials: usize,
    pub double_leader_trials: usize,
    pub false_evictions: usize,
    pub leader_pauses: usize,
}

impl Headline {
    pub fn of(exp: &Experiment, c: &Counts) -> Headline {
        if exp.fault_kinds().any(|f| matches!(f.action, Action::Pause | Action::Stop)) {
            Headline { what: "false evictions per leader pause", k: c.false_evictions, n: c.leader_pauses }
        } else {
            Headline { what: "trials with two leaders", k: c.double_leader_trials, n: c.trials }
        }
    }
}

/// How wide the headline rate's 95 % interval is now, and whether that is
/// enough for `until` (after its fewest trials).
pub fn settled(until: &Until, trials: usize, h: &Headline) -> (f64, bool) {
    let (lo, hi) = wilson95(h.k, h.n);
    let width = if h.n == 0 { 1.0 } else { hi - lo };
    (width, trials >= until.min as usize && width <= until.ci_width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_stops_once_its_fewest_trials_ran_and_the_interval_is_narrow_enough() {
        let until = Until { ci_width: 0.2, min: 10 };
        let none = |n| Headline { what: "trials with two leaders", k: 0, n };
        // 0/5: narrow enough? Wilson's upper end is 43 %: no, and too few.
        assert!(!settled(&until, 5, &none(5)).1);
        // 0/20: the interval is [0, 16 %]: settled.
        let (width, done) = settled(&until, 20, &none(20));
        assert!(done && (0.16..0.17).contains(&width), "{width}");
        // Nothing to count yet (no leader paused): the widest, never settled.
        assert_eq!(settled(&until, 50, &none(0)), (1.0, false));
        // Narrow, but fewer trials than the least asked for.
        assert!(!settled(&Until { ci_width: 0.5, min: 10 }, 9, &none(9)).1);
    }
}
