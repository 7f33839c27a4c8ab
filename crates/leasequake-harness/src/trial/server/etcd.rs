//! `etcd` as a managed server: one member on loopback, its data in a
//! temporary directory of its own (kept across a restart, removed with the
//! server), its client port serving the JSON gateway the workers use.
//!
//! Heartbeat 10 ms and election timeout 100 ms: etcd's minimum lease TTL
//! is 1.5 election timeouts, rounded up to whole seconds, so these make it
//! 1 s (with etcd's defaults it is 2 s), and a lone member elects itself at
//! once.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;

use super::ServerError;
use crate::trial::contain::OwnedDir;

/// Is `etcd` on PATH?
pub(super) fn installed() -> Result<(), super::NotInstalled> {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if found { Ok(()) } else { Err(super::NotInstalled::Etcd) }
}

/// One member: its name, data directory, peer addresses (where it
/// listens, and where the others reach it: the same for a lone member, the
/// harness's proxy in a cluster) and the cluster it starts in.
pub(super) struct Member {
    dir: OwnedDir,
    name: String,
    peer: SocketAddr,
    advertised: SocketAddr,
    cluster: String,
}

impl Member {
    /// A lone member on 127.0.0.1.
    pub(super) fn new() -> Result<Member, ServerError> {
        let peer = super::port::free_port(Ipv4Addr::LOCALHOST)?;
        Member::of_cluster("leasequake", peer, peer, &format!("leasequake=http://{peer}"))
    }

    /// Member `name` of the cluster `cluster` (`name=http://addr,…`),
    /// listening for its peers at `peer`, reached by them at `advertised`.
    pub(super) fn of_cluster(
        name: &str,
        peer: SocketAddr,
        advertised: SocketAddr,
        cluster: &str,
    ) -> Result<Member, ServerError> {
        let dir = tempfile::Builder::new()
            .prefix("leasequake-etcd-")
            .tempdir()
            .map_err(|e| ServerError::Setup(format!("cannot make a directory for etcd: {e}")))?;
        let dir = OwnedDir::new(dir);
        Ok(Member { dir, name: name.to_string(), peer, advertised, cluster: cluster.to_string() })
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The member serving clients on `ip:port`.
    pub(super) fn command(&self, ip: Ipv4Addr, port: u16) -> Command {
        let client = format!("http://{ip}:{port}");
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", &self.name])
            .arg("--data-dir")
            .arg(self.data())
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &format!("http://{}", self.peer)])
            .args(["--initial-advertise-peer-urls", &format!("http://{}", self.advertised)])
            .args(["--initial-cluster", &self.cluster])
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            // Its log is a warning or an error, not every request.
            .args(["--logger", "zap", "--log-level", "warn"])
            .current_dir(self.dir.path());
        cmd
    }
}

/// Does it answer a read?
pub(super) fn answers(address: &str) -> bool {
    crate::substrate::etcd::preflight(address, None).is_ok()
}
