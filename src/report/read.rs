//! Reading a results directory back: events.csv → one History per trial.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
    let text = match std::fs::read_to_string(&path) {
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

/// A results table up to its last complete line. Every row is written
/// whole and flushed with its trial, so what follows the last newline is a
/// row torn by a kill or a full disk, and belongs to no finished trial.
pub fn whole_lines(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = std::fs::read(path)?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(keep);
    Ok(bytes)
}

/// The trials listed in `dir/trials.csv`, which a run writes last for each
/// trial: a trial is finished exactly when its row is there.
pub fn finished_trials(dir: &Path) -> Result<BTreeSet<u32>, ReadError> {
    let path = dir.join("trials.csv");
    let bytes = whole_lines(&path).map_err(|e| ReadError::Csv { path: path.clone(), source: e.into() })?;
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
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

/// Every trial's history in `dir/events.csv`, by trial number; with `only`,
/// just those trials (the rows of others, such as one interrupted
/// half-written, are not even parsed). Worker indices must be below
/// `workers`, the most any of the experiment's trials ran.
pub fn read_histories(
    dir: &Path,
    only: Option<&BTreeSet<u32>>,
    workers: usize,
) -> Result<BTreeMap<u32, History>, ReadError> {
    let path = dir.join("events.csv");
    let csv_err = |source| ReadError::Csv { path: path.clone(), source };
    let bytes = whole_lines(&path).map_err(|e| csv_err(e.into()))?;
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let mut by_trial: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
    let mut record = csv::StringRecord::new();
    let headers = reader.headers().map_err(csv_err)?.clone();
    while reader.read_record(&mut record).map_err(csv_err)? {
        let line = record.position().map_or(0, |p| p.line());
        if let Some(only) = only
            && !record.get(0).and_then(|t| t.parse().ok()).is_some_and(|t| only.contains(&t))
        {
            continue;
        }
        let row: EventRow = record.deserialize(Some(&headers)).map_err(csv_err)?;
        let bad = |message: String| ReadError::Row { path: path.clone(), line, message };
        if row.trial == 0 {
            return Err(bad("trial 0: trials are numbered from 1".into()));
        }
        if !row.t_ms.is_finite() || row.t_ms.abs() > MAX_T_MS {
            return Err(bad(format!("t_ms {} is not a time within a trial", row.t_ms)));
        }
        if let Some(w) = row.worker.filter(|&w| w >= workers) {
            return Err(bad(format!("worker {w}: the experiment has {workers} worker(s), numbered from 0")));
        }
        let kind = EventKind::from_name(&row.event).ok_or_else(|| bad(format!("unknown event {:?}", row.event)))?;
        let detail = Detail::from_json(&row.detail).map_err(|e| bad(format!("bad detail: {e}")))?;
        by_trial.entry(row.trial).or_default().push(Event {
            t_us: ms_to_us(row.t_ms),
            worker: row.worker,
            pid: row.pid,
            kind,
            detail,
        });
    }
    Ok(by_trial.into_iter().map(|(t, events)| (t, History::new(events))).collect())
}

/// trial → `worker_outcomes` from `dir/trials.csv` (empty if unreadable).
pub fn worker_outcomes(dir: &Path) -> BTreeMap<u32, String> {
    let Ok(mut reader) = csv::Reader::from_path(dir.join("trials.csv")) else { return BTreeMap::new() };
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
    let bytes = whole_lines(&path).map_err(|e| csv_err(e.into()))?;
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let mut out = Vec::new();
    for row in reader.deserialize::<super::rows::FaultCsvRow>() {
        let row = row.map_err(csv_err)?;
        if row.trial == trial {
            out.push(row);
        }
    }
    Ok(out)
}
