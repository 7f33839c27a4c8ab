//! A kernel lock (`flock(2)` on the lock file) as a `Substrate`. The kernel
//! drops it when the holder's last descriptor closes, i.e. when it dies, and
//! never otherwise: there is no expiry. A SIGKILLed holder is replaced at
//! the next watch; a SIGSTOPped one is never replaced. The file's content
//! (`{"processId", "leaseUntil", "token"}`) only tells watchers who holds it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::lease::{Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};
use super::tokens;
use crate::model::Expiry;

pub struct FlockLease {
    path: PathBuf,
    fencing_tokens: bool,
    /// The locked descriptor while we hold the lease.
    held: Option<Flock<File>>,
    lease: Option<Lease>,
}

impl FlockLease {
    pub fn new(path: &Path, fencing_tokens: bool) -> FlockLease {
        FlockLease { path: path.to_path_buf(), fencing_tokens, held: None, lease: None }
    }

    fn open(&self) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&self.path)
    }

    /// Try the lock without blocking: Some(locked file) if we got it.
    fn try_lock(&self) -> io::Result<Option<Flock<File>>> {
        match Flock::lock(self.open()?, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => Ok(Some(locked)),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
            Err((_, e)) => Err(io::Error::from(e)),
        }
    }

    fn read(&self) -> Result<Lease, ReadError> {
        super::lockfile::read_lease(&self.path)
    }

    /// Is our locked descriptor still the file at the path? A lock file
    /// deleted (or replaced) under a holder leaves it locking an orphan
    /// inode while the next worker locks a new file: two holders.
    fn still_ours(&self) -> io::Result<bool> {
        let Some(held) = &self.held else { return Ok(false) };
        let mine = held.metadata()?;
        match fs::metadata(&self.path) {
            Ok(now) => Ok(now.ino() == mine.ino() && now.dev() == mine.dev()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Substrate for FlockLease {
    fn acquire(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        let Some(mut locked) = self.try_lock()? else { return Ok(None) };
        let token =
            if self.fencing_tokens { Some(tokens::claim(&tokens::dir_for(&self.path), seen_token)?) } else { None };
        let lease = Lease { token, ..fresh };
        locked.set_len(0)?;
        locked.write_all(&lease.to_bytes(Expiry::Exact))?;
        self.held = Some(locked);
        self.lease = Some(lease);
        Ok(Some(lease))
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        // Free exactly when the lock can be taken: take it and let go again
        // (the acquire that follows takes it for real, or loses the race).
        match self.try_lock().map_err(ReadError::Io)? {
            Some(locked) => {
                drop(locked);
                Ok(Seen::Free)
            }
            // Locked: held. (Empty content: the holder is between its lock
            // and its write; the watcher reports it unreadable and retries.)
            None => self.read().map(Seen::Held),
        }
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        // Nothing to extend: the lock lasts while we live. Check only that
        // it is still the lock at the path.
        if self.still_ours().map_err(ReadError::Io)? {
            let lease = Lease { token: self.lease.and_then(|l| l.token), ..fresh };
            Ok(Renewal::Renewed(lease))
        } else {
            self.held = None;
            Ok(Renewal::Lost { holder: self.read().ok().map(|l| l.process_id) })
        }
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        // Never called: a flock lease is never seen expired.
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        // Unlock by closing; the file stays (deleting it would open the
        // orphan-inode race for whoever locks next).
        self.held = None;
        self.lease = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(pid: i64) -> Lease {
        Lease { process_id: pid, lease_until: 0.0, token: None }
    }

    #[test]
    fn one_holder_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let (mut a, mut b) = (FlockLease::new(&path, true), FlockLease::new(&path, true));
        assert_eq!(b.observe().unwrap(), Seen::Free);
        let granted = a.acquire(lease(1), 0).unwrap().expect("a gets it");
        assert_eq!(granted.token, Some(1));
        assert!(b.acquire(lease(2), 0).unwrap().is_none(), "b is locked out");
        assert!(matches!(b.observe().unwrap(), Seen::Held(l) if l.process_id == 1));
        assert!(matches!(a.renew(lease(1)).unwrap(), Renewal::Renewed(_)));
        a.release(1).unwrap();
        assert_eq!(b.acquire(lease(2), 1).unwrap().and_then(|l| l.token), Some(2));
    }

    #[test]
    fn a_deleted_lock_file_is_noticed_at_the_renewal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let (mut a, mut b) = (FlockLease::new(&path, false), FlockLease::new(&path, false));
        a.acquire(lease(1), 0).unwrap().unwrap();
        fs::remove_file(&path).unwrap();
        // b locks a new file at the same path: a now locks an orphan.
        assert!(b.acquire(lease(2), 0).unwrap().is_some());
        assert_eq!(a.renew(lease(1)).unwrap(), Renewal::Lost { holder: Some(2) });
    }
}
