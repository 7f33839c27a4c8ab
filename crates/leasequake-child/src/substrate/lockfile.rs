//! The blog's substrate: a lock file holding `{"processId", "leaseUntil"}`,
//! with the acquire variants that let the fixes be measured against the bugs.
//!
//! Every operation here is one or two syscalls on purpose: the windows
//! between them (stat→create, create→write, remove→create) are what the
//! experiments measure, so none of them is hidden behind a helper that would
//! make them atomic.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Acquire, Expiry, Failpoint};

/// The content of the lock file, as the blog's Go program writes it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    #[serde(rename = "processId")]
    pub process_id: i64,
    #[serde(rename = "leaseUntil")]
    pub lease_until: f64,
    /// Fencing token of this grant (only with fencing tokens enabled; the
    /// blog's file has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

impl Lease {
    /// `leaseUntil` is an integer under unix-seconds, as in the blog.
    pub fn to_bytes(self, expiry: Expiry) -> Vec<u8> {
        match expiry {
            Expiry::UnixSeconds => {
                let token = self.token.map(|t| format!(",\"token\":{t}")).unwrap_or_default();
                format!("{{\"processId\":{},\"leaseUntil\":{}{token}}}", self.process_id, self.lease_until as i64)
                    .into_bytes()
            }
            Expiry::Exact => serde_json::to_vec(&self).expect("lease serialises"),
        }
    }
}

/// Read and parse a lease file, telling missing, empty and garbage apart.
pub fn read_lease(path: &Path) -> Result<Lease, ReadError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => return Err(ReadError::Io(e)),
    };
    if bytes.is_empty() {
        return Err(ReadError::Empty);
    }
    serde_json::from_slice(&bytes).map_err(ReadError::Parse)
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no lease is held (no lock file, key or row)")]
    Missing,
    #[error("cannot read the lease: {0}")]
    Io(io::Error),
    #[error("lock file is empty")]
    Empty,
    #[error("lock file does not parse: {0}")]
    Parse(serde_json::Error),
}

pub struct LockFile {
    path: PathBuf,
    /// Per-process temp name for the link/rename variants.
    tmp: PathBuf,
    acquire: Acquire,
    expiry: Expiry,
    /// Called when a failpoint is reached (the worker reports and stalls).
    failpoint: Option<(Failpoint, FailpointHook)>,
}

/// What a worker does at its failpoint.
pub type FailpointHook = Box<dyn Fn(Failpoint)>;

impl LockFile {
    pub fn new(path: &Path, acquire: Acquire, expiry: Expiry) -> LockFile {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        LockFile { path: path.to_path_buf(), tmp: tmp.into(), acquire, expiry, failpoint: None }
    }

    /// Stall at `at` by calling `hook` there (see `Failpoint`).
    pub fn with_failpoint(mut self, at: Failpoint, hook: FailpointHook) -> LockFile {
        if at != Failpoint::None {
            self.failpoint = Some((at, hook));
        }
        self
    }

