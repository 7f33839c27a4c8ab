//! What the machine holds while the tests run, and what a timing test does
//! when it cannot hold the test's margin.
//!
//! The tests run with `--no-calibrate`, so each test binary measures the
//! machine once, on first use: how late a thread wakes from a 1 ms sleep,
//! and how long a SIGSTOP takes to stop a child as `waitpid` sees it. A
//! timing test's tolerance is its own floor, or what those latencies make
//! of it when the machine is slower; its trials are judged by the harness's
//! own disturbance rule with that tolerance as the budget (`Timing::yaml`),
//! and only undisturbed trials are evidence. A test that has none, or whose
//! tolerance would pass the bugs it is there to catch, says `SKIPPED:` and
//! why, and returns: scripts/test.sh counts those and fails a run with
//! more than two, so a skip is never silent.

use std::io::Write;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Row;

/// The p50, p99 and worst of a latency, in ms.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(mut ms: Vec<f64>) -> Latency {
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
        Latency { p50_ms: at(0.5), p99_ms: at(0.99), max_ms: ms[ms.len() - 1] }
    }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", self.p50_ms, self.p99_ms, self.max_ms)
    }
}

#[derive(Debug)]
pub struct Machine {
    /// How late a 1 ms sleep returns: a worker's tick, a fault's moment.
    pub wake: Latency,
    /// From SIGSTOP sent to the stop seen by waitpid: a fault's effect.
    pub stop: Latency,
}

/// The machine as this test binary found it (measured once, about 0.5 s).
pub fn machine() -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let m = Machine { wake: wake_latency(200), stop: stop_latency(20) };
        eprintln!("machine: wake-ups {}; SIGSTOP to stopped {}", m.wake, m.stop);
        m
    })
}

fn wake_latency(n: usize) -> Latency {
    let nap = Duration::from_millis(1);
    Latency::of(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                std::thread::sleep(nap);
                (t.elapsed() - nap).as_secs_f64() * 1e3
            })
            .collect(),
    )
}

fn stop_latency(n: usize) -> Latency {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    use nix::unistd::Pid;
    let mut child = std::process::Command::new("sleep").arg("60").spawn().expect("spawn sleep");
    let pid = Pid::from_raw(child.id() as i32);
    let ms = (0..n)
        .map(|_| {
            let t = Instant::now();
            kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
            waitpid(pid, Some(WaitPidFlag::WUNTRACED)).expect("waitpid stopped");
            let d = t.elapsed().as_secs_f64() * 1e3;
            kill(pid, Signal::SIGCONT).expect("SIGCONT");
            waitpid(pid, Some(WaitPidFlag::WCONTINUED)).expect("waitpid continued");
            d
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    Latency::of(ms)
}

/// A timing test's tolerance, and its verdict on its own trials.
pub struct Timing {
    test: String,
    /// How far a measured time may be from the theory's bound, in real ms.
    pub tol: f64,
}

/// A measured time is a wake-up (the worker's tick) after a fault's effect
/// (a death or a stop seen): the machine's share of one is at most the sum
/// of those latencies, given twice over for the two ends of an interval.
const SHARE: f64 = 2.0;

impl Timing {
    /// The tolerance for `test`: `floor_ms`, or the machine's share of a
    /// measured time (`SHARE` × the p99s) where that is more. `None` (and
    /// `SKIPPED:`) when that is over `ceiling_ms`, the smallest error of
    /// the bugs the test is there to catch (a missed tick, a lost release).
    pub fn new(test: &str, floor_ms: f64, ceiling_ms: f64) -> Option<Timing> {
        let m = machine();
        let share = SHARE * (m.wake.p99_ms + m.stop.p99_ms);
        let tol = floor_ms.max(share);
        if tol >= ceiling_ms {
            skip(
                test,
                &format!(
                    "the machine's wake-ups ({}) and stops ({}) need a tolerance of {tol:.1} ms, \
                     as much as the {ceiling_ms} ms error of the bugs this test catches",
                    m.wake, m.stop
                ),
            );
            return None;
        }
        Some(Timing { test: test.to_string(), tol })
    }

    /// The same tolerance for one part of the test (a substrate of
    /// several), named as such where it skips.
    pub fn part(&self, name: &str) -> Timing {
        Timing { test: format!("{} ({name})", self.test), tol: self.tol }
    }

    /// The experiment's keys that have the harness judge its trials, and
    /// how late their faults came, by this tolerance (in the experiment's
    /// own time at `scale`), for a file's top level.
    /// A copy of the experiment `file` in `lab`, changed by `edit`, with
    /// this tolerance as its budgets at `scale`.
    pub fn copy(
        &self,
        lab: &super::Lab,
        file: &std::path::Path,
        scale: f64,
        edit: impl Fn(String) -> String,
    ) -> std::path::PathBuf {
        let text = edit(std::fs::read_to_string(file).expect("the experiment file")) + &self.yaml(scale);
        lab.file(&file.file_name().expect("a file name").to_string_lossy(), &text)
    }

    pub fn yaml(&self, scale: f64) -> String {
        let us = (self.tol * 1000.0 / scale).round();
        format!("disturbance_budget: {us}us\nfault_budget: {us}us\n")
    }

    /// The trials the machine did not disturb beyond the tolerance, with a
    /// note of those it did; `None` (and `SKIPPED:`) if it disturbed them
    /// all or left fewer than `need`.
    pub fn undisturbed<'a>(&self, trials: &'a [Row], need: usize) -> Option<Vec<&'a Row>> {
        let (calm, moved): (Vec<&Row>, Vec<&Row>) = trials.iter().partition(|t| t.get("disturbed") == "false");
        let why =
            || moved.iter().map(|t| format!("trial {}: {}", t.get("trial"), t.get("disturbed_by"))).collect::<Vec<_>>();
        if calm.len() < need.max(1) {
            let reason = format!(
                "{} of {} trials disturbed beyond {:.1} ms, {} needed undisturbed: {}",
                moved.len(),
                trials.len(),
                self.tol,
                need.max(1),
                why().join("; ")
            );
            skip(&self.test, &reason);
            return None;
        }
        if !moved.is_empty() {
            eprintln!("{}: judged over {} undisturbed trials; {}", self.test, calm.len(), why().join("; "));
        }
        Some(calm)
    }
}

/// Say that `test` could not judge, and why: on stderr, and as a line of
/// the file scripts/test.sh names in LEASEQUAKE_TEST_SKIPS, which it counts.
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIPPED: {test}: {reason}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("LEASEQUAKE_TEST_SKIPS") {
        // One write of a short line with O_APPEND: tests skipping at once
        // do not interleave.
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("the skips file");
        file.write_all(format!("{line}\n").as_bytes()).expect("write the skips file");
    }
}
