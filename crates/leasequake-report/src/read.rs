//! Reading a results directory back: events.csv → one History per trial.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::columns::header_of;
use super::rows::EventRow;
use crate::model::history::{Detail, Event, EventKind, History, ms_to_us};

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
const MAX_T_MS: f64 = 365.0 * 86_400_000.0;

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
    each_history(dir, only, workers, |trial, history| {
        out.insert(trial, history);
        Ok::<(), ReadError>(())
    })?;
    Ok(out)
}

/// Each trial's history in `dir/events.csv` handed to `each` as soon as it
/// is read, in file order: one trial in memory at a time, however long the
/// run. A run writes a trial's rows together, so a trial's rows that come
/// apart (another trial's between them) are refused. With `only` (the
/// trials trials.csv lists as finished), just those trials, each of which
/// must be whole. Every row is read the same way whatever its trial: one
/// that cannot be read is refused at its line, never skipped. Worker
/// indices must be below `workers`, the most any of the experiment's
/// trials ran.
pub fn each_history<E: From<ReadError>>(
    dir: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
    mut each: impl FnMut(u32, History) -> Result<(), E>,
) -> Result<(), E> {
    let path = dir.join("events.csv");
    let csv_err = |source| ReadError::Csv { path: path.clone(), source };
    let lines = whole_lines(&path).map_err(|e| csv_err(e.into()))?;
    let mut reader = csv::Reader::from_reader(lines);
    let mut record = csv::StringRecord::new();
    let headers = reader.headers().map_err(csv_err)?.clone();
    same_header(&path, &headers, &header_of::<EventRow>())?;
    // The trial being read, its rows so far, and the trials done with.
    let mut current: Option<(u32, Vec<(u64, Event)>)> = None;
    let mut seen = BTreeSet::new();
    let mut done = |trial: u32, events: Vec<(u64, Event)>| -> Result<(), E> {
        if only.is_some_and(|only| !only.contains(&trial)) {
            return Ok(());
        }
        whole(trial, &events, only.is_some()).map_err(|(line, message)| ReadError::Row {
            path: path.clone(),
            line,
            message,
        })?;
        each(trial, History::new(events.into_iter().map(|(_, e)| e).collect()))
    };
    while reader.read_record(&mut record).map_err(csv_err)? {
        let line = record.position().map_or(0, |p| p.line());
        let row: EventRow = record.deserialize(Some(&headers)).map_err(csv_err)?;
        let bad = |message: String| ReadError::Row { path: path.clone(), line, message };
        if row.trial == 0 {
            return Err(bad("trial 0: trials are numbered from 1".into()).into());
        }
        if !row.t_ms.is_finite() || row.t_ms.abs() > MAX_T_MS {
            return Err(bad(format!("t_ms {} is not a time within a trial", row.t_ms)).into());
        }
        if let Some(w) = row.worker.filter(|&w| w >= workers) {
            return Err(bad(format!("worker {w}: the experiment has {workers} worker(s), numbered from 0")).into());
        }
        let kind = EventKind::from_name(&row.event).ok_or_else(|| bad(format!("unknown event {:?}", row.event)))?;
        if current.as_ref().is_none_or(|(t, _)| *t != row.trial) {
            if let Some((t, events)) = current.take() {
                done(t, events)?;
            }
            if !seen.insert(row.trial) {
                let msg = format!(
                    "trial {} again, after other trials' rows: a run writes a trial's rows together",
                    row.trial
                );
                return Err(bad(msg).into());
            }
            current = Some((row.trial, Vec::new()));
        }
        if only.is_some_and(|only| !only.contains(&row.trial)) {
            continue;
        }
        let detail = Detail::from_json(&row.detail).map_err(|e| bad(format!("bad detail: {e}")))?;
        let event = Event { t_us: ms_to_us(row.t_ms), worker: row.worker, pid: row.pid, kind, detail };
        if let Some((_, events)) = current.as_mut() {
            events.push((line, event));
        }
    }
    if let Some((t, events)) = current.take() {
        done(t, events)?;
    }
    Ok(())
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

/// What the harness writes once in a trial (its barrier, its end) or once
/// per worker (its spawn, its exit) is there at most once, a copied row
/// being damage; and a `finished` trial has its end and an exit for every
/// worker it spawned: a history cut short is refused, not re-checked as a
/// shorter trial. The error is (line, why).
fn whole(trial: u32, events: &[(u64, Event)], finished: bool) -> Result<(), (u64, String)> {
    let mut first: BTreeMap<(&str, Option<usize>), u64> = BTreeMap::new();
    for (line, e) in events {
        let once = match e.kind {
            EventKind::Barrier | EventKind::TrialEnd => Some((e.kind.name(), None)),
            EventKind::Spawn | EventKind::Exit => Some((e.kind.name(), e.worker)),
            _ => None,
        };
        let Some(key) = once else { continue };
        if let Some(before) = first.insert(key, *line) {
            let whose = e.worker.map_or(String::new(), |w| format!(" of worker {w}"));
            return Err((
                *line,
                format!(
                    "a second {}{whose} in trial {trial} (the first at line {before}): a row copied",
                    e.kind.name()
                ),
            ));
        }
    }
    if !finished {
        return Ok(());
    }
    let last = events.last().map_or(0, |(line, _)| *line);
    let cut = |what: String| {
        Err((last, format!("trial {trial} is finished (trials.csv) but its history has no {what}: it was cut short")))
    };
    let (end, spawn, exit) = (EventKind::TrialEnd.name(), EventKind::Spawn.name(), EventKind::Exit.name());
    if !first.contains_key(&(end, None)) {
        return cut(end.into());
    }
    for (kind, worker) in first.keys() {
        if *kind == spawn && !first.contains_key(&(exit, *worker)) {
            return cut(format!("exit of worker {}", worker.map_or("?".into(), |w| w.to_string())));
        }
    }
    Ok(())
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
        each_history(dir.path(), None, 1, |t, h| {
            order.push((t, h.events.len()));
            Ok::<(), ReadError>(())
        })
        .unwrap();
        assert_eq!(order, [(2, 2), (1, 1), (3, 1)]);
        // Only the listed trials are handed on; the others are still read.
        let mut listed = Vec::new();
        let only = BTreeSet::from([1]);
        let e = each_history(dir.path(), Some(&only), 1, |t, _| {
            listed.push(t);
            Ok::<(), ReadError>(())
        });
        assert!(e.unwrap_err().to_string().contains("it was cut short"), "trial 1 has no trial_end");
        write("1,0.000,0,8,spawn,\n2,0.000,0,7,spawn,\n1,1.000,,,barrier,\n");
        let e = read_histories(dir.path(), None, 1).unwrap_err().to_string();
        assert!(e.contains("events.csv:4: trial 1 again, after other trials' rows"), "{e}");
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
