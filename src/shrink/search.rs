//! The search for a smaller schedule, over a `Probe` that runs a candidate
//! a few times and says how often it reproduced. Fewer faults first (delta
//! debugging, Zeller's ddmin), then simpler timings one fault at a time:
//! a moment re-expressed after a protocol event ("2.47 s after a
//! renewal"), rounder times, shorter pauses. A change is kept when the
//! candidate still reproduces in `need` of `repeats` runs. Pure: the probe
//! is the only way out, so the search is tested with a fake one.

use crate::model::history::EventKind;
use crate::model::{After, Dur, Fault, PauseLen};
use crate::report::shrunk::{Step, own_time};

pub struct Settings {
    /// Runs of each candidate, and how many must reproduce.
    pub repeats: u32,
    pub need: u32,
    /// Trials the search may spend, the original's check included.
    pub budget: u32,
    /// Grids to round times and lengths to (scaled), coarsest first.
    pub grids: Vec<Dur>,
    /// An anchored fault is armed this long before its anchor (about half
    /// an interval of the protocol: after the previous such event).
    pub arm_before: Dur,
    /// The trial's length: a fault (and a trigger's delay) must fall before.
    pub end: Dur,
    /// The experiment's time scale, to describe steps in its own time.
    pub scale: f64,
}

/// A fault of the schedule and the protocol event it came after, if known.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    pub fault: Fault,
    /// The hit worker's last event of its role before the fault, and when.
    pub anchor: Option<(EventKind, Dur)>,
}

/// A schedule to try, and why.
pub struct Candidate<'a> {
    pub step: usize,
    pub phase: &'static str,
    pub change: &'a str,
    pub faults: &'a [Fault],
    pub repeats: u32,
}

/// Runs candidates.
pub trait Probe {
    type Error;
    /// Run the candidate's schedule `repeats` times; how many runs
    /// reproduced the violation.
    fn run(&mut self, c: &Candidate<'_>) -> Result<u32, Self::Error>;
}

#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub shrunk: Vec<Fault>,
    pub steps: Vec<Step>,
    pub spent: u32,
    /// The original schedule reproduced (otherwise nothing was shrunk).
    pub reproduced: bool,
    /// The budget ended the search before it had tried everything.
    pub out_of_budget: bool,
}

struct Search<'a, P: Probe> {
    s: &'a Settings,
    probe: &'a mut P,
    steps: Vec<Step>,
    spent: u32,
    tried: std::collections::HashSet<String>,
    out_of_budget: bool,
}

