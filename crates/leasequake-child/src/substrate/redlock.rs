//! Redlock as a `Substrate`: the same key on several independent Redis
//! servers (no replication between them), the algorithm Redis's
//! documentation proposes for a lock that survives a server's loss.
//!
//! * Acquire: `SET key value NX PX ttl` on every server in turn, each with
//!   an equal share of the request timeout. Held if a majority said yes
//!   and time is left: the validity is the TTL less the time the attempt
//!   took and an allowance for the servers' clock drift (1 % of the TTL
//!   and 2 ms). Otherwise the attempt is undone everywhere.
//! * Renew: extend the key where it is still ours (a script); renewed if
//!   a majority extended it, with the same validity rule.
//! * Observe: the value a majority holds; free if none does, whatever a
//!   minority still holds.
//! * Release: delete the key where it is still ours.
//!
//! Every server judges expiry by its own clock; nothing orders the grants,
//! so there is no fencing token (the value is the holder's pid and a
//! nonce).

use std::io;
use std::time::{Duration, Instant};

use redis::{Client, Connection, Value};

use super::lease::{Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};
use crate::model::clock::{mono_ns, wall_ns};

const EXTEND: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

const LOOK: &str = r"return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}";

/// One server: its client and, while it works, its connection.
struct Server {
    client: Client,
    conn: Option<Connection>,
}

pub struct RedlockLease {
    servers: Vec<Server>,
    key: String,
    ttl: Duration,
    timeout: Duration,
    budget: Option<Duration>,
    /// Our value while we hold the lease.
    mine: Option<String>,
}

/// What one server answered, or why not.
type Answer = redis::RedisResult<Value>;

impl RedlockLease {
    pub fn connect(
        addresses: &[String],
        key: &str,
        ttl: Duration,
        timeout: Option<Duration>,
    ) -> io::Result<RedlockLease> {
        let servers = addresses
            .iter()
            .map(|a| Ok(Server { client: super::redis::client(a).map_err(other)?, conn: None }))
            .collect::<io::Result<_>>()?;
        let timeout = timeout.unwrap_or((ttl / 3).max(Duration::from_millis(20))).max(Duration::from_millis(1));
        Ok(RedlockLease { servers, key: key.to_string(), ttl, timeout, budget: None, mine: None })
    }

    fn majority(&self) -> usize {
        self.servers.len() / 2 + 1
    }

    /// The same command on every server in turn, each within an equal
    /// share of the request timeout (so that one silent server does not
    /// take the others' time).
    fn each(&mut self, cmd: &redis::Cmd) -> Vec<Answer> {
        let limit = self.budget.map_or(self.timeout, |b| b.min(self.timeout));
        let share = limit / self.servers.len() as u32;
        self.servers.iter_mut().map(|s| s.query(cmd, share)).collect()
    }

    fn script(&self, body: &str, args: &[String]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(body).arg(1).arg(&self.key).arg(args);
        cmd
    }

    /// The validity left of a grant whose attempt began at `start`, if any:
    /// the TTL less the attempt's time and the clocks' drift allowance.
    fn validity(&self, start: Instant) -> Option<Duration> {
        let drift = self.ttl / 100 + Duration::from_millis(2);
        self.ttl.checked_sub(start.elapsed() + drift).filter(|v| !v.is_zero())
    }

    fn ttl_ms(&self) -> String {
        self.ttl.as_millis().max(1).to_string()
    }

    fn undo(&mut self, value: &str) {
        let cmd = self.script(RELEASE, &[value.to_string()]);
        let _ = self.each(&cmd);
    }
}

impl Server {
    fn query(&mut self, cmd: &redis::Cmd, within: Duration) -> Answer {
        super::redis::query_within(&self.client, &mut self.conn, cmd, within)
    }
}

fn other(e: redis::RedisError) -> io::Error {
    io::Error::other(format!("redlock: {e}"))
}

fn ok(a: &Answer) -> bool {
    matches!(a, Ok(Value::Okay)) || matches!(a, Ok(Value::Int(1)))
}

