//! One writer per results directory. Every command that writes into a
//! results directory holds an exclusive `flock(2)` on the directory itself
//! for as long as it writes; one that only reads it (to write elsewhere)
//! holds a shared one. A second writer is refused, naming the first.
//!
//! The lock is on the directory, not on a file in it: nothing is added to
//! what the run wrote, and the kernel lets go when the holder dies, so a
//! killed run never leaves a directory locked.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::Error;

/// How a command uses a results directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// It writes into the directory: no one else may use it meanwhile.
    Write,
    /// It reads the directory only: others may read it too, no one write.
    Read,
}

/// A held directory; dropped, it is free again.
#[derive(Debug)]
pub struct Held {
    _dir: File,
}

/// Hold `dir` for `how`, or say who holds it.
pub fn hold(dir: &Path, how: Use) -> Result<Held, Error> {
    try_hold(dir, how)?
        .map_err(|holders| Error::Path { path: dir.to_path_buf(), problem: refusal(how, &holders, &command_line) })
}

/// How a command that only reads finds a directory.
#[derive(Debug)]
pub enum Reading {
    /// No one writes it: held for reading until dropped.
    Held(#[allow(dead_code)] Held),
    /// A process is writing it: read what it has written so far, without a
    /// lock, which would stop it.
    Live(Writer),
}

/// The process writing a directory.
#[derive(Debug)]
pub struct Writer {
    /// As a refusal names it: its pid and command line.
    pub who: String,
    /// When it started (wall clock), where /proc tells.
    pub started: Option<std::time::SystemTime>,
}

/// Hold `dir` for reading, or name the process writing it.
pub fn read_or_watch(dir: &Path) -> Result<Reading, Error> {
    Ok(match try_hold(dir, Use::Read)? {
        Ok(held) => Reading::Held(held),
        Err(holders) => Reading::Live(match holders.iter().find(|(_, exclusive)| *exclusive) {
            Some((pid, _)) => Writer { who: whom(*pid, &command_line), started: started(*pid) },
            None => Writer { who: "another process".into(), started: None },
        }),
    })
}

/// When process `pid` started (wall clock).
fn started(pid: u32) -> Option<std::time::SystemTime> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    let stat = process.stat().ok()?;
    let after_boot = std::time::Duration::from_millis(stat.starttime * 1000 / procfs::ticks_per_second());
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(procfs::boot_time_secs().ok()?) + after_boot)
}

/// Hold `dir` for `how`, or the processes holding it (pid, exclusively).
fn try_hold(dir: &Path, how: Use) -> Result<Result<Held, Vec<(u32, bool)>>, Error> {
    let path_err = |problem: String| Error::Path { path: dir.to_path_buf(), problem };
    // std opens with O_CLOEXEC: no child the command spawns inherits the lock.
    let file = File::open(dir).map_err(|e| path_err(format!("cannot open the directory: {e}")))?;
    let op = match how {
        Use::Write => libc::LOCK_EX,
        Use::Read => libc::LOCK_SH,
    };
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(Ok(Held { _dir: file }));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => {
                let meta = file.metadata().map_err(|e| path_err(e.to_string()))?;
                let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
                return Ok(Err(holders(&locks, meta.dev(), meta.ino())));
            }
            _ => return Err(path_err(format!("cannot lock the directory: {e}"))),
        }
    }
}

/// The pids holding a flock on the file (device, inode), from /proc/locks,
/// each with whether its lock is exclusive. Waiters (`->`) are not holders.
fn holders(locks: &str, dev: u64, ino: u64) -> Vec<(u32, bool)> {
    crate::substrate::view::lock_holders(locks, dev, ino, &["FLOCK"])
        .into_iter()
        .filter_map(|l| u32::try_from(l.pid).ok().map(|pid| (pid, l.exclusive)))
        .collect()
}

