//! Reading a results directory back: events.csv → one History per trial.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::columns::header_of;
use super::rows::EventRow;
use crate::model::history::{Detail, Event, EventKind, History, TRIAL_CUT, ms_to_us};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {source}", path.display())]
    Csv { path: std::path::PathBuf, source: csv::Error },
    #[error("{}:{line}: {message}", path.display())]
    Row { path: std::path::PathBuf, line: u64, message: String },
}

/// The results format a directory was written in (host.json's
/// `results_format`; runs from before it was recorded are format 1). A
/// directory without host.json was not written by a run (a history put
/// together by hand, to be checked): it is taken to be in this format.
pub fn results_format(dir: &Path) -> Result<u32, ReadError> {
    #[derive(serde::Deserialize)]
    struct Recorded {
        results_format: Option<u32>,
    }
    let path = dir.join("host.json");
    let text = match crate::files::read_text(&path, crate::files::MAX_TEXT_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(super::rows::RESULTS_FORMAT),
        Err(e) => return Err(ReadError::Row { path: path.clone(), line: 0, message: e.to_string() }),
    };
    let recorded: Recorded = serde_json::from_str(&text).map_err(|e| ReadError::Row {
        path: path.clone(),
        line: e.line() as u64,
        message: e.to_string(),
    })?;
    Ok(recorded.results_format.unwrap_or(1))
}

/// No trial lasts a year: a time beyond it is not one a run wrote.
const MAX_T_MS: f64 = crate::model::history::MAX_TRIAL_US as f64 / 1000.0;

/// A results table up to its last complete line, to be read as it is
/// parsed (a table is as large as its run made it: never read whole into
/// memory). Every row is written whole and flushed with its trial, so what
/// follows the last newline is a row torn by a kill or a full disk, and
/// belongs to no finished trial; what a live run appends meanwhile is not
/// read either.
pub fn whole_lines(path: &Path) -> std::io::Result<std::io::Take<std::fs::File>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = crate::files::open_regular(path)?;
    let len = file.metadata()?.len();
    // The last newline, found from the end a block at a time.
    const BLOCK: u64 = 64 << 10;
    let mut keep = 0;
    let mut end = len;
    let mut block = vec![0; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let chunk = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(file.take(keep))
}

/// The trials listed in `dir/trials.csv`, which a run writes last for each
/// trial: a trial is finished exactly when its row is there.
pub fn finished_trials(dir: &Path) -> Result<BTreeSet<u32>, ReadError> {
    let path = dir.join("trials.csv");
    let lines = whole_lines(&path).map_err(|e| ReadError::Csv { path: path.clone(), source: e.into() })?;
    let mut reader = csv::Reader::from_reader(lines);
    let mut out = BTreeSet::new();
    let mut records = reader.records().peekable();
    while let Some(record) = records.next() {
        // A last row with the wrong number of columns was torn, then
        // continued: its trial is not finished.
        if record.is_err() && records.peek().is_none() {
            break;
        }
        let record = record.map_err(|source| ReadError::Csv { path: path.clone(), source })?;
        let line = record.position().map_or(0, |p| p.line());
        let trial = record.get(0).and_then(|t| t.parse::<u32>().ok()).filter(|&t| t > 0);
        let trial = trial.ok_or_else(|| ReadError::Row {
            path: path.clone(),
            line,
            message: format!("{:?} is not a trial number", record.get(0).unwrap_or("")),
        })?;
        out.insert(trial);
    }
    Ok(out)
}

/// Every trial's history in `dir/events.csv`, by trial number; with `only`
/// (the trials trials.csv lists as finished), just those trials, each of
/// which must be whole. See `each_history`.
pub fn read_histories(
    dir: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
) -> Result<BTreeMap<u32, History>, ReadError> {
    let mut out = BTreeMap::new();
    each_history(
        dir,
        only,
        workers,
        |_| true,
        |trial, history| {
            out.insert(trial, history);
            Ok::<(), ReadError>(())
        },
    )?;
    Ok(out)
}

