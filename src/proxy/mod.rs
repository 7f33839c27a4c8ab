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
mod relay;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use address::{endpoint, with_endpoint};
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

/// A running proxy: `links` listening ports on 127.0.0.1, all relaying to
/// one upstream server. Dropping it closes every connection.
pub struct Proxy {
    addrs: Vec<SocketAddr>,
    tx: Option<mpsc::Sender<Command>>,
    waker: Arc<mio::Waker>,
    thread: Option<JoinHandle<Vec<LinkStats>>>,
}

/// How long the relay thread gets to acknowledge a fault.
const ACK_WITHIN: Duration = Duration::from_secs(2);

impl Proxy {
    /// Listen on `links` free loopback ports and relay to `upstream`.
    /// `seed` draws which connections a partial fault (`toxicity`) hits and
    /// each delayed chunk's jitter.
    pub fn start(upstream: SocketAddr, links: usize, seed: u64) -> io::Result<Proxy> {
        let relay = relay::Relay::new(upstream, links, seed)?;
        let addrs = relay.addrs()?;
        let waker = relay.waker();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name("proxy".into()).spawn(move || relay.run(rx))?;
        Ok(Proxy { addrs, tx: Some(tx), waker, thread: Some(thread) })
    }

    /// Link `i`'s listening address.
    pub fn address(&self, link: usize) -> SocketAddr {
        self.addrs[link]
    }

    pub fn links(&self) -> usize {
        self.addrs.len()
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
