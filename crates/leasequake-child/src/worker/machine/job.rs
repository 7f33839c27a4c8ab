//! The exactly-once epoch job (the blog's "nightly report"): run at every
//! epoch boundary by whoever should, caught up by a new leader, stored
//! through the protected resource with the leader's token.

use nix::sys::signal::Signal;

use super::{Role, Worker};
use crate::model::JobStrategy;
use crate::model::history::{Detail, EventKind};
use crate::substrate::resource::{self, JobOutcome};
use crate::worker::env::Env;

/// What became of one attempt to run the epoch job.
enum JobRun {
    /// The store (or this worker) already had the epoch's result.
    AlreadyDone,
    Ran,
    /// A shutdown signal arrived mid-job.
    Interrupted(Signal),
}

impl<E: Env> Worker<E> {
    /// How the epoch job is kept exactly-once (meaningless without a job).
    fn job_strategy(&self) -> JobStrategy {
        self.cfg.worker.epoch_job.map_or(JobStrategy::LeaseOnly, |j| j.strategy)
    }

    /// The epoch the worker is in now (0 before the first boundary).
    fn epoch_now(&self) -> u64 {
        match self.cfg.worker.epoch_job {
            Some(j) => ((self.env.mono_ns() - self.origin_ns).max(0) as u64) / j.epoch.as_ns(),
            None => 0,
        }
    }

    /// At an epoch boundary: run the job if it is ours to run.
    pub(super) fn on_boundary(&mut self, role: Role) -> Option<Signal> {
        let epoch = self.epoch_now();
        let ours = match self.job_strategy() {
            JobStrategy::Partitioned => epoch % self.cfg.workers.max(1) as u64 == self.index as u64,
            _ => matches!(role, Role::Leader { .. }),
        };
        if !ours {
            return None;
        }
        match self.run_job(epoch) {
            JobRun::Interrupted(sig) => Some(sig),
            JobRun::AlreadyDone | JobRun::Ran => None,
        }
    }

    /// A leader's catch-up: the oldest epoch up to now whose job nobody ran
    /// (the leader that should have died, or was paused past the boundary
    /// and its late result refused). One job per tick, so that catching up
    /// never costs the lease. Partitioned jobs have no leader to catch up.
    pub(super) fn catch_up(&mut self) -> Option<Signal> {
        if self.cfg.worker.epoch_job.is_none() || self.job_strategy() == JobStrategy::Partitioned {
            return None;
        }
        for epoch in 1..=self.epoch_now() {
            if self.known_done.contains(&epoch) {
                continue;
            }
            match self.run_job(epoch) {
                JobRun::AlreadyDone => continue,
                JobRun::Ran => return None,
                JobRun::Interrupted(sig) => return Some(sig),
            }
        }
        None
    }

    /// One run of the epoch's job: ask the store whether it is done (under
    /// fencing, presenting the token), work for the job's duration (a pause
    /// can land here), then store the result. The job does not look at the
    /// lease again: that is the point.
    fn run_job(&mut self, epoch: u64) -> JobRun {
        let Some(dir) = self.cfg.resource_dir.clone() else { return JobRun::AlreadyDone };
        let strategy = self.job_strategy();
        let token = self.token.unwrap_or(0);
        if epoch == 0 || self.known_done.contains(&epoch) || self.refused.contains(&(epoch, token)) {
            return JobRun::AlreadyDone;
        }
        // A partitioned job runs on no lease: it has no token to carry.
        let carried = (strategy != JobStrategy::Partitioned).then_some(token);
        let detail = |error: Option<String>| Detail { epoch: Some(epoch), token: carried, error, ..Detail::default() };
        match resource::begin_job(&dir, strategy, epoch, token) {
            Ok(true) => {
                self.known_done.insert(epoch);
                return JobRun::AlreadyDone;
            }
            Ok(false) => {}
            Err(e) => {
                self.emit(EventKind::JobRejected, detail(Some(e.to_string())));
                return JobRun::Ran;
            }
        }
        self.emit(EventKind::JobStarted, detail(None));
        self.log(&format!("[JOB] Running the job of epoch {epoch} with token {token}"));
        if let Some(sig) =
            self.env.wait_until(self.env.mono_ns() + self.cfg.worker.epoch_job.map_or(0, |j| j.duration.as_ns() as i64))
        {
            self.log(&format!("[JOB] Epoch {epoch} interrupted"));
            return JobRun::Interrupted(sig);
        }
        let (kind, error) = match resource::commit_job(&dir, strategy, epoch, token, self.pid) {
            Ok(JobOutcome::Applied) => (EventKind::JobApplied, None),
            Ok(JobOutcome::Repeated) => (EventKind::JobRepeated, None),
            Ok(JobOutcome::Rejected) => (EventKind::JobRejected, None),
            Err(e) => (EventKind::JobRejected, Some(e.to_string())),
        };
        if kind == EventKind::JobRejected {
            self.refused.insert((epoch, token));
        } else {
            self.known_done.insert(epoch);
        }
        self.emit(kind, detail(error));
        self.log(&format!("[JOB] Epoch {epoch} stored: {}", kind.name()));
        JobRun::Ran
    }
}
