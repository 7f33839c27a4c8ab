//! etcd's JSON gateway (`/v3/kv/txn`, `/v3/lease/grant`, `/v3/watch`, …)
//! over plain HTTP/1.1 on the client port: every request a POST of one
//! JSON object, every reply one JSON object, or a stream of them in
//! chunked encoding for the streaming calls (keep-alive, watch).
//!
//! Why not gRPC: the maintained Rust client generates its code with
//! `protoc` at build time, which a machine with only Rust lacks, and the
//! README's first command must build there (docs/etcd.md weighs the
//! choice). The gateway is part of every etcd v3 server, speaks the same
//! API, and passes through the harness's TCP proxy like any other link.
//!
//! Bytes in JSON are base64; 64-bit integers are strings.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// The longest reply or stream message read: anything larger is not a
/// lease's.
const MAX_BODY: usize = 1 << 20;

pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub fn unb64(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// A 64-bit integer the gateway sent as a string (or, rarely, a number);
/// absent fields are zero (proto3 leaves defaults out).
pub fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "etcd: no reply within the request timeout")
}

fn bad(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("etcd: {what}"))
}

/// Where the gateway listens: `http://host:port` (a path is ignored).
pub fn endpoint(address: &str) -> io::Result<(SocketAddr, String)> {
    let rest = address.strip_prefix("http://").ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{address:?}: etcd's address is http://host:port"))
    })?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let socket = authority
        .to_socket_addrs()
        .map_err(|e| io::Error::new(e.kind(), format!("{address:?}: {e}")))?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{address:?}: no address")))?;
    Ok((socket, authority.to_string()))
}

/// Time left before `deadline`, as a socket timeout (never zero, which
/// would mean none).
fn left(deadline: Instant) -> io::Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() { Err(timed_out()) } else { Ok(d) }
}

/// A read or write that hit the socket timeout is the request's timeout.
fn timeout_kind(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => timed_out(),
        _ => e,
    }
}

fn connect(socket: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&socket, left(deadline)?).map_err(timeout_kind)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn send(stream: &mut TcpStream, host: &str, path: &str, body: &Value, deadline: Instant) -> io::Result<()> {
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.set_write_timeout(Some(left(deadline)?))?;
    stream.write_all(request.as_bytes()).map_err(timeout_kind)
}

/// How a response's body is framed.
enum Framing {
    Length(usize),
    Chunked,
}

/// The status line and headers: the status code and the framing.
fn read_head(reader: &mut BufReader<TcpStream>, deadline: Instant) -> io::Result<(u16, Framing)> {
    let mut line = String::new();
    let mut status = None;
    let mut framing = Framing::Length(0);
    loop {
        line.clear();
        reader.get_ref().set_read_timeout(Some(left(deadline)?))?;
        if reader.read_line(&mut line).map_err(timeout_kind)? == 0 {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "etcd: connection closed"));
        }
        let text = line.trim_end();
        if status.is_none() {
            let code = text.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
            status = Some(code.ok_or_else(|| bad(format_args!("not an HTTP reply: {text:?}")))?);
            continue;
        }
        if text.is_empty() {
            return Ok((status.unwrap_or(0), framing));
        }
        if let Some((name, value)) = text.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let n: usize = value.parse().map_err(|_| bad("bad Content-Length"))?;
                if n > MAX_BODY {
                    return Err(bad("reply too large"));
                }
                framing = Framing::Length(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
                framing = Framing::Chunked;
            }
        }
    }
}

/// A whole body, however framed.
fn read_body(reader: &mut BufReader<TcpStream>, framing: Framing, deadline: Instant) -> io::Result<Vec<u8>> {
    match framing {
        Framing::Length(n) => {
            let mut body = vec![0; n];
            reader.get_ref().set_read_timeout(Some(left(deadline)?))?;
            reader.read_exact(&mut body).map_err(timeout_kind)?;
            Ok(body)
        }
        Framing::Chunked => {
            let mut body = Vec::new();
            let mut line = String::new();
            loop {
                line.clear();
                reader.get_ref().set_read_timeout(Some(left(deadline)?))?;
                reader.read_line(&mut line).map_err(timeout_kind)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| bad(format_args!("bad chunk size {line:?}")))?;
                if body.len() + size > MAX_BODY {
                    return Err(bad("reply too large"));
                }
                let start = body.len();
                body.resize(start + size + 2, 0);
                reader.read_exact(&mut body[start..]).map_err(timeout_kind)?;
                body.truncate(start + size);
                if size == 0 {
                    return Ok(body);
                }
            }
        }
    }
}