    /// Call the failpoint hook if `here` is the configured failpoint.
    pub fn reached(&self, here: Failpoint) {
        if let Some((at, hook)) = &self.failpoint
            && *at == here
        {
            hook(here);
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Try to become the holder. Ok(true): we created the lock; Ok(false):
    /// somebody else holds it (the create lost); Err: anything else.
    pub fn acquire(&self, lease: Lease) -> io::Result<bool> {
        match self.acquire {
            Acquire::Naive => {
                // Check, then act: two processes can both see "missing".
                if self.path.exists() {
                    return Ok(false);
                }
                self.reached(Failpoint::AfterCheck);
                OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&self.path)?;
                self.reached(Failpoint::AfterCreate);
                self.write_or_remove(lease)
            }
            Acquire::Excl => {
                match OpenOptions::new().write(true).create_new(true).mode(0o644).open(&self.path) {
                    Ok(f) => drop(f),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
                    Err(e) => return Err(e),
                }
                // The empty-file window of the blog lies exactly here.
                self.reached(Failpoint::AfterCreate);
                self.write_or_remove(lease)
            }
            Acquire::Link => {
                self.write_tmp(lease)?;
                let linked = fs::hard_link(&self.tmp, &self.path);
                let _ = fs::remove_file(&self.tmp);
                match linked {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Acquire::Rename => {
                if self.path.exists() {
                    return Ok(false);
                }
                // Every process that passed the check will create the lock.
                self.reached(Failpoint::AfterCheck);
                self.write_tmp(lease)?;
                // rename(2) replaces whatever appeared since the check.
                fs::rename(&self.tmp, &self.path)?;
                Ok(true)
            }
        }
    }

    fn write_or_remove(&self, lease: Lease) -> io::Result<bool> {
        match self.write_in_place(lease, false) {
            Ok(()) => Ok(true),
            Err(e) => {
                let _ = fs::remove_file(&self.path);
                Err(e)
            }
        }
    }

    fn write_tmp(&self, lease: Lease) -> io::Result<()> {
        fs::write(&self.tmp, lease.to_bytes(self.expiry))
    }

    /// Rewrite the lease (renewal). The O_EXCL and naive variants truncate
    /// and write in place, like the blog's `os.WriteFile`: a reader can see
    /// an empty file for an instant. link/rename replace the file atomically.
    pub fn write(&self, lease: Lease) -> io::Result<()> {
        self.write_in_place(lease, true)
    }

    /// The write of an acquire: no renewal failpoint.
    fn write_in_place(&self, lease: Lease, renewal: bool) -> io::Result<()> {
        match self.acquire {
            Acquire::Naive | Acquire::Excl => {
                let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&self.path)?;
                if renewal {
                    self.reached(Failpoint::AfterTruncate);
                }
                f.write_all(&lease.to_bytes(self.expiry))
            }
            Acquire::Link | Acquire::Rename => {
                self.write_tmp(lease)?;
                fs::rename(&self.tmp, &self.path)
            }
        }
    }

    pub fn read(&self) -> Result<Lease, ReadError> {
        read_lease(&self.path)
    }

    pub fn remove(&self) -> io::Result<()> {
        fs::remove_file(&self.path)
    }

    /// Time since the file was last modified (for the expire-by-age policy).
    pub fn age(&self) -> io::Result<Duration> {
        let modified = fs::metadata(&self.path)?.modified()?;
        Ok(modified.elapsed().unwrap_or(Duration::ZERO))
    }
}

/// What the harness can do to the lock file behind the workers' backs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LockFault {
    /// Zero bytes: a crash between O_EXCL create and the write.
    Empty,
    Delete,
    /// Bytes that are not JSON.
    Corrupt,
    /// A complete lease for a pid that is not running, already expired.
    Stale {
        dead_pid: i64,
        lease_until: f64,
    },
}

pub fn inject(path: &Path, fault: LockFault, expiry: Expiry) -> io::Result<()> {
    match fault {
        LockFault::Empty => File::create(path).map(drop),
        // A library's lock may be a directory (proper-lockfile's): gone
        // with what it holds.
        LockFault::Delete if path.is_dir() => fs::remove_dir_all(path),
        LockFault::Delete => match fs::remove_file(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        },
        _ if path.is_dir() => {
            Err(io::Error::other("the lock is a directory (a library's marker): it has no content to replace"))
        }
        LockFault::Corrupt => fs::write(path, b"\x00\x17{\"processId\": garbage"),
        LockFault::Stale { dead_pid, lease_until } => {
            fs::write(path, Lease { process_id: dead_pid, lease_until, token: None }.to_bytes(expiry))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(dir: &Path, acquire: Acquire) -> LockFile {
        LockFile::new(&dir.join("leader.lock"), acquire, Expiry::UnixSeconds)
    }

    const LEASE: Lease = Lease { process_id: 42, lease_until: 1_715_430_000.0, token: None };

    #[test]
    fn every_variant_acquires_once_then_loses() {
        for variant in [Acquire::Naive, Acquire::Excl, Acquire::Link, Acquire::Rename] {
            let dir = tempfile::tempdir().unwrap();
            let l = lock(dir.path(), variant);
            assert!(l.acquire(LEASE).unwrap(), "{variant:?}");
            assert!(!l.acquire(LEASE).unwrap(), "{variant:?}");
            assert_eq!(l.read().unwrap(), LEASE);
            assert_eq!(fs::read_to_string(l.path()).unwrap(), r#"{"processId":42,"leaseUntil":1715430000}"#);
        }
    }

    #[test]
    fn failpoints_fire_inside_their_windows_only() {
        use std::cell::RefCell;
        use std::rc::Rc;
        // (variant, failpoint, hits in the acquire, in the renewal, the
        // file's length inside the window: empty, or not there yet).
        for (variant, at, acquire_hits, renew_hits, inside) in [
            (Acquire::Excl, Failpoint::AfterCreate, 1, 0, Some(0)),
            (Acquire::Excl, Failpoint::AfterTruncate, 0, 1, Some(0)),
            (Acquire::Naive, Failpoint::AfterCheck, 1, 0, None),
            (Acquire::Rename, Failpoint::AfterCheck, 1, 0, None),
            // Atomic variants have no such window: the failpoint never fires.
            (Acquire::Link, Failpoint::AfterCreate, 0, 0, None),
            (Acquire::Link, Failpoint::AfterCheck, 0, 0, None),
            (Acquire::Rename, Failpoint::AfterTruncate, 0, 0, None),
            (Acquire::Excl, Failpoint::AfterCheck, 0, 0, None),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("leader.lock");
            let seen = Rc::new(RefCell::new(Vec::new()));
            let log = Rc::clone(&seen);
            let lock = LockFile::new(&path, variant, Expiry::UnixSeconds).with_failpoint(
                at,
                Box::new(move |fp| {
                    log.borrow_mut().push((fp, fs::read(&path).map(|b| b.len()).ok()));
                }),
            );
            lock.acquire(LEASE).unwrap();
            assert_eq!(seen.borrow().len(), acquire_hits, "{variant:?} {at:?}");
            lock.write(LEASE).unwrap();
            assert_eq!(seen.borrow().len(), acquire_hits + renew_hits, "{variant:?} {at:?}");
            assert!(seen.borrow().iter().all(|(fp, len)| *fp == at && *len == inside), "{:?}", seen.borrow());
        }
    }

    #[test]
    fn an_empty_file_defeats_o_excl_forever() {
        let dir = tempfile::tempdir().unwrap();
        let l = lock(dir.path(), Acquire::Excl);
        inject(l.path(), LockFault::Empty, Expiry::UnixSeconds).unwrap();
        assert!(matches!(l.read(), Err(ReadError::Empty)));
        assert!(!l.acquire(LEASE).unwrap());
    }

    #[test]
    fn read_errors_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let l = lock(dir.path(), Acquire::Excl);
        assert!(matches!(l.read(), Err(ReadError::Missing)));
        inject(l.path(), LockFault::Corrupt, Expiry::UnixSeconds).unwrap();
        assert!(matches!(l.read(), Err(ReadError::Parse(_))));
        inject(l.path(), LockFault::Stale { dead_pid: 7, lease_until: 3.0 }, Expiry::UnixSeconds).unwrap();
        assert_eq!(l.read().unwrap(), Lease { process_id: 7, lease_until: 3.0, token: None });
        inject(l.path(), LockFault::Delete, Expiry::UnixSeconds).unwrap();
        inject(l.path(), LockFault::Delete, Expiry::UnixSeconds).unwrap();
        assert!(matches!(l.read(), Err(ReadError::Missing)));
    }
}
