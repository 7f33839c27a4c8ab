//! `redis-server` as a managed server: no persistence, so that a restart
//! forgets every lease.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The server on `port`, its working directory `dir`.
pub(super) fn command(port: u16, dir: &Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        // A thousand workers reconnecting at once must not be refused.
        .args(["--maxclients", "20000", "--tcp-backlog", "4096"])
        // Push watchers subscribe to the lease key's deletions and expiries.
        .args(["--notify-keyspace-events", "Kgx"])
        .arg("--dir")
        .arg(dir);
    cmd
}

/// Does it answer PING?
pub(super) fn answers(address: &str) -> bool {
    ::redis::Client::open(address)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(100)))
        .and_then(|mut conn| ::redis::cmd("PING").query::<String>(&mut conn))
        .is_ok()
}
