//! The lock file as a `Substrate`: the blog's steps exactly. Expiry is
//! judged by the reader's clock; a takeover is remove, then create (not
//! atomic: see experiments/blog/takeover-race); with fencing tokens, a token
//! is claimed after the create wins and written into the lease.

use std::io;
use std::time::Duration;

use super::lease::{Renewal, Seen, Substrate};
use super::lockfile::{Lease, LockFile, ReadError};
use super::tokens;
use crate::model::Failpoint;
use crate::model::clock::wall_ns;
use crate::model::expiry::ExpiryRule;

pub struct FileLease {
    lock: LockFile,
    rule: ExpiryRule,
    fencing_tokens: bool,
}

impl FileLease {
    pub fn new(lock: LockFile, rule: ExpiryRule, fencing_tokens: bool) -> FileLease {
        FileLease { lock, rule, fencing_tokens }
    }

    /// With fencing tokens: claim this grant's token (after winning the
    /// create, so that claim order is grant order) and write it into the
    /// lease. The grant is the claim.
    fn claim(&self, lease: Lease, seen_token: u64) -> io::Result<Lease> {
        if !self.fencing_tokens {
            return Ok(lease);
        }
        let token = tokens::claim(&tokens::dir_for(self.lock.path()), seen_token)?;
        let lease = Lease { token: Some(token), ..lease };
        self.lock.write(lease)?;
        Ok(lease)
    }
}

impl Substrate for FileLease {
    fn acquire(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        if self.lock.acquire(fresh)? { self.claim(fresh, seen_token).map(Some) } else { Ok(None) }
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        match self.lock.read() {
            Ok(lease) if self.rule.expired(lease.lease_until, wall_ns()) => Ok(Seen::Expired(lease)),
            Ok(lease) => Ok(Seen::Held(lease)),
            Err(ReadError::Missing) => Ok(Seen::Free),
            Err(e) => Err(e),
        }
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        // Read, check it is still ours, rewrite: the blog's renewal (with its
        // truncate-then-write window for the O_EXCL variant).
        let current = self.lock.read()?;
        if current.process_id != fresh.process_id {
            return Ok(Renewal::Lost { holder: Some(current.process_id) });
        }
        let lease = Lease { token: current.token, ..fresh };
        self.lock.write(lease).map_err(ReadError::Io)?;
        Ok(Renewal::Renewed(lease))
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        self.lock.reached(Failpoint::BeforeRemove);
        // The blog: "the remove is just cleanup", the create decides the
        // winner. (It is not only cleanup: see experiments/blog/takeover-race.)
        let _ = self.lock.remove();
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        // Like the blog: remove without checking whose lease it is.
        self.lock.remove()
    }

    fn age(&self) -> Option<Duration> {
        self.lock.age().ok()
    }
}
