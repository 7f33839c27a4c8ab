//! A soak kept in windows (`window:`): a run stopped at any moment, `kill
//! -9` included, keeps its trial up to the last whole window when `--resume`
//! finds it, and the rest of the soak runs as the next trial, with fresh
//! processes and the soak's own faults from there on.

use std::path::{Path, PathBuf};

use crate::check::TrialMetrics;
use crate::error::Error;
use crate::model::history::{EventKind, History};
use crate::model::{Dur, Experiment, FaultRow};
use crate::report::spool::Kept::{Cut, Whole};
use crate::trial::{TrialError, TrialRecord};

/// The trials a soak has: (trial, unit, metrics), as a run keeps them.
type Trials = [(u32, usize, TrialMetrics)];

/// Where the rest of the soak starts, into it, and the trial that runs it:
/// after the trials it has, each cut at a window but the last, which ran
/// to the end (None: the soak is whole).
pub(super) fn rest(done: &Trials) -> Option<(u32, Dur)> {
    let mut trials: Vec<_> = done.iter().map(|(t, _, m)| (*t, m)).collect();
    trials.sort_by_key(|(t, _)| *t);
    if trials.last().is_some_and(|(_, m)| !m.cut) {
        return None;
    }
    let start: i64 = trials.iter().map(|(_, m)| m.end_us.max(0)).sum();
    Some((trials.last().map_or(1, |(t, _)| t + 1), Dur::from_us(start as u64)))
}

/// The rest of a soak from `start` on, as a trial of its own (what a
/// resume runs after keeping the soak's windows before `start`): the
/// soak's faults, scripted and drawn from its first trial's seed, as seen
/// from `start`; nothing more is drawn.
pub(super) fn rest_of_soak(exp: &Experiment, start: Dur) -> Experiment {
    let faults =
        crate::trial::trial_faults(exp, exp.trial_seed(1)).iter().filter_map(|f| f.from_start(start)).collect();
    let duration = Dur::from_us(exp.duration.as_us().saturating_sub(start.as_us()));
    // Through the proxy as the soak was, though its network faults be past.
    let substrate = crate::model::SubstrateSettings { proxy: exp.proxied(), ..exp.substrate.clone() };
    Experiment { duration, faults, random: None, substrate, ..exp.clone() }
}

/// A stopped soak's trial kept, judged and ready to be written as a
/// finished trial.
pub(super) struct Kept {
    pub(super) record: TrialRecord,
    pub(super) events: PathBuf,
    pub(super) metrics: TrialMetrics,
    pub(super) drawn: History,
}

/// The trial of `exp` (a soak kept in windows) that a stopped run of it
/// was in, kept up to its last whole window (or whole, where it had run
/// to its end); None if it has no whole window (it is run again from its
/// start) or none was running. Refused where the trials the soak has are
/// not one soak's.
pub(super) fn keep_stopped(exp: &Experiment, dir: &Path, done: &Trials) -> Result<Option<Kept>, Error> {
    let Some(window) = exp.window else { return Ok(None) };
    one_soak(dir, done)?;
    let Some((trial, start)) = rest(done) else { return Ok(None) };
    let events = dir.join("trials").join(format!("{trial:04}")).join("events.csv");
    let rest_us = exp.duration.as_us().saturating_sub(start.as_us()) as i64;
    let keep = |whole| {
        crate::report::spool::keep_stopped(&events, trial, window.as_us() as i64, rest_us, whole)
            .map_err(|e| Error::Trial { trial, source: TrialError::Events(e) })
    };
    let (kept, (metrics, drawn)) = match keep(true)? {
        None => return Ok(None),
        // Ended, but not every exit on disk (the reader's "cut short"):
        // cut like any other. Any other damage is an error.
        Some(Whole) => match super::inputs::judge_trial(&events, exp, trial, true) {
            Ok(judged) => (Whole, judged),
            Err(e) if !e.to_string().contains("it was cut short") => return Err(e),
            Err(_) => match keep(false)? {
                Some(kept) => (kept, super::inputs::judge_trial(&events, exp, trial, true)?),
                None => return Ok(None),
            },
        },
        Some(kept) => (kept, super::inputs::judge_trial(&events, exp, trial, true)?),
    };
    let faults = rest_of_soak(exp, start).faults;
    let said = match kept {
        Whole => "ran to its end; its run stopped before writing it down, and the resume kept it whole".to_string(),
        Cut(at) => {
            format!("cut at {} (the run was stopped; kept up to its last whole window)", Dur::from_us(at as u64))
        }
    };
    let record = TrialRecord {
        trial,
        seed: exp.seed_of(trial),
        deliveries: fault_rows(&drawn, &faults),
        garbage_lines: 0,
        outcomes: vec![said],
    };
    Ok(Some(Kept { record, events, metrics, drawn }))
}