/// Each trial's history in `dir/events.csv` handed to `each` as soon as it
/// is read, in file order, of its events those `keep` keeps: one trial in
/// memory at a time, however long the run. See `read_trials`, which this
/// is over.
pub fn each_history<E: From<ReadError>>(
    dir: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
    keep: fn(&Event) -> bool,
    each: impl FnMut(u32, History) -> Result<(), E>,
) -> Result<(), E> {
    struct Collect<F> {
        events: Vec<Event>,
        keep: fn(&Event) -> bool,
        each: F,
    }
    impl<E: From<ReadError>, F: FnMut(u32, History) -> Result<(), E>> TrialReader for Collect<F> {
        type Error = E;
        fn begin(&mut self, _trial: u32) -> Result<(), E> {
            self.events.clear();
            Ok(())
        }
        fn instant(&mut self, events: Vec<Event>) -> Result<(), E> {
            self.events.extend(events.into_iter().filter(self.keep));
            Ok(())
        }
        fn end(&mut self, trial: u32) -> Result<(), E> {
            (self.each)(trial, History { events: std::mem::take(&mut self.events) })
        }
    }
    read_trials(dir, only, workers, &mut Collect { events: Vec::new(), keep, each })
}

/// What takes a trial's history as it is read.
pub trait TrialReader {
    type Error: From<ReadError>;
    /// A trial's rows begin.
    fn begin(&mut self, trial: u32) -> Result<(), Self::Error>;
    /// Its events that share a µs, in the order the run wrote them; each
    /// instant after the one before in time.
    fn instant(&mut self, events: Vec<Event>) -> Result<(), Self::Error>;
    /// Its rows are all read, and it is whole.
    fn end(&mut self, trial: u32) -> Result<(), Self::Error>;
}

/// Rows of a trial sorted by time in memory, if they are not in order
/// already; a longer trial's rows must be in time order (a run writes them
/// so), and are handed on as they are read.
pub const SORT_ROWS: usize = 1 << 16;

/// Each trial's history in `dir/events.csv` handed to `reader` as it is
/// read, in file order, an instant at a time: what is held is one instant
/// (or, for a trial of at most `SORT_ROWS` rows, the trial, sorted by time
/// as a history is), however long the run. A run writes a trial's rows
/// together, so a trial's rows that come apart (another trial's between
/// them) are refused. With `only` (the trials trials.csv lists as
/// finished), just those trials, each of which must be whole. Every row is
/// read the same way whatever its trial: one that cannot be read is refused
/// at its line, never skipped. Worker indices must be below `workers`, the
/// most any of the experiment's trials ran.
pub fn read_trials<R: TrialReader>(
    dir: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
    reader: &mut R,
) -> Result<(), R::Error> {
    read_trials_at(&dir.join("events.csv"), only, workers, reader)
}

/// `read_trials` of the events file at `path` (a run's, or a running
/// trial's own).
pub fn read_trials_at<R: TrialReader>(
    path: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
    reader: &mut R,
) -> Result<(), R::Error> {
    let path = path.to_path_buf();
    let csv_err = |source| ReadError::Csv { path: path.clone(), source };
    let lines = whole_lines(&path).map_err(|e| csv_err(e.into()))?;
    let mut rows = csv::Reader::from_reader(lines);
    let mut record = csv::StringRecord::new();
    let headers = rows.headers().map_err(csv_err)?.clone();
    same_header(&path, &headers, &header_of::<EventRow>())?;
    let row_err = |line: u64, message: String| ReadError::Row { path: path.clone(), line, message };
    // The trial being read (None: one skipped), and the trials done with.
    let mut current: Option<(u32, Option<Trial>)> = None;
    let mut seen = BTreeSet::new();
    let finished = only.is_some();
    while rows.read_record(&mut record).map_err(csv_err)? {
        let line = record.position().map_or(0, |p| p.line());
        let row: RowRef<'_> = record.deserialize(Some(&headers)).map_err(csv_err)?;
        let bad = |message: String| row_err(line, message);
        if row.trial == 0 {
            return Err(bad("trial 0: trials are numbered from 1".into()).into());
        }
        if !row.t_ms.is_finite() || row.t_ms.abs() > MAX_T_MS {
            return Err(bad(format!("t_ms {} is not a time within a trial", row.t_ms)).into());
        }
        if let Some(w) = row.worker.filter(|&w| w >= workers) {
            return Err(bad(format!("worker {w}: the experiment has {workers} worker(s), numbered from 0")).into());
        }
        let kind = EventKind::from_name(row.event).ok_or_else(|| bad(format!("unknown event {:?}", row.event)))?;
        if current.as_ref().is_none_or(|(t, _)| *t != row.trial) {
            if let Some((t, Some(trial))) = current.take() {
                trial.end(t, finished, reader).map_err(|e| e.into_error(&row_err))?;
            }
            if !seen.insert(row.trial) {
                let msg = format!(
                    "trial {} again, after other trials' rows: a run writes a trial's rows together",
                    row.trial
                );
                return Err(bad(msg).into());
            }
            let kept = only.is_none_or(|only| only.contains(&row.trial));
            if kept {
                reader.begin(row.trial)?;
            }
            current = Some((row.trial, kept.then(Trial::default)));
        }
        let Some((t, Some(trial))) = current.as_mut() else { continue };
        let detail = Detail::from_json(row.detail).map_err(|e| bad(format!("bad detail: {e}")))?;
        let event = Event { t_us: ms_to_us(row.t_ms), worker: row.worker, pid: row.pid, kind, detail };
        trial.row(*t, line, event, reader).map_err(|e| e.into_error(&row_err))?;
    }
    if let Some((t, Some(trial))) = current.take() {
        trial.end(t, finished, reader).map_err(|e| e.into_error(&row_err))?;
    }
    Ok(())
}

