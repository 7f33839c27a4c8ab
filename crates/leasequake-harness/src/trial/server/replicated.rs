//! A replicated lease service the harness runs for one trial: a Redis
//! primary and `members − 1` replicas, watched by three Sentinels that
//! fail the primary over when it falls silent (the way Redis is deployed
//! when a single server is not enough); or an etcd cluster of `members`.
//!
//! Every link of it passes the harness's proxy, so that a partition can
//! cut any of them: each worker reaches each server through a door of its
//! own, and each server has a *front door* that the others dial (and that
//! it announces as its address). The servers themselves listen on other
//! ports, each on a loopback address of its own (127.0.0.11… for members,
//! 127.0.0.21… for Sentinels). A front door tells which link a
//! connection is on by who dialled it: Redis dials from its own address
//! (`bind-source-addr`); etcd cannot be told to, so the door looks up the
//! process behind the connection.
//!
//! The nodes of the trial's network are the workers, then the members,
//! then the Sentinels; a link joins each worker to each server and each
//! server to each other one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::port::free_port;
use super::redis::Setup;
use super::{ManagedServer, STARTS, ServerError, etcd};
use crate::model::{Experiment, Kind, MemberView, ServiceView, Target};
use crate::proxy::{Door, Owners, Proxy, Route, Toxic};
use std::sync::Mutex;

/// The name the Sentinels know the primary by.
const NAME: &str = "leasequake";
/// Three, so that a majority survives losing one.
const SENTINELS: usize = 3;
/// How long the service gets to come up whole: replicas in sync, every
/// Sentinel able to reach a quorum.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// A running replicated service and the proxy on its links.
pub struct ReplicatedService {
    kind: Kind,
    workers: usize,
    members: Vec<ManagedServer>,
    sentinels: Vec<ManagedServer>,
    proxy: Proxy,
    /// The two nodes each link joins (the last link, the harness's own
    /// connections, joins none).
    links: Vec<(usize, usize)>,
    /// Each server's front door: the address the service knows it by.
    fronts: Vec<SocketAddr>,
    /// Where each worker reaches the service.
    views: Vec<ServiceView>,
    /// Each member's clock control file, where the harness moves it, and
    /// its jumps so far (ns).
    clocks: Vec<Option<std::path::PathBuf>>,
    jumps: Mutex<Vec<i64>>,
}

fn ip_of(server: usize, members: usize) -> Ipv4Addr {
    if server < members {
        Ipv4Addr::new(127, 0, 0, 11 + server as u8)
    } else {
        Ipv4Addr::new(127, 0, 0, 21 + (server - members) as u8)
    }
}

/// The trial's network before any server runs: each server's loopback
/// address and ports, the links between the nodes.
struct Plan {
    workers: usize,
    ips: Vec<Ipv4Addr>,
    /// Where each server serves clients (its workers' doors lead there).
    client: Vec<SocketAddr>,
    links: Vec<(usize, usize)>,
    index: HashMap<(usize, usize), usize>,
}

impl Plan {
    fn new(workers: usize, servers: usize, members: usize) -> Result<Plan, ServerError> {
        let ips: Vec<Ipv4Addr> = (0..servers).map(|x| ip_of(x, members)).collect();
        let client = ips.iter().map(|ip| free_port(*ip)).collect::<Result<_, _>>()?;
        let (mut links, mut index) = (Vec::new(), HashMap::new());
        for a in 0..workers + servers {
            for b in (a + 1).max(workers)..workers + servers {
                index.insert((a, b), links.len());
                links.push((a, b));
            }
        }
        Ok(Plan { workers, ips, client, links, index })
    }

    /// The link between two nodes.
    fn link(&self, a: usize, b: usize) -> usize {
        self.index[&(a.min(b), a.max(b))]
    }

    /// The link for what no node of the plan dialled (the harness's own).
    fn harness(&self) -> usize {
        self.links.len()
    }

    /// Each worker's door to each server, after the servers' own doors.
    fn worker_doors(&self) -> Vec<Door> {
        let any: SocketAddr = (Ipv4Addr::LOCALHOST, 0).into();
        let mut doors = Vec::new();
        for w in 0..self.workers {
            for (x, upstream) in self.client.iter().enumerate() {
                doors.push(Door {
                    listen: any,
                    upstream: *upstream,
                    route: Route::Link(self.link(w, self.workers + x)),
                });
            }
        }
        doors
    }