impl<P: Probe> Search<'_, P> {
    /// Try a candidate: Some(reproduced), or None when the budget is spent.
    fn attempt(&mut self, faults: &[Fault], phase: &'static str, change: String) -> Result<Option<bool>, P::Error> {
        let key = format!("{faults:?}");
        let late = faults.iter().any(|f| f.at.as_us() + f.after.map_or(0, |a| a.delay.as_us()) >= self.s.end.as_us());
        if late || !self.tried.insert(key) {
            return Ok(Some(false)); // past the trial's end, or tried already and not kept then
        }
        if self.spent + self.s.repeats > self.s.budget {
            self.out_of_budget = true;
            return Ok(None);
        }
        let step = self.steps.len() + 1;
        let c = Candidate { step, phase, change: &change, faults, repeats: self.s.repeats };
        let hits = self.probe.run(&c)?;
        self.spent += self.s.repeats;
        let kept = hits >= self.s.need;
        let (faults, runs) = (faults.len(), self.s.repeats);
        self.steps.push(Step { step, phase, change, faults, hits, runs, kept });
        Ok(Some(kept))
    }

    /// ddmin over the faults: subsets, then complements, then finer.
    fn fewer(&mut self, mut cur: Vec<Element>) -> Result<Vec<Element>, P::Error> {
        let mut n = 2;
        while cur.len() >= 2 {
            let chunks = split(cur.len(), n);
            let mut next = None;
            for (lo, hi) in &chunks {
                let c: Vec<Element> = cur[*lo..*hi].to_vec();
                let what = format!("keep faults {}–{} of {}", lo + 1, hi, cur.len());
                match self.attempt(&faults_of(&c), "fewer faults", what)? {
                    None => return Ok(cur),
                    Some(true) => {
                        next = Some((c, 2));
                        break;
                    }
                    Some(false) => {}
                }
            }
            if next.is_none() && n > 2 {
                for (lo, hi) in &chunks {
                    let c: Vec<Element> = cur[..*lo].iter().chain(&cur[*hi..]).cloned().collect();
                    let what = format!("drop faults {}–{} of {}", lo + 1, hi, cur.len());
                    match self.attempt(&faults_of(&c), "fewer faults", what)? {
                        None => return Ok(cur),
                        Some(true) => {
                            next = Some((c, (n - 1).max(2)));
                            break;
                        }
                        Some(false) => {}
                    }
                }
            }
            match next {
                Some((c, m)) => {
                    cur = c;
                    n = m;
                }
                None if n >= cur.len() => break,
                None => n = (n * 2).min(cur.len()),
            }
        }
        Ok(cur)
    }

    /// Simpler timings, one fault at a time.
    fn simpler(&mut self, mut cur: Vec<Element>) -> Result<Vec<Element>, P::Error> {
        for i in 0..cur.len() {
            // Each kept change is the base of the next.
            let keep = |search: &mut Self, cur: &mut Vec<Element>, f: Fault, what: String| {
                let mut c = cur.clone();
                c[i].fault = f;
                let kept = search.attempt(&faults_of(&c), "simpler timing", what)?;
                if kept == Some(true) {
                    *cur = c;
                }
                Ok::<_, P::Error>(kept)
            };
            let name = describe(&cur[i].fault);
            // The moment, after a protocol event.
            let mut anchored = false;
            if let (Some((event, t)), None) = (cur[i].anchor, cur[i].fault.after) {
                let f = &cur[i].fault;
                let delay = Dur::from_us(f.at.as_us().saturating_sub(t.as_us()));
                let arm = arm_time(t, self.s.arm_before, &self.s.grids);
                let g = Fault { at: arm, after: Some(After { event, delay }), ..f.clone() };
                let what = format!("{name}: {} after the target's `{}`", own_time(delay, self.s.scale), event.name());
                match keep(self, &mut cur, g, what)? {
                    None => return Ok(cur),
                    Some(kept) => anchored = kept,
                }
            }
            // Rounder: the delay after the anchor, or the moment itself.
            for grid in self.s.grids.clone() {
                let f = &cur[i].fault;
                let (g, what) = match (anchored, f.after) {
                    (true, Some(a)) => {
                        let d = round(a.delay, grid);
                        if d == a.delay {
                            break;
                        }
                        let what = format!("{name}: delay {}", own_time(d, self.s.scale));
                        (Fault { after: Some(After { delay: d, ..a }), ..f.clone() }, what)
                    }
                    _ => {
                        let at = round(f.at, grid);
                        if at == f.at {
                            break;
                        }
                        (Fault { at, ..f.clone() }, format!("{name}: at {}", own_time(at, self.s.scale)))
                    }
                };
                match keep(self, &mut cur, g, what)? {
                    None => return Ok(cur),
                    Some(true) => break,
                    Some(false) => {}
                }
            }
            // Shorter lengths: halved while they reproduce, then bisected
            // between the shortest kept and the first that failed, towards
            // the shortest that still breaks it. Then rounder.
            let finest = self.s.grids.last().copied().unwrap_or(Dur::from_ms(1));
            let length = |c: &[Element]| match c[i].fault.duration {
                Some(PauseLen::Fixed(d)) => Some(d),
                _ => None,
            };
            let mut failed = None;
            for _ in 0..4 {
                let Some(d) = length(&cur) else { break };
                let half = Dur::from_us(d.as_us() / 2);
                if half < finest {
                    break;
                }
                let g = Fault { duration: Some(PauseLen::Fixed(half)), ..cur[i].fault.clone() };
                match keep(self, &mut cur, g, format!("{name}: lasting {}", own_time(half, self.s.scale)))? {
                    None => return Ok(cur),
                    Some(true) => {}
                    Some(false) => {
                        failed = Some(half);
                        break;
                    }
                }
            }
            if let Some(mut lo) = failed {
                for _ in 0..3 {
                    let Some(hi) = length(&cur) else { break };
                    if hi.as_us().saturating_sub(lo.as_us()) < 2 * finest.as_us() {
                        break;
                    }
                    let mid = Dur::from_us((lo.as_us() + hi.as_us()) / 2);
                    let g = Fault { duration: Some(PauseLen::Fixed(mid)), ..cur[i].fault.clone() };
                    match keep(self, &mut cur, g, format!("{name}: lasting {}", own_time(mid, self.s.scale)))? {
                        None => return Ok(cur),
                        Some(true) => {}
                        Some(false) => lo = mid,
                    }
                }
            }
            // Rounded up: the length was just brought down to near where
            // it stops breaking things, and below that it would.
            for grid in self.s.grids.clone() {
                let Some(PauseLen::Fixed(d)) = cur[i].fault.duration.clone() else { break };
                let r = round_up(d, grid);
                if r == d {
                    break;
                }
                let g = Fault { duration: Some(PauseLen::Fixed(r)), ..cur[i].fault.clone() };
                match keep(self, &mut cur, g, format!("{name}: lasting {}", own_time(r, self.s.scale)))? {
                    None => return Ok(cur),
                    Some(true) => break,
                    Some(false) => {}
                }
            }
        }
        Ok(cur)
    }
}

