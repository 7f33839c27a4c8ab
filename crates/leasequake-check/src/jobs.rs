//! The exactly-once job: how many runs of each epoch's job took effect.
//! An epoch whose result was never applied is missed; one applied twice or
//! more is a duplicate (the report sent twice). A repeat of an idempotent
//! put and a result the store refused took no effect and count as neither.

use std::collections::BTreeMap;

use leasequake_model::history::{Event, EventKind, Micros};

use super::fold::Fold;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Jobs {
    /// Epochs that had a whole epoch of the trial left after their boundary
    /// (time enough to run, even after a failover): those that can be missed.
    pub expected: u64,
    /// Runs begun (`job_started`).
    pub runs: usize,
    pub applied: usize,
    pub repeated: usize,
    pub rejected: usize,
    /// Expected epochs with no applied result.
    pub missed: u64,
    /// Applied results beyond the first, over all epochs.
    pub duplicates: usize,
    /// Epochs with two or more applied results.
    pub duplicate_epochs: u64,
    /// Results stored under a fencing token lower than one already granted
    /// (a stale holder's), and what the store did with them: applied (an
    /// older holder's work took effect after a newer grant), or refused or
    /// absorbed as a repeat. Partitioned jobs carry no token.
    pub stale_results: usize,
    pub stale_applied: usize,
}

impl std::ops::Add for Jobs {
    type Output = Jobs;
    fn add(self, o: Jobs) -> Jobs {
        Jobs {
            expected: self.expected + o.expected,
            runs: self.runs + o.runs,
            applied: self.applied + o.applied,
            repeated: self.repeated + o.repeated,
            rejected: self.rejected + o.rejected,
            missed: self.missed + o.missed,
            duplicates: self.duplicates + o.duplicates,
            duplicate_epochs: self.duplicate_epochs + o.duplicate_epochs,
            stale_results: self.stale_results + o.stale_results,
            stale_applied: self.stale_applied + o.stale_applied,
        }
    }
}

/// Counts the job's runs as the events come; `epoch_us` is the job's epoch
/// length. What it holds grows with the epochs, not the events.
pub(crate) struct JobsFold {
    epoch_us: Micros,
    out: Jobs,
    /// Applied results per epoch.
    applied: BTreeMap<u64, usize>,
    /// The highest fencing token granted so far.
    granted: u64,
}

impl JobsFold {
    pub fn new(epoch_us: Micros) -> JobsFold {
        JobsFold { epoch_us, out: Jobs::default(), applied: BTreeMap::new(), granted: 0 }
    }
}

impl Fold for JobsFold {
    type Out = Jobs;

    fn event(&mut self, e: &Event) {
        let out = &mut self.out;
        let result = matches!(e.kind, EventKind::JobApplied | EventKind::JobRepeated | EventKind::JobRejected);
        if let (true, Some(token)) = (result, e.detail.token)
            && token < self.granted
        {
            out.stale_results += 1;
            if e.kind == EventKind::JobApplied {
                out.stale_applied += 1;
            }
        }
        match e.kind {
            EventKind::Acquired => self.granted = self.granted.max(e.detail.token.unwrap_or(0)),
            EventKind::JobStarted => out.runs += 1,
            EventKind::JobApplied => {
                out.applied += 1;
                if let Some(epoch) = e.detail.epoch {
                    *self.applied.entry(epoch).or_default() += 1;
                }
            }
            EventKind::JobRepeated => out.repeated += 1,
            EventKind::JobRejected => out.rejected += 1,
            _ => {}
        }
    }

    /// `end_us` is relative to the barrier, like the epochs.
    fn finish(self, end_us: Micros) -> Jobs {
        let (epoch_us, mut out) = (self.epoch_us, self.out);
        // Boundary k at k × epoch; expected while (k + 1) × epoch ≤ end.
        out.expected = if epoch_us > 0 { (end_us / epoch_us).saturating_sub(1).max(0) as u64 } else { 0 };
        out.missed = (1..=out.expected).filter(|k| !self.applied.contains_key(k)).count() as u64;
        for &n in self.applied.values() {
            if n >= 2 {
                out.duplicates += n - 1;
                out.duplicate_epochs += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasequake_model::history::Detail;

    fn jobs(events: &[Event], epoch_us: Micros, end_us: Micros) -> Jobs {
        let mut fold = JobsFold::new(epoch_us);
        events.iter().for_each(|e| fold.event(e));
        fold.finish(end_us)
    }

    fn ev(t: Micros, w: usize, kind: EventKind, epoch: u64, token: u64) -> Event {
        Event::new(t, Some(w), kind).with_detail(Detail { epoch: Some(epoch), token: Some(token), ..Detail::default() })
    }

    /// Epochs of 20 (units arbitrary), trial end 100: epochs 1..=4 expected.
    /// A starts epoch 1's job at 20 and is paused in it; B takes over at 35
    /// (token 18), runs epoch 1's job and stores it at 37; A resumes at 45
    /// and stores its result; epochs 2 and 3 run once; nobody runs epoch 4.
    fn paused_mid_job(a_result: EventKind) -> Vec<Event> {
        vec![
            ev(1, 0, EventKind::Acquired, 0, 17),
            ev(20, 0, EventKind::JobStarted, 1, 17),
            ev(34, 1, EventKind::Acquired, 0, 18),
            ev(35, 1, EventKind::JobStarted, 1, 18),
            ev(37, 1, EventKind::JobApplied, 1, 18),
            ev(45, 0, a_result, 1, 17),
            ev(60, 1, EventKind::JobStarted, 2, 18),
            ev(62, 1, EventKind::JobApplied, 2, 18),
            ev(80, 1, EventKind::JobStarted, 3, 18),
            ev(82, 1, EventKind::JobApplied, 3, 18),
        ]
    }

    #[test]
    fn lease_only_the_paused_holders_late_result_is_a_duplicate() {
        let j = jobs(&paused_mid_job(EventKind::JobApplied), 20, 100);
        assert_eq!(
            j,
            Jobs {
                expected: 4,
                runs: 4,
                applied: 4,
                missed: 1,
                duplicates: 1,
                duplicate_epochs: 1,
                stale_results: 1,
                stale_applied: 1,
                ..Jobs::default()
            }
        );
    }

    #[test]
    fn refused_or_repeated_late_results_are_no_duplicates() {
        let fenced = jobs(&paused_mid_job(EventKind::JobRejected), 20, 100);
        assert_eq!((fenced.duplicates, fenced.rejected, fenced.applied, fenced.missed), (0, 1, 3, 1));
        assert_eq!((fenced.stale_results, fenced.stale_applied), (1, 0));
        let idempotent = jobs(&paused_mid_job(EventKind::JobRepeated), 20, 100);
        assert_eq!((idempotent.duplicates, idempotent.repeated, idempotent.missed), (0, 1, 1));
    }

    #[test]
    fn an_epoch_too_close_to_the_end_is_not_expected() {
        // End 99: the boundary at 80 has less than an epoch left.
        assert_eq!(jobs(&[], 20, 99).expected, 3);
        assert_eq!(jobs(&[], 20, 99).missed, 3);
        assert_eq!(jobs(&[], 20, 10).expected, 0);
        // A result for an unexpected epoch still counts (and can duplicate).
        let late = [ev(90, 0, EventKind::JobApplied, 4, 1), ev(91, 1, EventKind::JobApplied, 4, 2)];
        let j = jobs(&late, 20, 99);
        assert_eq!((j.applied, j.duplicates, j.missed), (2, 1, 3));
    }
}
