//! The durable result: the CSV files of docs/results-format.md, one serde
//! row type each (`rows.rs`), appended and flushed after every trial so
//! that an interrupted run keeps every finished trial.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::columns::{Swept, header_of, settings};
use super::measures::{
    eviction_counts, eviction_rate, job_counts, latency, network_counts, service_counts, stats, summed_evictions,
    write_counts,
};
use super::rows::{
    EventRow, EvictionCounts, EvictionRate, FaultCsvRow, GapRow, JobCounts, JobTrials, LatencyRow, NetworkCounts,
    PauseRow, ServiceCounts, SettingColumns, SummaryKey, SummaryStats, TrialKey, TrialMeasures, TrialRef, WriteCounts,
    ms, round_ms,
};
use super::summary::SummaryRow;
use crate::check::TrialMetrics;
use crate::model::summary_metrics::Features;
use crate::model::{Experiment, FaultRow};

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
    writer: csv::Writer<Stops<File>>,
}

/// A file that takes no more bytes once a write to it failed. csv's writer
/// keeps what it could not write and tries again on the next flush (and on
/// drop): once space is back, that would put the rest of a torn row after
/// whatever came in between, a line no reader can split into its columns.
struct Stops<W> {
    inner: W,
    /// A cell: bytes copied in past the csv writer (`Table::copy_in`) can
    /// fail too.
    failed: std::cell::Cell<bool>,
}

impl<W> Stops<W> {
    fn new(inner: W) -> Stops<W> {
        Stops { inner, failed: std::cell::Cell::new(false) }
    }

    fn check(&self) -> io::Result<()> {
        if self.failed.get() {
            return Err(io::Error::other("an earlier write to this file failed"));
        }
        Ok(())
    }
}

impl<W: io::Write> io::Write for Stops<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.write(buf).inspect_err(|_| self.failed.set(true))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        self.inner.flush().inspect_err(|_| self.failed.set(true))
    }
}

impl Table {
    fn create(dir: &Path, name: &str, header: &[String]) -> Result<Table, WriteError> {
        let path = dir.join(name);
        let file = File::create(&path).map_err(io_err(&path))?;
        // Rows may be tuples of row types: the header is written here.
        let mut writer = csv::WriterBuilder::new().has_headers(false).from_writer(Stops::new(file));
        writer.write_record(header).map_err(csv_err(&path))?;
        writer.flush().map_err(io_err(&path))?;
        Ok(Table { path, writer })
    }

    /// Reopen a table for appending with what it `kept` of its rows, in
    /// trial order (a trial's own rows in the order they were written).
    fn reopen(dir: &Path, name: &str, header: &[String], kept: Kept) -> Result<Table, WriteError> {
        let path = dir.join(name);
        // Written beside the original and renamed over it: a crash now
        // loses nothing. The open handle follows the file through the rename.
        let tmp_name = format!(".{name}.tmp");
        let mut table = Table::create(dir, &tmp_name, header)?;
        match kept {
            Kept::Rows(mut rows) => {
                // Stable: a trial's own rows keep their order.
                rows.sort_by_key(|(t, _)| *t);
                for (_, r) in rows {
                    // Columns added at the end since the run began
                    // (network.csv's storm) are left empty in the rows it
                    // wrote.
                    let mut r: Vec<String> = r.iter().map(str::to_string).collect();
                    r.resize(r.len().max(header.len()), String::new());
                    table.writer.write_record(&r).map_err(csv_err(&table.path))?;
                }
            }
            Kept::Stretches(from, stretches) => {
                table.copy_in(|to| super::stretches::copy(&from, &stretches, to))?;
            }
        }
        table.flush()?;
        std::fs::rename(&table.path, &path).map_err(io_err(&path))?;
        table.path = path;
        Ok(table)
    }

