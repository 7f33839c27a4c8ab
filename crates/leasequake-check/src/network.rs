//! What a silent or half-deaf link to the lease server leaves behind:
//! renewals that failed, replies lost, and grants the server held for a
//! live worker that did not believe it led (an *orphaned* grant: nobody
//! leads, yet nobody else can take the lease until it runs out).
//!
//! The server's grants are read off the history: every `acquired` and
//! `renewed` (until its `lease_until`), and every request that failed for
//! the worker but whose reply the harness's proxy dropped (`reply_lost`,
//! dropped under lost replies or delayed past the worker's timeout; it
//! answers the latest request sent before it): the request reached the
//! server. A lost-reply renewal took effect if the worker
//! still held the lease when it was sent; a lost-reply acquire if nobody
//! else held it. Where the history cannot tell, the grant is counted as
//! *possible* and left out of the orphaned time, which is thus a lower
//! bound. A grant ends at its expiry, at a release, or when another
//! worker acquires (the server can only have let it go by then).

use leasequake_model::history::{Event, EventKind, Micros};

use super::by_worker::ByWorker;
use super::metrics::Network;
use super::params::CheckParams;
use super::requests::{LostReplies, LostRequest, barrier_wall_us, grant_end, merge};
use super::spans::Spans;

/// One server-side grant of one worker.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Grant {
    start_us: Micros,
    end_us: Micros,
}

pub(crate) fn network(
    events: &[Event],
    by_worker: &ByWorker<'_>,
    params: &CheckParams,
    spans: &Spans,
    end_us: Micros,
) -> Network {
    let mut out = Network {
        renew_failures: events.iter().filter(|e| e.kind == EventKind::RenewFailed).count(),
        replies_lost: events.iter().filter(|e| e.kind == EventKind::ReplyLost).count(),
        ..Network::default()
    };
    // A lock held by a session or a process has no expiry to read; a
    // replicated service's grants are not one server's (a grant does not
    // end where another worker's begins).
    if !params.expires || params.replicated {
        return out;
    }
    let barrier_wall_us = barrier_wall_us(events);
    let workers = by_worker.workers();
    let acquisitions: Vec<(usize, Micros)> =
        events.iter().filter(|e| e.kind == EventKind::Acquired).filter_map(|e| e.worker.map(|w| (w, e.t_us))).collect();
    // First the grants each worker knew of, then those it did not.
    let known: Vec<Vec<Grant>> = (0..workers).map(|w| known_grants(by_worker.of(w), barrier_wall_us, end_us)).collect();
    for w in 0..workers {
        // A grant ends when another worker is granted the lease: the first
        // such acquisition inside it (they are in time order).
        let cut = |g: Grant| Grant {
            end_us: acquisitions[acquisitions.partition_point(|(_, t)| *t <= g.start_us)..]
                .iter()
                .take_while(|(_, t)| *t < g.end_us)
                .find(|(o, _)| *o != w)
                .map_or(g.end_us, |(_, t)| *t),
            ..g
        };
        let mut grants: Vec<Grant> = known[w].iter().copied().map(cut).collect();
        let (unknown, possible) = unknown_grants(by_worker.of(w), w, params, &known, &cut, end_us);
        grants.extend(unknown);
        out.possible_grants += possible;
        let died = by_worker.of(w).iter().find(|e| e.kind == EventKind::Exit).map_or(end_us, |e| e.t_us);
        let believed: Vec<(Micros, Micros)> =
            spans.tenures.iter().filter(|t| t.worker == w).map(|t| (t.start_us, t.end_us)).collect();
        for (start, end) in merge(grants.iter().map(|g| (g.start_us, g.end_us.min(died).min(end_us))).collect()) {
            let orphaned = minus(start, end, &believed);
            if orphaned > 0 {
                out.orphaned_grants += 1;
                out.orphaned_grant_us += orphaned;
                out.orphaned_grant_max_us = out.orphaned_grant_max_us.max(orphaned);
            }
        }
    }
    out
}

/// The grants `worker` was told of: each acquire and renewal, until its
/// lease runs out, or until the worker releases it.
fn known_grants(mine: &[&Event], barrier_wall_us: Option<i64>, end_us: Micros) -> Vec<Grant> {
    let mut out: Vec<Grant> = Vec::new();
    for e in mine {
        match e.kind {
            // From when the worker knows: the request's own round trip is
            // not time the grant went unbelieved.
            EventKind::Acquired | EventKind::Renewed => {
                if let Some(end) = grant_end(e, barrier_wall_us) {
                    out.push(Grant { start_us: e.t_us, end_us: end });
                }
            }
            EventKind::Released => {
                for g in out.iter_mut().filter(|g| g.end_us > e.t_us) {
                    g.end_us = e.t_us;
                }
            }
            _ => {}
        }
    }
    out.retain(|g| g.start_us < end_us);
    out
}

