//! Redis as a `Substrate`: `SET key value NX PX ttl` to acquire; renew and
//! release only while the value is still ours (a Lua script, so the check
//! and the change are one step on the server); the token from `INCR` in the
//! same script as the grant (on a counter seeded from the server's clock). Expiry is the server's: an expired key is
//! simply gone, so watchers see the lease free, never expired.
//!
//! The connection is opened lazily and again after any error, so a
//! restarted server is reached again at the next tick. Every command has a
//! timeout (`worker.request_timeout`, by default a third of the lease), so
//! a paused or partitioned server fails operations instead of hanging the
//! worker.
//!
//! Push (`watch_by: push`): a keyspace-notification subscription of its
//! own (`keyspace.rs`), once the server is seen to publish `del` and
//! `expired` events; a `del` or an `expired` frees the lease.

use std::io;
use std::time::{Duration, Instant};

use redis::{Client, Connection, IntoConnectionInfo, Value};

use crate::model::ServiceView;

use super::keyspace::{self, Keyspace};
use super::lease::{Pushed, Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};
use crate::model::clock::wall_ns;

// The token counter starts at the server's clock in µs: INCR is strictly
// increasing while the server lives, and a server restarted without
// persistence (which forgets the counter) starts above every token it gave
// before, as long as its clock moved forward.
const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], 'granting', 'NX', 'PX', ARGV[2]) then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local now = redis.call('TIME')
    redis.call('SET', KEYS[2], now[1] * 1000000 + now[2])
  end
  local t = redis.call('INCR', KEYS[2])
  -- Lua numbers are doubles: format the token as an integer, not 1.8e+15.
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%.0f', t), 'PX', ARGV[2])
  return t
end
return 0";

const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, v}
end
return {0, v or ''}";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

const OBSERVE: &str = r"return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}";

pub struct RedisLease {
    client: Client,
    conn: Option<Connection>,
    key: String,
    token_key: String,
    ttl: Duration,
    timeout: Duration,
    /// A shorter limit for the next operations (`Substrate::set_budget`).
    budget: Option<Duration>,
    /// Our value while we hold the lease: `pid:token`.
    mine: Option<String>,
    address: String,
    /// The push subscription, while there is one.
    keyspace: Option<Keyspace>,
    /// Found before the first event: the lease was gone by the time the
    /// subscription began.
    gone_already: bool,
    /// A replicated service: the primary is asked of its Sentinels at
    /// every new connection, as a Sentinel-aware client does.
    service: Option<ServiceView>,
    /// The member the connection is to.
    member: Option<usize>,
}

fn err(e: redis::RedisError) -> io::Error {
    if e.is_timeout() {
        return io::Error::new(io::ErrorKind::TimedOut, "redis: no reply within the request timeout");
    }
    io::Error::other(format!("redis: {e}"))
}

/// `pid:token` → (pid, token).
fn parse(value: &str) -> Option<(i64, u64)> {
    let (pid, token) = value.split_once(':')?;
    Some((pid.parse().ok()?, token.parse().ok()?))
}

impl RedisLease {
    pub fn connect(address: &str, key: &str, ttl: Duration, timeout: Option<Duration>) -> io::Result<RedisLease> {
        let client = client(address).map_err(err)?;
        let timeout = timeout.unwrap_or((ttl / 3).max(Duration::from_millis(20))).max(Duration::from_millis(1));
        Ok(RedisLease {
            client,
            conn: None,
            key: key.to_string(),
            token_key: format!("{key}:token"),
            ttl,
            timeout,
            budget: None,
            mine: None,
            address: address.to_string(),
            keyspace: None,
            gone_already: false,
            service: None,
            member: None,
        })
    }

    /// Find the primary through `service`'s Sentinels instead of the
    /// address given.
    pub fn through_sentinels(&mut self, service: ServiceView) {
        self.service = Some(service);
    }

    /// Ask the Sentinels, in order, where the primary is, and point the
    /// client at that member; each Sentinel gets an equal share of what is
    /// left of `limit`, so that one cut off does not take it all.
    fn discover(&mut self, limit: Duration) -> redis::RedisResult<()> {
        let Some(service) = &self.service else { return Ok(()) };
        let start = Instant::now();
        let mut last = None;
        for (i, sentinel) in service.sentinels.iter().enumerate() {
            let left = limit.saturating_sub(start.elapsed()) / (service.sentinels.len() - i) as u32;
            if left.is_zero() {
                break;
            }
            match ask_primary(sentinel, &service.name, left) {
                Ok(Some(announced)) => {
                    let Some(m) = service.members.iter().position(|m| m.announced == announced) else {
                        return Err(redis::RedisError::from(io::Error::other(format!(
                            "Sentinel names a primary {announced} that is no member of the service"
                        ))));
                    };
                    self.client = client(&service.members[m].url)?;
                    self.member = Some(service.members[m].index);
                    return Ok(());
                }
                Ok(None) => last = Some(io::Error::other(format!("Sentinel knows no primary {:?}", service.name))),
                Err(e) => last = Some(io::Error::other(format!("Sentinel {sentinel}: {e}"))),
            }
        }
        Err(redis::RedisError::from(
            last.unwrap_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no Sentinel answered in time")),
        ))
    }