    /// Bytes written straight to the file after the rows so far (a history
    /// table's rows copied whole); a failure stops the table as a row's
    /// would.
    fn copy_in(&mut self, write: impl FnOnce(&mut &File) -> io::Result<()>) -> Result<(), WriteError> {
        self.flush()?;
        let stops = self.writer.get_ref();
        stops.check().map_err(io_err(&self.path))?;
        write(&mut &stops.inner).inspect_err(|_| stops.failed.set(true)).map_err(io_err(&self.path))
    }

    fn row(&mut self, row: impl Serialize) -> Result<(), WriteError> {
        self.writer.serialize(row).map_err(csv_err(&self.path))
    }

    fn flush(&mut self) -> Result<(), WriteError> {
        self.writer.flush().map_err(io_err(&self.path))
    }
}

/// A table's rows, by trial.
type Rows = Vec<(u32, csv::StringRecord)>;

/// What a table keeps when it is rewritten: a derived table's rows (one a
/// trial, or a gap), or a history table's stretches of the file at the
/// path, copied as they are, never held.
enum Kept {
    Rows(Rows),
    Stretches(PathBuf, Vec<super::stretches::Stretch>),
}

/// Whether a table is the history itself, which is copied, not read.
fn is_history(name: &str) -> bool {
    HISTORY_TABLES.contains(&name)
}

/// A table read whole: its header, its rows of the trials in `keep` and
/// those of the others (the trial is the first column), each in file
/// order. Every row is read the same way: one whose trial cannot be read
/// is refused at its line, never dropped. A torn last line (killed
/// mid-write) is no row: it belongs to no finished trial.
fn rows_of(path: &Path, keep: &BTreeSet<u32>) -> io::Result<(csv::StringRecord, Rows, Rows)> {
    let mut reader = csv::Reader::from_reader(super::read::whole_lines(path)?);
    let header = reader.headers().map_err(io::Error::other)?.clone();
    super::stretches::trial_first(&header)?;
    let (mut kept, mut other) = (Vec::new(), Vec::new());
    for record in reader.records() {
        let record = record.map_err(io::Error::other)?;
        let line = record.position().map_or(0, |p| p.line());
        let t = super::stretches::trial_of(record.get(0).unwrap_or(""), line)?;
        if keep.contains(&t) { kept.push((t, record)) } else { other.push((t, record)) }
    }
    Ok((header, kept, other))
}

/// The rows of a trial that did not finish, moved into its directory
/// (`trials/NNNN/<table>`), which its rerun sets aside whole: what the
/// interrupted attempt wrote is kept with it, not deleted.
fn set_aside(dir: &Path, name: &str, header: &csv::StringRecord, rows: Kept) -> Result<(), WriteError> {
    match rows {
        Kept::Rows(rows) => {
            let mut by_trial: std::collections::BTreeMap<u32, Vec<&csv::StringRecord>> = Default::default();
            for (t, r) in &rows {
                by_trial.entry(*t).or_default().push(r);
            }
            for (t, rows) in by_trial {
                aside(dir, t, name, header, |file| {
                    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(file);
                    for r in rows {
                        w.write_record(r)?;
                    }
                    w.flush()
                })?;
            }
        }
        Kept::Stretches(from, stretches) => {
            let mut by_trial: std::collections::BTreeMap<u32, Vec<super::stretches::Stretch>> = Default::default();
            for s in stretches {
                by_trial.entry(s.trial).or_default().push(s);
            }
            for (t, mine) in by_trial {
                // A trial's own events.csv there (its events as they came,
                // written before any row of the run's) already holds every
                // row the run's has of it.
                if name == "events.csv" && trial_dir(dir, t).join(name).exists() {
                    continue;
                }
                aside(dir, t, name, header, |file| super::stretches::copy(&from, &mine, file))?;
            }
        }
    }
    Ok(())
}

fn trial_dir(dir: &Path, trial: u32) -> PathBuf {
    dir.join("trials").join(format!("{trial:04}"))
}

