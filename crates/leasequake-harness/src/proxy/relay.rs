//! The proxy's event loop: every link's listener and every relayed
//! connection on one `mio::Poll`, edge-triggered. Each socket remembers
//! whether it may still have bytes to read or room to write (a readiness
//! is consumed only by `WouldBlock`), so a direction held back by a fault
//! picks up where it stopped when the fault ends.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::mpsc::{self, TryRecvError};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Change, Command, Door, Route, Toxic};
use crate::model::clock::mono_ns;

const WAKER: Token = Token(usize::MAX);
/// Tokens below are listeners (one per door); from here on, connections:
/// `CONN + 2k` the worker's side of connection k, `CONN + 2k + 1` the server's.
const CONN: usize = 1 << 24;
/// Bytes held per direction before the relay stops reading that side
/// (a delayed or stalled direction must not buffer without bound).
const HOLD: usize = 1 << 20;
/// Reply-loss moments kept per link.
const LOSSES_KEPT: usize = 10_000;

/// What one link carried, for the trial's record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkStats {
    pub connections: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Reply bytes dropped under partition-replies.
    pub replies_lost_bytes: u64,
    /// When each lost reply came from the server (monotonic ns): dropped
    /// under partition-replies, or held (delayed) for a worker that had
    /// closed its connection.
    pub reply_losses: Vec<i64>,
    /// Connections reset (by `reset`, or at heal after lost replies).
    pub resets: u64,
}

/// A listening address, and where what it accepts goes.
struct Listener {
    listener: TcpListener,
    upstream: SocketAddr,
    route: Route,
}

struct Link {
    /// Toxics in force, with their toxicity, for connections accepted now.
    toxics: Vec<(Toxic, f64)>,
    stats: LinkStats,
}

/// One direction of a connection: chunks waiting for their moment.
#[derive(Default)]
struct Pipe {
    /// (due, arrived, bytes).
    queue: VecDeque<(i64, i64, Vec<u8>)>,
    held: usize,
    /// The latest due time given, so delayed chunks keep their order.
    last_due: i64,
    /// The sending side closed its half.
    eof: bool,
    /// That close was passed on.
    shut: bool,
    delay: Option<(Duration, Duration)>,
}

impl Pipe {
    fn push(&mut self, now: i64, bytes: Vec<u8>, rng: &mut ChaCha8Rng) {
        let due = match self.delay {
            None => now,
            Some((latency, jitter)) => {
                let (l, j) = (latency.as_nanos() as i64, jitter.as_nanos() as i64);
                now + if j > 0 { (l + rng.random_range(-j..=j)).max(0) } else { l }
            }
        };
        // A byte stream keeps its order, whatever each chunk drew.
        self.last_due = self.last_due.max(due);
        self.held += bytes.len();
        self.queue.push_back((self.last_due, now, bytes));
    }

    fn next_due(&self) -> Option<i64> {
        self.queue.front().map(|(t, _, _)| *t)
    }
}

struct Side {
    stream: TcpStream,
    readable: bool,
    writable: bool,
}

impl Side {
    fn new(stream: TcpStream) -> Side {
        // Small requests and replies: never wait to coalesce them.
        let _ = stream.set_nodelay(true);
        Side { stream, readable: false, writable: false }
    }
}

struct Conn {
    link: usize,
    upstream: SocketAddr,
    client: Side,
    /// None while a partition defers the upstream connection.
    server: Option<Side>,
    /// The upstream connect has completed.
    connected: bool,
    up: Pipe,
    down: Pipe,
    partitioned: bool,
    lose_replies: bool,
    /// A reply was dropped: the stream is beyond repair, reset at heal.
    lost: bool,
}

enum Outcome {
    Keep,
    Close,
    Reset,
}

pub(super) struct Relay {
    poll: Poll,
    waker: Arc<Waker>,
    doors: Vec<Listener>,
    links: Vec<Link>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    rng: ChaCha8Rng,
}