/// The gateway's answer to one call: its object, a stream's first
/// `result`, or its error as an error.
fn answer(status: u16, body: &[u8]) -> io::Result<Value> {
    let first = body.split(|b| *b == b'\n').find(|l| !l.iter().all(u8::is_ascii_whitespace)).unwrap_or(b"{}");
    let v: Value = serde_json::from_slice(first).map_err(|e| bad(format_args!("unreadable reply ({e})")))?;
    let error = v.get("error").filter(|e| !e.is_null());
    if status != 200 || error.is_some() {
        let message = v.get("message").or(error).and_then(|m| m.as_str().map(str::to_string));
        let message = message.or_else(|| error.map(|e| e.get("message").unwrap_or(e).to_string()));
        return Err(io::Error::other(format!(
            "etcd: {} (HTTP {status})",
            message.unwrap_or_else(|| String::from_utf8_lossy(first).into_owned())
        )));
    }
    Ok(v.get("result").cloned().unwrap_or(v))
}

/// One gateway: one kept-alive connection, opened lazily and again after
/// any error.
pub struct Gateway {
    socket: SocketAddr,
    host: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Gateway {
    pub fn new(address: &str) -> io::Result<Gateway> {
        let (socket, host) = endpoint(address)?;
        Ok(Gateway { socket, host, conn: None })
    }

    pub fn socket(&self) -> SocketAddr {
        self.socket
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// POST `body` to `path` and return the reply, all within `limit`.
    pub fn call(&mut self, path: &str, body: &Value, limit: Duration) -> io::Result<Value> {
        let deadline = Instant::now() + limit;
        let reused = self.conn.is_some();
        match self.call_once(path, body, deadline) {
            // A kept-alive connection the server closed meanwhile (it was
            // restarted, or dropped an idle one) fails before any reply:
            // once more, on a new one. Not after a timeout: a paused server
            // would cost the retry too.
            Err(e)
                if reused
                    && matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::BrokenPipe
                            | io::ErrorKind::UnexpectedEof
                    ) =>
            {
                self.call_once(path, body, deadline)
            }
            other => other,
        }
    }

    fn call_once(&mut self, path: &str, body: &Value, deadline: Instant) -> io::Result<Value> {
        let result = (|| {
            if self.conn.is_none() {
                self.conn = Some(BufReader::new(connect(self.socket, deadline)?));
            }
            let reader = self.conn.as_mut().expect("connected above");
            send(reader.get_mut(), &self.host, path, body, deadline)?;
            let (status, framing) = read_head(reader, deadline)?;
            let body = read_body(reader, framing, deadline)?;
            answer(status, &body)
        })();
        if result.is_err() {
            self.conn = None;
        }
        result
    }
}

/// What a watch reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key was written (a new holder).
    Put,
    /// The key was deleted: released, or its lease revoked or expired.
    Delete,
}

/// A chunked body read piece by piece: whole chunks decoded, whole
/// messages (a JSON object a line) taken out, whatever the pieces.
#[derive(Default)]
struct Chunks {
    /// Bytes read but not yet decoded.
    raw: Vec<u8>,
    /// Decoded stream bytes not yet split into messages.
    text: Vec<u8>,
    /// What is left of the chunk being read.
    left: usize,
}

impl Chunks {
    fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.raw.extend_from_slice(bytes);
        if self.raw.len() + self.text.len() > MAX_BODY {
            return Err(bad("watch message too large"));
        }
        self.decode()
    }

    /// Move whole chunk payloads from `raw` to `text`.
    fn decode(&mut self) -> io::Result<()> {
        loop {
            if self.left > 0 {
                let take = self.left.min(self.raw.len());
                self.text.extend(self.raw.drain(..take));
                self.left -= take;
                if self.left > 0 {
                    return Ok(());
                }
            }
            // A chunk's CRLF trailer, then the next size line.
            while self.raw.first().is_some_and(|b| *b == b'\r' || *b == b'\n') {
                self.raw.remove(0);
            }
            let Some(end) = self.raw.windows(2).position(|w| w == b"\r\n") else { return Ok(()) };
            let size_text = String::from_utf8_lossy(&self.raw[..end]).into_owned();
            let size = usize::from_str_radix(size_text.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad(format_args!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "etcd: the watch stream ended"));
            }
            self.raw.drain(..end + 2);
            self.left = size;
        }
    }

    /// The next whole message decoded, if one has arrived.
    fn message(&mut self) -> io::Result<Option<Value>> {
        while let Some(end) = self.text.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.text.drain(..=end).collect();
            if !line.iter().all(u8::is_ascii_whitespace) {
                return answer(200, &line).map(Some);
            }
        }
        Ok(None)
    }
}

/// One watch on one key: a connection whose reply never ends, read without
/// blocking once it is set up, so that a worker can wait on its socket
/// beside its signals.
pub struct WatchStream {
    reader: BufReader<TcpStream>,
    chunks: Chunks,
}

