//! The durable result: the CSV files of docs/results-format.md, appended and flushed
//! after every trial so that an interrupted run keeps every finished trial.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::check::TrialMetrics;
use crate::model::FaultRow;
use crate::model::history::{Event, History, us_to_ms};
use crate::model::{Experiment, setting_name};

use super::summary::SummaryRow;

pub const EVENTS_HEADER: [&str; 6] = ["trial", "t_ms", "worker", "pid", "event", "detail"];
pub const FAULTS_HEADER: [&str; 10] =
    ["trial", "fault", "action", "target", "worker", "pid", "scheduled_ms", "actual_ms", "error_us", "error"];
pub const GAPS_HEADER: [&str; 11] = [
    "trial",
    "gap",
    "start_ms",
    "end_ms",
    "duration_ms",
    "ended",
    "cause",
    "ended_by",
    "lease_remainder_ms",
    "detection_lag_ms",
    "cause_fault",
];
pub const TRIALS_HEADER: [&str; 42] = [
    "trial",
    "seed",
    "workers",
    "lease_ms",
    "renew_ms",
    "watch_ms",
    "resolution_ms",
    "acquire",
    "expiry",
    "unreadable",
    "start_spread_us",
    "first_leader_ms",
    "max_leaders",
    "double_leader_ms",
    "double_leader_active_ms",
    "leaderless_ms",
    "gaps",
    "wedged",
    "outcome",
    "end_ms",
    "point",
    "leader_pauses",
    "false_evictions",
    "predicted_evictions",
    "writes",
    "stale_writes",
    "stale_writes_accepted",
    "stale_writes_rejected",
    "stale_writes_superseded",
    "epochs",
    "job_runs",
    "jobs_applied",
    "jobs_repeated",
    "jobs_rejected",
    "missed_epochs",
    "duplicate_executions",
    "stale_results",
    "stale_results_applied",
    "stale_believers",
    "stale_belief_ms",
    "stale_belief_max_ms",
    "worker_outcomes",
];
pub const SUMMARY_HEADER: [&str; 57] = [
    "setting",
    "lease_ms",
    "renew_ms",
    "watch_ms",
    "n",
    "gaps",
    "open_gaps",
    "gap_min_ms",
    "gap_p50_ms",
    "gap_p90_ms",
    "gap_p99_ms",
    "gap_max_ms",
    "double_leader_trials",
    "double_leader",
    "double_leader_ci_low",
    "double_leader_ci_high",
    "wedged_trials",
    "wedged",
    "no_leader_trials",
    "leader_pauses",
    "false_evictions",
    "false_eviction_rate",
    "false_eviction_ci_low",
    "false_eviction_ci_high",
    "predicted_evictions",
    "crash_gap_bound_min_ms",
    "crash_gap_bound_max_ms",
    "crash_gaps",
    "crash_gap_p10_ms",
    "crash_gap_p50_ms",
    "crash_gap_p90_ms",
    "crash_gap_max_ms",
    "writes",
    "stale_writes",
    "stale_writes_accepted",
    "stale_writes_rejected",
    "stale_writes_superseded",
    "epochs",
    "job_runs",
    "jobs_applied",
    "jobs_repeated",
    "jobs_rejected",
    "missed_epochs",
    "missed_epoch_trials",
    "duplicate_executions",
    "duplicate_trials",
    "stale_results",
    "stale_results_applied",
    "stale_believers",
    "stale_belief_ms",
    "stale_belief_max_ms",
    "acquire_p50_us",
    "acquire_p99_us",
    "renew_p50_us",
    "renew_p99_us",
    "observe_p50_us",
    "observe_p99_us",
];

fn ms(us: i64) -> String {
    format!("{:.3}", us_to_ms(us))
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// A percentile of sorted µs values, rounded to whole µs.
pub fn pct_us(sorted: &[u64], q: f64) -> Option<u64> {
    let v: Vec<f64> = sorted.iter().map(|&x| x as f64).collect();
    crate::check::stats::percentile(&v, q).map(|p| p.round() as u64)
}

fn opt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_default()
}

