//! Faults: what the experiment schedules (`Fault`), and what the harness
//! delivered (`FaultRow`, a faults.csv row).

use serde::{Deserialize, Serialize};

use super::duration::{Dur, Offset};
use super::history::EventKind;

/// Whom a fault hits. Resolved at the moment of firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The worker that currently believes it leads (the latest to acquire).
    Leader,
    /// A seeded random live worker that does not believe it leads.
    Watcher,
    /// Every live worker.
    All,
    /// With `after:`, the worker whose event triggered the fault; otherwise
    /// a seeded random live worker.
    Any,
    /// The lock file itself (lock-* actions).
    Lock,
    /// The harness-managed lease server (server-* actions).
    Server,
    /// Every live worker except the one that believes it leads (the
    /// majority side of a partition that isolates the leader).
    AllButLeader,
    /// Worker by index.
    Worker(usize),
    /// A replicated service's primary (as it is at the fault) and the
    /// worker that believes it leads: a partition cuts them off from the
    /// rest of the service and the other workers (network faults).
    PrimarySide,
    /// A replicated service's side away from its primary: every other
    /// server and every worker but the leader (a partition cuts the same
    /// links as one of `primary-side`; the rows name this side).
    Majority,
    /// A member of a replicated service by index, 0 the first primary:
    /// a partition cuts it off from everything else (network faults).
    Member(usize),
}

impl Target {
    /// Every target written by name (a worker is written by its index, a
    /// member as `member-K`).
    pub const NAMES: [&'static str; 9] =
        ["leader", "watcher", "all", "all-but-leader", "any", "lock", "server", "primary-side", "majority"];

    /// The target of a name in `NAMES`, or `member-K`.
    pub fn from_name(name: &str) -> Option<Target> {
        if let Some(k) = name.strip_prefix("member-") {
            return k.parse().ok().map(Target::Member);
        }
        Some(match name {
            "leader" => Target::Leader,
            "watcher" => Target::Watcher,
            "all" => Target::All,
            "all-but-leader" => Target::AllButLeader,
            "any" => Target::Any,
            "lock" => Target::Lock,
            "server" => Target::Server,
            "primary-side" => Target::PrimarySide,
            "majority" => Target::Majority,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Leader => write!(f, "leader"),
            Target::Watcher => write!(f, "watcher"),
            Target::All => write!(f, "all"),
            Target::Any => write!(f, "any"),
            Target::Lock => write!(f, "lock"),
            Target::Server => write!(f, "server"),
            Target::AllButLeader => write!(f, "all-but-leader"),
            Target::Worker(i) => write!(f, "{i}"),
            Target::PrimarySide => write!(f, "primary-side"),
            Target::Majority => write!(f, "majority"),
            Target::Member(k) => write!(f, "member-{k}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// SIGKILL.
    Kill,
    /// SIGTERM.
    Term,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
    /// SIGSTOP, then SIGCONT after `duration`.
    Pause,
    LockEmpty,
    LockDelete,
    LockCorrupt,
    LockStale,
    /// SIGSTOP the harness-managed server, SIGCONT after `duration`.
    ServerPause,
    /// SIGKILL the server (it stays down).
    ServerKill,
    /// SIGKILL the server and start it again, empty (no persistence).
    ServerRestart,
    /// The worker's link to its lease server goes silent both ways:
    /// nothing is refused, connections hang (until `heal` or `duration`).
    Partition,
    /// Requests reach the server, replies are lost; at heal the affected
    /// connections are reset (a byte stream cannot skip lost replies).
    PartitionReplies,
    /// Latency (with jitter) on the link, in one direction or both.
    Delay,
    /// Connections are reset, new ones reset at once.
    Reset,
    /// End every network fault on the link.
    Heal,
    /// The worker's clock jumps `by` (forward or back) and stays there.
    Skew,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Kill => "kill",
            Action::Term => "term",
            Action::Stop => "stop",
            Action::Cont => "cont",
            Action::Pause => "pause",
            Action::LockEmpty => "lock-empty",
            Action::LockDelete => "lock-delete",
            Action::LockCorrupt => "lock-corrupt",
            Action::LockStale => "lock-stale",
            Action::ServerPause => "server-pause",
            Action::ServerKill => "server-kill",
            Action::ServerRestart => "server-restart",
            Action::Partition => "partition",
            Action::PartitionReplies => "partition-replies",
            Action::Delay => "delay",
            Action::Reset => "reset",
            Action::Heal => "heal",
            Action::Skew => "skew",
        }
    }

    /// Faults on a worker's link to its lease server (through the
    /// harness's proxy).
    pub fn is_network(self) -> bool {
        matches!(self, Action::Partition | Action::PartitionReplies | Action::Delay | Action::Reset | Action::Heal)
    }

    /// Actions that may last a `duration` (and end by themselves): pauses
    /// must, network faults may (otherwise they last until `heal`).
    pub fn takes_duration(self) -> bool {
        self.is_pause() || (self.is_network() && self != Action::Heal)
    }

    pub fn is_server(self) -> bool {
        matches!(self, Action::ServerPause | Action::ServerKill | Action::ServerRestart)
    }

    /// Pauses take a `duration`.
    pub fn is_pause(self) -> bool {
        matches!(self, Action::Pause | Action::ServerPause)
    }

    pub fn is_lock(self) -> bool {
        matches!(self, Action::LockEmpty | Action::LockDelete | Action::LockCorrupt | Action::LockStale)
    }
}

/// Fire a fault relative to the protocol instead of the clock: `delay` after
/// the next `event` of a matching target at or after the fault's `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct After {
    pub event: EventKind,
    pub delay: Dur,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub at: Dur,
    /// Fire at a seeded uniform moment in `[at, at + jitter)` instead (the
    /// "kill at a uniform moment" of the theoretical bounds).
    pub jitter: Dur,
    pub after: Option<After>,
    pub target: Target,
    pub action: Action,
    /// Pause length (pause only).
    pub duration: Option<PauseLen>,
    /// Fire again every `every` (each time with its own jitter and pause
    /// length) until the trial ends: the busy-leader workload. With
    /// `after:`, the fault is re-armed from each period's start and fires
    /// after the next matching event (e.g. a pause inside every job).
    pub every: Option<Dur>,
    /// How a network fault treats the link (network actions only).
    pub net: Option<NetParams>,
    /// How far a `skew` moves the worker's clock (scaled).
    pub skew: Option<Offset>,
}

impl Fault {
    /// How often it fires in a trial `end` long: once, or each period from
    /// `at` on.
    pub fn firings(&self, end: Dur) -> u64 {
        self.every.map_or(1, |e| end.as_us().saturating_sub(self.at.as_us()) / e.as_us().max(1) + 1)
    }

    /// The fault as a trial that begins `start` into this one sees it (the
    /// rest of a soak after a resume): a fault due before `start` (or whose
    /// jitter window had begun) is gone, having fired or been waiting; one
    /// that repeats keeps its period from its next firing.
    pub fn from_start(&self, start: Dur) -> Option<Fault> {
        let (at, start) = (self.at.as_us(), start.as_us());
        let at = match self.every.map(Dur::as_us) {
            _ if at >= start => at - start,
            Some(every) if every > 0 => (at + (start - at).div_ceil(every) * every) - start,
            _ => return None,
        };
        Some(Fault { at: Dur::from_us(at), ..self.clone() })
    }

    /// Every duration of the fault multiplied by `s` (the time scale).
    pub fn scaled(&self, s: f64) -> Fault {
        Fault {
            at: self.at.scaled(s),
            jitter: self.jitter.scaled(s),
            after: self.after.map(|a| After { event: a.event, delay: a.delay.scaled(s) }),
            duration: self.duration.as_ref().map(|d| d.scaled(s)),
            every: self.every.map(|e| e.scaled(s)),
            net: self.net.map(|n| n.scaled(s)),
            skew: self.skew.map(|o| o.scaled(s)),
            ..self.clone()
        }
    }
}

/// Which way a delay applies: to requests (worker → server), replies, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    #[default]
    Both,
    Requests,
    Replies,
}

impl Direction {
    pub fn requests(self) -> bool {
        self != Direction::Replies
    }