    /// Run a script; drop the connection on any error so the next call
    /// reconnects (to a restarted server, say).
    fn eval(&mut self, script: &str, args: &[String]) -> io::Result<Value> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(2).arg(&self.key).arg(&self.token_key).arg(args);
        self.query(&cmd)
    }

    /// One command, reconnecting once where the connection died with its
    /// server.
    fn query(&mut self, cmd: &redis::Cmd) -> io::Result<Value> {
        let reused = self.conn.is_some();
        match self.query_once(cmd) {
            // A connection that died with its server (a restart) fails its
            // first command before sending it: once more, on a new one. Not
            // after a timeout: a paused server would cost the retry too.
            Err(e) if reused && !e.is_timeout() && (e.is_connection_dropped() || e.is_io_error()) => {
                self.query_once(cmd).map_err(err)
            }
            other => other.map_err(err),
        }
    }

    /// One command, connecting first if need be, within one request
    /// timeout (or the budget) in all: a connection accepted by a
    /// partitioned link must not double the wait.
    fn query_once(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        let limit = self.limit();
        let start = Instant::now();
        if self.conn.is_none() && !limit.is_zero() {
            self.discover(limit)?;
        }
        query_within(&self.client, &mut self.conn, cmd, limit.saturating_sub(start.elapsed()))
    }

    /// With `sync_replicas`, wait (`WAIT`) until that many replicas have
    /// the write just made, for half the request timeout.
    fn synced(&mut self) -> io::Result<()> {
        let want = self.service.as_ref().map_or(0, |s| s.sync_replicas);
        if want == 0 {
            return Ok(());
        }
        let within = (self.limit() / 2).as_millis().max(1);
        // On the connection the write went over, or not at all: a WAIT on
        // a new connection (to a newly named primary, say) counts that
        // server's replicas, not the write's.
        if self.conn.is_none() {
            return Err(io::Error::other("redis: WAIT: the connection the write went over is gone"));
        }
        let (cmd, limit) = (redis::cmd("WAIT").arg(want).arg(within as u64).clone(), self.limit());
        let acked = int(&query_within(&self.client, &mut self.conn, &cmd, limit).map_err(err)?);
        if (acked as usize) < want {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("redis: WAIT: {acked} of {want} replicas have the write after {within} ms"),
            ));
        }
        Ok(())
    }

    fn limit(&self) -> Duration {
        self.budget.map_or(self.timeout, |b| b.min(self.timeout))
    }

    fn ttl_ms(&self) -> String {
        self.ttl.as_millis().max(1).to_string()
    }
}

/// A client for `address`. No `CLIENT SETINFO` after connecting: the
/// client waits a whole timeout for each of its replies, so a link that
/// loses replies would hold a request for several timeouts.
pub(super) fn client(address: &str) -> redis::RedisResult<Client> {
    let info = address.into_connection_info()?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    Client::open(info.set_redis_settings(settings))
}

/// One command on `conn` (connecting `client` first if there is none),
/// within `limit` in all: a connection accepted by a partitioned link must
/// not double the wait. The connection is dropped on any error, so the
/// next command reconnects (to a restarted server, say).
pub(super) fn query_within(
    client: &Client,
    conn: &mut Option<Connection>,
    cmd: &redis::Cmd,
    limit: Duration,
) -> redis::RedisResult<Value> {
    let start = Instant::now();
    let timed_out = || redis::RedisError::from(io::Error::new(io::ErrorKind::TimedOut, "no reply in time"));
    if limit.is_zero() {
        return Err(timed_out());
    }
    if conn.is_none() {
        *conn = Some(client.get_connection_with_timeout(limit)?);
    }
    let left = limit.saturating_sub(start.elapsed());
    if left.is_zero() {
        *conn = None;
        return Err(timed_out());
    }
    let c = conn.as_mut().expect("connected above");
    c.set_read_timeout(Some(left))?;
    c.set_write_timeout(Some(left))?;
    let result = cmd.query::<Value>(c);
    if result.is_err() {
        *conn = None;
    }
    result
}