/// Append to `trials/NNNN/<name>` (its header first, if it is new) what
/// `write` writes.
fn aside(
    dir: &Path,
    trial: u32,
    name: &str,
    header: &csv::StringRecord,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), WriteError> {
    let trial_dir = trial_dir(dir, trial);
    let path = trial_dir.join(name);
    let new = !path.exists();
    std::fs::create_dir_all(&trial_dir).map_err(io_err(&trial_dir))?;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(io_err(&path))?;
    if new {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(&mut file);
        w.write_record(header).map_err(csv_err(&path))?;
        w.flush().map_err(io_err(&path))?;
    }
    write(&mut file).map_err(io_err(&path))
}

/// The tables that are the history itself, as a run wrote them: nothing
/// recomputes them.
pub const HISTORY_TABLES: [&str; 2] = ["events.csv", "faults.csv"];

/// The history tables of several results directories of one experiment
/// (shards), as one in `out`: each directory's rows of its own `trials`,
/// in trial order, a trial's rows in the order its run wrote them. The
/// caller has held the directories to one header per table (the first's
/// is written).
pub fn merge_history(out: &Path, sources: &[(&Path, &BTreeSet<u32>)]) -> Result<(), WriteError> {
    for name in HISTORY_TABLES {
        let mut header = Vec::new();
        let mut picked = Vec::new();
        for (dir, trials) in sources {
            let from = dir.join(name);
            let s = super::stretches::stretches_of(&from).map_err(io_err(&from))?;
            if header.is_empty() {
                header = s.header.iter().map(str::to_string).collect();
            }
            picked.extend(s.sorted(|t| trials.contains(&t)).into_iter().map(|st| (st, from.clone())));
        }
        // Stable: a trial's stretches keep their source's and file's order.
        picked.sort_by_key(|(st, _)| st.trial);
        let mut table = Table::create(out, name, &header)?;
        table.copy_in(|to| {
            for (st, from) in &picked {
                super::stretches::copy(from, std::slice::from_ref(st), to)?;
            }
            Ok(())
        })?;
        table.flush()?;
    }
    Ok(())
}

/// Which tables a writer produces: a run writes the history too; `check`
/// only rewrites what is derived from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    All,
    Derived,
}

/// The per-trial tables and their headers.
struct Layout {
    trials: Vec<String>,
    features: Features,
}

impl Layout {
    fn of(exp: &Experiment) -> Layout {
        let trials = [
            header_of::<TrialKey>(),
            header_of::<SettingColumns>(),
            Swept::of(exp).names,
            header_of::<TrialMeasures>(),
        ]
        .concat();
        Layout { trials, features: Features::of(exp) }
    }

    /// (file, header) of every per-trial table, history first.
    fn tables(&self, tables: Tables) -> Vec<(&'static str, Vec<String>)> {
        let mut out = Vec::new();
        if tables == Tables::All {
            let [events, faults] = HISTORY_TABLES;
            out.push((events, header_of::<EventRow>()));
            out.push((faults, header_of::<FaultCsvRow>()));
        }
        out.push(("gaps.csv", header_of::<GapRow>()));
        out.push(("trials.csv", self.trials.clone()));
        let per_trial = |counts: Vec<String>| [header_of::<TrialRef>(), counts].concat();
        if self.features.evictions {
            out.push(("evictions.csv", per_trial(header_of::<EvictionCounts>())));
            out.push(("pauses.csv", header_of::<PauseRow>()));
        }
        if self.features.writes {
            out.push(("writes.csv", per_trial(header_of::<WriteCounts>())));
        }
        if self.features.jobs {
            out.push(("jobs.csv", per_trial(header_of::<JobCounts>())));
        }
        if self.features.network {
            out.push(("network.csv", per_trial(header_of::<NetworkCounts>())));
        }
        if self.features.service {
            out.push(("service.csv", per_trial(header_of::<ServiceCounts>())));
        }
        out
    }
}

/// Appends trials to the results directory.
pub struct ResultsWriter {
    dir: PathBuf,
    swept: Swept,
    features: Features,
    tables: std::collections::BTreeMap<&'static str, Table>,
    /// The highest trial written, and whether every trial so far came after
    /// the one before (with --jobs they finish in any order).
    last: u32,
    in_order: bool,
}

