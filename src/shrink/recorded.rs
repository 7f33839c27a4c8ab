//! A trial's schedule as it fired, rebuilt from its faults.csv rows and its
//! history: every delivered fault at the moment it was aimed for, with the
//! length it had, and its target named by role (the leader, a watcher) as
//! the worker it hit was at that moment, not by the worker's number.

use crate::model::history::{EventKind, History};
use crate::model::{Action, Dur, Fault, PauseLen, Target};
use crate::report::rows::FaultCsvRow;
use crate::trial::schedule::Live;

/// One fault of the rebuilt schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// At a fixed moment (no jitter, no trigger, no repeat).
    pub fault: Fault,
    /// The worker it hit, if one (for anchoring it to that worker's events).
    pub worker: Option<usize>,
}

/// Rebuild the schedule of one trial. `faults` is the trial's schedule as
/// drawn (its fault indices are faults.csv's), `rows` its faults.csv rows.
/// Deliveries that failed (nobody to hit) are left out: they did nothing.
pub fn recorded(faults: &[Fault], rows: &[FaultCsvRow], history: &History, workers: usize, end: Dur) -> Vec<Recorded> {
    let mut out: Vec<Recorded> = Vec::new();
    // The recorded starts of faults that end later (pauses, network faults
    // with a length): (fault index, worker) → index in `out`.
    let mut open: Vec<((usize, Option<usize>), usize)> = Vec::new();
    let mut rows: Vec<&FaultCsvRow> = rows.iter().filter(|r| r.error.is_empty()).collect();
    rows.sort_by(|a, b| a.scheduled_ms.total_cmp(&b.scheduled_ms));
    for row in rows {
        let Some(def) = faults.get(row.fault) else { continue };
        let Some(action) = action_of(&row.action) else { continue };
        let at_us = (row.scheduled_ms * 1000.0).round().max(0.0) as u64;
        let key = (row.fault, row.worker);
        let ends = def.duration.is_some() && def.action.takes_duration();
        if ends && matches!(action, Action::Cont | Action::Heal) && def.action != action {
            if let Some(pos) = open.iter().position(|(k, _)| *k == key) {
                let (_, i) = open.remove(pos);
                let len = at_us.saturating_sub(out[i].fault.at.as_us());
                out[i].fault.duration = Some(PauseLen::Fixed(Dur::from_us(len.max(1))));
            }
            continue;
        }
        let target = match def.target {
            Target::Worker(_) | Target::Any | Target::Leader | Target::Watcher => match row.worker {
                Some(w) if leads_at(history, workers, w, at_us as i64) => Target::Leader,
                Some(_) => Target::Watcher,
                None => def.target,
            },
            t => t,
        };
        // A length not seen to end (the trial ended first): what was drawn
        // for it cannot be read back, so it lasts to the end.
        let duration = ends.then(|| PauseLen::Fixed(Dur::from_us(end.as_us().saturating_sub(at_us).max(1))));
        if ends {
            open.push((key, out.len()));
        }
        out.push(Recorded {
            fault: Fault {
                at: Dur::from_us(at_us),
                jitter: Dur::ZERO,
                after: None,
                target,
                action: def.action,
                duration,
                every: None,
                net: def.net,
                skew: def.skew,
            },
            worker: row.worker,
        });
    }
    // A fault that hit several workers at once (`all`) is one fault.
    out.dedup_by(|b, a| a.fault == b.fault);
    out
}

/// A faults.csv action as the schedule's: a server's pause is written as
/// its two halves.
fn action_of(name: &str) -> Option<Action> {
    match name {
        "server-stop" => Some(Action::ServerPause),
        "server-cont" => Some(Action::Cont),
        _ => serde_json::from_value(serde_json::Value::String(name.to_string())).ok(),
    }
}

/// Whether `worker` believed it led just before `t_us`.
fn leads_at(history: &History, workers: usize, worker: usize, t_us: i64) -> bool {
    let mut live = Live::new(workers);
    for e in history.events.iter().take_while(|e| e.t_us < t_us) {
        if let Some(w) = e.worker.filter(|&w| w < workers) {
            live.observe(w, e.kind);
        }
    }
    live.leaders.contains(&worker)
}

