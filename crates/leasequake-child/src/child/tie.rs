//! A child's tie to the harness: it dies with the harness, even when the
//! harness is killed with SIGKILL.

use crate::model::protocol::{CGROUP_ENV, PARENT_ENV};

/// First thing in a child spawned without a pre_exec hook (the built-in
/// worker, the program trampoline): die with the harness named in
/// `LEASEQUAKE_PARENT`. False if the harness is already gone (then nobody
/// would ever kill us) or the tie cannot be made.
pub fn tie_to_parent() -> bool {
    let Some(parent) = std::env::var(PARENT_ENV).ok().and_then(|p| p.parse::<i32>().ok()) else {
        return true;
    };
    // SAFETY: plain syscalls.
    let tied = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) } == 0;
    tied && unsafe { libc::getppid() } == parent
}

/// Move this process into the cgroup named in `LEASEQUAKE_CGROUP` (before
/// exec, so that nothing the program starts is ever outside it). False if
/// one was named and the move failed.
pub fn join_cgroup() -> bool {
    let Some(path) = std::env::var_os(CGROUP_ENV) else { return true };
    // SAFETY: single-threaded until exec (the trampoline) or start-up (the
    // worker): nobody reads the environment concurrently.
    unsafe { std::env::remove_var(CGROUP_ENV) };
    std::fs::write(std::path::Path::new(&path).join("cgroup.procs"), "0").is_ok()
}