/// `host:port` of the primary a Sentinel at `sentinel` knows as `name`.
fn ask_primary(sentinel: &str, name: &str, within: Duration) -> redis::RedisResult<Option<String>> {
    let mut conn = client(sentinel)?.get_connection_with_timeout(within)?;
    conn.set_read_timeout(Some(within))?;
    conn.set_write_timeout(Some(within))?;
    let reply: Option<(String, String)> =
        redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(name).query(&mut conn)?;
    Ok(reply.map(|(host, port)| format!("{host}:{port}")))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => 0,
    }
}

fn pair(v: Value) -> io::Result<(Value, Value)> {
    match v {
        Value::Array(mut a) if a.len() == 2 => {
            let second = a.pop().expect("two");
            Ok((a.pop().expect("two"), second))
        }
        other => Err(io::Error::other(format!("redis: unexpected reply {other:?}"))),
    }
}

impl Substrate for RedisLease {
    fn acquire(&mut self, fresh: Lease, _seen_token: u64) -> io::Result<Option<Lease>> {
        let reply = self.eval(ACQUIRE, &[fresh.process_id.to_string(), self.ttl_ms()])?;
        let token = int(&reply);
        if token <= 0 {
            return Ok(None);
        }
        // Not replicated in time: not ours to use, though the primary
        // keeps it until it runs out.
        self.synced()?;
        self.mine = Some(format!("{}:{token}", fresh.process_id));
        Ok(Some(Lease { token: Some(token as u64), ..fresh }))
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        let (value, pttl) = pair(self.eval(OBSERVE, &[]).map_err(ReadError::Io)?).map_err(ReadError::Io)?;
        let value = text(&value);
        if value.is_empty() {
            return Ok(Seen::Free);
        }
        let Some((pid, token)) = parse(&value) else {
            // The instant between the NX set and the token: being granted.
            return Err(ReadError::Empty);
        };
        let until = wall_ns() as f64 / 1e9 + int(&pttl).max(0) as f64 / 1000.0;
        Ok(Seen::Held(Lease { process_id: pid, lease_until: until, token: Some(token) }))
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        let Some(mine) = self.mine.clone() else { return Ok(Renewal::Lost { holder: None }) };
        let (ok, value) =
            pair(self.eval(RENEW, &[mine.clone(), self.ttl_ms()]).map_err(ReadError::Io)?).map_err(ReadError::Io)?;
        if int(&ok) == 1 {
            self.synced().map_err(ReadError::Io)?;
            let token = parse(&mine).map(|(_, t)| t);
            return Ok(Renewal::Renewed(Lease { token, ..fresh }));
        }
        self.mine = None;
        Ok(Renewal::Lost { holder: parse(&text(&value)).map(|(pid, _)| pid) })
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        if let Some(mine) = self.mine.take() {
            self.eval(RELEASE, &[mine])?;
        }
        Ok(())
    }

    fn set_budget(&mut self, budget: Option<Duration>) {
        self.budget = budget;
    }

    fn member(&self) -> Option<usize> {
        self.member
    }

    fn subscribe(&mut self) -> io::Result<()> {
        if self.keyspace.is_none() {
            if let Some(why) = keyspace::refusal(&self.query(&keyspace::flags_query())?) {
                return Err(io::Error::other(format!("redis: {why}")));
            }
            self.keyspace = Some(Keyspace::subscribe(&self.address, &self.key, self.limit())?);
            // Freed between the last look and the subscription: no event
            // will say so.
            let (value, _) = pair(self.eval(OBSERVE, &[])?)?;
            self.gone_already = text(&value).is_empty();
        }
        Ok(())
    }

    fn subscribed(&self) -> Option<std::os::fd::RawFd> {
        self.keyspace.as_ref().map(Keyspace::fd)
    }

    fn pushed(&mut self) -> io::Result<Pushed> {
        if std::mem::take(&mut self.gone_already) {
            return Ok(Pushed::Gone("missing"));
        }
        let Some(sub) = self.keyspace.as_mut() else { return Ok(Pushed::Nothing) };
        match sub.events() {
            Ok(events) => Ok(match events.iter().rev().find(|e| keyspace::frees(e)).map(String::as_str) {
                Some("del") => Pushed::Gone("del"),
                Some("expired") => Pushed::Gone("expired"),
                Some(_) => Pushed::Gone("evicted"),
                None => Pushed::Nothing,
            }),
            Err(e) => {
                self.keyspace = None;
                Err(e)
            }
        }
    }

    fn unsubscribe(&mut self) {
        self.keyspace = None;
        self.gone_already = false;
    }
}
