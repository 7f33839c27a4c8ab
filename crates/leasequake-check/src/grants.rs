//! Double grants: the lease service's side of a split. A single server
//! grants a lease to one worker at a time, whatever the network does; a
//! service that splits (a Redis primary cut off while its replica is
//! promoted) may grant it to two at once, each on its own side.
//!
//! Each `acquired` and `renewed` is a grant the worker was told of. When
//! exactly the service made it is not known, only that it was between the
//! request and the reply, so each grant is counted for the least it can
//! have lasted: from its reply to a lease after its request was sent (or
//! to its `lease_until`, where that is earlier: a lock file's whole-second
//! truncation), ended early by the worker's own release or death (a grant
//! to a dead worker harms nobody), or by the service telling it that
//! another holds the lease. Two such grants of different workers
//! that overlap are a *definite* double grant: no timing of the service's
//! work could keep them apart. Against a replicated service, a request
//! whose reply the proxy dropped may have been granted (docs/network.md):
//! counted the same way, it makes only a *possible* double grant.

use leasequake_model::history::{Event, EventKind, Micros};

use super::by_worker::ByWorker;
use super::params::CheckParams;
use super::requests::{barrier_wall_us, grant_end, lost_requests, merge};

/// A service that keeps expiry in whole milliseconds may end a grant up
/// to a millisecond before a lease has passed on the harness's clock.
const ROUNDING_US: Micros = 1_000;

/// Double grants of one trial (or summed over trials).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DoubleGrants {
    /// Maximal intervals in which two workers held grants they were told of.
    pub definite: usize,
    /// Their total and longest time.
    pub definite_us: Micros,
    pub definite_max_us: Micros,
    /// Further intervals that a lost-reply request may have made double.
    pub possible: usize,
    /// Of the definite ones: the two grants came from different members
    /// of a replicated service (as the workers' events name them).
    pub across_members: usize,
    /// Trials with a definite double grant (one trial's: 0 or 1).
    pub trials: usize,
    /// Acquisitions whose fencing token is not above every token granted
    /// before them (a store that checks tokens could not tell the newer
    /// holder from the older), and acquisitions without a token at all.
    pub token_inversions: usize,
    pub untokened: usize,
}

impl std::ops::Add for DoubleGrants {
    type Output = DoubleGrants;

    fn add(self, o: DoubleGrants) -> DoubleGrants {
        DoubleGrants {
            definite: self.definite + o.definite,
            definite_us: self.definite_us + o.definite_us,
            definite_max_us: self.definite_max_us.max(o.definite_max_us),
            possible: self.possible + o.possible,
            across_members: self.across_members + o.across_members,
            trials: self.trials + o.trials,
            token_inversions: self.token_inversions + o.token_inversions,
            untokened: self.untokened + o.untokened,
        }
    }
}

/// One grant's least validity, and the member that made it.
#[derive(Clone, Copy, Debug)]
struct Window {
    worker: usize,
    start_us: Micros,
    end_us: Micros,
    member: Option<usize>,
}

