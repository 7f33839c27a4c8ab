//! A lease server the harness runs itself, so that faults can hit the
//! server too: a `redis-server` per trial on a free loopback port, without
//! persistence (`--save "" --appendonly no`), so a restart forgets every
//! lease, the classic critique of Redis locks.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::spawn::tie_to_harness;

/// How long a started server gets to answer PING.
const READY_WITHIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot start redis-server (is it installed? `apt-get install redis-server`): {0}")]
    Spawn(std::io::Error),
    #[error("cannot find a free loopback port: {0}")]
    Port(std::io::Error),
    #[error("redis-server on port {port} did not answer PING within {READY_WITHIN:?} (log: {log})")]
    NotReady { port: u16, log: PathBuf },
}

pub struct ManagedRedis {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl ManagedRedis {
    /// Start a server for one trial, its files and log in `dir`.
    pub fn start(dir: &Path) -> Result<ManagedRedis, ServerError> {
        // Let the kernel pick a free port; the small race until redis binds
        // it is acceptable on a test machine's loopback.
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(ServerError::Port)?.port();
        let mut server = ManagedRedis { port, dir: dir.to_path_buf(), child: None };
        server.spawn()?;
        Ok(server)
    }

    pub fn address(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    fn spawn(&mut self) -> Result<(), ServerError> {
        let log = self.dir.join("redis-server.log");
        let out = std::fs::File::options().create(true).append(true).open(&log).map_err(ServerError::Spawn)?;
        let err = out.try_clone().map_err(ServerError::Spawn)?;
        // Through the trampoline, like a program under test: it dies with us.
        let mut cmd = super::program::exec_program(&std::env::current_exe().map_err(ServerError::Spawn)?);
        cmd.arg("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        tie_to_harness(&mut cmd);
        let guard = super::spawn::SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let spawned = cmd.spawn();
        drop(guard);
        self.child = Some(spawned.map_err(ServerError::Spawn)?);
        self.wait_ready(&log)
    }

    fn wait_ready(&self, log: &Path) -> Result<(), ServerError> {
        let deadline = Instant::now() + READY_WITHIN;
        let client = redis::Client::open(self.address()).map_err(|e| ServerError::Spawn(std::io::Error::other(e)))?;
        while Instant::now() < deadline {
            if let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(100))
                && redis::cmd("PING").query::<String>(&mut conn).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(ServerError::NotReady { port: self.port, log: log.to_path_buf() })
    }

    pub fn signal(&self, sig: Signal) -> nix::Result<()> {
        match self.pid() {
            Some(pid) => kill(pid, sig),
            None => Err(nix::errno::Errno::ESRCH),
        }
    }

    /// End a server-pause still in force (the trial is over).
    pub fn heal(&self) {
        let _ = self.signal(Signal::SIGCONT);
    }

    /// SIGKILL and reap: every lease and counter is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill, then start again on the same port, empty.
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        self.spawn()
    }
}

impl Drop for ManagedRedis {
    fn drop(&mut self) {
        // A paused server must be continued to die promptly.
        let _ = self.signal(Signal::SIGCONT);
        self.kill();
    }
}
