//! Where a lease lives, behind one interface that the worker's loop
//! (acquire, renew, watch, take over, release) runs over:
//!
//! * `file`: the blog's lock file with its variants; expiry judged by the
//!   reader's clock;
//! * `flock`: a kernel lock the kernel drops when its holder dies, and never
//!   otherwise: no expiry at all;
//! * `redis`: `SET key value NX PX ttl`; expiry judged by the server;
//! * `postgres`: a lease row whose `expires_at` is judged by the server's
//!   `now()`, taken over by a conditional update; or a session advisory
//!   lock, held as long as the holder's connection lives.
//!
//! Every substrate gives each grant a fencing token strictly above every
//! earlier grant's (file and flock only with `fencing_tokens`).

pub mod file;
pub mod flock;
pub mod lockfile;
pub mod postgres;
pub mod redis;
pub mod resource;
pub mod tokens;

use std::io;
use std::time::Duration;

pub use lockfile::{Lease, ReadError};

use crate::model::{Kind, Server};

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
}

/// Everything a worker needs to open its substrate.
#[derive(Clone, Debug)]
pub struct Open<'a> {
    pub kind: Kind,
    pub lock: &'a std::path::Path,
    pub acquire: crate::model::Acquire,
    pub expiry: crate::model::Expiry,
    pub rule: crate::model::expiry::ExpiryRule,
    pub fencing_tokens: bool,
    pub address: Option<&'a str>,
    /// The lease's name on a server (unique per trial).
    pub key: &'a str,
    pub lease: Duration,
}

/// Open the substrate, with the file's failpoint hook where it applies.
pub fn open(o: &Open<'_>, lock: lockfile::LockFile) -> io::Result<Box<dyn Substrate>> {
    let address = |s: Server| o.address.unwrap_or(s.default_address()).to_string();
    Ok(match o.kind {
        Kind::File => Box::new(file::FileLease::new(lock, o.rule, o.fencing_tokens)),
        Kind::Flock => Box::new(flock::FlockLease::new(o.lock, o.fencing_tokens)),
        Kind::Redis => Box::new(redis::RedisLease::connect(&address(Server::Redis), o.key, o.lease)?),
        Kind::Postgres => Box::new(postgres::PgLease::connect(&address(Server::Postgres), o.key, o.lease, false)?),
        Kind::PostgresAdvisory => {
            Box::new(postgres::PgLease::connect(&address(Server::Postgres), o.key, o.lease, true)?)
        }
    })
}

/// Remove a trial's lease from a shared server (best effort: a leftover key
/// is harmless, every trial has its own).
pub fn forget(kind: Kind, address: &str, key: &str) {
    match kind.server() {
        Some(Server::Redis) => {
            if let Ok(mut conn) = ::redis::Client::open(address).and_then(|c| c.get_connection()) {
                let _ = ::redis::cmd("DEL").arg(key).arg(format!("{key}:token")).query::<i64>(&mut conn);
            }
        }
        Some(Server::Postgres) => {
            let _ = postgres::drop_lease(address, key);
        }
        None => {}
    }
}

/// A lease server that does not answer, and what to start.
#[derive(Debug, thiserror::Error)]
#[error("{server} at {address} does not answer ({reason}): {advice}")]
pub struct Unanswered {
    pub server: &'static str,
    pub address: String,
    pub reason: String,
    pub advice: &'static str,
}

/// Before a run: is the server there, and ready? The error says what to
/// start if not.
pub fn preflight(kind: Kind, address: &str) -> Result<(), Unanswered> {
    match kind.server() {
        Some(Server::Redis) => {
            let ping = ::redis::Client::open(address)
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .and_then(|mut conn| ::redis::cmd("PING").query::<String>(&mut conn));
            ping.map(|_| ()).map_err(|e| Unanswered {
                server: "Redis",
                address: address.into(),
                reason: e.to_string(),
                advice: "start it (`redis-server --daemonize yes`, or `apt-get install redis-server`), \
                         or set `substrate.address`, or use `managed: true`",
            })
        }
        Some(Server::Postgres) => postgres::ensure_table(address).map_err(|e| Unanswered {
            server: "PostgreSQL",
            address: address.into(),
            reason: e.to_string(),
            advice: "start it (`apt-get install postgresql`, `pg_ctlcluster 15 main start`) with a database \
                     `test` that trusts local connections, or set `substrate.address`",
        }),
        None => Ok(()),
    }
}
