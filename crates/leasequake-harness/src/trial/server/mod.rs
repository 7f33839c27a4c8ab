//! Lease servers the harness runs itself, so that faults can hit the server
//! too and so that nothing but the server's binaries must be installed: a
//! `redis-server` without persistence (`--save "" --appendonly no`: a
//! restart forgets every lease, the classic critique of Redis locks), or a
//! PostgreSQL cluster made with `initdb` in a temporary directory (a
//! restart is a crash and its recovery: committed lease rows survive, the
//! sessions and their advisory locks do not), or a one-member `etcd` (a
//! restart keeps its leases, which it then extends by a whole TTL).
//!
//! A server lives for a run (`pool::Servers`), every trial with its own
//! key, unless the experiment's faults pause, kill or restart it: then each
//! trial has its own.

mod etcd;
mod pool;
mod port;
mod postgres;
mod redis;
mod replicated;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub use pool::Servers;
pub use postgres::PgInstall;
pub use replicated::ReplicatedService;

use super::contain::{self, TrialGroup};
use crate::model::Server;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot start {what} (is it installed? `apt-get install {package}`): {source}")]
    Spawn { what: &'static str, package: &'static str, source: std::io::Error },
    #[error("cannot find a free loopback port: {0}")]
    Port(std::io::Error),
    #[error("{what} found its port {port} taken by another process (log: {})", log.display())]
    PortTaken { what: &'static str, port: u16, log: PathBuf },
    #[error("{what} on port {port} did not answer within {within:?} (log: {})", log.display())]
    NotReady { what: &'static str, port: u16, within: Duration, log: PathBuf },
    #[error("{0}")]
    Setup(String),
}

/// What pausing, continuing or restarting a managed server, or moving a
/// member's clock, can fail with; its text is the fault event's `error`.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot freeze the server's cgroup: {0}")]
    Freeze(std::io::Error),
    #[error("cannot thaw the server's cgroup: {0}")]
    Thaw(std::io::Error),
    #[error("the server is not running")]
    NotRunning,
    #[error("{0}")]
    Signal(nix::errno::Errno),
    #[error("member {0}'s clock is not the harness's to move")]
    NoClock(usize),
    #[error("cannot move member {member}'s clock: {source}")]
    Clock { member: usize, source: std::io::Error },
    #[error("{0}")]
    Restart(#[from] ServerError),
}

/// A managed server whose binaries are missing, and the package that has
/// them.
#[derive(Debug, thiserror::Error)]
pub enum NotInstalled {
    #[error("a managed Redis needs `redis-server` on PATH (`apt-get install redis-server`)")]
    Redis,
    #[error("a managed etcd needs `etcd` on PATH (`apt-get install etcd-server`)")]
    Etcd,
    #[error("{0}")]
    Postgres(ServerError),
}

/// Are the binaries of a managed `server` installed? The error names the
/// package.
pub fn installed(server: Server) -> Result<(), NotInstalled> {
    match server {
        Server::Redis => {
            let found = Command::new("redis-server")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|st| st.success());
            if found { Ok(()) } else { Err(NotInstalled::Redis) }
        }
        Server::Postgres => postgres::find_binaries().map(drop).map_err(NotInstalled::Postgres),
        Server::Etcd => etcd::installed(),
    }
}

/// How many times a server is started, each on a port of its own, when
/// another process takes the port before it binds it (`port`).
const STARTS: usize = 3;

/// One running server: its process (for PostgreSQL the postmaster, whose
/// children are found through /proc), its port, where it logs.
pub struct ManagedServer {
    /// Its loopback address (127.0.0.1, or one of its own for a member of
    /// a replicated service).
    ip: Ipv4Addr,
    port: u16,
    log: PathBuf,
    /// What the server keeps between its starts.
    data: Data,
    child: Option<Child>,
    /// How long its log was when it was last launched: what it said
    /// since is what that start said.
    log_from: u64,
    /// Its own cgroup where the harness has them: every process of the
    /// server in it, whatever sessions they make, frozen and killed whole,
    /// and by the guard should the harness die.
    group: TrialGroup,
}

