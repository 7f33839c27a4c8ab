//! What a substrate cannot do, checked on the experiment as written: the
//! lock file's variants, failpoints and faults exist only where there is a
//! lock file; an address, a proxy and network faults only where there is a
//! server; a managed server only for a server substrate; server faults
//! only against a managed server.

use super::faults::{RawFault, RawTarget};
use crate::model::{InitialLock, Kind, Push, SubstrateSettings, Target, WatchBy, WorkerSettings, setting_name};

/// The parts of an experiment file the rules read.
pub(super) struct Uses<'a> {
    pub substrate: &'a SubstrateSettings,
    pub worker: &'a WorkerSettings,
    pub initial_lock: Option<InitialLock>,
    pub faults: &'a [RawFault],
    /// A sweep varies the substrate (it may reach a server from a file).
    pub swept: bool,
    /// A program runs in place of the built-in worker.
    pub program: bool,
}

/// The most servers of a replicated service: each on a loopback address
/// of its own, started and watched per trial.
pub const MAX_MEMBERS: usize = 5;

/// Where the problem is: at a key of the file, or at a place.
pub(super) enum Problem {
    Key(&'static str, String),
    At(u64, u64, String),
}

/// The first rule the experiment breaks, if any.
pub(super) fn check(raw: &Uses<'_>) -> Result<(), Problem> {
    let s = raw.substrate;
    let name = setting_name(&s.kind);
    let has_file = matches!(s.kind, Kind::File | Kind::Flock);
    let w = raw.worker;
    let defaults = WorkerSettings::default();
    // A sweep over substrates may reach a server from a file substrate.
    let problem = if s.managed && s.kind.server().is_none() && !raw.swept {
        Some((
            "managed",
            format!(
                "managed: the {name} substrate has no server to run (redis, postgres, postgres-advisory and etcd have)"
            ),
        ))
    } else if s.members == 0 || s.members > MAX_MEMBERS {
        Some(("members", format!("members: {} is not in 1..={MAX_MEMBERS}", s.members)))
    } else if s.kind == Kind::Redlock && !(s.managed && s.members >= 3) {
        Some((
            "kind",
            format!(
                "redlock runs on independent Redis servers the harness starts: `substrate: {{kind: redlock, managed: true, members: 3}}` (members: {}, managed: {})",
                s.members, s.managed
            ),
        ))
    } else if s.replicated() && !(s.managed && matches!(s.kind, Kind::Redis | Kind::Etcd | Kind::Redlock)) {
        Some((
            "members",
            format!(
                "members: a replicated service is one the harness runs, Redis with Sentinel or an etcd cluster (`substrate: {{kind: redis, managed: true, members: {}}}`)",
                s.members
            ),
        ))
    } else if s.sync_replicas > 0 && s.sync_replicas >= s.members {
        Some((
            "sync_replicas",
            format!(
                "sync_replicas: {} is more than the service's {} replicas (members − 1)",
                s.sync_replicas,
                s.members - 1
            ),
        ))
    } else if s.failover_after.is_some() && !(s.replicated() && s.kind == Kind::Redis) {
        Some((
            "failover_after",
            "failover_after: only Sentinel fails a Redis over after a silence (members > 1); an etcd cluster elects a leader on its own".to_string(),
        ))
    } else if s.sync_replicas > 0 && s.kind != Kind::Redis {
        Some((
            "sync_replicas",
            "sync_replicas: Redis's WAIT; an etcd cluster commits every write to a majority".to_string(),
        ))
    } else if s.replicated() && w.watch_by == WatchBy::Push {
        Some((
            "watch_by",
            "watch_by: push is not yet followed across a failover; a replicated service is polled".to_string(),
        ))
    } else if s.observe && s.kind == Kind::Postgres && !raw.program {
        Some((
            "observe",
            "observe: PostgreSQL is observed through its advisory locks (pg_locks); the built-in worker's lease row is not: use kind postgres-advisory".to_string(),
        ))
    } else if s.managed && s.address.is_some() {
        Some(("address", "address: the harness chooses a managed server's address; remove it".to_string()))
    } else if s.address.is_some() && has_file {
        Some(("address", format!("address: the {name} substrate has no server")))
    } else if s.proxy && has_file {
        Some(("proxy", format!("proxy: the {name} substrate has no server to put a proxy before")))
    } else if s.kind != Kind::File && (w.acquire != defaults.acquire || w.failpoint != defaults.failpoint) {
        Some((
            "substrate",
            format!("worker.acquire and failpoints are lock-file variants; the {name} substrate has neither"),
        ))
    } else if w.watch_by == WatchBy::Push && s.kind.push() == Push::Nothing && !raw.swept {
        Some((
            "watch_by",
            format!(
                "watch_by: push needs a server that pushes (etcd, redis, postgres, postgres-advisory); the {name} substrate does not"
            ),
        ))
    } else if !has_file && raw.initial_lock.is_some_and(|l| l != InitialLock::None) {
        Some(("initial_lock", format!("initial_lock needs a lock file; the {name} substrate has none")))
    } else {
        None
    };
    let fault_problem = raw.faults.iter().find_map(|f| {
        let a = f.action.value;
        let loc = (f.action.referenced.line(), f.action.referenced.column());
        // A part of a replicated service: only there, only cut off.
        let service_part = f.target.as_ref().and_then(|t| match &t.value {
            RawTarget::Name(n) => Target::from_name(n)
                .filter(|t| matches!(t, Target::PrimarySide | Target::Majority | Target::Member(_)))
                .map(|target| (target, (t.referenced.line(), t.referenced.column()))),
            RawTarget::Index(_) => None,
        });
        if let Some((target, at)) = service_part {
            if !s.replicated() {
                return Some((at, format!("target {target} is a part of a replicated service; this substrate has one server (members: 1)")));
            }
            if let Target::Member(k) = target
                && k >= s.members
            {
                return Some((at, format!("target {target}: the service has members 0..{}", s.members - 1)));
            }
            if a == crate::model::Action::Skew && !(s.kind == Kind::Redlock && matches!(target, Target::Member(_))) {
                return Some((at, format!("skew of {target}: only Redlock's servers have a clock the harness moves")));
            }
            if !a.is_network() && a != crate::model::Action::Skew {
                return Some((at, format!("target {target} is cut off by a network fault (partition, …), not by {}", a.name())));
            }
            if matches!(target, Target::PrimarySide | Target::Majority) && s.kind == Kind::Redlock {
                return Some((at, format!("target {target}: Redlock's servers are all equal, none is primary; cut one off (member-K)")));
            }
            if f.after.is_some() && matches!(target, Target::Member(_)) {
                return Some((at, format!("target {target} is no worker: it reports no event to fire `after`")));
            }
        }
        if a.is_lock() && !has_file {
            Some((loc, format!("{}: the {name} substrate has no lock file", a.name())))
        } else if a.is_server() && s.replicated() {
            Some((loc, format!("{}: a replicated service has several servers; cut one off with a network fault instead", a.name())))
        } else if a.is_server() && !s.managed {
            Some((
                loc,
                format!(
                    "{} needs a server the harness runs: `substrate: {{kind: {}, managed: true}}`",
                    a.name(),
                    if s.kind.server().is_some() { name.as_str() } else { "redis" }
                ),
            ))
        } else if a.is_network() && has_file {
            Some((
                loc,
                format!(
                    "{} acts on the link to a lease server; the {name} substrate has none (use redis, postgres, postgres-advisory or etcd)",
                    a.name()
                ),
            ))
        } else {
            None
        }
    });
    if let Some(((line, column), msg)) = fault_problem {
        return Err(Problem::At(line, column, msg));
    }
    match problem {
        Some((key, msg)) => Err(Problem::Key(key, msg)),
        None => Ok(()),
    }
}
