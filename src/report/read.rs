//! Reading a results directory back: events.csv → one History per trial.

use std::collections::BTreeMap;
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

/// Every trial's history in `dir/events.csv`, by trial number.
pub fn read_histories(dir: &Path) -> Result<BTreeMap<u32, History>, ReadError> {
    let path = dir.join("events.csv");
    let csv_err = |source| ReadError::Csv { path: path.clone(), source };
    let mut reader = csv::Reader::from_path(&path).map_err(csv_err)?;
    let mut by_trial: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
    let mut record = csv::StringRecord::new();
    let headers = reader.headers().map_err(csv_err)?.clone();
    while reader.read_record(&mut record).map_err(csv_err)? {
        let line = record.position().map_or(0, |p| p.line());
        let row: EventRow = record.deserialize(Some(&headers)).map_err(csv_err)?;
        let bad = |message: String| ReadError::Row { path: path.clone(), line, message };
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