/// What a server keeps between its starts: Redis its part in a replicated
/// service, if it has one; PostgreSQL its cluster (binaries, data
/// directory, user); etcd its data directory and peer port.
enum Data {
    Redis(redis::Setup),
    Postgres(postgres::Cluster),
    Etcd(etcd::Member),
}

impl ManagedServer {
    /// Start `server` on a free loopback port, logging to `log`, again
    /// on another should another process take it first. A PostgreSQL
    /// cluster is copied from `pg`'s template.
    fn start(server: Server, log: &Path, pg: Option<&PgInstall>, connections: usize) -> Result<Self, ServerError> {
        let data = match (server, pg) {
            (Server::Postgres, Some(install)) => Data::Postgres(install.cluster(connections)?),
            (Server::Postgres, None) => return Err(ServerError::Setup("no PostgreSQL installation".into())),
            (Server::Etcd, _) => Data::Etcd(etcd::Member::new()?),
            (Server::Redis, _) => Data::Redis(redis::Setup::Single),
        };
        let group = TrialGroup::for_server();
        let ip = Ipv4Addr::LOCALHOST;
        let mut s = ManagedServer { ip, port: 0, log: log.to_path_buf(), data, child: None, log_from: 0, group };
        for start in 1..=STARTS {
            s.port = port::free_port(ip)?.port();
            match s.spawn() {
                Err(ServerError::PortTaken { .. }) if start < STARTS => {
                    s.kill();
                    // etcd's peer port may have been the one taken.
                    if let Data::Etcd(_) = s.data {
                        s.data = Data::Etcd(etcd::Member::new()?);
                    }
                }
                done => return done.map(|()| s),
            }
        }
        unreachable!("the last start returns")
    }

    /// Launch an etcd cluster's `member` serving clients on `ip:port`
    /// (it answers once a quorum of its cluster runs: `wait_ready`).
    fn launch_etcd(member: etcd::Member, ip: Ipv4Addr, port: u16, log: &Path) -> Result<Self, ServerError> {
        let group = TrialGroup::for_server();
        let data = Data::Etcd(member);
        let mut s = ManagedServer { ip, port, log: log.to_path_buf(), data, child: None, log_from: 0, group };
        s.launch()?;
        Ok(s)
    }

    /// Start a `redis-server` in the part `setup` on `ip:port`.
    fn start_redis(setup: redis::Setup, ip: Ipv4Addr, port: u16, log: &Path) -> Result<Self, ServerError> {
        let group = TrialGroup::for_server();
        let data = Data::Redis(setup);
        let mut s = ManagedServer { ip, port, log: log.to_path_buf(), data, child: None, log_from: 0, group };
        s.spawn()?;
        Ok(s)
    }

    fn server(&self) -> Server {
        match self.data {
            Data::Redis(_) => Server::Redis,
            Data::Postgres(_) => Server::Postgres,
            Data::Etcd(_) => Server::Etcd,
        }
    }

    pub fn address(&self) -> String {
        match self.server() {
            Server::Redis => format!("redis://{}:{}/", self.ip, self.port),
            Server::Postgres => format!("postgres://postgres@{}:{}/postgres", self.ip, self.port),
            Server::Etcd => format!("http://{}:{}", self.ip, self.port),
        }
    }

