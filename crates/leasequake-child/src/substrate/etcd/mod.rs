//! etcd as a `Substrate`: the lease is a key attached to an etcd lease
//! whose TTL is whole seconds.
//!
//! * Acquire: grant a lease, then one transaction: if the key was never
//!   created (`create_revision == 0`), put our pid under it with that
//!   lease; the fencing token is the revision of that put, which etcd
//!   makes strictly greater than every earlier write's.
//! * Renew: a keep-alive of our lease. A lease that already expired cannot
//!   be kept alive (its TTL comes back 0): the grant is lost.
//! * Expiry is the server's: when the TTL runs out, its lessor revokes the
//!   lease (in a loop that looks every 500 ms) and the key is deleted with
//!   it, through Raft. A watcher never sees an expired key, only a key or
//!   none.
//! * Release: revoke our lease (which deletes the key).
//! * Push (`watch_by: push`): a watch on the key from just after the last
//!   revision this worker saw, so that a deletion between its last look and
//!   the watch is not missed; a DELETE event frees the lease.
//!
//! Every request has a timeout (`worker.request_timeout`, by default a
//! third of the lease), like the other servers' substrates.

pub mod gateway;

use std::io;
use std::time::Duration;

use serde_json::{Value, json};

use self::gateway::{Change, Gateway, WatchStream, b64, int, unb64};
use super::lease::{Pushed, Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};
use crate::model::clock::wall_ns;

pub struct EtcdLease {
    gateway: Gateway,
    /// The key, base64.
    key: String,
    ttl_s: i64,
    timeout: Duration,
    budget: Option<Duration>,
    /// Our etcd lease and the grant's token, while we hold it.
    mine: Option<(i64, u64)>,
    /// The store's revision in the last reply that carried one.
    revision: i64,
    /// The watch on the key, while subscribed.
    watch: Option<WatchStream>,
    /// A cluster's members (by index, each this worker's address of it),
    /// tried in turn: a request that fails moves on to the next one.
    members: Vec<(usize, String)>,
    /// The member the gateway is to.
    at: usize,
}

/// The lease's TTL in etcd's whole seconds; `None` if `lease` is not a
/// whole number of them (the experiment's loader refuses such a lease).
pub fn ttl_seconds(lease: Duration) -> Option<i64> {
    (lease.subsec_nanos() == 0 && lease.as_secs() >= 1).then_some(lease.as_secs() as i64)
}

impl EtcdLease {
    pub fn connect(address: &str, key: &str, lease: Duration, timeout: Option<Duration>) -> io::Result<EtcdLease> {
        let ttl_s = ttl_seconds(lease).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("etcd leases are whole seconds, not {lease:?}"))
        })?;
        let timeout = timeout.unwrap_or((lease / 3).max(Duration::from_millis(50))).max(Duration::from_millis(1));
        Ok(EtcdLease {
            gateway: Gateway::new(address)?,
            key: b64(key.as_bytes()),
            ttl_s,
            timeout,
            budget: None,
            mine: None,
            revision: 0,
            watch: None,
            members: Vec::new(),
            at: 0,
        })
    }

    /// Reach a cluster through `service`'s members, starting at its first.
    pub fn through_members(&mut self, service: &crate::model::ServiceView) -> io::Result<()> {
        self.members = service.members.iter().map(|m| (m.index, m.url.clone())).collect();
        if let Some((_, url)) = self.members.first() {
            self.gateway = Gateway::new(url)?;
        }
        Ok(())
    }

    fn limit(&self) -> Duration {
        self.budget.map_or(self.timeout, |b| b.min(self.timeout))
    }

    fn call(&mut self, path: &str, body: &Value) -> io::Result<Value> {
        let limit = self.limit();
        if limit.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "etcd: no time left for the request"));
        }
        let reply = match self.gateway.call(path, body, limit) {
            Ok(r) => r,
            Err(e) => {
                // As etcd's own client does: the next request goes to the
                // next member.
                if !self.members.is_empty() {
                    self.at = (self.at + 1) % self.members.len();
                    if let Ok(g) = Gateway::new(&self.members[self.at].1) {
                        self.gateway = g;
                    }
                }
                return Err(e);
            }
        };
        let revision = int(&reply["header"]["revision"]);
        if revision > 0 && path.starts_with("/v3/kv/") {
            self.revision = revision;
        }
        Ok(reply)
    }

    /// The key's holder (pid) and token, if the key exists.
    fn holder(&mut self) -> io::Result<Option<(i64, u64, i64)>> {
        let reply = self.call("/v3/kv/range", &json!({"key": self.key}))?;
        Ok(reply.get("kvs").and_then(Value::as_array).and_then(|kvs| kvs.first()).map(|kv| {
            let pid = kv
                .get("value")
                .and_then(Value::as_str)
                .and_then(unb64)
                .and_then(|v| String::from_utf8(v).ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            (pid, int(&kv["create_revision"]) as u64, int(&kv["lease"]))
        }))
    }
}