    /// Member `k` as worker `w` reaches it, announced as `announced`.
    fn member_view(&self, proxy: &Proxy, w: usize, k: usize, announced: SocketAddr, scheme: &str) -> MemberView {
        MemberView { index: k, announced: announced.to_string(), url: self.door_url(proxy, w, k, scheme) }
    }

    /// Worker `w`'s door to server `x`, as a URL of `scheme`.
    fn door_url(&self, proxy: &Proxy, w: usize, x: usize, scheme: &str) -> String {
        let servers = self.ips.len();
        let a = proxy.address(servers + w * servers + x);
        if scheme == "redis" { format!("redis://{a}/") } else { format!("http://{a}") }
    }
}

impl ReplicatedService {
    /// Start the service for a trial of `exp` in `dir` (its logs and
    /// config files), the proxy's draws from `seed`.
    pub fn start(exp: &Experiment, dir: &Path, seed: u64) -> Result<ReplicatedService, ServerError> {
        // A server that finds its port taken starts the service again, on
        // ports all new (the others know its address).
        let mut start = 1;
        let service = loop {
            let started = match exp.substrate.kind {
                Kind::Etcd => ReplicatedService::start_etcd(exp, dir, seed),
                Kind::Redlock => ReplicatedService::start_redlock(exp, dir, seed),
                _ => ReplicatedService::start_redis(exp, dir, seed),
            };
            match started {
                Err(ServerError::PortTaken { .. }) if start < STARTS => start += 1,
                done => break done?,
            }
        };
        let path = dir.join("service.json");
        std::fs::write(&path, service.describe())
            .map_err(|e| ServerError::Setup(format!("{}: {e}", path.display())))?;
        Ok(service)
    }

    /// The trial's service as it ran: each server's address, front door
    /// and pid; each worker's doors.
    fn describe(&self) -> String {
        let server = |s: &ManagedServer, front: Option<&SocketAddr>| {
            serde_json::json!({
                "address": s.address(),
                "front_door": front.map(ToString::to_string),
                "pid": s.pid().map(|p| p.as_raw()),
            })
        };
        let members = self.members.len();
        let doc = serde_json::json!({
            "kind": crate::model::setting_name(&self.kind),
            "members": self.members.iter().enumerate().map(|(k, s)| server(s, self.fronts.get(k))).collect::<Vec<_>>(),
            "sentinels": self.sentinels.iter().enumerate().map(|(k, s)| server(s, self.fronts.get(members + k))).collect::<Vec<_>>(),
            "workers": self.views,
            "links": self.links.len() + 1,
        });
        serde_json::to_string_pretty(&doc).expect("a service description serialises") + "\n"
    }