impl ResultsWriter {
    pub fn create(dir: &Path, exp: &Experiment, tables: Tables) -> Result<ResultsWriter, WriteError> {
        let layout = Layout::of(exp);
        let mut open = std::collections::BTreeMap::new();
        for (name, header) in layout.tables(tables) {
            open.insert(name, Table::create(dir, name, &header)?);
        }
        Ok(ResultsWriter::with(dir, exp, layout.features, open, 0))
    }

    fn with(
        dir: &Path,
        exp: &Experiment,
        features: Features,
        tables: std::collections::BTreeMap<&'static str, Table>,
        last: u32,
    ) -> ResultsWriter {
        ResultsWriter { dir: dir.to_path_buf(), swept: Swept::of(exp), features, tables, last, in_order: true }
    }

    /// Continue a run in `dir`: keep the rows of the `completed` trials,
    /// move the others' into their trials' directories, append from there.
    /// Every table is read whole before any is rewritten: one that cannot
    /// be read leaves them all as they were.
    pub fn resume(dir: &Path, exp: &Experiment, completed: &BTreeSet<u32>) -> Result<ResultsWriter, WriteError> {
        let layout = Layout::of(exp);
        let mut read = Vec::new();
        for (name, header) in layout.tables(Tables::All) {
            let path = dir.join(name);
            let rows = if path.exists() {
                let (found, kept, other) = if is_history(name) {
                    let s = super::stretches::stretches_of(&path).map_err(io_err(&path))?;
                    let kept = Kept::Stretches(path.clone(), s.sorted(|t| completed.contains(&t)));
                    let other = Kept::Stretches(path.clone(), s.sorted(|t| !completed.contains(&t)));
                    (s.header, kept, other)
                } else {
                    let (found, kept, other) = rows_of(&path, completed).map_err(io_err(&path))?;
                    (found, Kept::Rows(kept), Kept::Rows(other))
                };
                // Columns may have been added at the end since the run began.
                if found.len() > header.len() || !found.iter().zip(&header).all(|(a, b)| a == b) {
                    let problem = format!(
                        "line 1: the header is {:?}, not the {:?} this run writes",
                        found.iter().collect::<Vec<_>>().join(","),
                        header.join(",")
                    );
                    return Err(WriteError { path, source: io::Error::other(problem) });
                }
                Some((found, kept, other))
            } else {
                None
            };
            read.push((name, header, rows));
        }
        let mut open = std::collections::BTreeMap::new();
        for (name, header, rows) in read {
            let kept = match rows {
                Some((found, kept, other)) => {
                    set_aside(dir, name, &found, other)?;
                    kept
                }
                None => Kept::Rows(Vec::new()),
            };
            open.insert(name, Table::reopen(dir, name, &header, kept)?);
        }
        // A finished trial's own events file, left by a stop between its
        // rows' append and its removal: its rows are in events.csv.
        for t in completed {
            let _ = std::fs::remove_file(trial_dir(dir, *t).join("events.csv"));
        }
        let last = completed.iter().next_back().copied().unwrap_or(0);
        Ok(ResultsWriter::with(dir, exp, layout.features, open, last))
    }

    /// Put every per-trial table in trial order, if trials finished out of
    /// it: each table is rewritten sorted beside itself and renamed over it,
    /// so a crash meanwhile leaves the unsorted but complete file.
    pub fn finish(&mut self) -> Result<(), WriteError> {
        if self.in_order {
            return Ok(());
        }
        for (name, table) in self.tables.iter_mut() {
            table.flush()?;
            let path = table.path.clone();
            let (header, kept) = if is_history(name) {
                let s = super::stretches::stretches_of(&path).map_err(io_err(&path))?;
                let kept = s.sorted(|_| true);
                (s.header, Kept::Stretches(path, kept))
            } else {
                let all: BTreeSet<u32> = (0..=self.last).collect();
                let (header, kept, _) = rows_of(&path, &all).map_err(io_err(&path))?;
                (header, Kept::Rows(kept))
            };
            let header: Vec<String> = header.iter().map(str::to_string).collect();
            *table = Table::reopen(&self.dir, name, &header, kept)?;
        }
        self.in_order = true;
        Ok(())
    }

