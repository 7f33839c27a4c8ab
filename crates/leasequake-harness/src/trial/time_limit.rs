//! A hard time limit per trial. Every wait inside a trial has its own
//! deadline; this is the backstop for whatever was not foreseen (a call
//! into a server that never answers, a file system that hangs): past the
//! limit the trial's processes are killed whole and the trial is an error,
//! never a hang. The trial runs on a thread of its own so that the caller
//! can stop waiting for it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::contain::TrialGroup;
use super::error::{KILL_TIMEOUT, READY_TIMEOUT, TrialError};
use super::run::{TrialEnv, TrialRecord, run_trial};
use super::server::Servers;
use crate::model::Experiment;
use crate::model::history::EventSink;

/// Beyond the trial's own waits: start-up, the server, the clean-up.
const MARGIN: Duration = Duration::from_secs(30);

/// How long a trial of `exp` may take, spawn to reap: the trial's duration
/// and grace, the longest start-up and kill waits, and a margin.
pub fn time_limit(exp: &Experiment) -> Duration {
    if let Some(ms) = std::env::var("LEASEQUAKE_TRIAL_LIMIT_MS").ok().and_then(|v| v.parse().ok()) {
        // Only for the test of this very mechanism.
        return Duration::from_millis(ms);
    }
    let (duration, grace) = (Duration::from_nanos(exp.duration.as_ns()), Duration::from_nanos(exp.grace.as_ns()));
    // A trial's own server: its start, its restarts, and its kill.
    let server = if exp.substrate.managed_server().is_some() && exp.fault_kinds().any(|f| f.action.is_server()) {
        Duration::from_secs(50) + Duration::from_secs(20) * server_faults(exp)
    } else {
        Duration::ZERO
    };
    READY_TIMEOUT + duration + grace + 2 * KILL_TIMEOUT + MARGIN + server
}

/// How many server faults a trial may fire, at most (a campaign's: twice
/// its expected number and a few, past which a Poisson draw is rare).
fn server_faults(exp: &Experiment) -> u32 {
    let scripted: u64 = exp.faults.iter().filter(|f| f.action.is_server()).map(|f| f.firings(exp.duration)).sum();
    let drawn: f64 = exp
        .random
        .iter()
        .flat_map(|r| &r.kinds)
        .filter(|k| k.fault.action.is_server())
        .map(|k| {
            let [from, until] =
                exp.random.as_ref().and_then(|r| r.window).unwrap_or([crate::model::Dur::ZERO, exp.duration]);
            2.0 * k.count.expected(crate::model::Dur::from_us(until.as_us().saturating_sub(from.as_us()))) + 3.0
        })
        .sum();
    u32::try_from(scripted + drawn.ceil() as u64).unwrap_or(u32::MAX).min(10_000)
}

/// `run_trial`, killed whole if it overruns `time_limit`; the sink comes
/// back whatever became of the trial (but from a trial stuck past the
/// kill, which keeps it).
pub fn run_trial_within_limit<S: EventSink + 'static>(
    exp: &Experiment,
    (trial, seed): (u32, u64),
    dir: &Path,
    exe: &Path,
    stop: &Arc<AtomicBool>,
    servers: &Arc<Servers>,
    mut events: S,
) -> (Result<TrialRecord, TrialError>, Option<S>) {
    let limit = time_limit(exp);
    let group = Arc::new(TrialGroup::new(trial));
    let (tx, rx) = std::sync::mpsc::channel();
    let owned =
        (exp.clone(), dir.to_path_buf(), exe.to_path_buf(), Arc::clone(stop), Arc::clone(&group), Arc::clone(servers));
    // The workers are tied to the thread that spawns them (PR_SET_PDEATHSIG
    // is per thread): this one lives from their spawn to their reap.
    let spawned = std::thread::Builder::new().name(format!("trial-{trial}")).spawn(move || {
        let (exp, dir, exe, stop, group, servers) = owned;
        let env = TrialEnv { exe: &exe, stop: &stop, group: &group, servers: &servers };
        let record = run_trial(&exp, trial, seed, &dir, &env, &mut events);
        let _ = tx.send((record, events));
    });
    let thread = match spawned {
        Ok(thread) => thread,
        Err(e) => return (Err(TrialError::Thread(e)), None),
    };
    match rx.recv_timeout(limit) {
        Ok((result, events)) => {
            let _ = thread.join();
            (result, Some(events))
        }
        Err(_) => {
            group.kill_all();
            // Its processes gone, the trial usually winds up at once; if it
            // is stuck in a call that nothing can interrupt, it is left
            // behind (the run stops, and the process exits around it).
            let events = rx.recv_timeout(KILL_TIMEOUT).ok().map(|(_, events)| {
                let _ = thread.join();
                events
            });
            (Err(TrialError::TimedOut(limit)), events)
        }
    }
}