impl WatchStream {
    /// Watch `key` (base64) for changes from revision `from` on, within
    /// `limit` for the watch to be set up.
    pub fn open(gateway: &Gateway, key: &str, from: i64, limit: Duration) -> io::Result<WatchStream> {
        let deadline = Instant::now() + limit;
        let mut stream = connect(gateway.socket(), deadline)?;
        let body = serde_json::json!({"create_request": {"key": key, "start_revision": from.to_string()}});
        send(&mut stream, gateway.host(), "/v3/watch", &body, deadline)?;
        let mut reader = BufReader::new(stream);
        let (status, framing) = read_head(&mut reader, deadline)?;
        if status != 200 || !matches!(framing, Framing::Chunked) {
            let body = read_body(&mut reader, framing, deadline).unwrap_or_default();
            return Err(answer(status, &body).err().unwrap_or_else(|| bad("the watch did not stream")));
        }
        // Whatever the head's reader already holds of the body.
        let mut chunks = Chunks::default();
        chunks.push(reader.buffer())?;
        let consumed = reader.buffer().len();
        reader.consume(consumed);
        let mut watch = WatchStream { reader, chunks };
        // The first message says the watch is created; changes come after
        // it, and stay decoded for the first `changes`.
        loop {
            if let Some(first) = watch.chunks.message()? {
                if first.get("created").and_then(Value::as_bool) != Some(true) {
                    return Err(bad(format_args!("the watch was not created: {first}")));
                }
                break;
            }
            watch.reader.get_ref().set_read_timeout(Some(left(deadline)?))?;
            let mut buf = [0u8; 4096];
            let n = watch.reader.get_mut().read(&mut buf).map_err(timeout_kind)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "etcd: the watch stream closed"));
            }
            watch.chunks.push(&buf[..n])?;
        }
        watch.reader.get_ref().set_nonblocking(true)?;
        Ok(watch)
    }

    pub fn fd(&self) -> RawFd {
        self.reader.get_ref().as_raw_fd()
    }

    /// Every change that has arrived, without waiting. An error means the
    /// watch is over (the stream closed, the server cancelled it).
    pub fn changes(&mut self) -> io::Result<Vec<Change>> {
        let mut buf = [0u8; 4096];
        loop {
            match self.reader.get_mut().read(&mut buf) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "etcd: the watch stream closed")),
                Ok(n) => self.chunks.push(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        let mut changes = Vec::new();
        while let Some(v) = self.chunks.message()? {
            changes.extend(watch_changes(&v)?);
        }
        Ok(changes)
    }
}

/// The changes one watch message reports; an error if it ends the watch.
fn watch_changes(v: &Value) -> io::Result<Vec<Change>> {
    if v.get("canceled").and_then(Value::as_bool) == Some(true) {
        let why = v.get("cancel_reason").and_then(Value::as_str).unwrap_or("compacted");
        return Err(io::Error::other(format!("etcd: the watch was cancelled ({why})")));
    }
    Ok(v.get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        // PUT is the enum's zero, which proto3's JSON leaves out.
        .map(|e| if e.get("type").and_then(Value::as_str) == Some("DELETE") { Change::Delete } else { Change::Put })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_reply_says_what_etcd_said() {
        let e = answer(400, br#"{"error":"etcdserver: requested lease not found","code":5,"message":"etcdserver: requested lease not found"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("requested lease not found"), "{e}");
        let ok = answer(200, b"{\"result\":{\"TTL\":\"3\"}}\n").unwrap();
        assert_eq!(int(&ok["TTL"]), 3);
    }

    #[test]
    fn a_watch_stream_is_read_whole_whatever_the_pieces() {
        let created = r#"{"result":{"header":{"revision":"5"},"created":true}}"#;
        let deleted = r#"{"result":{"header":{"revision":"6"},"events":[{"type":"DELETE","kv":{"key":"Zm9v"}}]}}"#;
        let put = r#"{"result":{"events":[{"kv":{"key":"Zm9v","value":"MQ=="}}]}}"#;
        let mut body = Vec::new();
        for m in [created, deleted, put] {
            let line = format!("{m}\n");
            body.extend(format!("{:x}\r\n{line}\r\n", line.len()).bytes());
        }
        for piece in [1, 2, 3, 7, 64, body.len()] {
            let mut chunks = Chunks::default();
            let mut messages = Vec::new();
            for part in body.chunks(piece) {
                chunks.push(part).unwrap();
                while let Some(m) = chunks.message().unwrap() {
                    messages.push(m);
                }
            }
            assert_eq!(messages.len(), 3, "pieces of {piece}");
            assert_eq!(messages[0]["created"], true);
            assert_eq!(watch_changes(&messages[1]).unwrap(), vec![Change::Delete]);
            assert_eq!(watch_changes(&messages[2]).unwrap(), vec![Change::Put]);
        }
        let mut end = Chunks::default();
        assert!(end.push(b"0\r\n\r\n").is_err(), "the end of the stream ends the watch");
        let cancelled = serde_json::json!({"canceled": true, "cancel_reason": "compacted"});
        assert!(watch_changes(&cancelled).is_err());
    }

    #[test]
    fn addresses_are_http_urls() {
        assert_eq!(endpoint("http://127.0.0.1:2379").unwrap().0.port(), 2379);
        assert_eq!(endpoint("http://127.0.0.1:2379/").unwrap().1, "127.0.0.1:2379");
        assert!(endpoint("127.0.0.1:2379").is_err());
    }
}
