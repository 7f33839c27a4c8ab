//! Releasing the workers together: t = 0 of the trial.

use std::time::Duration;

use std::os::fd::OwnedFd;

use crate::model::clock::{mono_ns, wall_ns};
use crate::model::{Dur, Experiment};

/// Before a fault is due, poll for this long instead of sleeping. A timed
/// wait can oversleep by most of a millisecond on a VM, even at real-time
/// priority (a shorter spin there was measured, and let loaded faults come
/// late again); the kernel's real-time throttling bounds what a spin takes.
pub const SPIN_NS: i64 = 1_000_000;

/// How far ahead of the release the built-in workers are told its time:
/// long enough for every one of them to wake from the pipe and go back to
/// sleep on its timer, one after another on few cores, so all of them are
/// asleep until the same instant.
fn release_lead_ns(workers: usize) -> i64 {
    2_000_000 + 60_000 * workers as i64
}

/// The first monotonic time at least `ahead` from now at which the wall
/// clock is `offset` past a multiple of `resolution`.
fn next_wall_phase(resolution: i64, offset: i64, ahead: i64) -> i64 {
    let (mono, wall) = (mono_ns(), wall_ns());
    let mut target = wall - wall.rem_euclid(resolution) + offset;
    while target < wall + ahead {
        target += resolution;
    }
    mono + (target - wall)
}

/// Sleep until the monotonic `deadline`, spinning for the last stretch
/// (a timed sleep can oversleep, more so on a VM).
pub fn sleep_until(deadline: i64) {
    let left = deadline - SPIN_NS - mono_ns();
    if left > 0 {
        std::thread::sleep(Duration::from_nanos(left as u64));
    }
    while mono_ns() < deadline {
        std::hint::spin_loop();
    }
}

/// A program's release still to come: its stdin's write end, closed at
/// `at_ns` (monotonic), when it starts.
pub struct LateStart {
    pub at_ns: i64,
    pub worker: usize,
    pub release: OwnedFd,
}

/// Release the barrier; returns t = 0 (monotonic ns), and the programs
/// whose start comes later (`start: staggered` or `random`), soonest first.
///
/// A program only sees EOF on stdin, so it starts when its pipe closes. The
/// built-in workers are instead handed the release time itself, 8 bytes
/// each, a little ahead: each sleeps on an absolute CLOCK_MONOTONIC timer
/// until then. The timers expire together, so the start spread no longer
/// includes the pipe waking 30 readers one after another, only the
/// scheduler running them. (They keep their own start delays, from their
/// config.)
pub fn release(exp: &Experiment, barrier: Vec<OwnedFd>, offsets: &[Dur]) -> (i64, Vec<LateStart>) {
    let lead = if exp.program.is_none() { release_lead_ns(exp.workers) } else { 0 };
    let t0 = match exp.align {
        Some(offset) => next_wall_phase(exp.lease.resolution.as_ns() as i64, offset.as_ns() as i64, lead + 1_000_000),
        None => mono_ns() + lead,
    };
    sleep_until(t0 - lead);
    let mut late = Vec::new();
    if exp.program.is_none() {
        for write in barrier {
            let mut pipe = std::fs::File::from(write);
            // One blocking write: chunks never straddle a pipe page (8
            // divides 4096), so every 8-byte read gets one whole copy. A
            // worker that died meanwhile is reported by its exit; nothing
            // to do here. Closing the only write end: EOF for anyone left.
            let _ = std::io::Write::write_all(&mut pipe, &t0.to_le_bytes().repeat(exp.workers));
        }
    } else {
        for (worker, release) in barrier.into_iter().enumerate() {
            match offsets.get(worker) {
                Some(&d) if d > Dur::ZERO => late.push(LateStart { at_ns: t0 + d.as_ns() as i64, worker, release }),
                // Closed here: EOF, the program starts.
                _ => drop(release),
            }
        }
        late.sort_by_key(|l| l.at_ns);
    }
    (t0, late)
}
