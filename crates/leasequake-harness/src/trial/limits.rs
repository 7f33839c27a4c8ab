//! Before a run: can this machine hold its workers? Each worker costs the
//! harness about three file descriptors (its pipes, its log while spawning;
//! one more for the memory of a program whose clock is moved in its vDSO)
//! and three tasks against RLIMIT_NPROC (the process and two threads that
//! read and reap it), times the trials that run at once. A soft limit below
//! that is raised to the hard limit; a hard limit below it is an error that
//! names the limit and how to raise it, given before anything is spawned.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Headroom for the harness's own descriptors and threads.
const SPARE: u64 = 64;

/// What a run asks of the machine at once.
#[derive(Debug, Clone, Copy)]
pub struct Demand {
    /// Workers per trial (the most any point of a sweep has).
    pub workers: usize,
    /// Trials at once.
    pub jobs: usize,
    /// Every worker reaches its server through a proxy link.
    pub proxied: bool,
    /// Every worker may be a program whose clock is moved in its vDSO
    /// (the harness keeps its memory open to move the clock again).
    pub clock_moved: bool,
}

impl Demand {
    fn workers_at_once(&self) -> u64 {
        (self.workers * self.jobs.max(1)) as u64
    }

    /// Tasks (and, less the links' and clocks', descriptors) it needs.
    fn needed(&self) -> u64 {
        3 * self.workers_at_once() + SPARE
    }

    /// Descriptors it needs besides `needed`.
    fn descriptors_besides(&self) -> u64 {
        let per_worker = if self.proxied { PER_LINK } else { 0 } + u64::from(self.clock_moved);
        per_worker * self.workers_at_once()
    }
}

/// Descriptors a proxy link costs the harness: its listener, and a
/// worker's connection (two, for a reconnect in flight) on both sides.
const PER_LINK: u64 = 5;

/// A limit of this machine too low for the run, and how to raise it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LimitError(String);

/// Raise soft limits as far as needed; Err names the limit that is too low.
pub fn ensure(demand: &Demand) -> Result<(), LimitError> {
    let (need, Demand { workers, jobs, .. }) = (demand.needed(), *demand);
    for (resource, name, raise) in [
        (Resource::RLIMIT_NOFILE, "open files (RLIMIT_NOFILE)", "ulimit -n"),
        (Resource::RLIMIT_NPROC, "processes and threads (RLIMIT_NPROC)", "ulimit -u"),
    ] {
        let (soft, hard) = getrlimit(resource).map_err(|e| LimitError(format!("cannot read the {name} limit: {e}")))?;
        if soft == nix::libc::RLIM_INFINITY {
            continue;
        }
        // The kernel does not hold root of the initial user namespace to
        // RLIMIT_NPROC: refusing it would refuse a run that works.
        if resource == Resource::RLIMIT_NPROC
            && nix::unistd::getuid().is_root()
            && std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|m| initial_namespace(&m))
        {
            continue;
        }
        // RLIMIT_NPROC counts every task of this user, ours and the rest.
        let in_use = if resource == Resource::RLIMIT_NPROC { tasks_of_this_user() } else { 0 };
        let total = need + in_use + if resource == Resource::RLIMIT_NOFILE { demand.descriptors_besides() } else { 0 };
        if soft >= total {
            continue;
        }
        if hard >= total && setrlimit(resource, total, hard).is_ok() {
            continue;
        }
        let running = if in_use > 0 { format!(" besides the {in_use} this user already runs") } else { String::new() };
        return Err(LimitError(format!(
            "{workers} workers × {jobs} trials at once need about {need} {name}{running}, but the limit is {soft} \
             (hard {hard}): raise it (`{raise} {total}`, or limits.conf / systemd LimitNOFILE/LimitNPROC), \
             or lower workers or --jobs"
        )));
    }
    if let Some((max, current, path)) = pids_cgroup()
        && max.saturating_sub(current) < need
    {
        return Err(LimitError(format!(
            "{workers} workers × {jobs} trials at once need about {need} tasks, but this cgroup allows {max} \
             and runs {current} ({path}): raise pids.max or lower workers or --jobs"
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

/// Is this the initial user namespace (its uid_map maps every id to
/// itself), where root is root of the whole machine?
fn initial_namespace(uid_map: &str) -> bool {
    let fields: Vec<&str> = uid_map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// Tasks (processes and threads) whose real user is ours, as RLIMIT_NPROC
/// counts them.
fn tasks_of_this_user() -> u64 {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { nix::libc::getuid() }.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|status| {
            status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|u| u.split_whitespace().next()) == Some(&uid)
        })
        .map(|status| {
            let threads = status.lines().find_map(|l| l.strip_prefix("Threads:"));
            threads.and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(1)
        })
        .sum()
}

/// (pids.max, pids.current, where) of the pids cgroup we are in, if it has
/// a limit (cgroup v1 `pids` hierarchy or v2).
fn pids_cgroup() -> Option<(u64, u64, String)> {
    let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let candidates = ours.lines().filter_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let base = match controllers {
            "pids" => "/sys/fs/cgroup/pids",
            "" if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() => "/sys/fs/cgroup",
            _ => return None,
        };
        Some(std::path::Path::new(base).join(path.trim_start_matches('/')))
    });
    for dir in candidates {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().and_then(|t| t.trim().parse::<u64>().ok());
        if let (Some(max), Some(current)) = (read("pids.max"), read("pids.current")) {
            return Some((max, current, dir.display().to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_the_initial_user_namespace_maps_every_id_to_itself() {
        assert!(super::initial_namespace("         0          0 4294967295\n"));
        assert!(!super::initial_namespace("         0       1000          1\n"));
        assert!(!super::initial_namespace("         0     100000      65536\n"));
        assert!(!super::initial_namespace(""));
    }
    use super::*;

    #[test]
    fn a_small_run_fits_and_an_absurd_one_names_the_limit() {
        let demand = |workers, jobs, proxied| Demand { workers, jobs, proxied, clock_moved: true };
        assert!(ensure(&demand(3, 1, true)).is_ok());
        let err = ensure(&demand(100_000_000, 64, false)).unwrap_err().to_string();
        assert!(err.contains("RLIMIT_NOFILE") && err.contains("ulimit -n"), "{err}");
    }
}