impl Relay {
    pub(super) fn new(doors: Vec<Door>, links: usize, seed: u64) -> io::Result<Relay> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let mut listeners = Vec::with_capacity(doors.len());
        for (i, door) in doors.into_iter().enumerate() {
            let mut listener = TcpListener::bind(door.listen)?;
            poll.registry().register(&mut listener, Token(i), Interest::READABLE)?;
            listeners.push(Listener { listener, upstream: door.upstream, route: door.route });
        }
        let all = (0..links).map(|_| Link { toxics: Vec::new(), stats: LinkStats::default() }).collect();
        Ok(Relay {
            poll,
            waker,
            doors: listeners,
            links: all,
            conns: Vec::new(),
            free: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }

    pub(super) fn addrs(&self) -> io::Result<Vec<SocketAddr>> {
        self.doors.iter().map(|d| d.listener.local_addr()).collect()
    }

    pub(super) fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Relay until the command channel closes; return what each link carried.
    pub(super) fn run(mut self, rx: mpsc::Receiver<Command>) -> Vec<LinkStats> {
        let mut events = Events::with_capacity(1024);
        loop {
            let timeout = self.next_due().map(|due| Duration::from_nanos((due - mono_ns()).max(0) as u64));
            if let Err(e) = self.poll.poll(&mut events, timeout)
                && e.kind() != io::ErrorKind::Interrupted
            {
                break;
            }
            let mut dirty = Vec::new();
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    Token(i) if i < CONN => self.accept(i),
                    Token(t) => {
                        let (k, server) = ((t - CONN) / 2, (t - CONN) % 2 == 1);
                        let Some(Some(c)) = self.conns.get_mut(k) else { continue };
                        let side = if server { c.server.as_mut() } else { Some(&mut c.client) };
                        if let Some(side) = side {
                            side.readable |= ev.is_readable() || ev.is_read_closed() || ev.is_error();
                            side.writable |= ev.is_writable() || ev.is_error();
                        }
                        if server && !c.connected && (ev.is_writable() || ev.is_error()) {
                            c.connected = true;
                            let failed = c.server.as_ref().is_some_and(|s| {
                                !matches!(s.stream.take_error(), Ok(None)) || s.stream.peer_addr().is_err()
                            });
                            if failed {
                                // The server refused: so does the proxy.
                                self.finish(k, Outcome::Reset);
                                continue;
                            }
                        }
                        dirty.push(k);
                    }
                }
            }
            loop {
                match rx.try_recv() {
                    Ok(cmd) => self.command(cmd),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.links.into_iter().map(|l| l.stats).collect(),
                }
            }
            let now = mono_ns();
            let due = (0..self.conns.len()).filter(|&k| {
                self.conns[k].as_ref().is_some_and(|c| {
                    c.up.next_due().is_some_and(|t| t <= now) || c.down.next_due().is_some_and(|t| t <= now)
                })
            });
            dirty.extend(due.collect::<Vec<_>>());
            dirty.sort_unstable();
            dirty.dedup();
            for k in dirty {
                self.pump(k);
            }
        }
        self.links.into_iter().map(|l| l.stats).collect()
    }

    /// The earliest moment a held chunk is due.
    fn next_due(&self) -> Option<i64> {
        self.conns.iter().flatten().flat_map(|c| [c.up.next_due(), c.down.next_due()]).flatten().min()
    }

    fn accept(&mut self, door: usize) {
        loop {
            let (stream, link) = match self.doors[door].listener.accept() {
                Ok((s, from)) => (s, route(&self.doors[door], from)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors, say: the worker's connect stays in
                // the backlog and is retried at the next readiness.
                Err(_) => return,
            };
            self.links[link].stats.connections += 1;
            let mut conn = Conn {
                link,
                upstream: self.doors[door].upstream,
                client: Side::new(stream),
                server: None,
                connected: false,
                up: Pipe::default(),
                down: Pipe::default(),
                partitioned: false,
                lose_replies: false,
                lost: false,
            };
            let toxics = self.links[link].toxics.clone();
            let mut reset = false;
            for (toxic, toxicity) in toxics {
                if self.rng.random_bool(toxicity.clamp(0.0, 1.0)) {
                    reset |= afflict(&mut conn, toxic);
                }
            }
            if reset {
                self.links[link].stats.resets += 1;
                reset_stream(&conn.client.stream);
                continue;
            }
            let k = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if self.poll.registry().register(&mut conn.client.stream, Token(CONN + 2 * k), rw()).is_err() {
                self.free.push(k);
                continue;
            }
            self.conns[k] = Some(conn);
            if !self.conns[k].as_ref().expect("just set").partitioned {
                self.connect(k);
            }
        }
    }

    /// Open connection k's upstream half.
    fn connect(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else { return };
        match TcpStream::connect(c.upstream) {
            Ok(mut s) => {
                if self.poll.registry().register(&mut s, Token(CONN + 2 * k + 1), rw()).is_err() {
                    return self.finish(k, Outcome::Reset);
                }
                c.server = Some(Side::new(s));
            }
            Err(_) => self.finish(k, Outcome::Reset),
        }
    }

    fn command(&mut self, cmd: Command) {
        let Command { link, change, done } = cmd;
        if link < self.links.len() {
            let ks: Vec<usize> =
                (0..self.conns.len()).filter(|&k| self.conns[k].as_ref().is_some_and(|c| c.link == link)).collect();
            match change {
                Change::Apply(toxic, toxicity) => {
                    let l = &mut self.links[link];
                    l.toxics.retain(|(t, _)| std::mem::discriminant(t) != std::mem::discriminant(&toxic));
                    l.toxics.push((toxic, toxicity));
                    for k in ks {
                        if !self.rng.random_bool(toxicity.clamp(0.0, 1.0)) {
                            continue;
                        }
                        let c = self.conns[k].as_mut().expect("listed above");
                        if afflict(c, toxic) {
                            self.finish(k, Outcome::Reset);
                        }
                    }
                }
                Change::Heal => {
                    self.links[link].toxics.clear();
                    for k in ks {
                        let c = self.conns[k].as_mut().expect("listed above");
                        let (lost, deferred) = (c.lost, c.server.is_none());
                        c.partitioned = false;
                        c.lose_replies = false;
                        c.up.delay = None;
                        c.down.delay = None;
                        if lost {
                            self.finish(k, Outcome::Reset);
                        } else if deferred {
                            self.connect(k);
                        }
                        self.pump(k);
                    }
                }
            }
        }
        let _ = done.send(mono_ns());
    }

    /// Move what may move on connection k.
    fn pump(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else { return };
        let stats = &mut self.links[c.link].stats;
        let outcome = step(c, stats, &mut self.rng);
        match outcome {
            Outcome::Keep => {}
            other => self.finish(k, other),
        }
    }

    fn finish(&mut self, k: usize, how: Outcome) {
        let Some(mut c) = self.conns[k].take() else { return };
        // Replies still held (delayed) will never be delivered.
        lost(&mut self.links[c.link].stats, c.down.queue.drain(..).map(|(_, arrived, _)| arrived));
        if matches!(how, Outcome::Reset) {
            self.links[c.link].stats.resets += 1;
            reset_stream(&c.client.stream);
        }
        let _ = self.poll.registry().deregister(&mut c.client.stream);
        if let Some(s) = c.server.as_mut() {
            let _ = self.poll.registry().deregister(&mut s.stream);
        }
        self.free.push(k);
    }
}