impl Substrate for EtcdLease {
    fn acquire(&mut self, fresh: Lease, _seen_token: u64) -> io::Result<Option<Lease>> {
        self.mine = None;
        let grant = self.call("/v3/lease/grant", &json!({"TTL": self.ttl_s}))?;
        let (id, ttl) = (int(&grant["ID"]), int(&grant["TTL"]));
        if ttl != self.ttl_s {
            // An etcd raises a TTL below its minimum (1.5 election timeouts)
            // without a word: a lease longer than the experiment's is not
            // the experiment.
            let _ = self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}));
            return Err(io::Error::other(format!(
                "etcd granted a TTL of {ttl} s for the {} s asked (its minimum TTL is larger)",
                self.ttl_s
            )));
        }
        let txn = json!({
            "compare": [{"key": self.key, "target": "CREATE", "create_revision": "0"}],
            "success": [{"request_put": {"key": self.key, "value": b64(fresh.process_id.to_string().as_bytes()), "lease": id.to_string()}}],
        });
        let reply = self.call("/v3/kv/txn", &txn)?;
        if reply.get("succeeded").and_then(Value::as_bool) != Some(true) {
            // Held by someone: our lease would only expire unused.
            let _ = self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}));
            return Ok(None);
        }
        let token = int(&reply["header"]["revision"]) as u64;
        self.mine = Some((id, token));
        Ok(Some(Lease { token: Some(token), ..fresh }))
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        let Some((pid, token, lease)) = self.holder().map_err(ReadError::Io)? else { return Ok(Seen::Free) };
        // What is left of the holder's lease, in etcd's whole seconds.
        let left = self.call("/v3/lease/timetolive", &json!({"ID": lease.to_string()})).map_err(ReadError::Io)?;
        let until = wall_ns() as f64 / 1e9 + int(&left["TTL"]).max(0) as f64;
        Ok(Seen::Held(Lease { process_id: pid, lease_until: until, token: Some(token) }))
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        let Some((id, token)) = self.mine else { return Ok(Renewal::Lost { holder: None }) };
        let reply = self.call("/v3/lease/keepalive", &json!({"ID": id.to_string()})).map_err(ReadError::Io)?;
        if int(&reply["TTL"]) > 0 {
            return Ok(Renewal::Renewed(Lease { token: Some(token), ..fresh }));
        }
        self.mine = None;
        let holder = self.holder().ok().flatten().map(|(pid, _, _)| pid);
        Ok(Renewal::Lost { holder })
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        if let Some((id, _)) = self.mine.take() {
            self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}))?;
        }
        Ok(())
    }

    fn set_budget(&mut self, budget: Option<Duration>) {
        self.budget = budget;
    }

    fn subscribe(&mut self) -> io::Result<()> {
        if self.watch.is_none() {
            // From the first revision this worker has not seen (the key's
            // state at `revision` is what it last looked at).
            let from = if self.revision > 0 { self.revision + 1 } else { 0 };
            self.watch = Some(WatchStream::open(&self.gateway, &self.key, from, self.limit())?);
        }
        Ok(())
    }

    fn subscribed(&self) -> Option<std::os::fd::RawFd> {
        self.watch.as_ref().map(WatchStream::fd)
    }

    fn pushed(&mut self) -> io::Result<Pushed> {
        let Some(watch) = self.watch.as_mut() else { return Ok(Pushed::Nothing) };
        match watch.changes() {
            Ok(changes) if changes.contains(&Change::Delete) => Ok(Pushed::Gone("delete")),
            Ok(_) => Ok(Pushed::Nothing),
            Err(e) => {
                self.watch = None;
                Err(e)
            }
        }
    }

    fn unsubscribe(&mut self) {
        self.watch = None;
    }

    fn member(&self) -> Option<usize> {
        self.members.get(self.at).map(|(k, _)| *k)
    }
}

/// Before a run: does etcd answer, and does it grant a lease of `ttl_s`
/// seconds as asked? (An etcd whose minimum TTL is larger would silently
/// lengthen every lease.)
pub fn preflight(address: &str, ttl_s: Option<i64>) -> io::Result<()> {
    let mut gateway = Gateway::new(address)?;
    let limit = Duration::from_secs(2);
    gateway.call("/v3/kv/range", &json!({"key": b64(b"leasequake-preflight")}), limit)?;
    if let Some(ttl_s) = ttl_s {
        let grant = gateway.call("/v3/lease/grant", &json!({"TTL": ttl_s}), limit)?;
        let _ = gateway.call("/v3/lease/revoke", &json!({"ID": int(&grant["ID"]).to_string()}), limit);
        let granted = int(&grant["TTL"]);
        if granted != ttl_s {
            return Err(io::Error::other(format!(
                "it grants at least {granted} s where the experiment's lease is {ttl_s} s \
                 (etcd's minimum TTL is 1.5 election timeouts: start it with a shorter --election-timeout, \
                 or use `managed: true`)"
            )));
        }
    }
    Ok(())
}

/// Remove one trial's key (and so its holder's lease's hold on it).
pub fn forget(address: &str, key: &str) -> io::Result<()> {
    let mut gateway = Gateway::new(address)?;
    gateway.call("/v3/kv/deleterange", &json!({"key": b64(key.as_bytes())}), Duration::from_secs(2)).map(drop)
}

/// Which of a cluster's members (by their addresses) is its Raft leader
/// now, as the first of them to answer says.
pub fn leader_of(addresses: &[String]) -> Option<usize> {
    let limit = Duration::from_millis(500);
    let id = |v: &Value| v.as_str().map(str::to_string).or_else(|| v.as_u64().map(|n| n.to_string()));
    let status =
        |a: &String| Gateway::new(a).and_then(|mut g| g.call("/v3/maintenance/status", &json!({}), limit)).ok();
    // One status per member: its own id, and the leader it knows.
    let replies: Vec<Option<Value>> = addresses.iter().map(status).collect();
    let ids: Vec<Option<String>> =
        replies.iter().map(|r| r.as_ref().and_then(|r| id(&r["header"]["member_id"]))).collect();
    let leader = replies.iter().flatten().find_map(|r| id(&r["leader"]))?;
    ids.iter().position(|m| m.as_deref() == Some(leader.as_str()))
}