/// An events.csv row as read, its text borrowed from the record: an
/// `EventRow` without a copy of its strings (every row of a history is read).
#[derive(serde::Deserialize)]
struct RowRef<'a> {
    trial: u32,
    t_ms: f64,
    worker: Option<usize>,
    pid: Option<i32>,
    event: &'a str,
    detail: &'a str,
}

/// Why a long trial's row out of time order is refused.
fn out_of_order(trial: u32) -> String {
    format!(
        "trial {trial} has more than {SORT_ROWS} rows, and this one is earlier than the row before it: a run writes \
         a trial's rows in time order (sort a history put together by hand by t_ms within each trial)"
    )
}

/// A reader's error, or a row's (line, why).
enum TrialError<E> {
    Reader(E),
    Row(u64, String),
}

impl<E: From<ReadError>> TrialError<E> {
    fn into_error(self, row: &impl Fn(u64, String) -> ReadError) -> E {
        match self {
            TrialError::Reader(e) => e,
            TrialError::Row(line, message) => row(line, message).into(),
        }
    }
}

/// One trial as it is read.
#[derive(Default)]
struct Trial {
    /// What the harness writes once, where it was first written.
    once: BTreeMap<(&'static str, Option<usize>), u64>,
    /// Its rows so far while it may still be sorted in memory.
    rows: Vec<(u64, Event)>,
    /// Past `SORT_ROWS`: its rows in time order, the current instant's.
    streaming: bool,
    instant: Vec<Event>,
    last_line: u64,
    /// Its end says it was cut (a soak's trial kept up to its last whole
    /// window when its run was stopped): the workers alive there have no
    /// exit.
    cut: bool,
}

impl Trial {
    fn row<R: TrialReader>(
        &mut self,
        trial: u32,
        line: u64,
        event: Event,
        reader: &mut R,
    ) -> Result<(), TrialError<R::Error>> {
        self.last_line = line;
        // What the harness writes once in a trial (its barrier, its end) or
        // once per worker (its spawn, its exit) is there at most once, a
        // copied row being damage.
        let once = match event.kind {
            EventKind::Barrier | EventKind::TrialEnd => Some((event.kind.name(), None)),
            EventKind::Spawn | EventKind::Exit => Some((event.kind.name(), event.worker)),
            _ => None,
        };
        if let Some(key) = once
            && let Some(before) = self.once.insert(key, line)
        {
            let whose = event.worker.map_or(String::new(), |w| format!(" of worker {w}"));
            let what = event.kind.name();
            let message = format!("a second {what}{whose} in trial {trial} (the first at line {before}): a row copied");
            return Err(TrialError::Row(line, message));
        }
        if event.kind == EventKind::TrialEnd {
            self.cut = event.detail.reason.as_deref() == Some(TRIAL_CUT);
        }
        if !self.streaming {
            self.rows.push((line, event));
            if self.rows.len() <= SORT_ROWS {
                return Ok(());
            }
            // Too long to sort in memory: in time order, handed on.
            if let Some(w) = self.rows.windows(2).find(|w| w[1].1.t_us < w[0].1.t_us) {
                return Err(TrialError::Row(w[1].0, out_of_order(trial)));
            }
            self.streaming = true;
            for (_, e) in std::mem::take(&mut self.rows) {
                self.push(e, reader)?;
            }
            return Ok(());
        }
        if self.instant.last().is_some_and(|last| event.t_us < last.t_us) {
            return Err(TrialError::Row(line, out_of_order(trial)));
        }
        self.push(event, reader)
    }