/// The grants `worker` was not told of: requests that failed for it but
/// whose reply was lost. (definite grants, how many were possible.)
fn unknown_grants(
    mine: &[&Event],
    worker: usize,
    params: &CheckParams,
    known: &[Vec<Grant>],
    cut: &dyn Fn(Grant) -> Grant,
    end_us: Micros,
) -> (Vec<Grant>, usize) {
    let (mut out, mut possible) = (Vec::new(), 0);
    for LostRequest { sent_us: sent, reply_us: reply, renewal } in lost_requests(mine) {
        let covers = |g: &Grant, t: Micros| g.start_us <= t && t < g.end_us;
        let held_by = |w: usize, t: Micros| known[w].iter().any(|g| covers(&cut(*g), t));
        let took = if renewal {
            // The server renews only a lease still ours: told of, or
            // renewed by an earlier request whose reply was lost too.
            let ours = |t: Micros| held_by(worker, t) || out.iter().any(|g| covers(g, t));
            match (ours(sent), ours(reply)) {
                (true, true) => Some(true),
                (false, false) => Some(false),
                _ => None,
            }
        } else {
            // It grants only a lease nobody holds.
            let others = |t| (0..known.len()).any(|w| w != worker && held_by(w, t));
            match (others(sent), others(reply)) {
                (false, false) => Some(true),
                (true, true) => Some(false),
                _ => None,
            }
        };
        match took {
            // Timed from when the request was sent: the least it can last.
            Some(true) if sent < end_us => out.push(cut(Grant { start_us: sent, end_us: sent + params.lease_us })),
            Some(true) => {}
            Some(false) => {}
            None => possible += 1,
        }
    }
    (out, possible)
}