/// Shrink `original` as far as the budget allows.
pub fn shrink<P: Probe>(original: Vec<Element>, s: &Settings, probe: &mut P) -> Result<Outcome, P::Error> {
    let mut search = Search { s, probe, steps: Vec::new(), spent: 0, tried: Default::default(), out_of_budget: false };
    let all = faults_of(&original);
    let reproduced = search.attempt(&all, "original", "the recorded schedule".into())? == Some(true);
    if !reproduced {
        let Search { steps, spent, out_of_budget, .. } = search;
        return Ok(Outcome { shrunk: all, steps, spent, reproduced, out_of_budget });
    }
    let mut cur = original;
    if !cur.is_empty() {
        match search.attempt(&[], "fewer faults", "no faults at all".into())? {
            Some(true) => cur.clear(),
            None => {}
            Some(false) => cur = search.fewer(cur)?,
        }
    }
    if !search.out_of_budget {
        cur = search.simpler(cur)?;
    }
    let Search { steps, spent, out_of_budget, .. } = search;
    Ok(Outcome { shrunk: faults_of(&cur), steps, spent, reproduced, out_of_budget })
}

fn faults_of(elements: &[Element]) -> Vec<Fault> {
    elements.iter().map(|e| e.fault.clone()).collect()
}

/// `n` contiguous chunks of `len` items, as (start, end).
fn split(len: usize, n: usize) -> Vec<(usize, usize)> {
    let n = n.min(len).max(1);
    (0..n).map(|i| (i * len / n, (i + 1) * len / n)).collect()
}

/// `d` to the nearest multiple of `grid`.
pub fn round(d: Dur, grid: Dur) -> Dur {
    let g = grid.as_us().max(1);
    Dur::from_us((d.as_us() + g / 2) / g * g)
}

/// `d` up to a multiple of `grid`.
pub fn round_up(d: Dur, grid: Dur) -> Dur {
    let g = grid.as_us().max(1);
    Dur::from_us(d.as_us().div_ceil(g) * g)
}

/// When to arm a fault that fires after an event at `t`: `before` ahead of
/// it, moved to the roundest moment that is still after the previous such
/// event (at least `before` … `2 × before` ahead, roughly).
fn arm_time(t: Dur, before: Dur, grids: &[Dur]) -> Dur {
    let earliest = t.as_us().saturating_sub(before.as_us() * 3 / 2);
    let latest = t.as_us().saturating_sub(before.as_us() / 2);
    for g in grids {
        let g = g.as_us().max(1);
        let at = latest / g * g;
        if at >= earliest {
            return Dur::from_us(at);
        }
    }
    Dur::from_us(t.as_us().saturating_sub(before.as_us()))
}