    fn start_redis(exp: &Experiment, dir: &Path, seed: u64) -> Result<ReplicatedService, ServerError> {
        let (workers, members) = (exp.workers, exp.substrate.members);
        let servers = members + SENTINELS;
        let plan = Plan::new(workers, servers, members)?;
        let ips = &plan.ips;
        let mut doors = Vec::new();
        for x in 0..servers {
            let sources = (0..servers)
                .filter(|y| *y != x)
                .map(|y| (IpAddr::V4(ips[y]), plan.link(workers + x, workers + y)))
                .collect();
            doors.push(Door {
                listen: SocketAddr::new(ips[x].into(), 0),
                upstream: plan.client[x],
                route: Route::BySource { sources, otherwise: plan.harness() },
            });
        }
        doors.extend(plan.worker_doors());
        let proxy = Proxy::start_doors(doors, plan.harness() + 1, seed)
            .map_err(|e| ServerError::Setup(format!("cannot start the proxy of the replicated service: {e}")))?;
        let fronts: Vec<SocketAddr> = (0..servers).map(|x| proxy.address(x)).collect();
        let views = (0..workers)
            .map(|w| ServiceView {
                name: NAME.to_string(),
                sentinels: (members..servers).map(|x| plan.door_url(&proxy, w, x, "redis")).collect(),
                members: (0..members).map(|k| plan.member_view(&proxy, w, k, fronts[k], "redis")).collect(),
                sync_replicas: exp.substrate.sync_replicas,
            })
            .collect();
        let mut started = Vec::new();
        for k in 0..members {
            let setup =
                Setup::Member { announce: fronts[k], replica_of: (k > 0).then_some(fronts[0]), clock: Vec::new() };
            let log = dir.join(format!("redis-{k}.log"));
            started.push(ManagedServer::start_redis(setup, ips[k], plan.client[k].port(), &log)?);
        }
        let deadline = Instant::now() + READY_WITHIN;
        for replica in &started[1..] {
            wait_for(deadline, "a replica in sync with its primary", || in_sync(&replica.address()))?;
        }
        let failover_after = exp.substrate.failover_after_of(exp.lease.lease);
        let failover_timeout = exp.substrate.failover_timeout_of(exp.lease.lease);
        let ids: Vec<String> = (0..SENTINELS).map(|s| format!("{:040x}", (seed as u128) << 8 | s as u128)).collect();
        let mut sentinels = Vec::new();
        for s in 0..SENTINELS {
            let x = members + s;
            let config = dir.join(format!("sentinel-{s}.conf"));
            let mut text = format!(
                "sentinel announce-ip {ip}\nsentinel announce-port {port}\nsentinel myid {id}\n\
                 sentinel monitor {NAME} {pip} {pport} 2\n\
                 sentinel down-after-milliseconds {NAME} {after}\n\
                 sentinel failover-timeout {NAME} {timeout}\n\
                 sentinel parallel-syncs {NAME} 1\n",
                ip = fronts[x].ip(),
                port = fronts[x].port(),
                id = ids[s],
                pip = fronts[0].ip(),
                pport = fronts[0].port(),
                after = failover_after.as_ms_f64().round() as u64,
                timeout = failover_timeout.as_ms_f64().round() as u64,
            );
            // Known from the start: no wait for their hello messages.
            for f in &fronts[1..members] {
                text += &format!("sentinel known-replica {NAME} {} {}\n", f.ip(), f.port());
            }
            for o in (0..SENTINELS).filter(|o| *o != s) {
                let f = fronts[members + o];
                text += &format!("sentinel known-sentinel {NAME} {} {} {}\n", f.ip(), f.port(), ids[o]);
            }
            std::fs::write(&config, text).map_err(|e| ServerError::Setup(format!("{}: {e}", config.display())))?;
            let log = dir.join(format!("sentinel-{s}.log"));
            sentinels.push(ManagedServer::start_redis(
                Setup::Sentinel { config },
                ips[x],
                plan.client[x].port(),
                &log,
            )?);
        }
        for s in &sentinels {
            wait_for(deadline, "a Sentinel that can reach its quorum", || quorum(&s.address()))?;
        }
        Ok(ReplicatedService::assemble(Kind::Redis, plan, proxy, (started, sentinels), fronts, views, Vec::new()))
    }

    /// Redlock's independent Redis servers: nothing between them, each
    /// worker's doors to each; a server's wall clock moved by the
    /// harness's shim where a `skew` targets a member.
    fn start_redlock(exp: &Experiment, dir: &Path, seed: u64) -> Result<ReplicatedService, ServerError> {
        let (workers, members) = (exp.workers, exp.substrate.members);
        let plan = Plan::new(workers, members, members)?;
        let any: SocketAddr = (Ipv4Addr::LOCALHOST, 0).into();
        // Front doors nobody dials (the servers know nothing of each
        // other), so that the doors' numbering is the others'.
        let mut doors: Vec<Door> = (0..members)
            .map(|x| Door { listen: any, upstream: plan.client[x], route: Route::Link(plan.harness()) })
            .collect();
        doors.extend(plan.worker_doors());
        let proxy = Proxy::start_doors(doors, plan.harness() + 1, seed)
            .map_err(|e| ServerError::Setup(format!("cannot start the proxy of the Redlock servers: {e}")))?;
        let skewed =
            exp.fault_kinds().any(|f| f.action == crate::model::Action::Skew && matches!(f.target, Target::Member(_)));
        let mut started = Vec::new();
        let mut clocks = Vec::new();
        for k in 0..members {
            let (control, clock) = if skewed {
                let (control, env) = crate::trial::clock::server_clock(&dir.join("clocks"), &format!("member-{k}"))
                    .map_err(|e| ServerError::Setup(format!("cannot prepare member {k}'s clock: {e}")))?;
                (Some(control), env)
            } else {
                (None, Vec::new())
            };
            let setup = Setup::Member { announce: plan.client[k], replica_of: None, clock };
            let log = dir.join(format!("redis-{k}.log"));
            started.push(ManagedServer::start_redis(setup, plan.ips[k], plan.client[k].port(), &log)?);
            clocks.push(control);
        }
        let views = (0..workers)
            .map(|w| ServiceView {
                name: String::new(),
                sentinels: Vec::new(),
                members: (0..members).map(|k| plan.member_view(&proxy, w, k, plan.client[k], "redis")).collect(),
                sync_replicas: 0,
            })
            .collect();
        let fronts = plan.client.clone();
        Ok(ReplicatedService::assemble(Kind::Redlock, plan, proxy, (started, Vec::new()), fronts, views, clocks))
    }

