//! Which managed server a trial talks to. A server lives for the run of an
//! experiment and every trial has its own key on it, so a trial pays no
//! start-up; a trial whose faults pause, kill or restart the server gets
//! one of its own, so that no other trial running beside it is hit.

use std::path::Path;

use super::postgres::PgInstall;
use super::{ManagedServer, ServerError};
use crate::model::{Experiment, Server};

/// The managed servers of one experiment's run.
#[derive(Default)]
pub struct Servers {
    /// One shared server per kind the trials without server faults need.
    shared: Vec<(Server, ManagedServer)>,
    /// The binaries and the template cluster, where PostgreSQL is managed.
    pg: Option<PgInstall>,
    /// Sessions a trial's own server must have room for.
    per_trial_connections: usize,
}

/// A trial's server: none managed, the run's, or its own.
pub enum TrialServer {
    None,
    Shared(String),
    Own(Box<ManagedServer>),
}

impl TrialServer {
    pub fn address(&self) -> Option<String> {
        match self {
            TrialServer::None => None,
            TrialServer::Shared(a) => Some(a.clone()),
            TrialServer::Own(s) => Some(s.address()),
        }
    }

    /// The trial's own server, which its faults may hit.
    pub fn own(&mut self) -> Option<&mut ManagedServer> {
        match self {
            TrialServer::Own(s) => Some(s),
            _ => None,
        }
    }

    /// Is the server shared with other trials (so a trial's lease must be
    /// forgotten after it)?
    pub fn shared(&self) -> bool {
        !matches!(self, TrialServer::Own(_))
    }
}

/// The managed server `exp` needs, and whether each trial needs its own.
fn need(exp: &Experiment) -> Option<(Server, bool)> {
    // A replicated service is each trial's own (`ReplicatedService`).
    if exp.substrate.replicated() {
        return None;
    }
    let server = exp.substrate.managed_server()?;
    Some((server, exp.fault_kinds().any(|f| f.action.is_server())))
}

/// Room for every worker's session, and for those a timed-out request
/// leaves behind: the worker reconnects while the proxy still holds the
/// old connection open, as a partition would.
fn connections(workers: usize) -> usize {
    (workers * 4 + 20).max(100)
}

impl Servers {
    /// No managed server (calibration, and experiments without one).
    pub fn none() -> Servers {
        Servers::default()
    }

    /// Start what the units (a sweep's points, or the experiment) need,
    /// logging in `dir`; `jobs` trials run at once on a shared server.
    pub fn start(units: &[&Experiment], dir: &Path, jobs: usize) -> Result<Servers, ServerError> {
        let needs: Vec<(Server, bool, usize)> =
            units.iter().filter_map(|u| need(u).map(|(s, own)| (s, own, u.workers))).collect();
        let mut servers = Servers::default();
        if needs.iter().any(|(s, _, _)| *s == Server::Postgres) {
            servers.pg = Some(PgInstall::new(&dir.join("initdb.log"))?);
        }
        servers.per_trial_connections =
            needs.iter().filter(|(_, own, _)| *own).map(|(_, _, w)| connections(*w)).max().unwrap_or(0);
        for kind in [Server::Redis, Server::Postgres, Server::Etcd] {
            let most = needs.iter().filter(|(s, own, _)| *s == kind && !own).map(|(_, _, w)| *w).max();
            if let Some(workers) = most {
                let log = dir.join(format!("{}.log", log_name(kind)));
                let server = ManagedServer::start(kind, &log, servers.pg.as_ref(), connections(workers * jobs))?;
                servers.shared.push((kind, server));
            }
        }
        Ok(servers)
    }

    /// The server a trial of `exp` in `dir` talks to.
    pub fn for_trial(&self, exp: &Experiment, dir: &Path) -> Result<TrialServer, ServerError> {
        let Some((kind, own)) = need(exp) else { return Ok(TrialServer::None) };
        if own {
            let log = dir.join(format!("{}.log", log_name(kind)));
            let connections = self.per_trial_connections.max(connections(exp.workers));
            return ManagedServer::start(kind, &log, self.pg.as_ref(), connections)
                .map(|s| TrialServer::Own(Box::new(s)));
        }
        self.shared
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| TrialServer::Shared(s.address()))
            .ok_or_else(|| ServerError::Setup(format!("no managed {} was started for this run", log_name(kind))))
    }
}

fn log_name(kind: Server) -> &'static str {
    match kind {
        Server::Redis => "redis-server",
        Server::Postgres => "postgres",
        Server::Etcd => "etcd",
    }
}
