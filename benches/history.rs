//! A synthetic soak's history, for the checker's benchmark against history
//! length (scripts/bench-history.sh):
//!
//!   cargo bench --bench history -- DIR EVENTS [WORKERS]
//!
//! writes DIR/experiment.yaml and DIR/events.csv: one trial of WORKERS
//! (default 100) built-in workers on the blog's lease (9 s, renewed and
//! watched every 3 s) in steady state, with the leader paused past its
//! lease about once a minute (at Poisson moments; the experiment file
//! says a pause a minute, which a campaign could not draw for a history
//! this long): the watchers see it
//! expire and one takes over, the paused leader resumes and steps down.
//! The events are what a real run of that experiment records, at the same
//! rate, written as they are generated: nothing is held, so a history far
//! larger than memory can be made. A directory without host.json is a
//! history put together by hand, which `leasequake check` takes as it is.

use std::io::Write;
use std::path::PathBuf;

use leasequake_model::history::{Detail, Event, EventKind, Micros};
use leasequake_report::rows::EventRow;

const SECOND: Micros = 1_000_000;
const LEASE: Micros = 9 * SECOND;
const TICK: Micros = 3 * SECOND;
/// A pause lasts longer than the lease, so that it costs the leader it.
const PAUSE: Micros = 12 * SECOND;
/// The campaign's mean interval between pauses.
const MEAN_INTERVAL: Micros = 60 * SECOND;
/// The wall clock at the barrier, in Unix seconds.
const WALL: f64 = 1_800_000_000.0;

fn usage() -> ! {
    eprintln!("usage: history DIR EVENTS [WORKERS]");
    std::process::exit(2);
}

/// A small deterministic generator (xorshift): the same history for the
/// same arguments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The rows, written a tick at a time in time order, as a run writes its
/// history: only the current tick's events are held.
struct Out {
    csv: csv::Writer<std::io::BufWriter<std::fs::File>>,
    tick: Vec<Event>,
    written: u64,
}

impl Out {
    fn event(&mut self, t_us: Micros, worker: Option<usize>, kind: EventKind, detail: Detail) {
        self.tick.push(Event { t_us, worker, pid: worker.map(pid), kind, detail });
        self.written += 1;
    }

    fn flush(&mut self) {
        self.tick.sort_by_key(|e| e.t_us);
        for e in self.tick.drain(..) {
            let row = EventRow {
                trial: 1,
                t_ms: e.t_us as f64 / 1000.0,
                worker: e.worker,
                pid: e.pid,
                event: e.kind.name().to_string(),
                detail: e.detail.to_json(),
            };
            self.csv.serialize(row).expect("events.csv is written");
        }
    }
}

fn pid(worker: usize) -> i32 {
    10_000 + worker as i32
}