/// The double grants of a trial, and the definite ones' intervals.
pub(crate) fn double_grants(
    events: &[Event],
    by_worker: &ByWorker<'_>,
    params: &CheckParams,
    end_us: Micros,
) -> (DoubleGrants, Vec<(Micros, Micros)>) {
    let lease_us = params.lease_us;
    let barrier_wall_us = barrier_wall_us(events);
    let mut told = Vec::new();
    let mut maybe = Vec::new();
    for w in 0..by_worker.workers() {
        let mine = by_worker.of(w);
        // Until the worker's own release or death, or the service telling
        // it another holds the lease; never past the trial.
        let over = |e: &Event| match e.kind {
            EventKind::Released | EventKind::Exit => true,
            EventKind::SteppedDown => e.detail.reason.as_deref() == Some("other-holder"),
            _ => false,
        };
        let overs: Vec<Micros> = mine.iter().filter(|e| over(e)).map(|e| e.t_us).collect();
        let cut_at = |t: Micros| overs.get(overs.partition_point(|&o| o < t)).copied().unwrap_or(end_us).min(end_us);
        for e in mine.iter().filter(|e| matches!(e.kind, EventKind::Acquired | EventKind::Renewed)) {
            // Only a lease that runs out by time has a least validity.
            let Some(ms) = e.detail.expires_in_ms else { continue };
            let sent = e.t_us - e.detail.op_us.map_or(0, |us| us as i64);
            let mut end = sent + (ms * 1000.0).round() as i64 - ROUNDING_US;
            if let Some(stated) = grant_end(e, barrier_wall_us) {
                end = end.min(stated);
            }
            let end = end.min(cut_at(e.t_us));
            if end > e.t_us {
                told.push(Window { worker: w, start_us: e.t_us, end_us: end, member: e.detail.member });
            }
        }
        // A single server grants one at a time: what it did with a lost
        // request is settled by the grants around it (network.rs).
        for r in lost_requests(mine).into_iter().filter(|_| params.replicated) {
            let end = (r.sent_us + lease_us - ROUNDING_US).min(cut_at(r.reply_us));
            if end > r.reply_us {
                maybe.push(Window { worker: w, start_us: r.reply_us, end_us: end, member: None });
            }
        }
    }
    let definite = overlaps(&told);
    let mut out = DoubleGrants {
        definite: definite.len(),
        trials: usize::from(!definite.is_empty()),
        definite_us: definite.iter().map(|(a, b)| b - a).sum(),
        definite_max_us: definite.iter().map(|(a, b)| b - a).max().unwrap_or(0),
        ..DoubleGrants::default()
    };
    out.across_members = definite
        .iter()
        .filter(|(a, b)| {
            let members: Vec<usize> =
                told.iter().filter(|g| g.start_us < *b && g.end_us > *a).filter_map(|g| g.member).collect();
            members.iter().any(|m| *m != members[0])
        })
        .count();
    let all: Vec<Window> = told.iter().chain(&maybe).copied().collect();
    out.possible = overlaps(&all).iter().filter(|(a, b)| !definite.iter().any(|(c, d)| c < b && a < d)).count();
    let acquired = events.iter().filter(|e| e.kind == EventKind::Acquired);
    out.untokened = acquired.clone().filter(|e| e.detail.token.is_none()).count();
    let mut highest = None;
    for token in acquired.filter_map(|e| e.detail.token) {
        if highest.is_some_and(|h| token <= h) {
            out.token_inversions += 1;
        }
        highest = highest.max(Some(token));
    }
    (out, definite)
}