    fn table(&mut self, name: &str) -> Option<&mut Table> {
        self.tables.get_mut(name)
    }

    /// Write one finished trial to every table and flush them all. `unit`
    /// is the sweep point's experiment (or the experiment) and `setting`
    /// its label in the summary.
    pub fn append(
        &mut self,
        run: &Experiment,
        unit: (&Experiment, &str),
        trial: TrialData<'_>,
    ) -> Result<(), WriteError> {
        let (exp, setting) = unit;
        let TrialData { trial, seed, events, faults, metrics: m, outcomes } = trial;
        self.in_order &= trial > self.last;
        self.last = self.last.max(trial);
        if let (Some(t), Some(from)) = (self.table("events.csv"), events) {
            t.copy_in(|to| super::stretches::copy_rows(from, to))?;
        }
        if let Some(t) = self.table("faults.csv") {
            for f in faults {
                t.row(FaultCsvRow {
                    trial,
                    fault: f.fault,
                    action: f.action.clone(),
                    target: f.target.clone(),
                    worker: f.worker,
                    pid: f.pid,
                    scheduled_ms: ms(f.scheduled_us),
                    actual_ms: ms(f.actual_us),
                    error_us: f.actual_us - f.scheduled_us,
                    error: f.error.clone().unwrap_or_default(),
                })?;
            }
        }
        if let Some(t) = self.table("gaps.csv") {
            for (i, g) in m.gaps.iter().enumerate() {
                t.row(GapRow {
                    trial,
                    gap: i + 1,
                    start_ms: ms(g.start_us),
                    end_ms: ms(g.end_us),
                    duration_ms: ms(g.duration_us()),
                    ended: g.ended,
                    cause: g.cause.clone(),
                    ended_by: g.ended_by,
                    lease_remainder_ms: g.lease_remainder_us.map(ms),
                    detection_lag_ms: g.detection_lag_us.map(ms),
                    cause_fault: g.cause_fault,
                    holder: g.holder,
                    predicted_ms: g.predicted_us().map(ms),
                    anomaly: g.anomaly.clone().unwrap_or_default(),
                })?;
            }
        }
        let key = TrialKey { trial, setting: setting.to_string(), seed };
        let measures = TrialMeasures {
            start_spread_us: m.start_spread_us,
            first_leader_ms: m.first_leader_us.map(ms),
            max_leaders: m.max_leaders,
            double_leader_ms: ms(m.double_leader_us),
            double_leader_active_ms: ms(m.double_leader_active_us),
            leaderless_ms: ms(m.leaderless_us),
            gaps: m.gaps.len(),
            open_gaps: m.gaps.iter().filter(|g| !g.ended).count(),
            wedged: m.wedged,
            outcome: m.outcome().to_string(),
            end_ms: ms(m.end_us),
            worker_outcomes: outcomes.to_string(),
            fault_error_max_us: m.precision.fault_error_max_us,
            faults_over_budget: m.precision.faults_over_budget,
            op_stall_max_us: m.disturbance.op_stall_max_us,
            cpu_pressure_ms: m.disturbance.cpu_pressure_us.map(ms),
            steal_ms: m.disturbance.steal_us.map(ms),
            disturbed: m.disturbance.disturbed(),
            disturbed_by: m.disturbance.text(),
        };
        let swept = self.swept.values(run, setting);
        let key_row = key;
        let key = || TrialRef { trial, setting: setting.to_string() };
        if let Some(t) = self.table("evictions.csv") {
            t.row((key(), eviction_counts(&m.evictions)))?;
        }
        if let Some(t) = self.table("network.csv") {
            let e = &m.evictions;
            let stale =
                (e.stale_believers, ms(e.stale_belief_us), (e.stale_believers > 0).then(|| ms(e.stale_belief_max_us)));
            t.row((key(), network_counts(&m.network, stale)))?;
        }
        if let Some(t) = self.table("pauses.csv") {
            for p in &m.evictions.pauses {
                t.row(PauseRow {
                    trial,
                    setting: setting.to_string(),
                    worker: p.worker,
                    start_ms: ms(p.start_us),
                    end_ms: ms(p.end_us),
                    resumed: p.resumed,
                    evicted: p.evicted,
                    visible_expiry_ms: p.visible_expiry_us.map(ms),
                    takeover_tick_ms: p.takeover_tick_us.map(ms),
                    predicted: p.predicted,
                    anomaly: p.anomaly(),
                })?;
            }
        }
        if let Some(t) = self.table("writes.csv") {
            t.row((key(), write_counts(&m.writes)))?;
        }
        if let Some(t) = self.table("jobs.csv") {
            t.row((key(), job_counts(&m.jobs)))?;
        }
        if let Some(t) = self.table("service.csv") {
            t.row((key(), service_counts(&m.service)))?;
        }
        // trials.csv last, once every other row of the trial is on disk: a
        // trial is finished exactly when its row is there. (Its row is not
        // even buffered before then, so no later flush, not even the one
        // on drop, can list a trial whose history was cut short.)
        for (_, t) in self.tables.iter_mut().filter(|(name, _)| **name != "trials.csv") {
            t.flush()?;
        }
        if let Some(t) = self.table("trials.csv") {
            t.row((key_row, settings(exp), swept, measures))?;
            t.flush()?;
        }
        Ok(())
    }

