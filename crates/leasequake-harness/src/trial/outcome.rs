//! What became of each worker: the exit policy (a worker that died by itself
//! is a broken system under test or harness, not a measurement) and each
//! worker's fate in words for trials.csv.

use super::error::TrialError;
use super::event_loop::Run;
use super::msg::ExitStatus;
use super::spawn::Workers;

impl Run<'_> {
    /// A worker that died by itself (non-zero exit, or a signal we did not
    /// send) is a broken system under test or harness, not a measurement.
    pub(super) fn check_exits(&self, workers: &Workers) -> Result<(), TrialError> {
        let killed: Vec<usize> =
            self.deliveries.iter().filter(|d| d.action == "kill").filter_map(|d| d.worker).collect();
        for (worker, exit) in self.exits.iter().enumerate() {
            let Some((t_ns, detail)) = exit else { continue };
            let expected = match (&detail.code, &detail.signal) {
                (Some(0), _) => true,
                // SIGKILL: a kill fault, or cleanup after the grace period.
                (_, Some(s)) if s == "SIGKILL" => killed.contains(&worker) || *t_ns >= self.end_ns,
                _ => false,
            };
            if !expected {
                let status = match (&detail.code, &detail.signal) {
                    (Some(c), _) => ExitStatus::Code(*c),
                    (_, Some(s)) => ExitStatus::Signal(s.clone()),
                    _ => ExitStatus::Code(-1),
                };
                return Err(TrialError::Crashed { worker, status, log: workers.procs[worker].log.clone() });
            }
        }
        Ok(())
    }

    /// Each worker's fate in words: how it ended, whether it said anything,
    /// whether it flooded. A crash of a program is a result, not an error.
    pub(super) fn outcomes(&self, workers: &Workers, t0: i64, protocol: bool) -> Vec<String> {
        let killed: Vec<usize> =
            self.deliveries.iter().filter(|d| d.action == "kill").filter_map(|d| d.worker).collect();
        let secs = |t: i64| (t - t0) as f64 / 1e9;
        workers
            .procs
            .iter()
            .map(|p| {
                let w = p.index;
                let exit = self.exits.get(w).and_then(Option::as_ref);
                let mut text = match exit.map(|(t, d)| (*t, d.code, d.signal.as_deref())) {
                    None => "never exited".to_string(),
                    Some((t, _, Some("SIGKILL"))) if t < self.end_ns && killed.contains(&w) => {
                        format!("killed by a fault at {:.3} s", secs(t))
                    }
                    Some((t, Some(code), _)) if t < self.end_ns => {
                        let how = if code == 0 { "exited" } else { "crashed" };
                        format!("{how} with code {code} at {:.3} s", secs(t))
                    }
                    Some((t, _, Some(sig))) if t < self.end_ns => format!("crashed by {sig} at {:.3} s", secs(t)),
                    Some((_, _, Some("SIGKILL"))) => "ignored SIGTERM: killed after the grace period".to_string(),
                    Some(_) => "ok".to_string(),
                };
                if !self.said.get(w).copied().unwrap_or(false) {
                    text += ", silent: no events";
                }
                let (lines, dropped, unmatched) = (
                    p.counts.lines.load(std::sync::atomic::Ordering::Relaxed),
                    p.counts.dropped.load(std::sync::atomic::Ordering::Relaxed),
                    p.counts.unmatched.load(std::sync::atomic::Ordering::Relaxed),
                );
                match self.vdso.get(w).cloned().flatten() {
                    Some(Ok(true)) => text += ", clock moved in its vDSO",
                    Some(Ok(false)) => text += ", clock moved in its vDSO (read by system call)",
                    Some(Err(why)) => text += &format!(", clock not moved ({why})"),
                    None if self.shim.as_ref().and_then(|s| s.get(w).copied().flatten()) == Some(false) => {
                        text += ", clock not moved (it did not load the clock shim)";
                    }
                    None => {}
                }
                if dropped > 0 {
                    text += &format!(", flooded: {lines} lines, {dropped} dropped past the budget");
                }
                if unmatched > 0 && protocol {
                    text += &format!(", {unmatched} lines not understood");
                }
                format!("{w}: {text}")
            })
            .collect()
    }
}
