//! Writes to the protected resource: which were stale (made under a token
//! lower than one already granted), and what became of them:
//! * rejected by the resource (fencing worked);
//! * accepted over a newer holder's write: lost work, an older holder
//!   overwrote a newer result;
//! * accepted before the newer holder wrote anything: no store can refuse
//!   a token it has not seen yet, and the newer write supersedes it.
//!
//! A write that carries no token (a lock library that gives none) is judged
//! by the order of the acquisitions instead: it is stale once another
//! acquisition followed its writer's, and nothing could refuse it.

use super::fold::Fold;
use leasequake_model::history::{Event, EventKind, Micros};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub attempted: usize,
    /// Made while a higher token had already been granted.
    pub stale: usize,
    /// Accepted over a newer token's accepted write (lost work).
    pub stale_accepted: usize,
    pub stale_rejected: usize,
    /// Accepted before any newer token had written.
    pub stale_superseded: usize,
}

/// Count over the trial's events (in time order, up to the trial's end).
/// The writes so far; the highest token granted and written; the same by
/// the acquisitions' order, for writes without a token.
#[derive(Default)]
pub(crate) struct WritesFold {
    out: Writes,
    tokens: Highest,
    order: Highest,
    /// Acquisitions so far, and each worker's place among them.
    acquisitions: u64,
    holding: Vec<u64>,
}

/// The highest token (or place in order) granted, and accepted in a write.
#[derive(Default)]
struct Highest {
    granted: u64,
    written: u64,
}

impl Highest {
    /// A write with `token`: stale if a higher one was granted.
    fn write(&mut self, out: &mut Writes, token: u64, accepted: bool) {
        out.attempted += 1;
        if token < self.granted {
            out.stale += 1;
            match (accepted, token < self.written) {
                (false, _) => out.stale_rejected += 1,
                (true, true) => out.stale_accepted += 1,
                (true, false) => out.stale_superseded += 1,
            }
        }
        if accepted {
            self.written = self.written.max(token);
        }
    }
}

impl Fold for WritesFold {
    type Out = Writes;

    fn event(&mut self, e: &Event) {
        match e.kind {
            EventKind::Acquired => {
                self.tokens.granted = self.tokens.granted.max(e.detail.token.unwrap_or(0));
                self.acquisitions += 1;
                self.order.granted = self.acquisitions;
                if let Some(w) = e.worker {
                    if w >= self.holding.len() {
                        self.holding.resize(w + 1, 0);
                    }
                    self.holding[w] = self.acquisitions;
                }
            }
            EventKind::WriteAccepted | EventKind::WriteRejected => {
                let accepted = e.kind == EventKind::WriteAccepted;
                match e.detail.token {
                    Some(token) => self.tokens.write(&mut self.out, token, accepted),
                    None => {
                        let place = e.worker.and_then(|w| self.holding.get(w).copied()).unwrap_or(0);
                        self.order.write(&mut self.out, place, accepted);
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(self, _end_us: Micros) -> Writes {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    fn ev(t: i64, w: usize, kind: EventKind, token: u64) -> Event {
        Event::new(t, Some(w), kind).with_detail(Detail { token: Some(token), ..Detail::default() })
    }

    #[test]
    fn the_seeds_table_with_and_without_fencing() {
        // A acquires 17 and writes; B acquires 18 and writes; A resumes and
        // writes with 17: stale. Fenced, the store rejects it; unfenced, it
        // is accepted (and overwrites B's report).
        let history = |a_verdict: EventKind| {
            vec![
                ev(1, 0, EventKind::Acquired, 17),
                ev(2, 0, EventKind::WriteAccepted, 17),
                ev(50, 1, EventKind::Acquired, 18),
                ev(51, 1, EventKind::WriteAccepted, 18),
                ev(60, 0, a_verdict, 17),
                ev(61, 1, EventKind::WriteAccepted, 18),
            ]
        };
        let fenced = crate::fold::over(WritesFold::default(), &history(EventKind::WriteRejected));
        assert_eq!(fenced, Writes { attempted: 4, stale: 1, stale_rejected: 1, ..Writes::default() });
        let unfenced = crate::fold::over(WritesFold::default(), &history(EventKind::WriteAccepted));
        assert_eq!(unfenced, Writes { attempted: 4, stale: 1, stale_accepted: 1, ..Writes::default() });
    }

    #[test]
    fn a_stale_write_before_the_newer_holder_wrote_is_superseded_not_lost() {
        let w = crate::fold::over(
            WritesFold::default(),
            &[
                ev(1, 0, EventKind::Acquired, 17),
                ev(50, 1, EventKind::Acquired, 18),
                // A writes between B's grant and B's first write.
                ev(51, 0, EventKind::WriteAccepted, 17),
                ev(52, 1, EventKind::WriteAccepted, 18),
            ],
        );
        assert_eq!(w, Writes { attempted: 2, stale: 1, stale_superseded: 1, ..Writes::default() });
    }

    #[test]
    fn writes_without_a_token_are_judged_by_the_order_of_the_acquisitions() {
        let untokened = |t: i64, w: usize, kind: EventKind| Event::new(t, Some(w), kind);
        let w = crate::fold::over(
            WritesFold::default(),
            &[
                untokened(1, 0, EventKind::Acquired),
                untokened(2, 0, EventKind::WriteAccepted),
                untokened(50, 1, EventKind::Acquired),
                // A, resumed, writes before B has: superseded; B writes, then
                // A again: B's work lost.
                untokened(51, 0, EventKind::WriteAccepted),
                untokened(52, 1, EventKind::WriteAccepted),
                untokened(60, 0, EventKind::WriteAccepted),
                // A acquires again, after B: its writes are the newest.
                untokened(70, 0, EventKind::Acquired),
                untokened(71, 0, EventKind::WriteAccepted),
            ],
        );
        assert_eq!(w, Writes { attempted: 5, stale: 2, stale_accepted: 1, stale_superseded: 1, ..Writes::default() });
    }

    #[test]
    fn a_write_before_the_newer_grant_is_not_stale() {
        let w = crate::fold::over(
            WritesFold::default(),
            &[
                ev(1, 0, EventKind::Acquired, 1),
                ev(2, 0, EventKind::WriteAccepted, 1),
                ev(3, 1, EventKind::Acquired, 2),
            ],
        );
        assert_eq!(w.stale, 0);
    }
}