    pub fn replies(self) -> bool {
        self != Direction::Requests
    }
}

/// The parameters of a network fault, like a Toxiproxy toxic's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetParams {
    /// Added one-way latency (delay only; scaled).
    pub latency: Dur,
    /// Each chunk's latency is drawn uniformly from `latency ± jitter`
    /// (never below zero; scaled). The stream's order is kept.
    pub jitter: Dur,
    pub direction: Direction,
    /// The fraction of connections the fault applies to, drawn (seeded)
    /// per connection: 1 = every connection.
    pub toxicity: f64,
}

impl Default for NetParams {
    fn default() -> Self {
        NetParams { latency: Dur::ZERO, jitter: Dur::ZERO, direction: Direction::Both, toxicity: 1.0 }
    }
}

impl NetParams {
    pub fn scaled(&self, s: f64) -> NetParams {
        NetParams { latency: self.latency.scaled(s), jitter: self.jitter.scaled(s), ..*self }
    }
}

/// How long a pause lasts: fixed, or drawn (seeded) per pause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseLen {
    Fixed(Dur),
    /// Uniform in [min, max).
    Uniform([Dur; 2]),
    /// Exponential with this mean (memoryless stalls: GC, swapping).
    Exponential(Dur),
    /// One of these, equally likely.
    Choice(Vec<Dur>),
}

