//! Redis keyspace notifications for a push watcher: a connection of its
//! own, subscribed to `__keyspace@DB__:KEY`, spoken in RESP directly so
//! that its socket can be waited on beside the worker's signals (the
//! client crate keeps its socket to itself).
//!
//! The server publishes an event per change of the key when its
//! `notify-keyspace-events` says so: `K` (keyspace channels) with `g`
//! (generic commands: `del`) and `x` (`expired`). It expires a key when a
//! client touches it after its TTL, or when its expiry cycle (every
//! 1/hz, 100 ms by default) samples it: the `expired` event comes then.
//! Pub/sub keeps no history: what happens while the subscription is down
//! is lost, and the watch ticks find it.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// The longest message read: anything larger is not a keyspace event.
const MAX_MESSAGE: usize = 64 * 1024;

/// The events that free a lease.
pub fn frees(event: &str) -> bool {
    matches!(event, "del" | "expired" | "evicted")
}

/// Asks the server what it publishes.
pub fn flags_query() -> redis::Cmd {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    cmd
}

/// Why a server that answered `flags_query` with `reply` cannot serve push
/// watchers, if it cannot.
pub fn refusal(reply: &redis::Value) -> Option<String> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let flags = match reply {
        redis::Value::Array(a) | redis::Value::Set(a) => a.get(1).map(text).unwrap_or_default(),
        redis::Value::Map(m) => m.first().map(|(_, v)| text(v)).unwrap_or_default(),
        _ => String::new(),
    };
    (!enabled(&flags)).then(|| {
        format!(
            "it publishes no deletions or expiries for push watchers (notify-keyspace-events {flags:?}; push needs Kgx)"
        )
    })
}

/// Does `flags` (the server's `notify-keyspace-events`) publish the events
/// a push watcher needs?
fn enabled(flags: &str) -> bool {
    let all = flags.contains('A');
    flags.contains('K') && (all || (flags.contains('g') && flags.contains('x')))
}

/// One reply of RESP2: what a subscribed connection receives.
#[derive(Clone, Debug, PartialEq)]
enum Resp {
    Text(String),
    Int(i64),
    Error(String),
    Nil,
    Array(Vec<Resp>),
}

/// The first whole value in `buf`, and how many bytes it took.
fn parse(buf: &[u8]) -> io::Result<Option<(Resp, usize)>> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let line = String::from_utf8_lossy(&buf[1..end]).into_owned();
    let next = end + 2;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("redis: unreadable reply {line:?}"));
    match buf.first() {
        Some(b'+') => Ok(Some((Resp::Text(line), next))),
        Some(b'-') => Ok(Some((Resp::Error(line), next))),
        Some(b':') => Ok(Some((Resp::Int(line.parse().map_err(|_| bad())?), next))),
        Some(b'$') => {
            let n: i64 = line.parse().map_err(|_| bad())?;
            if n < 0 {
                return Ok(Some((Resp::Nil, next)));
            }
            let n = n as usize;
            if buf.len() < next + n + 2 {
                return Ok(None);
            }
            Ok(Some((Resp::Text(String::from_utf8_lossy(&buf[next..next + n]).into_owned()), next + n + 2)))
        }
        Some(b'*') => {
            let n: i64 = line.parse().map_err(|_| bad())?;
            let mut items = Vec::new();
            let mut at = next;
            for _ in 0..n.max(0) {
                let Some((item, used)) = parse(&buf[at..])? else { return Ok(None) };
                items.push(item);
                at += used;
            }
            Ok(Some((Resp::Array(items), at)))
        }
        _ => Err(bad()),
    }
}

/// A command as RESP.
fn command(words: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        out.extend(format!("${}\r\n{w}\r\n", w.len()).bytes());
    }
    out
}

/// The parts of `redis://[user[:password]@]host[:port][/db]` a subscription
/// needs.
struct Target {
    host: String,
    user: Option<String>,
    password: Option<String>,
    db: u32,
}

fn target(address: &str) -> io::Result<Target> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{address:?}: {why}"));
    let rest = address.strip_prefix("redis://").ok_or_else(|| invalid("push needs a redis:// address"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((u, p)) => ((!u.is_empty()).then(|| u.to_string()), (!p.is_empty()).then(|| p.to_string())),
        None => (None, None),
    };
    let host = if host.contains(':') { host.to_string() } else { format!("{host}:6379") };
    let db = path
        .split(['?', '/'])
        .next()
        .filter(|d| !d.is_empty())
        .map_or(Ok(0), |d| d.parse())
        .map_err(|_| invalid("bad database number"))?;
    Ok(Target { host, user, password, db })
}