    /// Move member `k`'s wall clock by `by_ns` (jumps add up).
    pub fn jump_clock(&self, k: usize, by_ns: i64) -> Result<(), super::ControlError> {
        let Some(Some(control)) = self.clocks.get(k) else {
            return Err(super::ControlError::NoClock(k));
        };
        let mut jumps = self.jumps.lock().unwrap_or_else(|p| p.into_inner());
        jumps[k] += by_ns;
        crate::trial::clock::jump_file(control, jumps[k])
            .map_err(|source| super::ControlError::Clock { member: k, source })
    }

    /// etcd as a cluster of `members`: each member's peers dial its front
    /// door, told apart by the process that dialled (etcd cannot be told
    /// to dial from an address of its own).
    fn start_etcd(exp: &Experiment, dir: &Path, seed: u64) -> Result<ReplicatedService, ServerError> {
        let (workers, members) = (exp.workers, exp.substrate.members);
        let plan = Plan::new(workers, members, members)?;
        let ips = &plan.ips;
        let peers: Vec<SocketAddr> = ips.iter().map(|ip| free_port(*ip)).collect::<Result<_, _>>()?;
        let owners: Vec<Owners> = (0..members).map(|_| Owners::default()).collect();
        let mut doors: Vec<Door> = (0..members)
            .map(|x| Door {
                listen: SocketAddr::new(ips[x].into(), 0),
                upstream: peers[x],
                route: Route::ByOwner { owners: owners[x].clone(), otherwise: plan.harness() },
            })
            .collect();
        doors.extend(plan.worker_doors());
        let proxy = Proxy::start_doors(doors, plan.harness() + 1, seed)
            .map_err(|e| ServerError::Setup(format!("cannot start the proxy of the etcd cluster: {e}")))?;
        let fronts: Vec<SocketAddr> = (0..members).map(|x| proxy.address(x)).collect();
        let cluster = (0..members).map(|k| format!("m{k}=http://{}", fronts[k])).collect::<Vec<_>>().join(",");
        let mut started = Vec::new();
        for k in 0..members {
            let member = etcd::Member::of_cluster(&format!("m{k}"), peers[k], fronts[k], &cluster)?;
            let log = dir.join(format!("etcd-{k}.log"));
            let server = ManagedServer::launch_etcd(member, ips[k], plan.client[k].port(), &log)?;
            let pid = server.pid().map_or(0, |p| p.as_raw());
            // Known before it can dial: its connections are on their links.
            for (x, door) in owners.iter().enumerate().filter(|(x, _)| *x != k) {
                door.lock().unwrap_or_else(|p| p.into_inner()).push((pid, plan.link(workers + k, workers + x)));
            }
            started.push(server);
        }
        if let Err(e) = started.iter_mut().try_for_each(ManagedServer::wait_ready) {
            // A member gone at start-up (its port taken) keeps the others
            // from a quorum: its reason is the one to act on.
            return Err(started.iter_mut().find_map(ManagedServer::exited).unwrap_or(e));
        }
        // A connection the front door could not place (its dialler not
        // yet known) is reset: the member dials again, and is placed.
        let _ = proxy.apply(plan.harness(), Toxic::Reset, 1.0);
        let _ = proxy.heal(plan.harness());
        let views = (0..workers)
            .map(|w| ServiceView {
                name: String::new(),
                sentinels: Vec::new(),
                // Each worker starts at a member of its own: w mod members.
                members: (0..members)
                    .map(|i| (w + i) % members)
                    .map(|k| plan.member_view(&proxy, w, k, fronts[k], "http"))
                    .collect(),
                sync_replicas: 0,
            })
            .collect();
        Ok(ReplicatedService::assemble(Kind::Etcd, plan, proxy, (started, Vec::new()), fronts, views, Vec::new()))
    }

    /// The running service, from its parts: its members and Sentinels,
    /// each member's clock control file where the harness moves it.
    fn assemble(
        kind: Kind,
        plan: Plan,
        proxy: Proxy,
        (members, sentinels): (Vec<ManagedServer>, Vec<ManagedServer>),
        fronts: Vec<SocketAddr>,
        views: Vec<ServiceView>,
        clocks: Vec<Option<std::path::PathBuf>>,
    ) -> ReplicatedService {
        let jumps = Mutex::new(vec![0; clocks.len()]);
        ReplicatedService {
            kind,
            workers: plan.workers,
            members,
            sentinels,
            proxy,
            links: plan.links,
            fronts,
            views,
            clocks,
            jumps,
        }
    }

