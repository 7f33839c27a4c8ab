//! The harness's own TCP proxy between each worker and its lease server,
//! through which the network faults act (like Toxiproxy, without a daemon
//! or any privilege): one listening port per worker (a *link*), each
//! connection accepted there relayed to the server. Workers are handed
//! their link's address instead of the server's, so neither the built-in
//! worker nor a program under test changes.
//!
//! One thread serves every link with `epoll` (mio): a relay adds a few
//! microseconds per hop, and a thousand workers cost a thousand sockets,
//! not a thousand threads. Faults are applied by that thread and
//! acknowledged with the moment they took effect.

mod address;
mod owner;
mod relay;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use address::{AddressError, endpoint, with_endpoint};
pub use relay::LinkStats;

use crate::model::{Direction, NetParams};

/// A network fault as the relay applies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Toxic {
    /// Nothing moves either way; new connections are accepted and hang.
    Partition,
    /// Requests pass, replies are dropped; the connections that lost one
    /// are reset at heal.
    PartitionReplies,
    /// Each chunk waits `latency ± jitter` before it is passed on.
    Delay { latency: Duration, jitter: Duration, direction: Direction },
    /// Connections are reset, new ones at once.
    Reset,
}

impl Toxic {
    /// The toxic of a network action (none for `heal`).
    pub fn of(action: crate::model::Action, p: &NetParams) -> Option<Toxic> {
        use crate::model::Action;
        Some(match action {
            Action::Partition => Toxic::Partition,
            Action::PartitionReplies => Toxic::PartitionReplies,
            Action::Delay => {
                Toxic::Delay { latency: p.latency.as_std(), jitter: p.jitter.as_std(), direction: p.direction }
            }
            Action::Reset => Toxic::Reset,
            _ => return None,
        })
    }
}

enum Change {
    Apply(Toxic, f64),
    Heal,
}

struct Command {
    link: usize,
    change: Change,
    /// The moment the change took effect (monotonic ns).
    done: mpsc::SyncSender<i64>,
}

/// A listening address of the proxy, where it relays to, and which link a
/// connection accepted there belongs to (the unit a fault acts on).
#[derive(Clone, Debug)]
pub struct Door {
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    pub route: Route,
}

/// Which link a door's connection belongs to.
#[derive(Clone, Debug)]
pub enum Route {
    /// Every connection: a worker's own door to its server.
    Link(usize),
    /// By the address the connection comes from: one door before a member
    /// of a replicated service that every other member dials, each member
    /// from a loopback address of its own (Redis's `bind-source-addr`).
    BySource { sources: Vec<(IpAddr, usize)>, otherwise: usize },
    /// By the process that dialled it (/proc), for servers that dial from
    /// any address: (pid, link) pairs, filled in as the servers start.
    ByOwner { owners: Owners, otherwise: usize },
}

/// (pid, link) of each process a door knows, shared with who starts them.
pub type Owners = Arc<std::sync::Mutex<Vec<(i32, usize)>>>;

/// A running proxy: listening addresses (doors) relaying to their
/// upstream servers, their connections grouped into links that faults act
/// on. Dropping it closes every connection.
pub struct Proxy {
    addrs: Vec<SocketAddr>,
    links: usize,
    tx: Option<mpsc::Sender<Command>>,
    waker: Arc<mio::Waker>,
    thread: Option<JoinHandle<Vec<LinkStats>>>,
}

/// How long the relay thread gets to acknowledge a fault.
const ACK_WITHIN: Duration = Duration::from_secs(2);

impl Proxy {
    /// Listen on `links` free loopback ports and relay to `upstream`, a
    /// link per port. `seed` draws which connections a partial fault
    /// (`toxicity`) hits and each delayed chunk's jitter.
    pub fn start(upstream: SocketAddr, links: usize, seed: u64) -> io::Result<Proxy> {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("a socket address");
        let doors = (0..links).map(|i| Door { listen: any, upstream, route: Route::Link(i) }).collect();
        Proxy::start_doors(doors, links, seed)
    }

    /// Listen at each door (port 0: a free one) and relay what it accepts
    /// to its upstream, on `links` links.
    pub fn start_doors(doors: Vec<Door>, links: usize, seed: u64) -> io::Result<Proxy> {
        let relay = relay::Relay::new(doors, links, seed)?;
        let addrs = relay.addrs()?;
        let waker = relay.waker();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name("proxy".into()).spawn(move || relay.run(rx))?;
        Ok(Proxy { addrs, links, tx: Some(tx), waker, thread: Some(thread) })
    }

    /// Door `i`'s listening address (with `start`, link `i`'s).
    pub fn address(&self, door: usize) -> SocketAddr {
        self.addrs[door]
    }

    pub fn links(&self) -> usize {
        self.links
    }

    /// Apply a toxic to link `link`'s connections (each drawn with
    /// probability `toxicity`) and to those it accepts until `heal`.
    /// Returns when it took effect.
    pub fn apply(&self, link: usize, toxic: Toxic, toxicity: f64) -> io::Result<i64> {
        self.send(link, Change::Apply(toxic, toxicity))
    }

    /// End every toxic on link `link`.
    pub fn heal(&self, link: usize) -> io::Result<i64> {
        self.send(link, Change::Heal)
    }

    fn send(&self, link: usize, change: Change) -> io::Result<i64> {
        let gone = || io::Error::other("the proxy thread has stopped");
        let (done, ack) = mpsc::sync_channel(1);
        self.tx.as_ref().ok_or_else(gone)?.send(Command { link, change, done }).map_err(|_| gone())?;
        self.waker.wake()?;
        ack.recv_timeout(ACK_WITHIN).map_err(|_| gone())
    }

    /// Stop relaying; every connection is closed. What each link carried.
    pub fn stop(mut self) -> Vec<LinkStats> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Vec<LinkStats> {
        // A closed channel is the stop order.
        drop(self.tx.take());
        let _ = self.waker.wake();
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shut_down();
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
