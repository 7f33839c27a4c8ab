//! The lease as the service holds it, read from outside by the harness
//! (`substrate.observe`): independent of what any worker says, so that a
//! program that renews inside its library, or reports only `acquired` and
//! `released`, is still measured, and one wrong about its own lease is
//! caught.
//!
//! Each look answers one question: is the lease held now, and by which
//! grant? A grant is named by what the service keeps of it (a Redis key's
//! value, an etcd key's creation revision, a lock file's holder or inode,
//! a PostgreSQL backend), so that a renewal keeps its grant and a takeover
//! makes a new one. Where the service names the holder's process (a kernel
//! lock in /proc/locks, a pid in the lock file), the look says so.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::etcd::gateway::{Gateway, b64, int, unb64};
use crate::model::Kind;

/// One look at the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Look {
    /// Nobody holds it.
    Free,
    /// A grant holds it: `grant` names it, `pid` is its holder's process
    /// where the service says, `ttl_ms` what is left of it where it expires.
    Held { grant: String, pid: Option<i32>, ttl_ms: Option<i64> },
    /// The service could not be read (it is paused, restarting, or
    /// splits so that no grant has a majority): neither held nor free.
    Unseen,
}

impl Look {
    /// Whether two looks say the same thing (what is left of a lease
    /// changes at every look without anything happening).
    pub fn same(&self, other: &Look) -> bool {
        match (self, other) {
            (Look::Held { grant: a, pid: p, .. }, Look::Held { grant: b, pid: q, .. }) => a == b && p == q,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// How long one look may wait on a server: a paused server must not hold
/// the watch past a few of its periods.
const LOOK_LIMIT: Duration = Duration::from_millis(100);

/// A way to look at one lease.
pub trait LeaseView: Send {
    fn look(&mut self) -> Look;
}

/// The view of the lease named `key` (servers) or at `lock` (files), on
/// the service at `addresses` (one, or every member of a replicated one).
pub fn open_view(kind: Kind, lock: &Path, key: &str, addresses: &[String]) -> io::Result<Box<dyn LeaseView>> {
    use crate::model::settings::Server;
    Ok(match kind.server() {
        None => Box::new(FileView::new(lock)),
        Some(Server::Redis) => Box::new(RedisView::new(key, addresses)?),
        Some(Server::Etcd) => Box::new(EtcdView::new(key, addresses)?),
        Some(Server::Postgres) => Box::new(PostgresView::new(addresses)?),
    })
}

/// A lock file and everything beside it whose name begins with its own
/// (`leader.lock.lock`, a library's marker directory): held while any of
/// them carries a kernel lock (flock, POSIX or OFD) or, for locks that
/// exist rather than lock, while one is a directory or has content. An
/// empty file is held only until a kernel lock has been seen on the lock's
/// files: a library that flocks leaves its empty file behind on release.
pub struct FileView {
    dir: PathBuf,
    name: String,
    kernel_locked: bool,
    /// The last file seen empty (its identity, the grant it was given): a
    /// marker is created empty and written a moment later, and the pid it
    /// then names keeps that grant.
    created: Option<(String, String)>,
    /// The holder the file names now and its grant: kept while it holds
    /// (a renewal may rewrite the file), forgotten when another holder or
    /// nobody is seen, so that a pid acquiring again is a new grant.
    named: Option<(i32, String)>,
    /// The kernel lock held now (as its holder names it) and its grant:
    /// the grant of the file it locks where that file was seen empty just
    /// before (flock(1) creates the file, then locks it: one grant).
    locked: Option<(String, String)>,
    /// Grants named so far: a new one gets the next number.
    grants: u32,
}

impl FileView {
    pub fn new(lock: &Path) -> FileView {
        let dir = lock.parent().unwrap_or(Path::new(".")).to_path_buf();
        let name = lock.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        FileView { dir, name, kernel_locked: false, created: None, named: None, locked: None, grants: 0 }
    }
}

impl LeaseView for FileView {
    fn look(&mut self) -> Look {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Look::Unseen };
        let mut files: Vec<(String, std::fs::Metadata)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name.starts_with(&self.name) && !name.ends_with(".tmp"))
                    .then(|| e.path().symlink_metadata().ok().map(|m| (name, m)))
                    .flatten()
            })
            .collect();
        if files.is_empty() {
            (self.named, self.locked) = (None, None);
            return Look::Free;
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        // The whole machine's locks: read only while there is a file to hold one.
        let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        for (name, meta) in &files {
            if let Some(l) = lock_holders(&locks, meta.dev(), meta.ino(), &["FLOCK", "POSIX", "OFDLCK"]).first() {
                self.kernel_locked = true;
                let pid = (l.pid > 0).then_some(l.pid as i32);
                let own = format!("{name} locked by {}", l.pid);
                let file = format!("{name} {}", born(meta));
                let grant = match (self.created.take(), self.locked.take()) {
                    (Some((f, g)), _) if f == file => g,
                    (_, Some((o, g))) if o == own => g,
                    _ => own.clone(),
                };
                self.locked = Some((own, grant.clone()));
                return Look::Held { grant, pid, ttl_ms: None };
            }
        }
        self.locked = None;
        for (name, meta) in &files {
            if meta.is_dir() {
                return Look::Held { grant: format!("{name}/ {}", born(meta)), pid: None, ttl_ms: None };
            }
            if !meta.is_file() || (meta.len() == 0 && self.kernel_locked) {
                continue;
            }
            let content = read_head(&self.dir.join(name));
            let pid = named_pid(&content);
            // A holder named in the file keeps its grant when it rewrites
            // the file (a renewal may replace it); otherwise the file and
            // what it says are the grant (a heartbeat that touches it
            // keeps it, a takeover that rewrites it makes a new one).
            let file = format!("{name} {}", born(meta));
            let grant = match pid {
                Some(p) => {
                    let g = match (self.created.take(), self.named.take()) {
                        // Made empty, now written: the grant it was seen with.
                        (Some((f, g)), _) if f == file => g,
                        (_, Some((q, g))) if q == p => g,
                        _ => {
                            self.grants += 1;
                            format!("{name} of {p} #{}", self.grants)
                        }
                    };
                    self.named = Some((p, g.clone()));
                    g
                }
                None => {
                    let g = format!("{file} {:016x}", crate::model::hash::fnv1a(content.as_bytes()));
                    if content.is_empty() {
                        self.created = Some((file, g.clone()));
                    }
                    g
                }
            };
            return Look::Held { grant, pid, ttl_ms: None };
        }
        self.named = None;
        Look::Free
    }
}