/// `worker`'s requests whose reply was lost, in order.
fn lost_requests(mine: &[&Event]) -> Vec<LostRequest> {
    let (mut lost, mut out) = (LostReplies::default(), Vec::new());
    for e in mine {
        lost.event(e, &mut out);
    }
    lost.finish(&mut out);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The length of [start, end) not covered by `cover`.
fn minus(start: Micros, end: Micros, cover: &[(Micros, Micros)]) -> Micros {
    let covered: Micros =
        merge(cover.iter().map(|&(a, b)| (a.max(start), b.min(end))).collect()).iter().map(|(a, b)| b - a).sum();
    (end - start) - covered
}

#[cfg(test)]
mod tests {
    use leasequake_model::history::{Detail, Event, EventKind, History};

    use super::super::intervals::check;
    use super::super::params::CheckParams;

    use crate::testkit::{LEASE, ev, s};

    /// A grant the worker was told of, lasting a lease from `t`.
    fn grant(t: f64, w: usize, kind: EventKind) -> Event {
        ev(t, w, kind).with_detail(Detail { expires_in_ms: Some(LEASE * 1000.0), ..Detail::default() })
    }

    fn failed(t: f64, w: usize, kind: EventKind, op: f64) -> Event {
        ev(t, w, kind).with_detail(Detail {
            error: Some("no reply".into()),
            op_us: Some(s(op) as u64),
            ..Detail::default()
        })
    }

    /// A renewal sent at `t` that failed by timeout 0.3 s later, its reply
    /// lost 1 ms after it was sent (it reached the server).
    fn lost_renewal(t: f64, w: usize) -> [Event; 3] {
        use EventKind::*;
        [ev(t, w, Renewing), ev(t + 0.001, w, ReplyLost), failed(t + 0.3, w, RenewFailed, 0.3)]
    }

    fn params() -> CheckParams {
        crate::params::server_lease(s(LEASE), s(3.0), s(3.0))
    }

    fn trial(mut events: Vec<Event>, end: f64) -> super::Network {
        events.insert(0, Event::new(0, None, EventKind::Barrier));
        events.push(Event::new(s(end), None, EventKind::TrialEnd));
        check(&History::new(events), &params()).network
    }

    #[test]
    fn a_renewal_whose_reply_was_lost_holds_the_lease_for_a_holder_that_stepped_down() {
        // Granted at 0; renewals at 3 and 6 reach the server, their replies
        // lost; the blog's third failure at 9 steps down. The server's
        // grant runs a lease from the last one sent: to 15.
        use EventKind::*;
        let mut events = vec![grant(0.0, 0, Acquired)];
        events.extend(lost_renewal(3.0, 0));
        events.extend(lost_renewal(6.0, 0));
        events.extend([ev(9.0, 0, Renewing), failed(9.3, 0, RenewFailed, 0.3), ev(9.3, 0, SteppedDown)]);
        let n = trial(events, 20.0);
        assert_eq!((n.renew_failures, n.replies_lost, n.possible_grants), (3, 2, 0));
        assert_eq!((n.orphaned_grants, n.orphaned_grant_us), (1, s(15.0 - 9.3)));
        // A chain of them: each renews the lease the one before kept alive
        // (the told-of grant ended at 9, the renewal at 12 still finds it).
        let chain = || {
            let mut v = Vec::from(lost_renewal(6.0, 0));
            v.extend(lost_renewal(12.0, 0));
            v.push(ev(12.3, 0, SteppedDown));
            v
        };
        let mut chained = vec![grant(0.0, 0, Acquired)];
        chained.extend(chain());
        assert_eq!(trial(chained, 30.0).orphaned_grant_us, s(21.0 - 12.3));
        // Taken by another meanwhile: the renewal after that found the
        // lease gone, whatever reply it lost.
        let mut taken = vec![grant(0.0, 0, Acquired), grant(10.0, 1, Acquired)];
        taken.extend(chain());
        taken.sort_by_key(|e| e.t_us);
        assert_eq!(trial(taken, 30.0).orphaned_grant_us, 0);
    }

    #[test]
    fn a_reply_delayed_past_the_timeout_answers_the_request_before_it() {
        use EventKind::*;
        // The renewal at 6 times out at 6.3; its reply, delayed, comes at
        // 6.5: it renewed the lease to 15. The holder stepped down at 7.
        let n = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(6.0, 0, Renewing),
                failed(6.3, 0, RenewFailed, 0.3),
                ev(6.5, 0, ReplyLost),
                ev(7.0, 0, SteppedDown),
            ],
            20.0,
        );
        assert_eq!(n.orphaned_grant_us, s(15.0 - 7.0));
    }

    #[test]
    fn a_killed_holder_or_a_release_leaves_no_orphan() {
        use EventKind::*;
        let killed = trial(vec![grant(0.0, 0, Acquired), ev(4.0, 0, Exit)], 20.0);
        assert_eq!(killed.orphaned_grant_us, 0, "a dead holder's lease is the crash gap, not an orphan");
        let released = trial(vec![grant(0.0, 0, Acquired), ev(4.0, 0, Released), ev(4.0, 0, SteppedDown)], 20.0);
        assert_eq!(released.orphaned_grant_us, 0);
    }

    #[test]
    fn a_holder_that_steps_down_at_a_local_deadline_orphans_only_what_is_left_of_its_grant() {
        use EventKind::*;
        let n = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(3.0, 0, Renewing),
                failed(3.3, 0, RenewFailed, 0.3),
                ev(8.0, 0, SteppedDown),
                grant(9.5, 1, Acquired),
            ],
            20.0,
        );
        assert_eq!((n.orphaned_grants, n.orphaned_grant_us), (1, s(1.0)), "from 8 to the expiry at 9");
    }

    #[test]
    fn an_acquire_whose_reply_was_lost_is_a_grant_if_nobody_held_the_lease() {
        use EventKind::*;
        // Worker 0's lease ran out at 9; worker 1's takeover at 10 reached
        // the server, its reply lost: the lease is worker 1's until 19,
        // and nobody knows it.
        let free = trial(
            vec![
                grant(0.0, 0, Acquired),
                ev(1.0, 0, Exit),
                ev(10.001, 1, ReplyLost),
                failed(10.3, 1, TakeoverLost, 0.3),
            ],
            30.0,
        );
        assert_eq!((free.orphaned_grants, free.orphaned_grant_us, free.possible_grants), (1, s(LEASE), 0));
        // The same attempt while worker 0 still held the lease: no grant.
        let held =
            trial(vec![grant(0.0, 0, Acquired), ev(5.001, 1, ReplyLost), failed(5.3, 1, NotAcquired, 0.3)], 30.0);
        assert_eq!((held.orphaned_grant_us, held.possible_grants), (0, 0));
        // Sent before the expiry, answered after it: the history cannot tell.
        let unsure = trial(
            vec![grant(0.0, 0, Acquired), ev(1.0, 0, Exit), ev(9.1, 1, ReplyLost), failed(9.2, 1, NotAcquired, 0.3)],
            30.0,
        );
        assert_eq!((unsure.orphaned_grant_us, unsure.possible_grants), (0, 1));
    }

    #[test]
    fn a_grant_ends_when_another_worker_is_granted_the_lease() {
        use EventKind::*;
        let n = trial(vec![grant(0.0, 0, Acquired), ev(2.0, 0, SteppedDown), grant(5.0, 1, Acquired)], 20.0);
        assert_eq!(n.orphaned_grant_us, s(3.0));
    }
}