fn lease_until(granted_us: Micros) -> f64 {
    WALL + (granted_us + LEASE) as f64 / SECOND as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let (Some(dir), Some(events)) = (args.first(), args.get(1)) else { usage() };
    let Ok(events) = events.parse::<u64>() else { usage() };
    let workers: usize = match args.get(2) {
        Some(w) => w.parse().ok().filter(|&w| w >= 2).unwrap_or_else(|| usage()),
        None => 100,
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("the directory is made");
    let file = std::fs::File::create(dir.join("events.csv")).expect("events.csv is made");
    let mut out = Out {
        csv: csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 20, file)),
        tick: Vec::new(),
        written: 0,
    };
    // A tick's events are done this long after it: what falls between two
    // ticks (a pause, a resume) comes after them.
    let settled = 2_000 + workers as Micros * 5;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let op = |rng: &mut Rng| Some(20 + rng.below(400));

    // Spawned, ready, released on the barrier; worker 0 wins the race.
    for w in 0..workers {
        out.event(-20_000 + w as Micros * 10, Some(w), EventKind::Spawn, Detail::default());
    }
    for w in 0..workers {
        out.event(-2_000 + w as Micros, Some(w), EventKind::Ready, Detail::default());
    }
    out.event(0, None, EventKind::Barrier, Detail::default());
    for w in 0..workers {
        out.event(50 + w as Micros, Some(w), EventKind::Start, Detail::default());
    }
    let mut leader = 0usize;
    let mut granted: Micros = 100 + workers as Micros;
    let grant = |holder: usize, at: Micros, how: &str, rng: &mut Rng| Detail {
        holder: Some(i64::from(pid(holder))),
        lease_until: Some(lease_until(at)),
        expires_in_ms: Some(LEASE as f64 / 1000.0),
        op_us: op(rng),
        how: Some(how.to_string()),
        ..Detail::default()
    };
    out.event(granted, Some(0), EventKind::Acquired, grant(0, granted, "start", &mut rng));
    for w in 1..workers {
        out.event(
            granted + 10 + w as Micros,
            Some(w),
            EventKind::NotAcquired,
            Detail { op_us: op(&mut rng), ..Detail::default() },
        );
    }

    // The campaign: the next pause, and the one paused (until when).
    let mut next_pause = (rng.unit().max(1e-9).ln() * -(MEAN_INTERVAL as f64)) as Micros;
    let mut paused: Option<(usize, Micros)> = None;
    let mut faults = 0usize;
    out.flush();
    let mut last = 0;
    for k in 1.. {
        let t = k as Micros * TICK;
        if out.written >= events {
            break;
        }
        last = t;
        // A pause of the leader falls between two ticks.
        if paused.is_none() && next_pause < t {
            let at = next_pause.max(t - TICK + settled);
            let fault = |action: &str, rng: &mut Rng| Detail {
                fault: Some(faults),
                action: Some(action.to_string()),
                error_us: Some(rng.below(200) as i64),
                ..Detail::default()
            };
            out.event(at, Some(leader), EventKind::Fault, fault("stop", &mut rng));
            paused = Some((leader, at + PAUSE));
            faults += 1;
            next_pause = at + PAUSE + (rng.unit().max(1e-9).ln() * -(MEAN_INTERVAL as f64)) as Micros;
        }
        // The paused one resumes between ticks, and steps down at its next.
        let mut resumed = None;
        if let Some((w, until)) = paused
            && until < t
        {
            let d = Detail {
                fault: Some(faults - 1),
                action: Some("cont".into()),
                error_us: Some(rng.below(20) as i64),
                ..Detail::default()
            };
            out.event(until.max(t - TICK + settled), Some(w), EventKind::Fault, d);
            paused = None;
            resumed = Some(w);
        }
        let expired = t >= granted + LEASE;
        // Who leads at this tick: the leader renews unless paused.
        if paused.is_none_or(|(w, _)| w != leader) && !expired {
            out.event(
                t + 400,
                Some(leader),
                EventKind::Renewing,
                Detail { late_us: Some(rng.below(500)), ..Detail::default() },
            );
            granted = t + 900;
            out.event(granted, Some(leader), EventKind::Renewed, grant(leader, granted, "renew", &mut rng));
        }
        let mut taken = false;
        let holder = leader;
        for w in 0..workers {
            if w == holder || paused.is_some_and(|(p, _)| p == w) {
                continue;
            }
            let at = t + 1_000 + w as Micros * 5;
            let seen = Detail {
                holder: Some(i64::from(pid(holder))),
                lease_until: Some(lease_until(granted)),
                op_us: op(&mut rng),
                late_us: Some(rng.below(300)),
                ..Detail::default()
            };
            if resumed == Some(w) && leader != w {
                out.event(
                    at,
                    Some(w),
                    EventKind::SteppedDown,
                    Detail {
                        reason: Some("other-holder".into()),
                        holder: Some(i64::from(pid(leader))),
                        op_us: op(&mut rng),
                        ..Detail::default()
                    },
                );
            } else if expired {
                out.event(at, Some(w), EventKind::ExpiredSeen, seen);
                if taken {
                    out.event(
                        at + 300,
                        Some(w),
                        EventKind::TakeoverLost,
                        Detail { op_us: op(&mut rng), ..Detail::default() },
                    );
                } else {
                    taken = true;
                    leader = w;
                    granted = at + 200;
                    out.event(granted, Some(w), EventKind::Acquired, grant(w, granted, "takeover", &mut rng));
                }
            } else {
                out.event(at, Some(w), EventKind::HeldBy, seen);
            }
        }
        out.flush();
    }
    // The trial ends after its last tick's events, as its duration says.
    let end = (last + SECOND) / SECOND * SECOND;
    out.event(end, None, EventKind::TrialEnd, Detail::default());
    out.flush();
    out.csv.flush().expect("events.csv is written");
    let experiment = format!(
        "# A synthetic soak's history (benches/history.rs): {} events.\n\
         name: synthetic-soak\nworkers: {workers}\ntrials: 1\nseed: 1\nduration: {}s\n\
         faults:\n  - {{at: 30s, target: leader, action: pause, duration: 12s, every: 60s}}\n",
        out.written,
        end / SECOND
    );
    std::fs::write(dir.join("experiment.yaml"), experiment).expect("experiment.yaml is written");
    let mut stdout = std::io::stdout();
    let _ =
        writeln!(stdout, "{} events, {} pauses, {workers} workers, {} s of trial", out.written, faults, end / SECOND);
}
