//! The exec trampoline (`leasequake exec-program -- argv…`): how a program
//! under test is started, so that the harness's spawn needs no pre_exec
//! hook.

use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::model::protocol::{EXEC_EVENTS_FD_ENV, PARENT_ENV, TRACE_EXEC_ENV};

/// `leasequake exec-program -- argv…`, in the child: tie to the harness,
/// move the protocol pipe (`LEASEQUAKE_EXEC_EVENTS_FD`) to fd 3, close
/// every other descriptor from 3 up (a program must not inherit what the
/// harness itself inherited), ask to be traced if the harness moves the
/// program's clock in its vDSO (`LEASEQUAKE_TRACE_EXEC`: it stops at the
/// exec, and the harness lets it go), and exec. Returns only on failure.
pub fn exec(argv: &[String]) -> u8 {
    if !super::tie::tie_to_parent() {
        return 1;
    }
    if !super::tie::join_cgroup() {
        eprintln!("leasequake exec-program: cannot join the trial's cgroup");
        return 126;
    }
    let events = std::env::var(EXEC_EVENTS_FD_ENV).ok().and_then(|v| v.parse::<i32>().ok());
    let traced = std::env::var_os(TRACE_EXEC_ENV).is_some();
    // SAFETY: this process is single-threaded until exec.
    unsafe {
        std::env::remove_var(EXEC_EVENTS_FD_ENV);
        std::env::remove_var(PARENT_ENV);
        std::env::remove_var(TRACE_EXEC_ENV);
    }
    match events {
        // SAFETY: plain fcntl/dup2/close on descriptors we own.
        Some(3) => unsafe {
            libc::fcntl(3, libc::F_SETFD, 0);
        },
        Some(fd) => unsafe {
            if libc::dup2(fd, 3) == -1 {
                eprintln!("leasequake exec-program: cannot move the protocol pipe to fd 3");
                return 126;
            }
            libc::close(fd);
        },
        None => {}
    }
    close_from(if events.is_some() { 4 } else { 3 });
    if traced {
        // SAFETY: PTRACE_TRACEME takes no pointer.
        if unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) } == -1 {
            let err = std::io::Error::last_os_error();
            eprintln!("leasequake exec-program: cannot be traced, so its clock is not moved in its vDSO: {err}");
        }
        // Stopped for the harness, our parent, traced or not: it follows a
        // traced program to its exec, and lets an untraced one go.
        // SAFETY: raising a signal at ourselves.
        unsafe { libc::raise(libc::SIGSTOP) };
    }
    let err = Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!("leasequake: cannot run {}: {err}", argv[0]);
    127
}

/// Close every descriptor from `first` up.
fn close_from(first: libc::c_uint) {
    // SAFETY: close_range only closes descriptors; failure (old kernel)
    // only leaves them open.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0);
    }
}