/// A file's identity across its life: its inode and when it was created
/// (an inode number is reused at once after a remove and a create, as a
/// stale lock's takeover does).
fn born(meta: &std::fs::Metadata) -> String {
    let created = meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    format!("{}.{}", meta.ino(), created.map_or(0, |d| d.as_nanos()))
}

/// The first 4 KiB of a file (a lock file is small; a big one is not read).
fn read_head(path: &Path) -> String {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(4096).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The holder's pid a lock file names: after `processId` (the blog's
/// `{"processId": N, "leaseUntil": …}`, the built-in worker's and the
/// `lock-stale` fault's) or `pid` (`{"pid": N}`, a marker's `pid=N`), or a
/// first line that is a bare number (`N\nhost`). Anything else names none.
fn named_pid(content: &str) -> Option<i32> {
    let number = |s: &str| -> Option<i32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok().filter(|p| *p > 0)
    };
    let after = ["processId", "pid"].iter().find_map(|k| content.find(k).map(|at| at + k.len()));
    if let Some(at) = after {
        let rest = &content[at..];
        let skip = rest.find(|c: char| !matches!(c, '"' | '\'' | ':' | '=' | ' '))?;
        return number(&rest[skip..]);
    }
    let first = content.lines().next()?.trim();
    if first.chars().all(|c| c.is_ascii_digit()) { number(first) } else { None }
}

/// One kernel lock from /proc/locks: its holder's pid (-1 for an OFD lock,
/// which belongs to an open file, not a process) and whether it excludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelLock {
    pub pid: i64,
    pub exclusive: bool,
}