/// `pause leader at 12.3s`, for a step's description.
pub fn describe(f: &Fault) -> String {
    format!("{} {}", f.action.name(), f.target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, Target};

    fn kill(at_ms: u64, target: Target) -> Element {
        Element {
            fault: Fault {
                at: Dur::from_ms(at_ms),
                jitter: Dur::ZERO,
                after: None,
                target,
                action: Action::Kill,
                duration: None,
                every: None,
                net: None,
                skew: None,
            },
            anchor: None,
        }
    }

    /// Reproduces when its rule holds for the schedule, every time.
    struct Fake<F: Fn(&[Fault]) -> bool>(F, u32);

    impl<F: Fn(&[Fault]) -> bool> Probe for Fake<F> {
        type Error = ();
        fn run(&mut self, c: &Candidate<'_>) -> Result<u32, ()> {
            self.1 += 1;
            Ok(if (self.0)(c.faults) { c.repeats } else { 0 })
        }
    }

    fn settings(budget: u32) -> Settings {
        Settings {
            repeats: 2,
            need: 1,
            budget,
            grids: vec![Dur::from_secs(1), Dur::from_ms(100), Dur::from_ms(10)],
            arm_before: Dur::from_ms(1500),
            end: Dur::from_secs(30),
            scale: 1.0,
        }
    }

    #[test]
    fn ddmin_finds_the_two_faults_that_matter_among_many() {
        // Twelve kills; it takes the leader kill at 4.2 s and the watcher
        // kill at 8.7 s together.
        let mut all: Vec<Element> = (0..10).map(|i| kill(1000 + i * 900, Target::Any)).collect();
        all.insert(3, kill(4234, Target::Leader));
        all.insert(8, kill(8711, Target::Watcher));
        let needs =
            |f: &[Fault]| f.iter().any(|f| f.target == Target::Leader) && f.iter().any(|f| f.target == Target::Watcher);
        let mut probe = Fake(needs, 0);
        let out = shrink(all, &settings(1000), &mut probe).unwrap();
        assert!(out.reproduced && !out.out_of_budget);
        assert_eq!(out.shrunk.len(), 2, "{:?}", out.shrunk);
        // Rounded to whole seconds: the fake cares about no time.
        let times: Vec<Dur> = out.shrunk.iter().map(|f| f.at).collect();
        assert_eq!(times, [Dur::from_secs(4), Dur::from_secs(9)]);
        assert_eq!(out.spent, probe.1 * 2);
        assert_eq!(out.steps.len() as u32, probe.1);
        assert!(out.steps.iter().filter(|s| s.kept).all(|s| s.hits >= 1));
    }

    #[test]
    fn a_schedule_that_does_not_reproduce_is_not_shrunk() {
        let mut probe = Fake(|_: &[Fault]| false, 0);
        let out = shrink(vec![kill(1000, Target::Leader)], &settings(100), &mut probe).unwrap();
        assert!(!out.reproduced);
        assert_eq!((out.shrunk.len(), out.steps.len(), out.spent), (1, 1, 2));
    }

    #[test]
    fn no_faults_at_all_is_tried_first() {
        let mut probe = Fake(|_: &[Fault]| true, 0);
        let out = shrink((0..5).map(|i| kill(1000 * i, Target::Any)).collect(), &settings(100), &mut probe).unwrap();
        assert!(out.shrunk.is_empty());
        assert_eq!(out.steps.len(), 2);
    }

    #[test]
    fn the_budget_is_never_overspent() {
        let mut probe = Fake(|f: &[Fault]| f.len() >= 3, 0);
        let all: Vec<Element> = (0..40).map(|i| kill(100 * i + 7, Target::Any)).collect();
        let out = shrink(all, &settings(11), &mut probe).unwrap();
        assert!(out.out_of_budget);
        assert!(out.spent <= 11, "{}", out.spent);
        assert!(out.shrunk.len() >= 3);
    }

    #[test]
    fn a_moment_is_moved_to_its_anchor_and_rounded() {
        // A kill 2.47 s after the leader's renewal at 9.005 s.
        let mut e = kill(11_475, Target::Leader);
        e.anchor = Some((EventKind::Renewed, Dur::from_ms(9005)));
        // Reproduces when it fires between 2.2 and 2.6 s after a renewal.
        let rule = |f: &[Fault]| {
            f.len() == 1
                && match f[0].after {
                    Some(a) => a.delay >= Dur::from_ms(2200) && a.delay <= Dur::from_ms(2600),
                    None => true,
                }
        };
        let mut probe = Fake(rule, 0);
        let out = shrink(vec![e], &settings(100), &mut probe).unwrap();
        let f = &out.shrunk[0];
        assert_eq!(f.after.map(|a| (a.event, a.delay)), Some((EventKind::Renewed, Dur::from_ms(2500))));
        // Armed at a round moment between the renewals (1.5 s apart here).
        assert_eq!(f.at, Dur::from_secs(8));
    }

    #[test]
    fn pauses_get_shorter_while_they_reproduce() {
        let mut e = kill(3000, Target::Leader);
        e.fault.action = Action::Pause;
        e.fault.duration = Some(PauseLen::Fixed(Dur::from_ms(12_345)));
        let rule = |f: &[Fault]| matches!(f.first().and_then(|f| f.duration.clone()), Some(PauseLen::Fixed(d)) if d >= Dur::from_secs(3));
        let mut probe = Fake(rule, 0);
        let out = shrink(vec![e], &settings(100), &mut probe).unwrap();
        // 12.345 → 6.172 → 3.086 (1.543 fails; so do 2.314, 2.7, 2.893
        // between) → rounded up to 4 s, which holds.
        assert_eq!(out.shrunk[0].duration, Some(PauseLen::Fixed(Dur::from_secs(4))));
    }

    #[test]
    fn a_pause_is_bisected_towards_the_shortest_that_breaks_it() {
        // Breaks when it outlasts a 9 s lease and a 1 s look: 10 s.
        let mut e = kill(3000, Target::Leader);
        e.fault.action = Action::Pause;
        e.fault.duration = Some(PauseLen::Fixed(Dur::from_ms(14_750)));
        let rule = |f: &[Fault]| matches!(f.first().and_then(|f| f.duration.clone()), Some(PauseLen::Fixed(d)) if d >= Dur::from_secs(10));
        let mut probe = Fake(rule, 0);
        let out = shrink(vec![e], &settings(100), &mut probe).unwrap();
        // 7.375 fails; 11.06 holds, 9.22 fails, 10.14 holds → up to 11 s.
        assert_eq!(out.shrunk[0].duration, Some(PauseLen::Fixed(Dur::from_secs(11))));
    }
}
