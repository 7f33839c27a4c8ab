//! A PostgreSQL cluster of the harness's own: `initdb` once per run into a
//! template, copied for each server (a copy takes a fraction of an
//! `initdb`), started as `postgres -D DIR` on a loopback port with no Unix
//! socket. PostgreSQL refuses to run as root, and the harness may be root
//! (CI is): then the cluster belongs to the `postgres` user, or `nobody`.
//! Debian keeps the binaries off PATH, under /usr/lib/postgresql/N/bin.
//!
//! Durability is traded for speed (`fsync=off`): a server-kill is a crash of
//! the processes, not of the machine, so the page cache keeps every
//! committed row and the restart's recovery finds the lease rows.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::ServerError;
use crate::trial::contain::OwnedDir;

pub const PACKAGE: &str = "postgresql";

/// Where `initdb` and `postgres` are: beside a `postgres` on PATH, else the
/// newest /usr/lib/postgresql/N/bin.
pub fn find_binaries() -> Result<PathBuf, ServerError> {
    let has_both = |dir: &Path| dir.join("postgres").is_file() && dir.join("initdb").is_file();
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| has_both(d));
    if let Some(dir) = on_path {
        return Ok(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| has_both(bin))
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        ServerError::Setup(format!(
            "a managed PostgreSQL needs its server binaries, `initdb` and `postgres` (on PATH or under \
             /usr/lib/postgresql/N/bin): `apt-get install {PACKAGE}`"
        ))
    })
}

/// The user the cluster runs as, if not ourselves: PostgreSQL will not run
/// as root.
fn run_as() -> Result<Option<(u32, u32)>, ServerError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
            return Ok(Some((u.uid.as_raw(), u.gid.as_raw())));
        }
    }
    Err(ServerError::Setup(
        "PostgreSQL refuses to run as root and there is no `postgres` or `nobody` user to run it as".into(),
    ))
}

/// The binaries, the user, and a freshly made template cluster.
pub struct PgInstall {
    bin: PathBuf,
    user: Option<(u32, u32)>,
    template: OwnedDir,
}

impl PgInstall {
    /// Find the binaries and `initdb` the template (its output in `log`).
    pub fn new(log: &Path) -> Result<PgInstall, ServerError> {
        let bin = find_binaries()?;
        let user = run_as()?;
        let template = owned_tempdir(user)?;
        let data = template.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
            .stdin(Stdio::null());
        run_logged(&mut initdb, user, log, "initdb")?;
        Ok(PgInstall { bin, user, template })
    }

    /// A cluster of its own, copied from the template, for a server with
    /// room for `connections` sessions.
    pub(super) fn cluster(&self, connections: usize) -> Result<Cluster, ServerError> {
        let dir = owned_tempdir(self.user)?;
        let data = dir.path().join("data");
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(self.template.path().join("data")).arg(&data).stdin(Stdio::null());
        run_logged(&mut cp, self.user, &dir.path().join("cp.log"), "cp")?;
        Ok(Cluster { dir, data, bin: self.bin.clone(), user: self.user, connections })
    }
}

/// One server's data directory (removed with it).
pub(super) struct Cluster {
    dir: OwnedDir,
    data: PathBuf,
    bin: PathBuf,
    user: Option<(u32, u32)>,
    connections: usize,
}

impl Cluster {
    /// `postgres` on `port`: loopback TCP only, no Unix socket (a temporary
    /// directory's path can be too long for one).
    pub(super) fn command(&self, port: u16) -> Command {
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D").arg(&self.data).args(["-p", &port.to_string()]);
        for setting in [
            "listen_addresses=127.0.0.1".to_string(),
            "unix_socket_directories=".to_string(),
            "fsync=off".to_string(),
            "synchronous_commit=off".to_string(),
            "full_page_writes=off".to_string(),
            format!("max_connections={}", self.connections),
            "shared_buffers=32MB".to_string(),
            // The log goes to the file the harness gave it.
            "logging_collector=off".to_string(),
        ] {
            cmd.arg("-c").arg(setting);
        }
        cmd.current_dir(self.dir.path());
        cmd
    }

    /// Who the server runs as (the harness switches to it before exec).
    pub(super) fn user(&self) -> Option<(u32, u32)> {
        self.user
    }
}

/// A temporary directory that `user` owns.
fn owned_tempdir(user: Option<(u32, u32)>) -> Result<OwnedDir, ServerError> {
    let dir = tempfile::Builder::new()
        .prefix("leasequake-pg-")
        .tempdir()
        .map_err(|e| ServerError::Setup(format!("cannot make a directory for PostgreSQL: {e}")))?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).map_err(|e| {
            ServerError::Setup(format!("cannot give {} to the PostgreSQL user: {e}", dir.path().display()))
        })?;
    }
    Ok(OwnedDir::new(dir))
}

/// Run a set-up step as `user`, its output in `log`; its failure says where
/// to look.
fn run_logged(cmd: &mut Command, user: Option<(u32, u32)>, log: &Path, what: &str) -> Result<(), ServerError> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| ServerError::Setup(format!("{}: {e}", log.display())))?;
    let err = out.try_clone().map_err(|e| ServerError::Setup(e.to_string()))?;
    cmd.stdout(out).stderr(err);
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    let status = cmd.status().map_err(|e| ServerError::Setup(format!("cannot run {what}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(ServerError::Setup(format!("{what} failed ({status}); see {}", log.display())))
    }
}
