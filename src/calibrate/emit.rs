//! `leasequake calibrate-emit` (hidden): the program `calibrate` observes.
//! After EOF on stdin (the harness's release), it writes `lines` lines, one
//! every `interval`, each carrying its CLOCK_MONOTONIC time: on stdout for
//! log patterns, and as a protocol line on fd 3 when fd 3 is open.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::time::Duration;

use crate::model::clock::mono_ns;

pub fn run(lines: usize, interval_us: u64) -> u8 {
    let mut buf = [0u8; 1];
    let _ = std::io::stdin().read(&mut buf);
    // The protocol's fd, if the harness gave one (it says so in the
    // environment; an fd 3 inherited from elsewhere is not ours).
    let fd = std::env::var("LEASEQUAKE_EVENTS_FD").ok().and_then(|v| v.parse::<i32>().ok());
    // SAFETY: the harness opened this descriptor for us.
    let mut fd3 =
        fd.filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1).map(|fd| unsafe { File::from_raw_fd(fd) });
    let mut out = std::io::stdout().lock();
    for _ in 0..lines {
        std::thread::sleep(Duration::from_micros(interval_us));
        let t = mono_ns();
        if let Some(f) = &mut fd3 {
            let _ = writeln!(f, "{{\"event\":\"held_by\",\"detail\":{{\"token\":{t}}}}}");
        } else {
            let _ = writeln!(out, "t_ns={t}");
            let _ = out.flush();
        }
    }
    0
}

/// `leasequake calibrate-target` (hidden): wait for SIGTERM in sigtimedwait
/// and print the wall-clock ns of its receipt: the shell baseline's victim
/// (for SIGSTOP and SIGKILL it just waits).
pub fn target() -> u8 {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return 3;
    }
    println!("ready");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let _ = set.wait();
    println!("R {}", crate::model::clock::wall_ns());
    0
}