/// A process's command line, as `ps` shows it.
fn command_line(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> =
        raw.split(|b| *b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// A process as a refusal names it: its pid and command line.
fn whom(pid: u32, command: &dyn Fn(u32) -> Option<String>) -> String {
    match command(pid) {
        Some(c) => format!("process {pid} ({c})"),
        None => format!("process {pid}"),
    }
}

/// Why `how` is refused, naming who holds the directory.
fn refusal(how: Use, holders: &[(u32, bool)], command: &dyn Fn(u32) -> Option<String>) -> String {
    let writer = holders.iter().find(|(_, w)| *w);
    let whom = |pid: u32| whom(pid, command);
    match (how, writer) {
        (_, Some((pid, _))) => format!(
            "{} is writing into it; one command at a time may write a results directory (wait for it, or stop it)",
            whom(*pid)
        ),
        (Use::Write, None) if !holders.is_empty() => {
            let readers: Vec<String> = holders.iter().map(|(p, _)| whom(*p)).collect();
            let verb = if readers.len() == 1 { "is" } else { "are" };
            format!("{} {verb} reading it; it cannot be written until they finish", readers.join(", "))
        }
        _ => "another process holds it (its lock is not in /proc/locks); one command at a time may write a \
              results directory"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_excludes_everyone_and_readers_exclude_writers() {
        let dir = tempfile::tempdir().unwrap();
        let w = hold(dir.path(), Use::Write).unwrap();
        let me = std::process::id();
        for how in [Use::Write, Use::Read] {
            let e = hold(dir.path(), how).unwrap_err().to_string();
            assert!(e.contains(&format!("process {me} (")) && e.contains("is writing into it"), "{e}");
        }
        drop(w);
        let r1 = hold(dir.path(), Use::Read).unwrap();
        let _r2 = hold(dir.path(), Use::Read).unwrap();
        let e = hold(dir.path(), Use::Write).unwrap_err().to_string();
        assert!(e.contains(&format!("process {me} (")) && e.contains("reading it"), "{e}");
        drop((r1, _r2));
        let w = hold(dir.path(), Use::Write).unwrap();
        // A reader that would not stop the writer reads along, naming it.
        match read_or_watch(dir.path()).unwrap() {
            Reading::Live(w) => {
                assert!(w.who.starts_with(&format!("process {me} (")), "{}", w.who);
                let since = std::time::SystemTime::now().duration_since(w.started.unwrap()).unwrap();
                assert!(since < std::time::Duration::from_secs(24 * 3600), "{since:?}");
            }
            Reading::Held(_) => panic!("held for reading while written"),
        }
        drop(w);
        assert!(matches!(read_or_watch(dir.path()).unwrap(), Reading::Held(_)));
    }

    #[test]
    fn holders_are_read_from_proc_locks_by_device_and_inode() {
        let dev = libc::makedev(0x08, 0x01);
        let locks = "1: POSIX  ADVISORY  WRITE 10 08:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 20 08:01:77 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 30 08:01:77 0 EOF\n\
                     3: FLOCK  ADVISORY  READ 40 08:01:78 0 EOF\n\
                     4: FLOCK  ADVISORY  READ 50 08:01:77 0 EOF\n";
        assert_eq!(holders(locks, dev, 77), vec![(20, true), (50, false)]);
        assert_eq!(holders(locks, dev, 99), vec![]);
        // The device as st_dev gives it differs from /proc/locks' (btrfs):
        // the inode alone names the holder.
        assert_eq!(holders(locks, libc::makedev(0, 0x2a), 78), vec![(40, false)]);
    }

    #[test]
    fn the_refusal_names_the_holder_and_its_command() {
        let cmd = |pid: u32| (pid == 7).then(|| "leasequake run --resume r".to_string());
        let e = refusal(Use::Write, &[(7, true)], &cmd);
        assert!(e.starts_with("process 7 (leasequake run --resume r) is writing into it"), "{e}");
        let e = refusal(Use::Write, &[(7, false), (8, false)], &cmd);
        assert!(e.starts_with("process 7 (leasequake run --resume r), process 8 are reading it"), "{e}");
        let e = refusal(Use::Read, &[], &cmd);
        assert!(e.contains("another process holds it"), "{e}");
    }
}