/// The maximal intervals in which two or more workers hold a window.
fn overlaps(windows: &[Window]) -> Vec<(Micros, Micros)> {
    let workers = windows.iter().map(|g| g.worker + 1).max().unwrap_or(0);
    // Each worker's windows joined, then swept: +1 at a start, −1 at an end.
    let mut edges: Vec<(Micros, i32)> = Vec::new();
    for w in 0..workers {
        let mine = merge(windows.iter().filter(|g| g.worker == w).map(|g| (g.start_us, g.end_us)).collect());
        for (a, b) in mine {
            edges.push((a, 1));
            edges.push((b, -1));
        }
    }
    // Ends before starts at one instant: touching is not overlapping.
    edges.sort_unstable();
    let (mut depth, mut open, mut out) = (0, None, Vec::new());
    for (t, step) in edges {
        depth += step;
        match open {
            None if depth >= 2 => open = Some(t),
            Some(start) if depth < 2 => {
                if t > start {
                    out.push((start, t));
                }
                open = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;

    use crate::testkit::{LEASE, ev, s};

    /// A grant told at `t`, its request sent `op` before, made by `member`.
    fn grant(t: f64, w: usize, kind: EventKind, op: f64, member: Option<usize>) -> Event {
        ev(t, w, kind).with_detail(Detail {
            expires_in_ms: Some(LEASE * 1000.0),
            op_us: Some(s(op) as u64),
            member,
            ..Detail::default()
        })
    }

    fn trial(mut events: Vec<Event>, end: f64) -> super::DoubleGrants {
        events.insert(0, Event::new(0, None, EventKind::Barrier));
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        events.sort_by_key(|e| e.t_us);
        let params = CheckParams { replicated: true, ..crate::params::server_lease(s(LEASE), s(3.0), s(3.0)) };
        check(&History::new(events), &params).network.double_grants
    }

    #[test]
    fn a_takeover_after_the_lease_ran_out_is_no_double_grant_however_slow_the_requests() {
        use EventKind::*;
        // The holder's last renewal was sent at 2.9 (its reply at 3.0):
        // the server ended the lease at 11.9 at the earliest. A takeover
        // answered at 11.95 cannot have been granted before 11.9.
        let g = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, Some(0)),
                grant(3.0, 0, Renewed, 0.1, Some(0)),
                ev(4.0, 0, Exit),
                grant(11.95, 1, Acquired, 0.2, Some(0)),
            ],
            20.0,
        );
        assert_eq!((g.definite, g.possible), (0, 0));
    }

    #[test]
    fn two_primaries_granting_at_once_are_a_definite_double_grant_across_members() {
        use EventKind::*;
        // Worker 0 keeps renewing on member 0 every 3 s; worker 1 acquires
        // on member 1 at 10 and renews there at 13.
        let mut events = vec![grant(0.0, 0, Acquired, 0.001, Some(0))];
        for k in 1..6 {
            events.push(grant(3.0 * k as f64, 0, Renewed, 0.001, Some(0)));
        }
        events.push(grant(10.0, 1, Acquired, 0.001, Some(1)));
        events.push(grant(13.0, 1, Renewed, 0.001, Some(1)));
        events.push(ev(16.5, 0, Renewing));
        events.push(ev(16.5, 0, SteppedDown));
        let g = trial(events, 30.0);
        // Both hold from worker 1's acquire at 10 until its renewal's least
        // validity, sent at 12.999, ends (less the rounding): 21.998.
        assert_eq!((g.definite, g.across_members, g.possible), (1, 1, 0));
        assert_eq!(g.definite_us, s(21.998) - s(10.0));
        assert_eq!(g.definite_max_us, g.definite_us);
    }

    #[test]
    fn a_release_or_a_death_ends_a_grant_and_one_workers_renewals_never_overlap_themselves() {
        use EventKind::*;
        let released = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, None),
                grant(3.0, 0, Renewed, 0.001, None),
                ev(4.0, 0, Released),
                grant(4.5, 1, Acquired, 0.001, None),
            ],
            20.0,
        );
        assert_eq!(released.definite, 0);
        let dead = trial(
            vec![grant(0.0, 0, Acquired, 0.001, None), ev(1.0, 0, Exit), grant(2.0, 1, Acquired, 0.001, None)],
            20.0,
        );
        assert_eq!(dead.definite, 0);
    }

    #[test]
    fn a_grant_ends_when_the_service_names_another_holder() {
        use EventKind::*;
        // Worker 0's renewal at 6 was granted to 15, but at 8 the service
        // (its old primary, demoted) says worker 1 holds the lease.
        let mut events = vec![
            grant(0.0, 0, Acquired, 0.001, Some(0)),
            grant(6.0, 0, Renewed, 0.001, Some(0)),
            grant(7.0, 1, Acquired, 0.001, Some(1)),
        ];
        let down = Detail { reason: Some("other-holder".into()), ..Detail::default() };
        events.push(ev(8.0, 0, SteppedDown).with_detail(down));
        let g = trial(events, 20.0);
        assert_eq!((g.definite, g.definite_us), (1, s(1.0)));
    }

    #[test]
    fn a_token_not_above_every_earlier_one_is_an_inversion() {
        use EventKind::*;
        let with = |t: f64, w: usize, token: Option<u64>| {
            ev(t, w, Acquired).with_detail(Detail { token, expires_in_ms: Some(1000.0), ..Detail::default() })
        };
        let g =
            trial(vec![with(0.0, 0, Some(5)), with(2.0, 1, Some(7)), with(4.0, 2, Some(6)), with(6.0, 0, None)], 10.0);
        assert_eq!((g.token_inversions, g.untokened), (1, 1));
    }

    #[test]
    fn a_lost_reply_makes_only_a_possible_double_grant() {
        use EventKind::*;
        // Worker 1's acquire at 5 reached the service, its reply lost,
        // while worker 0 held the lease.
        let g = trial(
            vec![
                grant(0.0, 0, Acquired, 0.001, None),
                grant(3.0, 0, Renewed, 0.001, None),
                ev(5.001, 1, ReplyLost),
                ev(5.3, 1, NotAcquired).with_detail(Detail {
                    error: Some("no reply".into()),
                    op_us: Some(s(0.3) as u64),
                    ..Detail::default()
                }),
            ],
            20.0,
        );
        assert_eq!((g.definite, g.possible), (0, 1));
    }

    #[test]
    fn a_lock_files_truncated_lease_until_is_what_the_grant_said() {
        use EventKind::*;
        // The holder wrote lease_until 9 s after the barrier's wall clock,
        // though its write was at 0.6 (whole seconds): a takeover at 9.2
        // overlaps nothing it was granted.
        let wall0 = 1_700_000_000.0;
        let mut barrier = Event::new(0, None, Barrier);
        barrier.detail.wall_ns = Some((wall0 * 1e9) as i64);
        let held = ev(0.6, 0, Acquired).with_detail(Detail {
            expires_in_ms: Some(LEASE * 1000.0),
            lease_until: Some(wall0 + 9.0),
            ..Detail::default()
        });
        let mut events = vec![barrier, held, grant(9.2, 1, Acquired, 0.001, None)];
        events.push(Event::new(s(20.0), None, TrialEnd));
        let params: CheckParams = crate::params::server_lease(s(LEASE), s(3.0), s(3.0));
        assert_eq!(check(&History::new(events), &params).network.double_grants.definite, 0);
    }
}
