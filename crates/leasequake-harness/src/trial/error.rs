//! How a trial can fail (as opposed to what it measures).

use std::path::PathBuf;
use std::time::Duration;

use super::msg::ExitStatus;
use super::server;
use super::spawn::SpawnError;

/// How long workers may take to start up and reach the barrier.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long SIGKILLed workers may take to be reaped before we give up.
pub const KILL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error("trial directory {}: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("worker {worker} exited before the barrier ({status:?}); see {}", log.display())]
    DiedEarly { worker: usize, status: ExitStatus, log: PathBuf },
    #[error("workers did not reach the barrier within {READY_TIMEOUT:?} ({ready} of {total} ready)")]
    NotReady { ready: usize, total: usize },
    #[error("interrupted")]
    Interrupted,
    #[error("{0} worker(s) survived SIGKILL for {KILL_TIMEOUT:?} (uninterruptible sleep?); giving up on them")]
    Unkillable(usize),
    #[error("worker {worker} crashed ({status:?}), not by a fault of this experiment; see {}", log.display())]
    Crashed { worker: usize, status: ExitStatus, log: PathBuf },
    #[error(
        "a process the workers started still holds their output open {KILL_TIMEOUT:?} after they exited \
         (it left their process group and no cgroup could contain it); find it with `fuser` on the trial's logs"
    )]
    PipesHeld,
    #[error(
        "the trial overran its time limit of {0:?} (duration, grace and every start-up and clean-up wait): its processes were killed"
    )]
    TimedOut(Duration),
    #[error("cannot start the trial's thread: {0} (see `ulimit -u`)")]
    Thread(std::io::Error),
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error("network proxy: {0}")]
    Address(#[from] crate::proxy::AddressError),
    #[error("network proxy: cannot start the proxy: {0}")]
    Proxy(std::io::Error),
    #[error("cannot observe the lease: {0}")]
    Observe(String),
    #[error("cannot keep the trial's events: {0}")]
    Events(std::io::Error),
}
