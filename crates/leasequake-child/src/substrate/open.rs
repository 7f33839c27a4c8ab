//! Opening a substrate for a worker, and the harness's dealings with a
//! lease server: is it there before a run, and forgetting a trial's lease
//! after it.

use std::io;
use std::time::Duration;

use super::lease::Substrate;
use super::lockfile::LockFile;
use super::{etcd, file, flock, postgres, redis, redlock};
use crate::model::{Experiment, Kind, Server, WatchBy};

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
    /// A replicated service, found through its Sentinels, instead.
    pub service: Option<&'a crate::model::ServiceView>,
    /// The lease's name on a server (unique per trial).
    pub key: &'a str,
    pub lease: Duration,
    /// How long one request to a server may take (default: the
    /// substrate's, a third of the lease).
    pub request_timeout: Option<Duration>,
}

/// Open the substrate, with the file's failpoint hook where it applies.
pub fn open(o: &Open<'_>, lock: LockFile) -> io::Result<Box<dyn Substrate>> {
    let address = |s: Server| o.address.unwrap_or(s.default_address()).to_string();
    Ok(match o.kind {
        Kind::File => Box::new(file::FileLease::new(lock, o.rule, o.fencing_tokens)),
        Kind::Flock => Box::new(flock::FlockLease::new(o.lock, o.fencing_tokens)),
        Kind::Redis => {
            let mut lease = redis::RedisLease::connect(&address(Server::Redis), o.key, o.lease, o.request_timeout)?;
            if let Some(service) = o.service {
                lease.through_sentinels(service.clone());
            }
            Box::new(lease)
        }
        Kind::Postgres => {
            Box::new(postgres::PgLease::connect(&address(Server::Postgres), o.key, o.lease, o.request_timeout, false)?)
        }
        Kind::PostgresAdvisory => {
            Box::new(postgres::PgLease::connect(&address(Server::Postgres), o.key, o.lease, o.request_timeout, true)?)
        }
        Kind::Redlock => {
            let service = o.service.ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "redlock needs its servers (a managed service)")
            })?;
            let addresses: Vec<String> = service.members.iter().map(|m| m.url.clone()).collect();
            Box::new(redlock::RedlockLease::connect(&addresses, o.key, o.lease, o.request_timeout)?)
        }
        Kind::Etcd => {
            let mut lease = etcd::EtcdLease::connect(&address(Server::Etcd), o.key, o.lease, o.request_timeout)?;
            if let Some(service) = o.service {
                lease.through_members(service)?;
            }
            Box::new(lease)
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
        Some(Server::Etcd) => {
            let _ = etcd::forget(address, key);
        }
        None => {}
    }
}

/// A lease server that does not answer, or cannot serve the experiment, and
/// what to start or set.
#[derive(Debug, thiserror::Error)]
#[error("{server} at {address} is not ready ({reason}): {advice}")]
pub struct Unanswered {
    pub server: &'static str,
    pub address: String,
    pub reason: String,
    pub advice: &'static str,
}

/// Before a run: is the server of `unit` there, and ready for its lease
/// (and, for push watchers, does it publish what they need)? The error
/// says what to start or set if not.
pub fn preflight(unit: &Experiment, address: &str) -> Result<(), Unanswered> {
    let push = unit.worker.watch_by == WatchBy::Push;
    match unit.substrate.kind.server() {
        Some(Server::Redis) => {
            let ping = ::redis::Client::open(address)
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .and_then(|mut conn| {
                    ::redis::cmd("PING").query::<String>(&mut conn)?;
                    if !push {
                        return Ok(None);
                    }
                    Ok(super::keyspace::refusal(&super::keyspace::flags_query().query(&mut conn)?))
                });
            match ping {
                Ok(Some(why)) => Err(Unanswered {
                    server: "Redis",
                    address: address.into(),
                    reason: why,
                    advice: "`CONFIG SET notify-keyspace-events Kgx` on it, or use `managed: true`",
                }),
                Ok(_) => Ok(()),
                Err(e) => Err(Unanswered {
                    server: "Redis",
                    address: address.into(),
                    reason: e.to_string(),
                    advice: "start it (`redis-server --daemonize yes`, or `apt-get install redis-server`), \
                             or set `substrate.address`, or use `managed: true`",
                }),
            }
        }
        Some(Server::Postgres) => postgres::ensure_table(address).map_err(|e| Unanswered {
            server: "PostgreSQL",
            address: address.into(),
            reason: e.to_string(),
            advice: "start it (`apt-get install postgresql`, `pg_ctlcluster 15 main start`) with a database \
                     `test` that trusts local connections, or set `substrate.address`",
        }),
        Some(Server::Etcd) => {
            etcd::preflight(address, etcd::ttl_seconds(unit.lease.lease.as_std())).map_err(|e| Unanswered {
                server: "etcd",
                address: address.into(),
                reason: e.to_string(),
                advice: "start it (`apt-get install etcd-server`; its JSON gateway is on the client port), \
                     or set `substrate.address`, or use `managed: true`",
            })
        }
        None => Ok(()),
    }
}
