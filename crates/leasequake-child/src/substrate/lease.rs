//! The interface every substrate implements, and what its operations say.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::lockfile::{Lease, ReadError};

/// What a watcher sees of the lease.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Seen {
    /// Held and not expired, as the substrate's judge of time says.
    Held(Lease),
    /// Still there, but expired: a takeover may begin.
    Expired(Lease),
    /// No lease at all (released, deleted, or dropped by the server).
    Free,
}

/// What a leader's renewal found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Renewal {
    Renewed(Lease),
    /// The lease is somebody else's now (or nobody's).
    Lost {
        holder: Option<i64>,
    },
}

/// What a subscribed watcher was told (`Substrate::pushed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Nothing that frees the lease (yet).
    Nothing,
    /// The lease is gone, as the server says it: the reason in its words
    /// (`delete`, `expired`, `released`).
    Gone(&'static str),
}

/// One lease, as the worker uses it. `fresh` leases carry the caller's pid
/// and the `leaseUntil` its clock computes; substrates whose server judges
/// expiry return what the server holds instead.
pub trait Substrate {
    /// Try to become the holder of a free lease. `seen_token` is the highest
    /// token this worker has seen (where tokens are claimed client-side).
    fn acquire(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>>;
    /// Look at the lease without changing it.
    fn observe(&mut self) -> Result<Seen, ReadError>;
    /// Extend our lease, if it is still ours.
    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError>;
    /// Take over a lease seen expired.
    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>>;
    /// Give the lease up on shutdown.
    fn release(&mut self, pid: i64) -> io::Result<()>;
    /// How long an unreadable lease has been left alone (the lock file's
    /// mtime), for the expire-age rule. None where it does not apply.
    fn age(&self) -> Option<Duration> {
        None
    }
    /// Let the next operations take at most `budget` (less than the request
    /// timeout), or the request timeout again (None): a leader whose belief
    /// ends at a deadline must not sit in a request past it. Substrates
    /// without requests that can hang ignore it.
    fn set_budget(&mut self, _budget: Option<Duration>) {}

    /// The member of a replicated service the last operation went to.
    fn member(&self) -> Option<usize> {
        None
    }
    /// `watch_by: push`: subscribe to the lease's changes unless already
    /// subscribed (a substrate that pushes nothing does nothing).
    fn subscribe(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The subscription's descriptor, readable when the server pushed
    /// something; `None` while there is no subscription.
    fn subscribed(&self) -> Option<RawFd> {
        None
    }
    /// What the server pushed since the last call, without waiting. An
    /// error ends the subscription: the next `subscribe` makes a new one.
    fn pushed(&mut self) -> io::Result<Pushed> {
        Ok(Pushed::Nothing)
    }
    /// Drop the subscription (a leader needs none).
    fn unsubscribe(&mut self) {}
}