    pub fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    fn what(&self) -> &'static str {
        match self.server() {
            Server::Redis => "redis-server",
            Server::Postgres => "postgres",
            Server::Etcd => "etcd",
        }
    }

    fn spawn_error(&self, source: std::io::Error) -> ServerError {
        let package = match self.server() {
            Server::Redis => "redis-server",
            Server::Postgres => "postgresql",
            Server::Etcd => "etcd-server",
        };
        ServerError::Spawn { what: self.what(), package, source }
    }

    fn spawn(&mut self) -> Result<(), ServerError> {
        self.launch()?;
        self.wait_ready()
    }

    /// Start the process, without waiting for it to answer (the members
    /// of an etcd cluster answer only once a quorum of them runs).
    fn launch(&mut self) -> Result<(), ServerError> {
        let out =
            std::fs::File::options().create(true).append(true).open(&self.log).map_err(|e| self.spawn_error(e))?;
        let err = out.try_clone().map_err(|e| self.spawn_error(e))?;
        self.log_from = out.metadata().map_or(0, |m| m.len());
        let mut cmd = match &self.data {
            Data::Postgres(cluster) => cluster.command(self.port),
            Data::Etcd(member) => member.command(self.ip, self.port),
            Data::Redis(setup) => setup.command(self.ip, self.port, self.log.parent().unwrap_or(Path::new("."))),
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::from(out)).stderr(Stdio::from(err));
        let user = match &self.data {
            Data::Postgres(cluster) => cluster.user(),
            _ => None,
        };
        die_with_this_thread(&mut cmd, self.group.cgroup(), user).map_err(|e| self.spawn_error(e))?;
        let guard = super::spawn::SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let spawned = cmd.spawn();
        drop(guard);
        self.child = Some(spawned.map_err(|e| self.spawn_error(e))?);
        Ok(())
    }

    fn wait_ready(&mut self) -> Result<(), ServerError> {
        // PostgreSQL may first replay its log after a restart (a crash).
        let within = match self.server() {
            Server::Redis => Duration::from_secs(5),
            Server::Postgres | Server::Etcd => Duration::from_secs(30),
        };
        let deadline = Instant::now() + within;
        let address = self.address();
        while Instant::now() < deadline {
            if let Some(exit) = self.exited() {
                return Err(exit);
            }
            let answered = match self.server() {
                Server::Redis => redis::answers(&address),
                Server::Postgres => crate::substrate::postgres::ensure_table(&address).is_ok(),
                Server::Etcd => etcd::answers(&address),
            };
            // Its own answer, not that of a server that took the port first.
            if answered && self.pid().is_some_and(|pid| port::listens_on(pid.as_raw(), self.port)) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(ServerError::NotReady { what: self.what(), port: self.port, within, log: self.log.clone() })
    }

    /// Why the server's process is gone, if it is: the port taken (it
    /// says so in its log), or another exit, quoted from its log.
    fn exited(&mut self) -> Option<ServerError> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        let said = self.said_at_start();
        if port::says_port_taken(&said) {
            return Some(ServerError::PortTaken { what: self.what(), port: self.port, log: self.log.clone() });
        }
        let last = said.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("(its log is empty)");
        Some(ServerError::Setup(format!(
            "{} exited at start-up ({status}), its log's last line: {last} (see {})",
            self.what(),
            self.log.display()
        )))
    }

    /// What the server's log says since its last launch (its last 64 KiB).
    fn said_at_start(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        const TAIL: u64 = 64 * 1024;
        let Ok(mut file) = std::fs::File::open(&self.log) else { return String::new() };
        let len = file.metadata().map_or(0, |m| m.len());
        let from = self.log_from.max(len.saturating_sub(TAIL));
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(from)).is_err() || file.take(TAIL).read_to_end(&mut bytes).is_err() {
            return String::new();
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The server's processes: the one we spawned and, for PostgreSQL, the
    /// postmaster's children (each backend is a session leader of its own,
    /// so no process group reaches them all).
    fn processes(&self) -> Vec<Pid> {
        let Some(pid) = self.pid() else { return Vec::new() };
        let mut all = vec![pid];
        if matches!(self.data, Data::Postgres(_)) {
            all.extend(children_of(pid));
        }
        all
    }

    /// SIGSTOP every process of the server (the parent first, so that it
    /// starts no new one while its children are being stopped).
    /// A pause that fails is undone: no server is left stopped that no
    /// resume is scheduled for.
    pub fn pause(&self) -> Result<(), ControlError> {
        if let Some(frozen) = self.group.freeze(true) {
            return frozen.map_err(|e| {
                let _ = self.group.freeze(false);
                ControlError::Freeze(e)
            });
        }
        let Some(parent) = self.pid() else { return Err(ControlError::NotRunning) };
        // The guard is told of each before it is stopped: a stopped process
        // never notices the harness's death, so the guard must kill it.
        contain::stopped(parent.as_raw());
        kill(parent, Signal::SIGSTOP).map_err(ControlError::Signal)?;
        // Listed once the parent is stopped: it forks no new child now. A
        // child that exits meanwhile (ESRCH) needs no pause.
        for p in children_of(parent) {
            contain::stopped(p.as_raw());
            if let Err(e) = kill(p, Signal::SIGSTOP)
                && e != nix::errno::Errno::ESRCH
            {
                let _ = self.resume();
                return Err(ControlError::Signal(e));
            }
        }
        Ok(())
    }

    /// SIGCONT every process of the server (the children first).
    pub fn resume(&self) -> Result<(), ControlError> {
        if let Some(thawed) = self.group.freeze(false) {
            return thawed.map_err(ControlError::Thaw);
        }
        // A server that is not running (killed) has nothing to resume.
        let procs = self.processes();
        let mut result = Ok(());
        for p in procs.into_iter().rev() {
            if let Err(e) = kill(p, Signal::SIGCONT)
                && e != nix::errno::Errno::ESRCH
            {
                result = Err(ControlError::Signal(e));
            } else {
                contain::continued(p.as_raw());
            }
        }
        result
    }

    /// SIGKILL every process of the server and wait for them: every Redis
    /// lease is gone; PostgreSQL loses its sessions and recovers its rows
    /// at the next start.
    pub fn kill(&mut self) {
        if self.group.kill_and_wait().is_some() {
            // A server killed while frozen: the next start must not join a
            // frozen cgroup.
            let _ = self.group.freeze(false);
        } else {
            let procs = self.processes();
            for p in &procs {
                let _ = kill(*p, Signal::SIGKILL);
                contain::continued(p.as_raw());
            }
            // A new postmaster refuses a data directory whose shared memory
            // an old backend still holds: wait for the children to go.
            let deadline = Instant::now() + Duration::from_secs(10);
            while procs.iter().skip(1).any(|p| alive(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same port (and data) after a kill.
    pub fn start_again(&mut self) -> Result<(), ServerError> {
        self.spawn()
    }
}

impl Drop for ManagedServer {
    fn drop(&mut self) {
        // A paused server must be continued to die promptly.
        let _ = self.resume();
        self.kill();
    }
}

/// The child joins `cgroup` (if any) before it execs, then becomes `user`
/// (uid, gid; the order matters: only root may join a root's cgroup), and
/// dies with the thread that spawned it, even when the harness is killed with SIGKILL
/// (PR_SET_PDEATHSIG, set after any change of user, which would clear it),
/// or never starts if the harness is already gone. A pre_exec hook rather
/// than the `exec-program` trampoline: a server run as another user may
/// not be allowed to execute the harness's binary.
fn die_with_this_thread(cmd: &mut Command, cgroup: Option<&Path>, user: Option<(u32, u32)>) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as i32;
    let procs = cgroup
        .map(|c| std::ffi::CString::new(c.join("cgroup.procs").as_os_str().as_bytes()))
        .transpose()
        .map_err(std::io::Error::other)?;
    cmd.process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec (the path
    // was allocated before the fork).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(path) = &procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            if let Some((uid, gid)) = user
                && (libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The harness is already gone: nobody would stop us.
                libc::_exit(127);
            }
            Ok(())
        });
    }
    Ok(())
}

/// Processes whose parent is `parent`, from /proc.
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
    all.filter_map(Result::ok)
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.ppid == parent.as_raw() && s.state != 'Z')
        .map(|s| Pid::from_raw(s.pid))
        .collect()
}

/// Alive and not a zombie (a zombie holds no memory, no socket).
fn alive(pid: Pid) -> bool {
    procfs::process::Process::new(pid.as_raw()).and_then(|p| p.stat()).is_ok_and(|s| s.state != 'Z')
}