#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> WriteError + '_ {
    move |source| WriteError { path: path.to_path_buf(), source }
}

fn csv_err(path: &Path) -> impl Fn(csv::Error) -> WriteError + '_ {
    move |e| WriteError { path: path.to_path_buf(), source: io::Error::other(e) }
}

struct Table {
    path: PathBuf,
    writer: csv::Writer<File>,
}

impl Table {
    fn create(dir: &Path, name: &str, header: &[&str]) -> Result<Table, WriteError> {
        let path = dir.join(name);
        let file = File::create(&path).map_err(io_err(&path))?;
        let mut writer = csv::Writer::from_writer(file);
        writer.write_record(header).map_err(csv_err(&path))?;
        writer.flush().map_err(io_err(&path))?;
        Ok(Table { path, writer })
    }

    /// Reopen a table for appending, keeping only the rows whose `trial`
    /// (first column) is in `keep`: a trial interrupted half-written leaves
    /// no rows behind to be duplicated by its rerun.
    fn reopen(dir: &Path, name: &str, header: &[&str], keep: &BTreeSet<u32>) -> Result<Table, WriteError> {
        let path = dir.join(name);
        let mut kept = Vec::new();
        if path.exists() {
            let mut reader = csv::Reader::from_path(&path).map_err(csv_err(&path))?;
            for record in reader.records() {
                // A torn last line (killed mid-write) is dropped like any
                // other row of an unfinished trial.
                let Ok(record) = record else { continue };
                if record.get(0).and_then(|t| t.parse().ok()).is_some_and(|t| keep.contains(&t)) {
                    kept.push(record);
                }
            }
        }
        // Written beside the original and renamed over it: a crash now
        // loses nothing. The open handle follows the file through the rename.
        let tmp_name = format!(".{name}.tmp");
        let mut table = Table::create(dir, &tmp_name, header)?;
        for r in kept {
            table.writer.write_record(&r).map_err(csv_err(&table.path))?;
        }
        table.flush()?;
        std::fs::rename(&table.path, &path).map_err(io_err(&path))?;
        table.path = path;
        Ok(table)
    }

    fn row(&mut self, fields: &[String]) -> Result<(), WriteError> {
        self.writer.write_record(fields).map_err(csv_err(&self.path))
    }

    fn flush(&mut self) -> Result<(), WriteError> {
        self.writer.flush().map_err(io_err(&self.path))
    }
}

/// Which tables a writer produces: a run writes the history too; `check`
/// only rewrites what is derived from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    All,
    Derived,
}

/// Appends trials to the results directory.
pub struct ResultsWriter {
    dir: PathBuf,
    events: Option<Table>,
    faults: Option<Table>,
    gaps: Table,
    trials: Table,
}

impl ResultsWriter {
    pub fn create(dir: &Path, tables: Tables) -> Result<ResultsWriter, WriteError> {
        let (events, faults) = if tables == Tables::All {
            (
                Some(Table::create(dir, "events.csv", &EVENTS_HEADER)?),
                Some(Table::create(dir, "faults.csv", &FAULTS_HEADER)?),
            )
        } else {
            (None, None)
        };
        Ok(ResultsWriter {
            dir: dir.to_path_buf(),
            events,
            faults,
            gaps: Table::create(dir, "gaps.csv", &GAPS_HEADER)?,
            trials: Table::create(dir, "trials.csv", &TRIALS_HEADER)?,
        })
    }

    /// Continue a run in `dir`: keep the rows of the `completed` trials,
    /// drop everything else, append from there.
    pub fn resume(dir: &Path, completed: &BTreeSet<u32>) -> Result<ResultsWriter, WriteError> {
        Ok(ResultsWriter {
            dir: dir.to_path_buf(),
            events: Some(Table::reopen(dir, "events.csv", &EVENTS_HEADER, completed)?),
            faults: Some(Table::reopen(dir, "faults.csv", &FAULTS_HEADER, completed)?),
            gaps: Table::reopen(dir, "gaps.csv", &GAPS_HEADER, completed)?,
            trials: Table::reopen(dir, "trials.csv", &TRIALS_HEADER, completed)?,
        })
    }