/// The trials a resumed soak has are one soak's: numbered from 1 on, each
/// but the last cut at a window.
fn one_soak(dir: &Path, done: &Trials) -> Result<(), Error> {
    let mut trials: Vec<_> = done.iter().map(|(t, _, m)| (*t, m.cut)).collect();
    trials.sort_unstable();
    let wrong = trials.iter().enumerate().find(|(i, (t, cut))| *t != *i as u32 + 1 || (!cut && i + 1 < trials.len()));
    match wrong {
        None => Ok(()),
        Some((_, (t, _))) => Err(Error::Path {
            path: dir.join("trials.csv"),
            problem: format!(
                "--resume: trial {t} is not where a soak kept in windows puts it (trials 1, 2, … each but the last \
                 cut at a window); this is not as a run left it"
            ),
        }),
    }
}

/// faults.csv's rows of a trial from its `fault` events (the trial's own
/// record of them went with its run): scheduled where the harness
/// measured how late a fault was, else when it took effect.
fn fault_rows(history: &History, faults: &[crate::model::Fault]) -> Vec<FaultRow> {
    let delivered = history.events.iter().filter(|e| e.kind == EventKind::Fault);
    delivered
        .filter_map(|e| {
            let fault = e.detail.fault?;
            Some(FaultRow {
                fault,
                action: e.detail.action.clone().unwrap_or_default(),
                target: faults.get(fault).map(|f| f.target.to_string()).unwrap_or_default(),
                worker: e.worker,
                pid: e.pid,
                scheduled_us: e.t_us - e.detail.error_us.unwrap_or(0),
                actual_us: e.t_us,
                error: e.detail.error.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::history::{Detail, Event};

    fn soak() -> Experiment {
        let yaml = "name: soak\nworkers: 3\ntrials: 1\nduration: 10m\nwindow: 1m\nfaults:\n  \
                    - {at: 1m, action: pause, target: leader, duration: 5s}\n  - {at: 2m, action: kill, target: 2}\n";
        crate::experiment::load_str(Path::new("soak.yaml"), yaml, &Default::default()).expect("a valid soak")
    }

    fn trial(end_s: i64, cut: bool) -> TrialMetrics {
        let events = vec![Event::new(end_s * 1_000_000, None, EventKind::TrialEnd)];
        TrialMetrics { cut, ..crate::check::check(&History::new(events), &crate::check::CheckParams::of(&soak())) }
    }

    #[test]
    fn the_rest_of_a_soak_starts_where_its_cut_trials_end() {
        assert_eq!(rest(&Vec::new()), Some((1, Dur::ZERO)));
        let cut = vec![(1, 0, trial(120, true)), (2, 0, trial(60, true))];
        assert_eq!(rest(&cut), Some((3, Dur::from_secs(180))));
        let whole = vec![(2, 0, trial(60, true)), (1, 0, trial(120, true)), (3, 0, trial(300, false))];
        assert_eq!(rest(&whole), None, "its last trial ran to the end");
    }

    #[test]
    fn a_cut_trials_faults_are_its_fault_events() {
        let kill = |t, late| {
            let detail = Detail { fault: Some(1), action: Some("kill".into()), error_us: late, ..Detail::default() };
            Event { pid: Some(42), ..Event::new(t, Some(2), EventKind::Fault).with_detail(detail) }
        };
        let history = History::new(vec![kill(5_000_000, Some(300)), kill(9_000_000, None)]);
        let rows = fault_rows(&history, &soak().faults);
        assert_eq!((rows[0].scheduled_us, rows[0].actual_us, rows[0].worker), (4_999_700, 5_000_000, Some(2)));
        assert_eq!((rows[1].scheduled_us, rows[1].pid, rows[1].action.as_str()), (9_000_000, Some(42), "kill"));
        assert_eq!(rows[1].target, "2", "the target as written");
    }
    #[test]
    fn the_rest_of_a_soak_fires_the_soaks_own_later_faults_earlier_by_its_start() {
        let yaml = "name: soak\nworkers: 3\ntrials: 1\nduration: 60m\nwindow: 1m\nseed: 38\nfaults:\n  random:\n    kinds:\n      \
                    - {action: kill, target: leader, mean_interval: 5m}\n";
        let path = std::path::Path::new("soak.yaml");
        let soak = crate::experiment::load_str(path, yaml, &Default::default()).expect("a valid soak");
        let start = Dur::from_secs(25 * 60);
        let rest = rest_of_soak(&soak, start);
        assert_eq!(rest.duration, Dur::from_secs(35 * 60));
        assert!(rest.random.is_none(), "nothing is drawn again");
        let whole = crate::trial::trial_faults(&soak, soak.trial_seed(1));
        let later: Vec<u64> = whole.iter().map(|f| f.at.as_us()).filter(|at| *at >= start.as_us()).collect();
        assert!(!later.is_empty() && later.len() < whole.len(), "faults on both sides of the start");
        let moved: Vec<u64> =
            crate::trial::trial_faults(&rest, 99).iter().map(|f| f.at.as_us() + start.as_us()).collect();
        assert_eq!(moved, later, "whatever the rest's own seed");
    }
}
