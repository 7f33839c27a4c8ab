//! `etcd` as a managed server: one member on loopback, its data in a
//! temporary directory of its own (kept across a restart, removed with the
//! server), its client port serving the JSON gateway the workers use.
//!
//! Heartbeat 10 ms and election timeout 100 ms: etcd's minimum lease TTL
//! is 1.5 election timeouts, rounded up to whole seconds, so these make it
//! 1 s (with etcd's defaults it is 2 s), and a lone member elects itself at
//! once.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use super::ServerError;

/// Is `etcd` on PATH?
pub(super) fn installed() -> Result<(), String> {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if found { Ok(()) } else { Err("a managed etcd needs `etcd` on PATH (`apt-get install etcd-server`)".into()) }
}

/// One member's data directory and peer port.
pub(super) struct Member {
    dir: tempfile::TempDir,
    peer_port: u16,
}

impl Member {
    pub(super) fn new() -> Result<Member, ServerError> {
        let dir = tempfile::Builder::new()
            .prefix("leasequake-etcd-")
            .tempdir()
            .map_err(|e| ServerError::Setup(format!("cannot make a directory for etcd: {e}")))?;
        let peer_port =
            TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(ServerError::Port)?.port();
        Ok(Member { dir, peer_port })
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The member serving clients on `port`.
    pub(super) fn command(&self, port: u16) -> Command {
        let client = format!("http://127.0.0.1:{port}");
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", "leasequake"])
            .arg("--data-dir")
            .arg(self.data())
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("leasequake={peer}")])
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
