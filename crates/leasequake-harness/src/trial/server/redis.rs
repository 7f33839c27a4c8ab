//! `redis-server` as a managed server: no persistence, so that a restart
//! forgets every lease.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A `redis-server`'s part: a server alone, a member of a replicated
/// service (announcing the address the others reach it at, through the
/// harness's proxy), or a Sentinel (its config file, which it rewrites).
pub(super) enum Setup {
    Single,
    /// `clock`: the environment that preloads the harness's clock shim,
    /// for a member whose wall clock a `skew` moves.
    Member {
        announce: SocketAddr,
        replica_of: Option<SocketAddr>,
        clock: Vec<(&'static str, OsString)>,
    },
    Sentinel {
        config: PathBuf,
    },
}

impl Setup {
    /// The server on `ip:port`, its working directory `dir`.
    pub(super) fn command(&self, ip: Ipv4Addr, port: u16, dir: &Path) -> Command {
        let mut cmd = Command::new("redis-server");
        if let Setup::Sentinel { config } = self {
            cmd.arg(config).arg("--sentinel");
        }
        cmd.args(["--port", &port.to_string(), "--bind", &ip.to_string()]);
        if let Setup::Single = self {
            cmd.args(["--save", "", "--appendonly", "no"])
                // A thousand workers reconnecting at once must not be refused.
                .args(["--maxclients", "20000", "--tcp-backlog", "4096"])
                // Push watchers subscribe to the lease key's deletions and expiries.
                .args(["--notify-keyspace-events", "Kgx"]);
        } else {
            // Each member dials the others from its own address, so that
            // the proxy can tell whose connection it is; such an address is
            // not "loopback" to Redis's protected mode.
            cmd.args(["--bind-source-addr", &ip.to_string(), "--protected-mode", "no"]);
        }
        if let Setup::Member { announce, replica_of, clock } = self {
            cmd.envs(clock.iter().map(|(k, v)| (k, v)));
            cmd.args(["--save", "", "--appendonly", "no"])
                // A replica's first sync at once, not after the default 5 s
                // wait for more replicas to share it.
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--replica-announce-ip", &announce.ip().to_string()])
                .args(["--replica-announce-port", &announce.port().to_string()]);
            if let Some(primary) = replica_of {
                cmd.args(["--replicaof", &primary.ip().to_string(), &primary.port().to_string()]);
            }
        }
        cmd.arg("--dir").arg(dir);
        cmd
    }
}

/// Does it answer PING?
pub(super) fn answers(address: &str) -> bool {
    ::redis::Client::open(address)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(100)))
        .and_then(|mut conn| ::redis::cmd("PING").query::<String>(&mut conn))
        .is_ok()
}