/// One subscription to one key's events.
pub struct Keyspace {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Keyspace {
    /// Subscribe to `key`'s events on the server at `address`, within
    /// `limit`.
    pub fn subscribe(address: &str, key: &str, limit: Duration) -> io::Result<Keyspace> {
        let deadline = Instant::now() + limit;
        let left = || {
            let d = deadline.saturating_duration_since(Instant::now());
            if d.is_zero() {
                Err(io::Error::new(io::ErrorKind::TimedOut, "redis: no reply within the request timeout"))
            } else {
                Ok(d)
            }
        };
        let t = target(address)?;
        let socket = t.host.to_socket_addrs()?.next().ok_or_else(|| io::Error::other("redis: no address"))?;
        let stream = TcpStream::connect_timeout(&socket, left()?)?;
        stream.set_nodelay(true)?;
        let mut sub = Keyspace { stream, buf: Vec::new() };
        if let Some(password) = &t.password {
            let auth = match &t.user {
                Some(user) => command(&["AUTH", user, password]),
                None => command(&["AUTH", password]),
            };
            sub.send(&auth, left()?)?;
            if let Resp::Error(e) = sub.reply(deadline)? {
                return Err(io::Error::other(format!("redis: {e}")));
            }
        }
        let channel = format!("__keyspace@{}__:{key}", t.db);
        sub.send(&command(&["SUBSCRIBE", &channel]), left()?)?;
        match sub.reply(deadline)? {
            Resp::Array(a) if a.first() == Some(&Resp::Text("subscribe".into())) => {}
            other => return Err(io::Error::other(format!("redis: SUBSCRIBE answered {other:?}"))),
        }
        sub.stream.set_nonblocking(true)?;
        Ok(sub)
    }

    fn send(&mut self, bytes: &[u8], limit: Duration) -> io::Result<()> {
        self.stream.set_write_timeout(Some(limit))?;
        self.stream.write_all(bytes)
    }

    /// One whole reply, waiting until `deadline` at most.
    fn reply(&mut self, deadline: Instant) -> io::Result<Resp> {
        loop {
            if let Some((value, used)) = parse(&self.buf)? {
                self.buf.drain(..used);
                return Ok(value);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "redis: no reply within the request timeout"));
            }
            self.stream.set_read_timeout(Some(left))?;
            self.read_some()?;
        }
    }

    /// Read what is there; false if nothing was.
    fn read_some(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(io::Error::new(io::ErrorKind::ConnectionAborted, "redis: the subscription closed")),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                if self.buf.len() > MAX_MESSAGE {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "redis: message too large"));
                }
                Ok(true)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// The events published since the last call (`set`, `expire`, `del`,
    /// `expired`, …), without waiting. An error ends the subscription.
    pub fn events(&mut self) -> io::Result<Vec<String>> {
        while self.read_some()? {}
        let mut events = Vec::new();
        while let Some((value, used)) = parse(&self.buf)? {
            self.buf.drain(..used);
            if let Resp::Array(a) = value
                && a.first() == Some(&Resp::Text("message".into()))
                && let Some(Resp::Text(event)) = a.get(2)
            {
                events.push(event.clone());
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_whole_or_not_at_all() {
        let msg = b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyspace@0__:a-lease\r\n$7\r\nexpired\r\n";
        let (value, used) = parse(msg).unwrap().unwrap();
        assert_eq!(used, msg.len());
        let Resp::Array(a) = value else { panic!("{value:?}") };
        assert_eq!(a[2], Resp::Text("expired".into()));
        for cut in 0..msg.len() {
            assert_eq!(parse(&msg[..cut]).unwrap(), None, "a partial message at {cut}");
        }
        assert_eq!(parse(b":1\r\n").unwrap(), Some((Resp::Int(1), 4)));
    }

    #[test]
    fn the_flags_must_publish_deletions_and_expiries_on_key_channels() {
        assert!(enabled("Kgx") && enabled("xgK") && enabled("KA"));
        assert!(!enabled("") && !enabled("Egx") && !enabled("Kx") && !enabled("Kg"));
    }

    #[test]
    fn addresses_name_the_database_and_the_credentials() {
        let t = target("redis://u:p@127.0.0.1:7000/3").unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_deref(), t.password.as_deref(), t.db),
            ("127.0.0.1:7000", Some("u"), Some("p"), 3)
        );
        let t = target("redis://127.0.0.1/").unwrap();
        assert_eq!((t.host.as_str(), t.db), ("127.0.0.1:6379", 0));
        assert!(target("http://127.0.0.1").is_err());
    }
}