    /// Rewrite the per-setting tables: summary.csv, and each feature's
    /// summary (temp file + rename: never half-written).
    pub fn write_summary(&self, run: &Experiment, rows: &[SummaryRow<'_>]) -> Result<(), WriteError> {
        let header = [
            header_of::<SummaryKey>(),
            header_of::<SettingColumns>(),
            self.swept.names.clone(),
            header_of::<SummaryStats>(),
        ]
        .concat();
        self.replace(
            "summary.csv",
            &header,
            rows.iter().map(|r| {
                (
                    SummaryKey { setting: r.setting.clone() },
                    settings(r.exp),
                    self.swept.values(run, &r.setting),
                    stats(r),
                )
            }),
        )?;
        let key = |r: &SummaryRow<'_>| SummaryKey { setting: r.setting.clone() };
        if self.features.evictions {
            let header =
                [header_of::<SummaryKey>(), header_of::<EvictionCounts>(), header_of::<EvictionRate>()].concat();
            let row = |r: &SummaryRow<'_>| (key(r), summed_evictions(r), eviction_rate(r));
            self.replace("summary-evictions.csv", &header, rows.iter().map(row))?;
        }
        if self.features.network {
            let header = [header_of::<SummaryKey>(), header_of::<NetworkCounts>()].concat();
            let row = |r: &SummaryRow<'_>| {
                let s = &r.summary;
                let stale = (s.stale_believers, round_ms(s.stale_belief_ms), s.stale_belief_max_ms.map(round_ms));
                (key(r), network_counts(&s.network, stale))
            };
            self.replace("summary-network.csv", &header, rows.iter().map(row))?;
        }
        if self.features.writes {
            let header = [header_of::<SummaryKey>(), header_of::<WriteCounts>()].concat();
            let row = |r: &SummaryRow<'_>| (key(r), write_counts(&r.summary.writes));
            self.replace("summary-writes.csv", &header, rows.iter().map(row))?;
        }
        if self.features.service {
            let header = [header_of::<SummaryKey>(), header_of::<ServiceCounts>()].concat();
            let row = |r: &SummaryRow<'_>| (key(r), service_counts(&r.summary.service));
            self.replace("summary-service.csv", &header, rows.iter().map(row))?;
        }
        if self.features.jobs {
            let header = [header_of::<SummaryKey>(), header_of::<JobCounts>(), header_of::<JobTrials>()].concat();
            let trials = |r: &SummaryRow<'_>| JobTrials {
                missed_epoch_trials: r.summary.missed_trials,
                duplicate_trials: r.summary.duplicate_trials,
            };
            let row = |r: &SummaryRow<'_>| (key(r), job_counts(&r.summary.jobs), trials(r));
            self.replace("summary-jobs.csv", &header, rows.iter().map(row))?;
        }
        if rows.iter().any(|r| !r.summary.gap_beyond_theory.is_empty()) {
            let kinds: Vec<_> = rows.iter().flat_map(super::measures::gap_kinds).collect();
            self.replace("summary-gaps.csv", &header_of::<super::rows::GapKindRow>(), kinds.into_iter())?;
        }
        let timed = rows.iter().any(|r| {
            let l = &r.summary.latency;
            !(l.acquire_us.is_empty() && l.renew_us.is_empty() && l.observe_us.is_empty())
        });
        if timed {
            let header = [header_of::<SummaryKey>(), header_of::<LatencyRow>()].concat();
            self.replace("latency.csv", &header, rows.iter().map(|r| (key(r), latency(r))))?;
        }
        Ok(())
    }

    fn replace<R: Serialize>(
        &self,
        name: &str,
        header: &[String],
        rows: impl Iterator<Item = R>,
    ) -> Result<(), WriteError> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let written = Table::create(&self.dir, &format!(".{name}.tmp"), header).and_then(|mut t| {
            for r in rows {
                t.row(r)?;
            }
            t.flush()
        });
        let result = written.and_then(|()| std::fs::rename(&tmp, &path).map_err(io_err(&path)));
        if result.is_err() {
            // A summary that no longer matches the trials is worse than
            // none (`leasequake check` or a resume writes it again).
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&path);
        }
        result
    }
}