    /// The next event in time order: a new instant hands on the last.
    fn push<R: TrialReader>(&mut self, event: Event, reader: &mut R) -> Result<(), TrialError<R::Error>> {
        if self.instant.last().is_some_and(|last| last.t_us != event.t_us) {
            reader.instant(std::mem::take(&mut self.instant)).map_err(TrialError::Reader)?;
        }
        self.instant.push(event);
        Ok(())
    }

    /// The trial's rows are all read: a `finished` trial has its end and
    /// an exit for every worker it spawned (a history cut short is refused,
    /// not re-checked as a shorter trial).
    fn end<R: TrialReader>(mut self, trial: u32, finished: bool, reader: &mut R) -> Result<(), TrialError<R::Error>> {
        if finished {
            let cut = |what: String| {
                let message =
                    format!("trial {trial} is finished (trials.csv) but its history has no {what}: it was cut short");
                Err(TrialError::Row(self.last_line, message))
            };
            let (end, spawn, exit) = (EventKind::TrialEnd.name(), EventKind::Spawn.name(), EventKind::Exit.name());
            if !self.once.contains_key(&(end, None)) {
                return cut(end.into());
            }
            for (kind, worker) in self.once.keys() {
                if !self.cut && *kind == spawn && !self.once.contains_key(&(exit, *worker)) {
                    return cut(format!("exit of worker {}", worker.map_or("?".into(), |w| w.to_string())));
                }
            }
        }
        if !self.streaming {
            // As a history holds them: by time, in the run's order within
            // a µs.
            let mut rows = std::mem::take(&mut self.rows);
            rows.sort_by_key(|(_, e)| e.t_us);
            for (_, e) in rows {
                self.push(e, reader)?;
            }
        }
        if !self.instant.is_empty() {
            reader.instant(std::mem::take(&mut self.instant)).map_err(TrialError::Reader)?;
        }
        reader.end(trial).map_err(TrialError::Reader)
    }
}

/// A table's header must be the one a run writes, by name and in order: a
/// reordered or misspelt column would be read as another.
fn same_header(path: &Path, found: &csv::StringRecord, wanted: &[String]) -> Result<(), ReadError> {
    if found.iter().eq(wanted.iter().map(String::as_str)) {
        return Ok(());
    }
    let found: Vec<&str> = found.iter().collect();
    Err(ReadError::Row {
        path: path.to_path_buf(),
        line: 1,
        message: format!("the header is {:?}, not the {:?} a run writes", found.join(","), wanted.join(",")),
    })
}

/// trial → `worker_outcomes` from `dir/trials.csv` (empty if unreadable).
pub fn worker_outcomes(dir: &Path) -> BTreeMap<u32, String> {
    let Ok(lines) = whole_lines(&dir.join("trials.csv")) else { return BTreeMap::new() };
    let mut reader = csv::Reader::from_reader(lines);
    let Ok(headers) = reader.headers().cloned() else { return BTreeMap::new() };
    let (Some(t), Some(o)) =
        (headers.iter().position(|h| h == "trial"), headers.iter().position(|h| h == "worker_outcomes"))
    else {
        return BTreeMap::new();
    };
    reader.records().flatten().filter_map(|r| Some((r.get(t)?.parse().ok()?, r.get(o)?.to_string()))).collect()
}

/// One trial's rows of `dir/faults.csv` (none if the run fired none).
pub fn fault_rows(dir: &Path, trial: u32) -> Result<Vec<super::rows::FaultCsvRow>, ReadError> {
    let path = dir.join("faults.csv");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let csv_err = |source| ReadError::Csv { path: path.clone(), source };
    let lines = whole_lines(&path).map_err(|e| csv_err(e.into()))?;
    let mut reader = csv::Reader::from_reader(lines);
    let headers = reader.headers().map_err(csv_err)?.clone();
    same_header(&path, &headers, &header_of::<super::rows::FaultCsvRow>())?;
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        let row: super::rows::FaultCsvRow = record.deserialize(Some(&headers)).map_err(csv_err)?;
        let line = record.position().map_or(0, |p| p.line());
        for (name, t) in [("scheduled_ms", row.scheduled_ms), ("actual_ms", row.actual_ms)] {
            if !t.is_finite() || t.abs() > MAX_T_MS {
                let message = format!("{name} {t} is not a time within a trial");
                return Err(ReadError::Row { path: path.clone(), line, message });
            }
        }
        if row.trial == trial {
            out.push(row);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, worker: Option<usize>) -> Event {
        Event { t_us: 0, worker, pid: None, kind, detail: Detail::default() }
    }

    fn trial(kinds: &[(EventKind, Option<usize>)]) -> Vec<(u64, Event)> {
        kinds.iter().enumerate().map(|(i, (k, w))| (i as u64 + 2, event(*k, *w))).collect()
    }

    /// A reader that takes what it is handed and does nothing with it.
    struct Ignore;

    impl TrialReader for Ignore {
        type Error = ReadError;
        fn begin(&mut self, _: u32) -> Result<(), ReadError> {
            Ok(())
        }
        fn instant(&mut self, _: Vec<Event>) -> Result<(), ReadError> {
            Ok(())
        }
        fn end(&mut self, _: u32) -> Result<(), ReadError> {
            Ok(())
        }
    }

    /// Whether a trial's rows are whole: (line, why) if not.
    fn whole(t: u32, rows: &[(u64, Event)], finished: bool) -> Result<(), (u64, String)> {
        let mut trial = Trial::default();
        let fails = |e: TrialError<ReadError>| match e {
            TrialError::Row(line, why) => (line, why),
            TrialError::Reader(e) => (0, e.to_string()),
        };
        for (line, e) in rows {
            trial.row(t, *line, e.clone(), &mut Ignore).map_err(fails)?;
        }
        trial.end(t, finished, &mut Ignore).map_err(fails)
    }

    #[test]
    fn a_table_is_read_to_its_last_newline_however_far_back() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let read = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let mut out = Vec::new();
            whole_lines(&path).unwrap().read_to_end(&mut out).unwrap();
            out
        };
        assert_eq!(read(b"a\nb\ntorn"), b"a\nb\n");
        assert_eq!(read(b"a\nb\n"), b"a\nb\n");
        assert_eq!(read(b"no newline"), b"");
        assert_eq!(read(b""), b"");
        // A torn row longer than the blocks it is searched back in.
        let mut long = b"h\nrow\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', 200_000));
        assert_eq!(read(&long), b"h\nrow\n");
    }

    #[test]
    fn histories_come_one_trial_at_a_time_in_file_order_and_a_trial_apart_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let header = header_of::<EventRow>().join(",");
        let write = |rows: &str| std::fs::write(dir.path().join("events.csv"), format!("{header}\n{rows}")).unwrap();
        // Trials finish out of order with --jobs: each one's rows together.
        write("2,0.000,0,7,spawn,\n2,1.000,,,barrier,\n1,0.000,0,8,spawn,\n3,0.000,0,9,spawn,\n");
        let mut order = Vec::new();
        each_history(
            dir.path(),
            None,
            1,
            |_| true,
            |t, h| {
                order.push((t, h.events.len()));
                Ok::<(), ReadError>(())
            },
        )
        .unwrap();
        assert_eq!(order, [(2, 2), (1, 1), (3, 1)]);
        // Only the listed trials are handed on; the others are still read.
        let mut listed = Vec::new();
        let only = BTreeSet::from([1]);
        let e = each_history(
            dir.path(),
            Some(&only),
            1,
            |_| true,
            |t, _| {
                listed.push(t);
                Ok::<(), ReadError>(())
            },
        );
        assert!(e.unwrap_err().to_string().contains("it was cut short"), "trial 1 has no trial_end");
        write("1,0.000,0,8,spawn,\n2,0.000,0,7,spawn,\n1,1.000,,,barrier,\n");
        let e = read_histories(dir.path(), None, 1).unwrap_err().to_string();
        assert!(e.contains("events.csv:4: trial 1 again, after other trials' rows"), "{e}");
    }

    #[test]
    fn a_long_trial_is_handed_on_an_instant_at_a_time_and_must_be_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let header = header_of::<EventRow>().join(",");
        let rows = |n: usize, swap: Option<usize>| {
            let mut t: Vec<usize> = (0..n).map(|k| k / 2).collect();
            if let Some(k) = swap {
                t.swap(k, k + 2);
            }
            let body: String = t.iter().map(|ms| format!("1,{ms}.000,0,7,held_by,\n")).collect();
            std::fs::write(dir.path().join("events.csv"), format!("{header}\n{body}")).unwrap();
        };
        struct Count(Vec<usize>);
        impl TrialReader for Count {
            type Error = ReadError;
            fn begin(&mut self, _: u32) -> Result<(), ReadError> {
                Ok(())
            }
            fn instant(&mut self, events: Vec<Event>) -> Result<(), ReadError> {
                assert!(events.iter().all(|e| e.t_us == events[0].t_us), "an instant shares its µs");
                self.0.push(events.len());
                Ok(())
            }
            fn end(&mut self, _: u32) -> Result<(), ReadError> {
                Ok(())
            }
        }
        let long = SORT_ROWS + 10;
        rows(long, None);
        let mut count = Count(Vec::new());
        read_trials(dir.path(), None, 1, &mut count).unwrap();
        assert_eq!((count.0.len(), count.0.iter().sum::<usize>()), (long / 2, long));
        // Out of order past what is sorted in memory: refused at its row
        // (rows k and k + 2 swapped, two to a ms: row k + 2, on its line
        // k + 4 after the header, is the first earlier than the one before).
        let k = SORT_ROWS + 3;
        rows(long, Some(k));
        let e = read_trials(dir.path(), None, 1, &mut Count(Vec::new())).unwrap_err().to_string();
        assert!(e.contains(&format!("events.csv:{}: trial 1 has more than", k + 4)), "{e}");
        // A short trial out of order is sorted, as a history is.
        rows(10, Some(2));
        let h = read_histories(dir.path(), None, 1).unwrap();
        assert!(h[&1].events.is_sorted_by_key(|e| e.t_us));
    }

    #[test]
    fn a_fault_time_that_is_not_a_time_is_refused_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let header = header_of::<super::super::rows::FaultCsvRow>().join(",");
        for bad in ["NaN", "inf", "-inf", "1e300"] {
            let rows =
                format!("{header}\n1,0,kill,leader,0,12,1000.000,1000.100,100,\n1,1,kill,leader,0,12,{bad},1.0,0,\n");
            std::fs::write(dir.path().join("faults.csv"), rows).unwrap();
            let e = fault_rows(dir.path(), 1).unwrap_err().to_string();
            assert!(
                e.contains("faults.csv:3: scheduled_ms") && e.contains("is not a time within a trial"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_finished_trial_needs_its_end_and_an_exit_for_every_worker_it_spawned() {
        use EventKind::*;
        let full =
            [(Spawn, Some(0)), (Spawn, Some(1)), (Barrier, None), (TrialEnd, None), (Exit, Some(1)), (Exit, Some(0))];
        assert_eq!(whole(1, &trial(&full), true), Ok(()));
        // Cut at every row: finished, each prefix is refused at its last line.
        for n in 1..full.len() {
            let (line, why) = whole(1, &trial(&full[..n]), true).unwrap_err();
            assert_eq!(line, n as u64 + 1, "{why}");
            assert!(why.contains("cut short"), "{why}");
            // Unfinished (a trial interrupted), it is what a kill left.
            assert_eq!(whole(1, &trial(&full[..n]), false), Ok(()));
        }
    }

    #[test]
    fn a_soaks_trial_cut_at_a_window_has_its_end_and_no_exit() {
        use EventKind::*;
        let mut rows = trial(&[(Spawn, Some(0)), (Spawn, Some(1)), (Barrier, None), (TrialEnd, None)]);
        assert!(whole(1, &rows, true).is_err(), "an end without exits is a history cut short");
        rows[3].1.detail.reason = Some(TRIAL_CUT.into());
        assert_eq!(whole(1, &rows, true), Ok(()));
        assert!(whole(1, &rows[..3], true).is_err(), "a cut trial still has its end");
    }

    #[test]
    fn a_row_the_harness_writes_once_is_refused_twice() {
        use EventKind::*;
        for copied in [(Spawn, Some(0)), (Barrier, None), (TrialEnd, None), (Exit, Some(0))] {
            let mut rows = vec![(Spawn, Some(0)), (Barrier, None), (TrialEnd, None), (Exit, Some(0))];
            rows.push(copied);
            let (line, why) = whole(3, &trial(&rows), false).unwrap_err();
            assert_eq!(line, 6, "{why}");
            assert!(why.contains(&format!("a second {}", copied.0.name())) && why.contains("trial 3"), "{why}");
        }
        // Two workers' spawns are not one copied.
        assert_eq!(whole(3, &trial(&[(Spawn, Some(0)), (Spawn, Some(1))]), false), Ok(()));
    }
}