    /// Write one finished trial to every table and flush them all.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        exp: &Experiment,
        point: &str,
        trial: u32,
        seed: u64,
        history: &History,
        faults: &[FaultRow],
        m: &TrialMetrics,
        outcomes: &str,
    ) -> Result<(), WriteError> {
        if let Some(t) = &mut self.events {
            for e in &history.events {
                t.row(&event_row(trial, e))?;
            }
            t.flush()?;
        }
        if let Some(t) = &mut self.faults {
            for f in faults {
                t.row(&[
                    trial.to_string(),
                    f.fault.to_string(),
                    f.action.clone(),
                    f.target.clone(),
                    opt(f.worker),
                    opt(f.pid),
                    ms(f.scheduled_us),
                    ms(f.actual_us),
                    (f.actual_us - f.scheduled_us).to_string(),
                    f.error.clone().unwrap_or_default(),
                ])?;
            }
            t.flush()?;
        }
        for (i, g) in m.gaps.iter().enumerate() {
            self.gaps.row(&[
                trial.to_string(),
                (i + 1).to_string(),
                ms(g.start_us),
                ms(g.end_us),
                ms(g.duration_us()),
                g.ended.to_string(),
                g.cause.clone(),
                opt(g.ended_by),
                g.lease_remainder_us.map(ms).unwrap_or_default(),
                g.detection_lag_us.map(ms).unwrap_or_default(),
                opt(g.cause_fault),
            ])?;
        }
        self.gaps.flush()?;
        let [lease, renew, watch] = lease_columns(exp);
        self.trials.row(&[
            trial.to_string(),
            seed.to_string(),
            exp.workers.to_string(),
            lease,
            renew,
            watch,
            format!("{:.3}", exp.lease.resolution.as_ms_f64()),
            setting_name(&exp.worker.acquire),
            setting_name(&exp.worker.expiry),
            setting_name(&exp.worker.unreadable),
            opt(m.start_spread_us),
            m.first_leader_us.map(ms).unwrap_or_default(),
            m.max_leaders.to_string(),
            ms(m.double_leader_us),
            ms(m.double_leader_active_us),
            ms(m.leaderless_us),
            m.gaps.len().to_string(),
            m.wedged.to_string(),
            m.outcome().to_string(),
            ms(m.end_us),
            point.to_string(),
            m.evictions.leader_pauses.to_string(),
            m.evictions.false_evictions.to_string(),
            m.evictions.predicted.to_string(),
            m.writes.attempted.to_string(),
            m.writes.stale.to_string(),
            m.writes.stale_accepted.to_string(),
            m.writes.stale_rejected.to_string(),
            m.writes.stale_superseded.to_string(),
            m.jobs.expected.to_string(),
            m.jobs.runs.to_string(),
            m.jobs.applied.to_string(),
            m.jobs.repeated.to_string(),
            m.jobs.rejected.to_string(),
            m.jobs.missed.to_string(),
            m.jobs.duplicates.to_string(),
            m.jobs.stale_results.to_string(),
            m.jobs.stale_applied.to_string(),
            m.evictions.stale_believers.to_string(),
            ms(m.evictions.stale_belief_us),
            ms(m.evictions.stale_belief_max_us),
            outcomes.to_string(),
        ])?;
        self.trials.flush()
    }

    /// Rewrite summary.csv, one row per setting (temp file + rename: never
    /// half-written).
    pub fn write_summary(&self, rows: &[SummaryRow<'_>]) -> Result<(), WriteError> {
        let path = self.dir.join("summary.csv");
        let tmp = self.dir.join(".summary.csv.tmp");
        let mut w = csv::Writer::from_path(&tmp).map_err(csv_err(&tmp))?;
        w.write_record(SUMMARY_HEADER).map_err(csv_err(&tmp))?;
        for row in rows {
            let s = &row.summary;
            let (lo, hi) = s.double_leader_ci;
            let [lease, renew, watch] = lease_columns(row.exp);
            w.write_record([
                row.setting.clone(),
                lease,
                renew,
                watch,
                s.n.to_string(),
                s.gaps.to_string(),
                s.open_gaps.to_string(),
                opt_ms(s.gap_min_ms),
                opt_ms(s.gap_p50_ms),
                opt_ms(s.gap_p90_ms),
                opt_ms(s.gap_p99_ms),
                opt_ms(s.gap_max_ms),
                s.double_leader_trials.to_string(),
                format!("{}/{}", s.double_leader_trials, s.n),
                format!("{lo:.4}"),
                format!("{hi:.4}"),
                s.wedged_trials.to_string(),
                format!("{}/{}", s.wedged_trials, s.n),
                s.no_leader_trials.to_string(),
                s.leader_pauses.to_string(),
                s.false_evictions.to_string(),
                if s.leader_pauses > 0 {
                    format!("{:.4}", s.false_evictions as f64 / s.leader_pauses as f64)
                } else {
                    String::new()
                },
                format!("{:.4}", s.false_eviction_ci.0),
                format!("{:.4}", s.false_eviction_ci.1),
                s.predicted_evictions.to_string(),
                format!("{:.3}", crash_bound_ms(row.exp).0),
                format!("{:.3}", crash_bound_ms(row.exp).1),
                s.crash_gaps_ms.len().to_string(),
                opt_ms(s.crash_gap(0.1)),
                opt_ms(s.crash_gap(0.5)),
                opt_ms(s.crash_gap(0.9)),
                opt_ms(s.crash_gap(1.0)),
                s.writes.attempted.to_string(),
                s.writes.stale.to_string(),
                s.writes.stale_accepted.to_string(),
                s.writes.stale_rejected.to_string(),
                s.writes.stale_superseded.to_string(),
                s.jobs.expected.to_string(),
                s.jobs.runs.to_string(),
                s.jobs.applied.to_string(),
                s.jobs.repeated.to_string(),
                s.jobs.rejected.to_string(),
                s.jobs.missed.to_string(),
                s.missed_trials.to_string(),
                s.jobs.duplicates.to_string(),
                s.duplicate_trials.to_string(),
                s.jobs.stale_results.to_string(),
                s.jobs.stale_applied.to_string(),
                s.stale_believers.to_string(),
                format!("{:.3}", s.stale_belief_ms),
                opt_ms(s.stale_belief_max_ms),
                opt(pct_us(&s.latency.acquire_us, 0.5)),
                opt(pct_us(&s.latency.acquire_us, 0.99)),
                opt(pct_us(&s.latency.renew_us, 0.5)),
                opt(pct_us(&s.latency.renew_us, 0.99)),
                opt(pct_us(&s.latency.observe_us, 0.5)),
                opt(pct_us(&s.latency.observe_us, 0.99)),
            ])
            .map_err(csv_err(&tmp))?;
        }
        w.flush().map_err(io_err(&tmp))?;
        drop(w);
        std::fs::rename(&tmp, &path).map_err(io_err(&path))
    }
}

/// The theory's bound on the gap after a SIGKILL at a uniform moment:
/// `[lease - renew, lease + watch + resolution]` (docs/metrics.md).
pub fn crash_bound_ms(exp: &Experiment) -> (f64, f64) {
    let p = crate::check::CheckParams::of(exp);
    let ms = |us: i64| us as f64 / 1000.0;
    (ms(p.lease_us - p.renew_us), ms(p.wedge_threshold_us()))
}

/// lease_ms, renew_ms, watch_ms: the setting a row belongs to.
fn lease_columns(exp: &Experiment) -> [String; 3] {
    let l = &exp.lease;
    [l.lease, l.renew, l.watch].map(|d| format!("{:.3}", d.as_ms_f64()))
}

fn event_row(trial: u32, e: &Event) -> Vec<String> {
    vec![trial.to_string(), ms(e.t_us), opt(e.worker), opt(e.pid), e.kind.name().to_string(), e.detail.to_json()]
}