/// The protocol moment a fault on `worker` at `t_us` came after: the
/// worker's last renewal or acquisition if it led, its last look at the
/// lease if it watched. (kind, when.)
pub fn anchor(history: &History, worker: usize, t_us: i64, leader: bool) -> Option<(EventKind, i64)> {
    let kinds: &[EventKind] = if leader {
        &[EventKind::Renewed, EventKind::Acquired]
    } else {
        &[EventKind::HeldBy, EventKind::NotAcquired, EventKind::ExpiredSeen]
    };
    history
        .events
        .iter()
        .take_while(|e| e.t_us <= t_us)
        .filter(|e| e.worker == Some(worker) && kinds.contains(&e.kind))
        .last()
        .map(|e| (e.kind, e.t_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::history::Event;

    fn fault(action: Action, target: Target, duration: Option<PauseLen>) -> Fault {
        Fault {
            at: Dur::from_secs(1),
            jitter: Dur::from_secs(1),
            after: None,
            target,
            action,
            duration,
            every: Some(Dur::from_secs(5)),
            net: None,
            skew: None,
        }
    }

    fn row(fault: usize, action: &str, worker: Option<usize>, ms: f64, error: &str) -> FaultCsvRow {
        FaultCsvRow {
            trial: 1,
            fault,
            action: action.into(),
            target: String::new(),
            worker,
            scheduled_ms: ms,
            actual_ms: ms,
            error: error.into(),
            ..FaultCsvRow::default()
        }
    }

    #[test]
    fn a_schedule_is_rebuilt_as_it_fired_with_roles() {
        let faults = vec![
            fault(Action::Pause, Target::Worker(1), Some(PauseLen::Uniform([Dur::from_secs(1), Dur::from_secs(3)]))),
            fault(Action::Kill, Target::Any, None),
            fault(Action::LockEmpty, Target::Lock, None),
            fault(Action::ServerPause, Target::Server, Some(PauseLen::Fixed(Dur::from_secs(2)))),
        ];
        let history = History::new(vec![
            Event::new(100_000, Some(1), EventKind::Acquired),
            Event::new(2_000_000, Some(1), EventKind::Renewed),
        ]);
        let rows = vec![
            row(0, "stop", Some(1), 1500.0, ""),
            row(0, "cont", Some(1), 3700.0, ""),
            row(1, "kill", Some(0), 4000.0, ""),
            row(1, "kill", None, 9000.0, "no live worker at this moment"),
            row(0, "stop", Some(1), 6000.0, ""),
            row(2, "lock-empty", None, 7000.0, ""),
            row(3, "server-stop", None, 8000.0, ""),
            row(3, "server-cont", None, 8500.0, ""),
        ];
        let got = recorded(&faults, &rows, &history, 3, Dur::from_secs(10));
        let summary: Vec<(Action, Target, u64, Option<PauseLen>)> = got
            .iter()
            .map(|r| (r.fault.action, r.fault.target, r.fault.at.as_us() / 1000, r.fault.duration.clone()))
            .collect();
        assert_eq!(
            summary,
            [
                (Action::Pause, Target::Leader, 1500, Some(PauseLen::Fixed(Dur::from_ms(2200)))),
                (Action::Kill, Target::Watcher, 4000, None),
                // Its CONT came after the trial: it lasts to the end.
                (Action::Pause, Target::Leader, 6000, Some(PauseLen::Fixed(Dur::from_ms(4000)))),
                (Action::LockEmpty, Target::Lock, 7000, None),
                (Action::ServerPause, Target::Server, 8000, Some(PauseLen::Fixed(Dur::from_ms(500)))),
            ]
        );
        assert!(got.iter().all(|r| r.fault.jitter == Dur::ZERO && r.fault.every.is_none()));
        assert_eq!(anchor(&history, 1, 4_000_000, true), Some((EventKind::Renewed, 2_000_000)));
        assert_eq!(anchor(&history, 0, 4_000_000, false), None);
    }
}