    /// Each member's own address, past the proxy.
    pub fn member_addresses(&self) -> Vec<String> {
        self.members.iter().map(ManagedServer::address).collect()
    }

    /// Where each worker reaches the service.
    pub fn views(&self) -> Vec<ServiceView> {
        self.views.clone()
    }

    /// The member the Sentinels name as primary now, or etcd's Raft
    /// leader (asked directly, past the proxy), else the first.
    pub fn primary(&self) -> usize {
        if self.kind == Kind::Etcd {
            let addresses: Vec<String> = self.members.iter().map(ManagedServer::address).collect();
            return crate::substrate::etcd::leader_of(&addresses).unwrap_or(0);
        }
        self.sentinels
            .iter()
            .find_map(|s| primary_named(&s.address()))
            .and_then(|a| self.fronts.iter().position(|f| f.to_string() == a))
            .filter(|k| *k < self.members.len())
            .unwrap_or(0)
    }

    /// The node of member `k`.
    pub fn member_node(&self, k: usize) -> usize {
        self.workers + k
    }

    /// The nodes of every server but member `k` (Sentinels included).
    pub fn servers_but(&self, k: usize) -> Vec<usize> {
        let servers = self.members.len() + self.sentinels.len();
        (0..servers).filter(|x| *x != k).map(|x| self.workers + x).collect()
    }

    /// The pid of server `x` (members, then Sentinels).
    pub fn server_pid(&self, x: usize) -> Option<i32> {
        self.members.iter().chain(&self.sentinels).nth(x).and_then(|m| m.pid()).map(|p| p.as_raw())
    }

    /// The links that join `side` to the rest.
    fn across(&self, side: &[usize]) -> Vec<usize> {
        let on = |n: usize| side.contains(&n);
        (0..self.links.len()).filter(|&l| on(self.links[l].0) != on(self.links[l].1)).collect()
    }

    /// Cut `side` off from the rest with `toxic`; when it took effect.
    pub fn apply(&self, side: &[usize], toxic: Toxic, toxicity: f64) -> std::io::Result<i64> {
        let mut at = crate::model::clock::mono_ns();
        for l in self.across(side) {
            at = self.proxy.apply(l, toxic, toxicity)?;
        }
        Ok(at)
    }

    /// End every fault between `side` and the rest.
    pub fn heal(&self, side: &[usize]) -> std::io::Result<i64> {
        let mut at = crate::model::clock::mono_ns();
        for l in self.across(side) {
            at = self.proxy.heal(l)?;
        }
        Ok(at)
    }

    /// End every fault.
    pub fn heal_all(&self) {
        for l in 0..self.proxy.links() {
            let _ = self.proxy.heal(l);
        }
    }

    /// Stop relaying; each worker's lost replies (monotonic ns), by worker.
    pub fn stop(self) -> Vec<Vec<i64>> {
        let mut lost = vec![Vec::new(); self.workers];
        for (l, stats) in self.proxy.stop().into_iter().enumerate() {
            if let Some(&(w, _)) = self.links.get(l).filter(|(a, _)| *a < self.workers) {
                lost[w].extend(stats.reply_losses);
            }
        }
        lost
    }
}

fn wait_for(deadline: Instant, what: &str, mut ready: impl FnMut() -> bool) -> Result<(), ServerError> {
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(ServerError::Setup(format!("the replicated Redis did not come up: no {what} within {READY_WITHIN:?}")))
}

fn query<T: ::redis::FromRedisValue>(address: &str, cmd: &::redis::Cmd) -> Option<T> {
    let within = Duration::from_millis(200);
    let mut conn = ::redis::Client::open(address).ok()?.get_connection_with_timeout(within).ok()?;
    conn.set_read_timeout(Some(within)).ok()?;
    cmd.query(&mut conn).ok()
}

fn in_sync(replica: &str) -> bool {
    query::<String>(replica, ::redis::cmd("INFO").arg("replication"))
        .is_some_and(|s| s.contains("master_link_status:up"))
}

fn quorum(sentinel: &str) -> bool {
    query::<String>(sentinel, ::redis::cmd("SENTINEL").arg("CKQUORUM").arg(NAME)).is_some_and(|s| s.starts_with("OK"))
}

fn primary_named(sentinel: &str) -> Option<String> {
    let (host, port): (String, String) =
        query(sentinel, ::redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(NAME))?;
    Some(format!("{host}:{port}"))
}