/// The locks of the given kinds (`FLOCK`, `POSIX`, `OFDLCK`) held on the
/// file (device, inode), from /proc/locks' text. Waiters (`->`) are not
/// holders.
pub fn lock_holders(locks: &str, dev: u64, ino: u64, kinds: &[&str]) -> Vec<KernelLock> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    // Some file systems (btrfs) show a device that differs from st_dev:
    // where no lock is on ours, the inode alone is the best we have.
    let dev_prefix = format!("{major:02x}:{minor:02x}:");
    let dev_seen = locks.lines().any(|l| l.contains(&dev_prefix));
    let mut found = Vec::new();
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if fields.len() < 6 || !kinds.contains(&fields[1]) {
            continue;
        }
        let Ok(pid) = fields[4].parse::<i64>() else { continue };
        let mut id = fields[5].split(':');
        let (Some(maj), Some(min), Some(inode)) = (id.next(), id.next(), id.next()) else { continue };
        let same_dev = u32::from_str_radix(maj, 16).is_ok_and(|m| m == major)
            && u32::from_str_radix(min, 16).is_ok_and(|m| m == minor);
        let same_ino = inode.parse::<u64>().is_ok_and(|i| i == ino);
        if same_ino && (same_dev || !dev_seen) {
            found.push(KernelLock { pid, exclusive: fields[3] == "WRITE" });
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Every string key whose name contains the lease's name (libraries add
/// their own prefixes: `lock:`, `redlock:`), or without one a channel of
/// that name someone is subscribed to, on each member: held by the key
/// and value (the channel) that a majority of the members hold.
pub struct RedisView {
    pattern: String,
    /// The built-in worker's fencing-token counter: not a lease.
    counter: Vec<u8>,
    members: Vec<(::redis::Client, Option<::redis::Connection>)>,
}

impl RedisView {
    fn new(key: &str, addresses: &[String]) -> io::Result<RedisView> {
        let members = addresses
            .iter()
            .map(|a| super::redis::client(a).map(|c| (c, None)).map_err(io::Error::other))
            .collect::<io::Result<_>>()?;
        Ok(RedisView { pattern: format!("*{key}*"), counter: format!("{key}:token").into_bytes(), members })
    }
}

/// One member's holder: (key, value) and what is left of it.
fn redis_holder(
    client: &::redis::Client,
    conn: &mut Option<::redis::Connection>,
    pattern: &str,
    counter: &[u8],
) -> Option<Option<(String, i64)>> {
    use ::redis::Value;
    let keys = match super::redis::query_within(client, conn, ::redis::cmd("KEYS").arg(pattern), LOOK_LIMIT).ok()? {
        Value::Array(keys) => keys,
        _ => return None,
    };
    let mut names: Vec<Vec<u8>> =
        keys.into_iter().filter_map(|k| if let Value::BulkString(b) = k { Some(b) } else { None }).collect();
    names.retain(|n| n != counter);
    names.sort();
    for name in names {
        let mut get = ::redis::cmd("EVAL");
        // One round trip, and the value and its time left read together.
        get.arg(
            "if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return false end \
                 return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}",
        )
        .arg(1)
        .arg(&name);
        if let Value::Array(pair) = super::redis::query_within(client, conn, &get, LOOK_LIMIT).ok()?
            && let [Value::BulkString(value), Value::Int(ttl)] = pair.as_slice()
        {
            let key = String::from_utf8_lossy(&name);
            return Some(Some((format!("{key}={}", String::from_utf8_lossy(value)), *ttl)));
        }
    }
    // No key: a lock held as a subscription (portalocker's RedisLock holds
    // a channel while its holder lives).
    let channels =
        match super::redis::query_within(client, conn, ::redis::cmd("PUBSUB").arg("CHANNELS").arg(pattern), LOOK_LIMIT)
            .ok()?
        {
            Value::Array(c) => c,
            _ => return None,
        };
    let mut channels: Vec<String> = channels
        .iter()
        .filter_map(|c| if let Value::BulkString(b) = c { Some(String::from_utf8_lossy(b).into_owned()) } else { None })
        .collect();
    channels.sort();
    Some(channels.first().map(|c| (format!("subscribed to {c}"), -1)))
}

impl LeaseView for RedisView {
    fn look(&mut self) -> Look {
        let (pattern, counter) = (&self.pattern, &self.counter);
        let seen: Vec<Option<Option<(String, i64)>>> =
            self.members.iter_mut().map(|(client, conn)| redis_holder(client, conn, pattern, counter)).collect();
        majority(&seen)
    }
}

/// The grant a majority of the members hold (a single server: its own),
/// free where a majority hold none, unseen otherwise.
fn majority(seen: &[Option<Option<(String, i64)>>]) -> Look {
    let need = seen.len() / 2 + 1;
    let free = seen.iter().filter(|s| matches!(s, Some(None))).count();
    if free >= need {
        return Look::Free;
    }
    for (grant, ttl) in seen.iter().flatten().flatten() {
        let holders = seen.iter().filter(|s| matches!(s, Some(Some((g, _))) if g == grant)).count();
        if holders >= need {
            return Look::Held { grant: grant.clone(), pid: None, ttl_ms: Some(*ttl) };
        }
    }
    Look::Unseen
}

/// Every key containing the lease's name (an election's keys under its
/// prefix, a lock's key): held by the oldest of them, as etcd's election
/// and lock recipes both decide; what is left of its etcd lease, read once
/// per grant (a look every few ms need not ask twice).
pub struct EtcdView {
    key: String,
    gateways: Vec<Gateway>,
    last: Option<(String, i64)>,
}

impl EtcdView {
    fn new(key: &str, addresses: &[String]) -> io::Result<EtcdView> {
        let gateways = addresses.iter().map(|a| Gateway::new(a)).collect::<io::Result<_>>()?;
        Ok(EtcdView { key: key.to_string(), gateways, last: None })
    }

    fn call(&mut self, path: &str, body: &Value) -> Option<Value> {
        self.gateways.iter_mut().find_map(|g| g.call(path, body, LOOK_LIMIT).ok())
    }
}

impl LeaseView for EtcdView {
    fn look(&mut self) -> Look {
        // The whole key space (a trial's server holds only its own keys).
        let body = json!({"key": b64(b"\0"), "range_end": b64(b"\0")});
        let seen = self.call("/v3/kv/range", &body).map(|reply| etcd_holder(&reply, &self.key));
        let Some(Some((grant, lease))) = seen else {
            // Seen again after this, a grant's TTL is read again.
            self.last = None;
            return if seen.is_none() { Look::Unseen } else { Look::Free };
        };
        let ttl_ms = match &self.last {
            Some((last, ttl)) if *last == grant => Some(*ttl),
            // etcd says it in whole seconds; -1 once the lease is gone.
            _ => self
                .call("/v3/lease/timetolive", &json!({"ID": lease.to_string()}))
                .map(|r| int(&r["TTL"]))
                .filter(|s| *s >= 0)
                .map(|s| s * 1000),
        };
        // A read that failed is tried again at the next look.
        self.last = ttl_ms.map(|t| (grant.clone(), t));
        Look::Held { grant, pid: None, ttl_ms }
    }
}

/// The oldest key naming the lease: its grant (`key@create revision`) and
/// its etcd lease's id.
fn etcd_holder(reply: &Value, key: &str) -> Option<(String, i64)> {
    let kvs = reply["kvs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let oldest = kvs
        .iter()
        .filter_map(|kv| {
            let name = String::from_utf8(unb64(kv["key"].as_str()?)?).ok()?;
            name.contains(key).then(|| (int(&kv["create_revision"]), name, int(&kv["lease"])))
        })
        .min()?;
    let (rev, name, lease) = oldest;
    Some((format!("{name}@{rev}"), lease))
}

/// Advisory locks (`pg_locks`), as the psycopg forms hold them: held by the
/// backend that holds one. The built-in worker's lease row is not read.
pub struct PostgresView {
    address: String,
    client: Option<::postgres::Client>,
}

impl PostgresView {
    fn new(addresses: &[String]) -> io::Result<PostgresView> {
        let address = addresses.first().cloned().ok_or_else(|| io::Error::other("no PostgreSQL address"))?;
        Ok(PostgresView { address, client: None })
    }
}

impl LeaseView for PostgresView {
    fn look(&mut self) -> Look {
        if self.client.is_none() {
            let mut config: ::postgres::Config = match self.address.parse() {
                Ok(c) => c,
                Err(_) => return Look::Unseen,
            };
            config.connect_timeout(LOOK_LIMIT);
            self.client = config.connect(::postgres::NoTls).ok();
        }
        let Some(client) = self.client.as_mut() else { return Look::Unseen };
        let rows = client.query(
            "SELECT pid, objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted ORDER BY pid, objid",
            &[],
        );
        match rows {
            Ok(rows) => match rows.first() {
                Some(r) => Look::Held {
                    grant: format!("backend {} lock {}", r.get::<_, i32>(0), r.get::<_, i64>(1)),
                    pid: None,
                    ttl_ms: None,
                },
                None => Look::Free,
            },
            Err(_) => {
                self.client = None;
                Look::Unseen
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: &str = "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF\n\
                         1: -> FLOCK  ADVISORY  WRITE 99 08:01:5678 0 EOF\n\
                         2: POSIX  ADVISORY  WRITE 4321 08:01:777 0 EOF\n\
                         3: OFDLCK ADVISORY  WRITE -1 08:01:888 0 EOF\n";

    #[test]
    fn kernel_locks_are_read_by_kind_and_waiters_are_not_holders() {
        let dev = libc::makedev(8, 1);
        assert_eq!(lock_holders(LOCKS, dev, 5678, &["FLOCK"]), vec![KernelLock { pid: 1234, exclusive: true }]);
        assert!(lock_holders(LOCKS, dev, 777, &["FLOCK"]).is_empty());
        assert_eq!(lock_holders(LOCKS, dev, 777, &["POSIX"])[0].pid, 4321);
        assert_eq!(lock_holders(LOCKS, dev, 888, &["OFDLCK"])[0].pid, -1);
    }

    #[test]
    fn a_pid_in_the_lock_file_is_found_in_each_format() {
        assert_eq!(named_pid("{\"processId\":4242,\"leaseUntil\":1796553187}"), Some(4242));
        assert_eq!(named_pid("{\"pid\": 4242, \"leaseUntil\": 17.5}"), Some(4242));
        assert_eq!(named_pid("{\"pid\":4242}"), Some(4242));
        assert_eq!(named_pid("filelock-soft-v2\npid=4242\nhost=h\n"), Some(4242));
        assert_eq!(named_pid("4242\nhost"), Some(4242));
        // A number that is not after `pid` is not a pid.
        assert_eq!(named_pid("v2\n{\"lease\": 9}"), None);
        assert_eq!(named_pid(""), None);
        assert_eq!(named_pid("0"), None);
    }

    #[test]
    fn a_majority_of_members_decides_and_a_split_is_unseen() {
        let held = |g: &str| Some(Some((g.to_string(), 500)));
        assert_eq!(majority(&[Some(None)]), Look::Free);
        assert!(matches!(majority(&[held("a")]), Look::Held { ref grant, .. } if grant == "a"));
        assert!(matches!(majority(&[held("a"), None, held("a")]), Look::Held { .. }));
        assert_eq!(majority(&[held("a"), held("b"), Some(None)]), Look::Unseen);
        assert_eq!(majority(&[None]), Look::Unseen);
    }

    #[test]
    fn a_renewal_is_the_same_look_and_a_new_grant_is_not() {
        let h = |g: &str, ttl| Look::Held { grant: g.into(), pid: None, ttl_ms: Some(ttl) };
        assert!(h("k=1", 900).same(&h("k=1", 300)));
        assert!(!h("k=1", 900).same(&h("k=2", 900)));
        assert!(!Look::Free.same(&Look::Unseen));
    }

    #[test]
    fn the_oldest_etcd_key_holds_the_lease() {
        let kv = |k: &str, rev: i64| json!({"key": b64(k.as_bytes()), "create_revision": rev.to_string(), "lease": (rev * 100).to_string()});
        let reply = json!({"kvs": [kv("e/leasequake-1/b", 9), kv("e/leasequake-1/a", 7), kv("other", 1)]});
        assert_eq!(etcd_holder(&reply, "leasequake-1"), Some(("e/leasequake-1/a@7".to_string(), 700)));
        assert_eq!(etcd_holder(&json!({}), "leasequake-1"), None);
    }

    #[test]
    fn a_file_lease_is_held_while_it_has_content_or_is_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("leader.lock");
        let mut view = FileView::new(&lock);
        assert_eq!(view.look(), Look::Free);
        std::fs::write(&lock, "{\"pid\": 77}").unwrap();
        assert!(matches!(view.look(), Look::Held { pid: Some(77), .. }));
        std::fs::remove_file(&lock).unwrap();
        let marker = tmp.path().join("leader.lock.lock");
        std::fs::create_dir(&marker).unwrap();
        let first = view.look();
        assert!(matches!(first, Look::Held { pid: None, .. }));
        // A stale marker taken over: removed and made again at once, most
        // likely on the same inode, is a new grant.
        std::fs::remove_dir(&marker).unwrap();
        std::fs::create_dir(&marker).unwrap();
        assert!(!view.look().same(&first));
    }

    #[test]
    fn a_marker_seen_empty_then_naming_its_pid_is_one_grant_and_a_takeover_another() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("leader.lock");
        let mut view = FileView::new(&lock);
        let grant = |l: Look| match l {
            Look::Held { grant, pid, .. } => (grant, pid),
            other => panic!("{other:?}"),
        };
        std::fs::write(&lock, "").unwrap();
        let (created, nobody) = grant(view.look());
        assert_eq!(nobody, None);
        std::fs::write(&lock, "41").unwrap();
        assert_eq!(grant(view.look()), (created.clone(), Some(41)), "written a moment after it was made");
        // Renewed by a rename over it: the same holder, the same grant.
        std::fs::write(tmp.path().join("x"), "41\n").unwrap();
        std::fs::rename(tmp.path().join("x"), &lock).unwrap();
        assert_eq!(grant(view.look()), (created.clone(), Some(41)));
        // Broken and made again by another process: a new grant.
        std::fs::write(&lock, "42").unwrap();
        let (taken, holder) = grant(view.look());
        assert_eq!(holder, Some(42));
        assert_ne!(taken, created);
        // The first holder's marker made again, empty then written: one
        // new grant, not its old one back.
        std::fs::remove_file(&lock).unwrap();
        std::fs::write(&lock, "").unwrap();
        let (again, _) = grant(view.look());
        std::fs::write(&lock, "41").unwrap();
        assert_eq!(grant(view.look()), (again.clone(), Some(41)));
        assert_ne!(again, created);
        // Taken by 42, then by 41 again with no empty file seen between:
        // each a grant of its own, 41's second not its first back.
        std::fs::write(&lock, "42").unwrap();
        let (second, _) = grant(view.look());
        std::fs::write(&lock, "41").unwrap();
        let (third, holder) = grant(view.look());
        assert_eq!(holder, Some(41));
        assert!(third != second && third != again && third != created, "{third}");
    }

    #[test]
    fn a_flocked_file_is_held_by_its_locker_and_free_when_unlocked() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("leader.lock");
        let mut view = FileView::new(&lock);
        let me = std::process::id() as i32;
        let f = std::fs::File::create(&lock).unwrap();
        // Before anyone locked it, an empty file may be an existence lock.
        let Look::Held { grant: created, pid: None, .. } = view.look() else { panic!("not held") };
        let lock_it = |f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
        let held = lock_it(f);
        // Locked a moment after it was made (as flock(1) does): one grant,
        // now naming its holder.
        assert_eq!(view.look(), Look::Held { grant: created.clone(), pid: Some(me), ttl_ms: None });
        assert_eq!(view.look(), Look::Held { grant: created.clone(), pid: Some(me), ttl_ms: None });
        let f = held.unlock().unwrap();
        assert_eq!(view.look(), Look::Free);
        // Locked again: a new grant.
        let _held = lock_it(f);
        assert!(matches!(view.look(), Look::Held { grant, pid: Some(p), .. } if p == me && grant != created));
    }
}