impl PauseLen {
    pub fn scaled(&self, s: f64) -> PauseLen {
        match self {
            PauseLen::Fixed(d) => PauseLen::Fixed(d.scaled(s)),
            PauseLen::Uniform([a, b]) => PauseLen::Uniform([a.scaled(s), b.scaled(s)]),
            PauseLen::Exponential(m) => PauseLen::Exponential(m.scaled(s)),
            PauseLen::Choice(v) => PauseLen::Choice(v.iter().map(|d| d.scaled(s)).collect()),
        }
    }

    /// Draw one length.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> Dur {
        match self {
            PauseLen::Fixed(d) => *d,
            PauseLen::Uniform([a, b]) if b > a => Dur::from_us(rng.random_range(a.as_us()..b.as_us())),
            PauseLen::Uniform([a, _]) => *a,
            PauseLen::Exponential(mean) => {
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                Dur::from_us((-u.ln() * mean.as_us() as f64).round() as u64)
            }
            PauseLen::Choice(v) => v[rng.random_range(0..v.len())],
        }
    }

    /// As written in YAML: `15s`, or a one-key mapping in flow style.
    pub fn to_yaml(&self) -> String {
        match self {
            PauseLen::Fixed(d) => d.to_string(),
            PauseLen::Uniform([a, b]) => format!("{{uniform: [{a}, {b}]}}"),
            PauseLen::Exponential(m) => format!("{{exponential: {m}}}"),
            PauseLen::Choice(v) => {
                format!("{{choice: [{}]}}", v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
            }
        }
    }

    pub fn is_positive(&self) -> bool {
        match self {
            PauseLen::Fixed(d) | PauseLen::Exponential(d) => *d > Dur::ZERO,
            PauseLen::Uniform([a, b]) => b >= a && *b > Dur::ZERO,
            PauseLen::Choice(v) => !v.is_empty() && v.iter().all(|d| *d > Dur::ZERO),
        }
    }
}

/// A fault delivery with times relative to the barrier (a faults.csv row).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRow {
    pub fault: usize,
    pub action: String,
    pub target: String,
    pub worker: Option<usize>,
    pub pid: Option<i32>,
    pub scheduled_us: i64,
    pub actual_us: i64,
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn a_fault_seen_from_later_in_the_trial_is_moved_earlier_or_gone() {
        let at = |s| Fault {
            at: Dur::from_secs(s),
            jitter: Dur::ZERO,
            after: None,
            target: Target::Leader,
            action: Action::Kill,
            duration: None,
            every: None,
            net: None,
            skew: None,
        };
        let from = |f: &Fault, s| f.from_start(Dur::from_secs(s)).map(|f| f.at.as_us() / 1_000_000);
        assert_eq!(from(&at(90), 60), Some(30));
        assert_eq!(from(&at(60), 60), Some(0), "due at the start: fires at once");
        assert_eq!(from(&at(30), 60), None, "fired (or waited) before the start");
        let every = Fault { every: Some(Dur::from_secs(25)), ..at(10) };
        // It fires at 10, 35, 60, 85, …: from 70 on, 15 s in and every 25 s.
        assert_eq!(from(&every, 70), Some(15));
        assert_eq!(from(&every, 60), Some(0));
        assert_eq!(every.from_start(Dur::from_secs(70)).unwrap().every, every.every);
    }

    #[test]
    fn every_target_name_reads_back_as_itself() {
        for name in Target::NAMES {
            assert_eq!(Target::from_name(name).map(|t| t.to_string()).as_deref(), Some(name));
        }
        assert_eq!(Target::from_name("3"), None);
        assert_eq!(Target::from_name("member-2"), Some(Target::Member(2)));
        assert_eq!(Target::Member(2).to_string(), "member-2");
    }

    #[test]
    fn pause_lengths_are_drawn_from_their_distribution() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let n = 20_000;
        let mean = |len: &PauseLen, rng: &mut rand_chacha::ChaCha8Rng| {
            (0..n).map(|_| len.sample(rng).as_ms_f64()).sum::<f64>() / n as f64
        };
        let exp = PauseLen::Exponential(Dur::from_secs(2));
        assert!((mean(&exp, &mut rng) - 2000.0).abs() < 60.0, "exponential mean");
        let uni = PauseLen::Uniform([Dur::from_secs(1), Dur::from_secs(3)]);
        assert!((mean(&uni, &mut rng) - 2000.0).abs() < 30.0, "uniform mean");
        assert!((0..1000).all(|_| {
            let d = uni.sample(&mut rng);
            d >= Dur::from_secs(1) && d < Dur::from_secs(3)
        }));
        let choice = PauseLen::Choice(vec![Dur::from_secs(1), Dur::from_secs(4)]);
        assert!((0..1000).all(|_| [Dur::from_secs(1), Dur::from_secs(4)].contains(&choice.sample(&mut rng))));
        assert_eq!(PauseLen::Fixed(Dur::from_ms(5)).sample(&mut rng), Dur::from_ms(5));
    }
}
