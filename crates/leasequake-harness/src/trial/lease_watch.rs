//! The harness's own eye on the lease (`substrate.observe`): a thread that
//! looks at it on the service every few milliseconds for the whole trial
//! and keeps each change, with the worker it belongs to where the service
//! names a process. Its sightings become `lease_held`, `lease_free` and
//! `lease_unseen` events of the history.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::msg::Msg;
use super::record::RawEvent;
use crate::model::clock::mono_ns;
use crate::model::history::{Detail, EventKind};
use crate::substrate::view::{LeaseView, Look};

/// How often the lease is looked at.
const PERIOD: Duration = Duration::from_micros(crate::model::settings::OBSERVE_PERIOD_US as u64);

/// One change seen on the service.
#[derive(Debug)]
pub struct Sighting {
    /// When the look that saw it began (CLOCK_MONOTONIC).
    pub t_ns: i64,
    /// When the look before it began: the change came between the two.
    pub before_ns: i64,
    pub look: Look,
    /// The worker (its index) whose process group holds the lease, where
    /// the service names a process.
    pub worker: Option<usize>,
}

impl Sighting {
    /// The history's event for it.
    fn into_raw(self) -> RawEvent {
        let since_us = Some(((self.t_ns - self.before_ns).max(0) / 1_000) as u64);
        let (kind, detail) = match self.look {
            Look::Free => (EventKind::LeaseFree, Detail { since_us, ..Detail::default() }),
            Look::Unseen => (EventKind::LeaseUnseen, Detail { since_us, ..Detail::default() }),
            Look::Held { grant, pid, ttl_ms } => (
                EventKind::LeaseHeld,
                Detail {
                    grant: Some(grant.chars().take(MAX_GRANT).collect()),
                    holder: pid.map(i64::from),
                    expires_in_ms: ttl_ms.map(|t| t as f64),
                    since_us,
                    ..Detail::default()
                },
            ),
        };
        RawEvent::harness(self.t_ns, self.worker, None, kind, detail)
    }
}

/// A grant's name is kept to this many characters (a key and its value).
const MAX_GRANT: usize = 200;

pub struct LeaseWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<RawEvent>>,
}

impl LeaseWatch {
    /// Start looking; `groups` are the workers' process groups (each
    /// worker leads its own), by worker index. Each change goes to the
    /// trial loop through `tx` as it is seen (never waiting for room: what
    /// the loop has no room for yet waits here).
    pub fn start(mut view: Box<dyn LeaseView>, groups: Vec<i32>, tx: SyncSender<Msg>) -> std::io::Result<LeaseWatch> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("lease-watch".into()).spawn(move || {
            let mut last: Option<Look> = None;
            let mut unsent: VecDeque<RawEvent> = VecDeque::new();
            let mut next = mono_ns();
            let mut before_ns = next;
            while !flag.load(Ordering::Relaxed) {
                let t_ns = mono_ns();
                let look = view.look();
                if last.as_ref().is_none_or(|l| !l.same(&look)) {
                    let worker = match &look {
                        Look::Held { pid: Some(pid), .. } => worker_of(*pid, &groups),
                        _ => None,
                    };
                    last = Some(look.clone());
                    unsent.push_back(Sighting { t_ns, before_ns, look, worker }.into_raw());
                }
                while let Some(raw) = unsent.pop_front() {
                    match tx.try_send(Msg::Observed(Box::new(raw))) {
                        Ok(()) => {}
                        Err(TrySendError::Full(Msg::Observed(raw))) => {
                            unsent.push_front(*raw);
                            break;
                        }
                        Err(_) => {}
                    }
                }
                before_ns = t_ns;
                next += PERIOD.as_nanos() as i64;
                let now = mono_ns();
                if next < now {
                    // Behind (the machine was busy): from now, not a burst.
                    next = now;
                }
                std::thread::sleep(Duration::from_nanos((next - now) as u64));
            }
            unsent.into()
        })?;
        Ok(LeaseWatch { stop, thread })
    }

    /// Stop looking: the changes not yet handed to the trial loop.
    pub fn stop(self) -> Vec<RawEvent> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// The worker whose process group `pid` is in: the worker itself, or a
/// process it started.
fn worker_of(pid: i32, groups: &[i32]) -> Option<usize> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    groups.iter().position(|g| Some(*g) == group_in_stat(&stat))
}

/// The process group field of /proc/PID/stat (the fifth, after the command
/// in parentheses, which may hold spaces and parentheses itself).
fn group_in_stat(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_read_past_a_command_with_parentheses() {
        assert_eq!(group_in_stat("42 (a (b) c) S 1 4000 4000 0"), Some(4000));
        assert_eq!(group_in_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_found_in_its_own_group() {
        let group = nix::unistd::getpgrp().as_raw();
        assert_eq!(worker_of(std::process::id() as i32, &[1, group]), Some(1));
    }

    /// A view that plays back a script of looks, then repeats the last
    /// and says it is done.
    struct Script(Vec<Look>, std::sync::mpsc::Sender<()>);

    impl LeaseView for Script {
        fn look(&mut self) -> Look {
            if self.0.len() > 1 {
                return self.0.remove(0);
            }
            let _ = self.1.send(());
            self.0[0].clone()
        }
    }

    #[test]
    fn only_changes_are_kept_and_those_the_loop_has_no_room_for_wait() {
        let held = |g: &str, ttl| Look::Held { grant: g.into(), pid: None, ttl_ms: Some(ttl) };
        let script = vec![Look::Free, Look::Free, held("a", 9), held("a", 5), held("b", 9), Look::Unseen];
        let (done, played) = std::sync::mpsc::channel();
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        let watch = LeaseWatch::start(Box::new(Script(script, done)), vec![], tx).unwrap();
        played.recv().unwrap();
        let unsent = watch.stop();
        let mut seen: Vec<RawEvent> = rx
            .try_iter()
            .map(|m| match m {
                Msg::Observed(raw) => *raw,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!((seen.len(), unsent.len()), (2, 2));
        seen.extend(unsent);
        let looks: Vec<(EventKind, Option<String>, Option<f64>)> =
            seen.into_iter().map(|r| (r.kind, r.detail.grant, r.detail.expires_in_ms)).collect();
        let held = |g: &str| (EventKind::LeaseHeld, Some(g.to_string()), Some(9.0));
        assert_eq!(
            looks,
            vec![(EventKind::LeaseFree, None, None), held("a"), held("b"), (EventKind::LeaseUnseen, None, None)]
        );
    }
}