/// Why no majority: how many said yes, and what each other server said.
fn short(answers: &[Answer], majority: usize) -> io::Error {
    let yes = answers.iter().filter(|a| ok(a)).count();
    let others: Vec<String> = answers
        .iter()
        .enumerate()
        .filter(|(_, a)| !ok(a))
        .map(|(i, a)| match a {
            Err(e) => format!("server {i}: {e}"),
            Ok(v) => format!("server {i}: {v:?}"),
        })
        .collect();
    let kind = if answers.iter().any(|a| a.is_err()) { io::ErrorKind::TimedOut } else { io::ErrorKind::Other };
    io::Error::new(
        kind,
        format!(
            "redlock: {yes} of {} servers, {majority} needed{}",
            answers.len(),
            if others.is_empty() { String::new() } else { format!(" ({})", others.join("; ")) }
        ),
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    }
}

impl Substrate for RedlockLease {
    fn acquire(&mut self, fresh: Lease, _seen_token: u64) -> io::Result<Option<Lease>> {
        let value = format!("{}:{}", fresh.process_id, mono_ns());
        let start = Instant::now();
        let wall = wall_ns();
        let mut cmd = redis::cmd("SET");
        cmd.arg(&self.key).arg(&value).arg("NX").arg("PX").arg(self.ttl_ms());
        let answers = self.each(&cmd);
        let yes = answers.iter().filter(|a| ok(a)).count();
        match self.validity(start).filter(|_| yes >= self.majority()) {
            Some(valid) => {
                self.mine = Some(value);
                let until = wall as f64 / 1e9 + valid.as_secs_f64();
                Ok(Some(Lease { lease_until: until, token: None, ..fresh }))
            }
            None => {
                // Undone where it took, so that a minority of servers does
                // not hold it for a whole TTL.
                if yes > 0 {
                    self.undo(&value);
                }
                if answers.iter().all(|a| a.is_ok()) { Ok(None) } else { Err(short(&answers, self.majority())) }
            }
        }
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        let cmd = self.script(LOOK, &[]);
        let answers = self.each(&cmd);
        let mut seen: Vec<(String, i64)> = Vec::new();
        for a in answers.iter().flatten() {
            if let Value::Array(v) = a
                && v.len() == 2
            {
                let ttl = if let Value::Int(t) = v[1] { t } else { 0 };
                seen.push((text(&v[0]), ttl));
            }
        }
        let majority = self.majority();
        let held = seen
            .iter()
            .filter(|(v, _)| !v.is_empty())
            .find(|(v, _)| seen.iter().filter(|(w, _)| w == v).count() >= majority);
        match held {
            Some((value, _)) => {
                let pid = value.split(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
                // Until the majority's shortest TTL runs out.
                let mut ttls: Vec<i64> = seen.iter().filter(|(v, _)| v == value).map(|(_, t)| *t).collect();
                ttls.sort_unstable();
                let ttl = ttls[ttls.len() - majority].max(0);
                Ok(Seen::Held(Lease {
                    process_id: pid,
                    lease_until: wall_ns() as f64 / 1e9 + ttl as f64 / 1000.0,
                    token: None,
                }))
            }
            None if seen.len() >= majority => Ok(Seen::Free),
            None => Err(ReadError::Io(short(&answers, majority))),
        }
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        let Some(mine) = self.mine.clone() else { return Ok(Renewal::Lost { holder: None }) };
        let start = Instant::now();
        let wall = wall_ns();
        let cmd = self.script(EXTEND, &[mine, self.ttl_ms()]);
        let answers = self.each(&cmd);
        let yes = answers.iter().filter(|a| ok(a)).count();
        if let Some(valid) = self.validity(start).filter(|_| yes >= self.majority()) {
            return Ok(Renewal::Renewed(Lease {
                lease_until: wall as f64 / 1e9 + valid.as_secs_f64(),
                token: None,
                ..fresh
            }));
        }
        let refused = answers.iter().filter(|a| matches!(a, Ok(Value::Int(0)))).count();
        if refused >= self.majority() {
            // Gone from a majority: another may hold it now.
            self.mine = None;
            return Ok(Renewal::Lost { holder: None });
        }
        Err(ReadError::Io(short(&answers, self.majority())))
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        if let Some(mine) = self.mine.take() {
            self.undo(&mine);
        }
        Ok(())
    }

    fn set_budget(&mut self, budget: Option<Duration>) {
        self.budget = budget;
    }
}
