//! Before a run: can this machine hold its workers? Each worker costs the
//! harness about three file descriptors (its pipes, its log while spawning)
//! and three tasks against RLIMIT_NPROC (the process and two threads that
//! read and reap it), times the trials that run at once. A soft limit below
//! that is raised to the hard limit; a hard limit below it is an error that
//! names the limit and how to raise it, given before anything is spawned.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Headroom for the harness's own descriptors and threads.
const SPARE: u64 = 64;

/// What a run of `workers` per trial with `jobs` trials at once needs.
pub fn needed(workers: usize, jobs: usize) -> u64 {
    3 * (workers * jobs.max(1)) as u64 + SPARE
}

/// A limit of this machine too low for the run, and how to raise it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LimitError(String);

/// Raise soft limits as far as needed; Err names the limit that is too low.
pub fn ensure(workers: usize, jobs: usize) -> Result<(), LimitError> {
    let need = needed(workers, jobs);
    for (resource, name, raise) in [
        (Resource::RLIMIT_NOFILE, "open files (RLIMIT_NOFILE)", "ulimit -n"),
        (Resource::RLIMIT_NPROC, "processes and threads (RLIMIT_NPROC)", "ulimit -u"),
    ] {
        let (soft, hard) = getrlimit(resource).map_err(|e| LimitError(format!("cannot read the {name} limit: {e}")))?;
        if soft >= need {
            continue;
        }
        if hard >= need && setrlimit(resource, need, hard).is_ok() {
            continue;
        }
        return Err(LimitError(format!(
            "{workers} workers × {jobs} trials at once need about {need} {name}, but the limit is {soft} \
             (hard {hard}): raise it (`{raise} {need}`, or limits.conf / systemd LimitNOFILE/LimitNPROC), \
             or lower workers or --jobs"
        )));
    }
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/threads-max")
        && let Ok(max) = text.trim().parse::<u64>()
        && max < need
    {
        return Err(LimitError(format!(
            "{workers} workers × {jobs} trials at once need about {need} threads, but kernel.threads-max is {max}: \
             raise it (`sysctl -w kernel.threads-max={need}`) or lower workers or --jobs"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_fits_and_an_absurd_one_names_the_limit() {
        assert!(ensure(3, 1).is_ok());
        let err = ensure(100_000_000, 64).unwrap_err().to_string();
        assert!(err.contains("RLIMIT_NOFILE") && err.contains("ulimit -n"), "{err}");
    }
}
