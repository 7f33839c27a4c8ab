//! A trial's schedule as it fired, rebuilt from its faults.csv rows and its
//! history: every delivered fault at the moment it was aimed for, with the
//! length it had, and its target named by role (the leader, a watcher) as
//! the worker it hit was at that moment, not by the worker's number.

use crate::model::history::{EventKind, History};
use crate::model::{Action, Dur, Fault, PauseLen, Target};
use crate::report::rows::FaultCsvRow;
use crate::trial::Live;

/// One fault of the rebuilt schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// At a fixed moment (no jitter, no trigger, no repeat).
    pub fault: Fault,
    /// The one worker it hit and whether that worker led then (a fault
    /// that hit several, or none, has none: it is anchored to nobody).
    pub hit: Option<(usize, bool)>,
}

/// Rebuild the schedule of one trial. `faults` is the trial's schedule as
/// drawn (its fault indices are faults.csv's), `rows` its faults.csv rows.
/// Deliveries that failed (nobody to hit) are left out: they did nothing.
/// The end of a pause that could not be delivered (its worker had died)
/// still ends it where it was due.
pub fn recorded(faults: &[Fault], rows: &[FaultCsvRow], history: &History, workers: usize, end: Dur) -> Vec<Recorded> {
    let mut out: Vec<Recorded> = Vec::new();
    // The recorded starts of faults that end later (pauses, network faults
    // with a length): (fault index, worker) → index in `out`.
    let mut open: Vec<((usize, Option<usize>), usize)> = Vec::new();
    // The last start: (fault index, its moment) → index in `out`; the
    // further rows of one delivery to several workers are that one fault.
    let mut last: Option<((usize, u64), usize)> = None;
    let mut rows: Vec<&FaultCsvRow> = rows.iter().collect();
    rows.sort_by(|a, b| a.scheduled_ms.total_cmp(&b.scheduled_ms));
    let mut replay = Replay::new(history, workers);
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
        if !row.error.is_empty() {
            continue;
        }
        if let Some(((fault, at), i)) = last
            && fault == row.fault
            && at == at_us
        {
            // Another worker of the same delivery: the fault hit several.
            out[i].hit = None;
            if ends {
                open.push((key, i));
            }
            continue;
        }
        // By role: the leader is the latest to acquire (as a target says
        // it); an older believer is named by its number, there is no role
        // for it.
        let role = row.worker.map(|w| (w, replay.role_at(w, at_us as i64)));
        let target = match (def.target, role) {
            (Target::Worker(_) | Target::Any | Target::Leader | Target::Watcher, Some((w, role))) => match role {
                Role::Leader => Target::Leader,
                Role::Watcher => Target::Watcher,
                Role::StaleBeliever => Target::Worker(w),
            },
            (t, _) => t,
        };
        // A length not seen to end (the trial ended first): what was drawn
        // for it cannot be read back, so it lasts to the end.
        let duration = ends.then(|| PauseLen::Fixed(Dur::from_us(end.as_us().saturating_sub(at_us).max(1))));
        if ends {
            open.push((key, out.len()));
        }
        last = Some(((row.fault, at_us), out.len()));
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
            hit: role.map(|(w, r)| (w, r == Role::Leader)),
        });
    }
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

#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// The latest to acquire that still believes: whom `leader` hits.
    Leader,
    /// Believes it leads, but another acquired since.
    StaleBeliever,
    Watcher,
}

/// The trial's live view, replayed once as the rows move forward in time.
struct Replay<'a> {
    events: std::slice::Iter<'a, crate::model::history::Event>,
    next: Option<&'a crate::model::history::Event>,
    live: Live,
}

impl<'a> Replay<'a> {
    fn new(history: &'a History, workers: usize) -> Replay<'a> {
        let mut events = history.events.iter();
        let next = events.next();
        Replay { events, next, live: Live::new(workers) }
    }

    /// What `worker` was just before `t_us` (no earlier than the last ask).
    fn role_at(&mut self, worker: usize, t_us: i64) -> Role {
        while let Some(e) = self.next.filter(|e| e.t_us < t_us) {
            if let Some(w) = e.worker.filter(|&w| w < self.live.alive.len()) {
                self.live.observe(w, e.kind);
            }
            self.next = self.events.next();
        }
        match self.live.leaders.iter().rposition(|&w| w == worker) {
            Some(i) if i + 1 == self.live.leaders.len() => Role::Leader,
            Some(_) => Role::StaleBeliever,
            None => Role::Watcher,
        }
    }
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
        assert_eq!(got[0].hit, Some((1, true)), "worker 1 led when it was paused");
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

    #[test]
    fn stale_believers_failed_ends_and_simultaneous_faults_are_kept_apart() {
        let faults = vec![
            fault(Action::Kill, Target::Any, None),
            fault(Action::Kill, Target::Watcher, None),
            fault(Action::Pause, Target::All, Some(PauseLen::Fixed(Dur::from_secs(3)))),
        ];
        // Worker 1 leads, then worker 2 acquires while 1 still believes.
        let history = History::new(vec![
            Event::new(100_000, Some(1), EventKind::Acquired),
            Event::new(3_000_000, Some(2), EventKind::Acquired),
        ]);
        let rows = vec![
            row(0, "kill", Some(1), 4000.0, ""),
            row(1, "kill", Some(0), 4000.0, ""),
            row(2, "stop", Some(0), 5000.0, ""),
            row(2, "stop", Some(2), 5000.0, ""),
            row(2, "cont", Some(0), 8000.0, "worker already exited"),
            row(2, "cont", Some(2), 8000.0, ""),
        ];
        let got = recorded(&faults, &rows, &history, 3, Dur::from_secs(10));
        let targets: Vec<Target> = got.iter().map(|r| r.fault.target).collect();
        // The stale believer by its number; two kills at one moment stay
        // two; the pause of all is one fault, hitting no one worker.
        assert_eq!(targets, [Target::Worker(1), Target::Watcher, Target::All]);
        assert_eq!(got[2].hit, None);
        // Its end is where the cont was due, delivered or not.
        assert_eq!(got[2].fault.duration, Some(PauseLen::Fixed(Dur::from_secs(3))));
    }
}