/// One finished trial, as `ResultsWriter::append` takes it.
pub struct TrialData<'a> {
    pub trial: u32,
    pub seed: u64,
    /// Its events in time order, in events.csv's format (see `spool`):
    /// none where the history is not rewritten.
    pub events: Option<&'a Path>,
    pub faults: &'a [FaultRow],
    pub metrics: &'a TrialMetrics,
    /// What became of each worker, in words.
    pub outcomes: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_table_is_put_in_trial_order_and_its_unfinished_trials_set_aside_by_copying() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let header: Vec<String> = ["trial", "t_ms", "x"].map(String::from).into();
        let table = "trial,t_ms,x\n3,0,a\n1,0,b\n1,1,\"c\nd\"\n4,0,e\n2,0,f\n3,1,g\n4,1,tor";
        let path = dir.join("faults.csv");
        std::fs::write(&path, table).unwrap();
        // A resume that has trials 1 to 3 of it: 4 goes to its directory.
        let s = super::super::stretches::stretches_of(&path).unwrap();
        let done = |t: u32| t <= 3;
        set_aside(dir, "faults.csv", &s.header, Kept::Stretches(path.clone(), s.sorted(|t| !done(t)))).unwrap();
        let mut reopened =
            Table::reopen(dir, "faults.csv", &header, Kept::Stretches(path.clone(), s.sorted(done))).unwrap();
        reopened.row((5, 0.5, "h")).unwrap();
        reopened.flush().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&path), "trial,t_ms,x\n1,0,b\n1,1,\"c\nd\"\n2,0,f\n3,0,a\n3,1,g\n5,0.5,h\n");
        assert_eq!(read(&dir.join("trials/0004/faults.csv")), "trial,t_ms,x\n4,0,e\n");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 2, "no temporary file left");
    }

    #[test]
    fn headers_come_from_the_row_types() {
        assert_eq!(header_of::<EventRow>(), ["trial", "t_ms", "worker", "pid", "event", "detail"]);
        assert_eq!(header_of::<SummaryKey>(), ["setting"]);
    }

    #[test]
    fn ms_print_to_the_microsecond() {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.serialize((ms(12_345), ms(-7), round_ms(2.0 / 3.0), Option::<f64>::None)).unwrap();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), "12.345,-0.007,0.667,\n");
    }
}
