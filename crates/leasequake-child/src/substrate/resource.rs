//! The protected resource ("report storage") that a leader writes to: a
//! directory holding the report. Unfenced, the last writer wins; fenced,
//! the store remembers the highest fencing token it has seen and rejects a
//! write carrying a lower one — the check that makes exclusion real even
//! when two workers believe they lead.

use std::fs::{self, File};
use std::io::{self, ErrorKind, Write};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::model::{JobStrategy, Resource};

/// The store's own lock (flock on a guard file), so that a check and the
/// write it guards are one step for every writer. Unlocked when dropped.
fn guard(dir: &Path) -> io::Result<Flock<File>> {
    fs::create_dir_all(dir)?;
    let file = File::options().create(true).truncate(false).write(true).open(dir.join(".guard"))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))
}

/// The highest fencing token the store has seen.
fn highest(dir: &Path) -> io::Result<u64> {
    match fs::read_to_string(dir.join("highest")) {
        Ok(s) => Ok(s.trim().parse::<u64>().unwrap_or(0)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Record `token` as seen; false if a higher one already was.
fn fence(dir: &Path, token: u64) -> io::Result<bool> {
    if token < highest(dir)? {
        return Ok(false);
    }
    fs::write(dir.join("highest"), token.to_string())?;
    Ok(true)
}

/// Write the report as `pid` holding `token`. Ok(true) if the store took it.
pub fn write(dir: &Path, mode: Resource, token: u64, pid: i64) -> io::Result<bool> {
    fs::create_dir_all(dir)?;
    let report = format!("{{\"processId\":{pid},\"token\":{token}}}");
    match mode {
        Resource::None => Ok(false),
        Resource::Unfenced => fs::write(dir.join("report"), report).map(|()| true),
        Resource::Fenced => {
            let _held = guard(dir)?;
            if !fence(dir, token)? {
                return Ok(false);
            }
            fs::write(dir.join("report"), report)?;
            Ok(true)
        }
    }
}

/// What the store made of one run's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// The result took effect.
    Applied,
    /// The same result was already there; the put changed nothing.
    Repeated,
    /// Refused: a lower token, or the epoch's result already exists.
    Rejected,
}

fn job_path(dir: &Path, epoch: u64) -> std::path::PathBuf {
    dir.join("jobs").join(epoch.to_string())
}

/// The job is starting: does the store hold this epoch's result already?
/// Under `fencing` the job also presents its token here, as its first
/// request to the store — so a result from an older holder that arrives
/// later is refused, whoever finishes first.
pub fn begin_job(dir: &Path, strategy: JobStrategy, epoch: u64, token: u64) -> io::Result<bool> {
    let _held = guard(dir)?;
    if strategy == JobStrategy::Fencing {
        fence(dir, token)?;
    }
    Ok(job_path(dir, epoch).exists())
}

/// Store the result of epoch `epoch`'s job, run by `pid` holding `token`.
pub fn commit_job(dir: &Path, strategy: JobStrategy, epoch: u64, token: u64, pid: i64) -> io::Result<JobOutcome> {
    let _held = guard(dir)?;
    fs::create_dir_all(dir.join("jobs"))?;
    let path = job_path(dir, epoch);
    // Every run's own record: what a lease-only job would have sent twice.
    let run = format!("{{\"epoch\":{epoch},\"processId\":{pid},\"token\":{token}}}");
    let applied = |outcome| -> io::Result<JobOutcome> {
        let mut log = File::options().create(true).append(true).open(dir.join("jobs.log"))?;
        writeln!(log, "{run}")?;
        Ok(outcome)
    };
    match strategy {
        JobStrategy::LeaseOnly | JobStrategy::Partitioned => {
            fs::write(&path, &run)?;
            applied(JobOutcome::Applied)
        }
        JobStrategy::Fencing => {
            if !fence(dir, token)? {
                return Ok(JobOutcome::Rejected);
            }
            fs::write(&path, &run)?;
            applied(JobOutcome::Applied)
        }
        JobStrategy::Idempotent => {
            // The result is a function of the epoch alone, under its key.
            let result = format!("{{\"epoch\":{epoch}}}");
            if fs::read_to_string(&path).is_ok_and(|r| r == result) {
                fs::write(&path, &result)?;
                return Ok(JobOutcome::Repeated);
            }
            fs::write(&path, &result)?;
            applied(JobOutcome::Applied)
        }
        JobStrategy::Unique => match File::options().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                f.write_all(run.as_bytes())?;
                applied(JobOutcome::Applied)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(JobOutcome::Rejected),
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_jobs_late_result_under_each_strategy() {
        // A (token 17) began epoch 3's job and was paused; B (token 18) took
        // over, began, finished and stored it; then A's result arrives.
        let outcome = |strategy| {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            assert!(!begin_job(d, strategy, 3, 17).unwrap());
            assert!(!begin_job(d, strategy, 3, 18).unwrap(), "B sees no result yet");
            assert_eq!(commit_job(d, strategy, 3, 18, 2).unwrap(), JobOutcome::Applied);
            assert!(begin_job(d, strategy, 3, 18).unwrap(), "now it is done");
            commit_job(d, strategy, 3, 17, 1).unwrap()
        };
        assert_eq!(outcome(JobStrategy::LeaseOnly), JobOutcome::Applied, "a duplicate");
        assert_eq!(outcome(JobStrategy::Partitioned), JobOutcome::Applied);
        assert_eq!(outcome(JobStrategy::Fencing), JobOutcome::Rejected);
        assert_eq!(outcome(JobStrategy::Idempotent), JobOutcome::Repeated);
        assert_eq!(outcome(JobStrategy::Unique), JobOutcome::Rejected);
    }

    #[test]
    fn fencing_refuses_an_older_result_even_when_it_comes_first() {
        // B began (presenting 18) but A's result arrives before B's.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        begin_job(d, JobStrategy::Fencing, 1, 17).unwrap();
        begin_job(d, JobStrategy::Fencing, 1, 18).unwrap();
        assert_eq!(commit_job(d, JobStrategy::Fencing, 1, 17, 1).unwrap(), JobOutcome::Rejected);
        assert_eq!(commit_job(d, JobStrategy::Fencing, 1, 18, 2).unwrap(), JobOutcome::Applied);
    }

    #[test]
    fn fenced_rejects_an_older_token_and_unfenced_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let fenced = dir.path().join("f");
        assert!(write(&fenced, Resource::Fenced, 18, 2).unwrap());
        assert!(!write(&fenced, Resource::Fenced, 17, 1).unwrap(), "stale token 17 after 18");
        assert!(write(&fenced, Resource::Fenced, 18, 2).unwrap(), "the holder may write again");
        assert_eq!(fs::read_to_string(fenced.join("report")).unwrap(), r#"{"processId":2,"token":18}"#);
        let open = dir.path().join("u");
        assert!(write(&open, Resource::Unfenced, 18, 2).unwrap());
        assert!(write(&open, Resource::Unfenced, 17, 1).unwrap());
        assert_eq!(fs::read_to_string(open.join("report")).unwrap(), r#"{"processId":1,"token":17}"#);
    }
}