/// The link a connection from `from` to `door` belongs to.
fn route(door: &Listener, from: SocketAddr) -> usize {
    match &door.route {
        Route::Link(link) => *link,
        Route::BySource { sources, otherwise } => {
            sources.iter().find(|(ip, _)| *ip == from.ip()).map_or(*otherwise, |(_, link)| *link)
        }
        Route::ByOwner { owners, otherwise } => {
            let owners = owners.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let here = door.listener.local_addr().ok();
            here.and_then(|d| super::owner::owner(from, d, &owners)).unwrap_or(*otherwise)
        }
    }
}

fn rw() -> Interest {
    Interest::READABLE | Interest::WRITABLE
}

/// Put a toxic on a connection; true if it is to be reset now.
fn afflict(c: &mut Conn, toxic: Toxic) -> bool {
    match toxic {
        Toxic::Partition => c.partitioned = true,
        Toxic::PartitionReplies => c.lose_replies = true,
        Toxic::Delay { latency, jitter, direction } => {
            if direction.requests() {
                c.up.delay = Some((latency, jitter));
            }
            if direction.replies() {
                c.down.delay = Some((latency, jitter));
            }
        }
        Toxic::Reset => return true,
    }
    false
}

/// Close with an RST instead of a FIN (SO_LINGER 0): the peer's next read
/// fails with "connection reset".
fn reset_stream(s: &TcpStream) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Read what `from` has (while there is room), into `pipe` or, when
/// `drop`, nowhere. Returns bytes read, or None on a broken socket.
fn fill(from: &mut Side, pipe: &mut Pipe, drop: bool, rng: &mut ChaCha8Rng) -> Option<(u64, bool)> {
    let mut buf = [0u8; 16 * 1024];
    let (mut total, mut dropped) = (0u64, false);
    while from.readable && !pipe.eof && pipe.held < HOLD {
        match from.stream.read(&mut buf) {
            Ok(0) => pipe.eof = true,
            Ok(n) => {
                total += n as u64;
                if drop {
                    dropped = true;
                } else {
                    pipe.push(mono_ns(), buf[..n].to_vec(), rng);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => from.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some((total, dropped))
}

/// Write the chunks of `pipe` that are due to `to`; pass a close on once
/// everything before it went. None on a broken socket.
fn drain(to: &mut Side, pipe: &mut Pipe) -> Option<()> {
    let now = mono_ns();
    while to.writable {
        let Some((due, _, chunk)) = pipe.queue.front_mut() else { break };
        if *due > now {
            break;
        }
        match to.stream.write(chunk) {
            Ok(n) if n == chunk.len() => {
                pipe.held -= n;
                pipe.queue.pop_front();
            }
            Ok(n) => {
                pipe.held -= n;
                chunk.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    if pipe.eof && pipe.queue.is_empty() && !pipe.shut {
        pipe.shut = true;
        let _ = to.stream.shutdown(Shutdown::Write);
    }
    Some(())
}

/// Record replies that will never reach their worker, by when each came
/// from the server.
fn lost(stats: &mut LinkStats, arrivals: impl Iterator<Item = i64>) {
    for t in arrivals {
        if stats.reply_losses.len() < LOSSES_KEPT {
            stats.reply_losses.push(t);
        }
    }
}

/// One pass over a connection under its toxics.
fn step(c: &mut Conn, stats: &mut LinkStats, rng: &mut ChaCha8Rng) -> Outcome {
    if c.partitioned {
        // Silent: nothing is read, written or closed until heal.
        return Outcome::Keep;
    }
    let Some((n, _)) = fill(&mut c.client, &mut c.up, false, rng) else { return Outcome::Close };
    stats.bytes_up += n;
    let Some(server) = c.server.as_mut() else { return Outcome::Keep };
    if !c.connected {
        return Outcome::Keep;
    }
    // A broken server side is passed on as such: the worker sees a reset,
    // as it would without the proxy.
    let Some((n, dropped)) = fill(server, &mut c.down, c.lose_replies, rng) else { return Outcome::Reset };
    if dropped {
        stats.replies_lost_bytes += n;
        lost(stats, [mono_ns()].into_iter());
        c.lost = true;
    } else {
        stats.bytes_down += n;
    }
    if drain(server, &mut c.up).is_none() {
        return Outcome::Reset;
    }
    // A worker that closed its side (after a timeout) reads no more: a
    // reply still on its way to it is lost.
    if c.up.eof {
        lost(stats, c.down.queue.drain(..).map(|(_, arrived, _)| arrived));
        c.down.held = 0;
    }
    // Under lost replies not even the server's close comes back.
    if !c.lose_replies && drain(&mut c.client, &mut c.down).is_none() {
        return Outcome::Close;
    }
    if c.up.shut && c.down.shut {
        return Outcome::Close;
    }
    Outcome::Keep
}
