//! A run's progress: a bar on a terminal; in a log, where no bar can be
//! drawn (CI), a line now and then with an ETA.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use crate::model::Experiment;
use crate::warnln;

/// The bar on a terminal; in a log, where indicatif draws nothing, a line
/// now and then.
pub(super) struct Progress {
    pub(super) bar: ProgressBar,
    log: Option<LogProgress>,
}

impl Progress {
    pub(super) fn new(exp: &Experiment, total: u32, todo: usize, quiet: bool) -> Progress {
        let already = u64::from(total) - todo as u64;
        let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(u64::from(total)) };
        bar.set_position(already);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} trials, {elapsed} (ETA {eta}) {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(exp.name.clone());
        let log = (!quiet && !std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .then(|| LogProgress::new(&exp.name, u64::from(total), already));
        Progress { bar, log }
    }

    pub(super) fn finished_one(&self, message: String) {
        self.bar.set_message(message);
        self.bar.inc(1);
        if let Some(log) = &self.log {
            log.finished_one();
        }
    }

    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Progress as lines, for a log that no bar can be drawn in (CI): one at
/// most every 10 s, and one for the last trial, with an ETA from the pace
/// of this run so far (trials at once included).
struct LogProgress {
    name: String,
    total: u64,
    /// Trials done before this run started (a resume), and since.
    before: u64,
    done: AtomicU32,
    started: std::time::Instant,
    last: Mutex<std::time::Instant>,
}

impl LogProgress {
    fn new(name: &str, total: u64, before: u64) -> LogProgress {
        let now = std::time::Instant::now();
        LogProgress {
            name: name.to_string(),
            total,
            before,
            done: AtomicU32::new(0),
            started: now,
            last: Mutex::new(now),
        }
    }

    fn finished_one(&self) {
        let done = u64::from(self.done.fetch_add(1, Ordering::SeqCst) + 1);
        let all = self.before + done;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() < std::time::Duration::from_secs(10) && all < self.total {
            return;
        }
        *last = std::time::Instant::now();
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (self.total - all) as f64;
        warnln!("leasequake: {}: {all}/{} trials, {elapsed:.0} s, ETA {eta:.0} s", self.name, self.total);
    }
}
