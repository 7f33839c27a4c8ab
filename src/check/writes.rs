//! Writes to the protected resource: which were stale (made under a token
//! lower than one already granted), and whether the resource took them.
//! A stale write accepted is lost work: an older holder overwrote a newer
//! result.

use crate::history::{Event, EventKind};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub attempted: usize,
    /// Made while a higher token had already been granted.
    pub stale: usize,
    pub stale_accepted: usize,
    pub stale_rejected: usize,
}

/// Count over the trial's events (in time order, up to the trial's end).
pub fn writes(events: &[Event]) -> Writes {
    let mut out = Writes::default();
    let mut highest = 0;
    for e in events {
        let token = e.detail.token.unwrap_or(0);
        match e.kind {
            EventKind::Acquired => highest = highest.max(token),
            EventKind::WriteAccepted | EventKind::WriteRejected => {
                out.attempted += 1;
                if token < highest {
                    out.stale += 1;
                    if e.kind == EventKind::WriteAccepted {
                        out.stale_accepted += 1;
                    } else {
                        out.stale_rejected += 1;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Detail;

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
        let fenced = writes(&history(EventKind::WriteRejected));
        assert_eq!(fenced, Writes { attempted: 4, stale: 1, stale_accepted: 0, stale_rejected: 1 });
        let unfenced = writes(&history(EventKind::WriteAccepted));
        assert_eq!(unfenced, Writes { attempted: 4, stale: 1, stale_accepted: 1, stale_rejected: 0 });
    }

    #[test]
    fn a_write_before_the_newer_grant_is_not_stale() {
        let w = writes(&[
            ev(1, 0, EventKind::Acquired, 1),
            ev(2, 0, EventKind::WriteAccepted, 1),
            ev(3, 1, EventKind::Acquired, 2),
        ]);
        assert_eq!(w.stale, 0);
    }
}
