//! A running trial's events on disk (`trials/NNNN/events.csv`, in
//! events.csv's own format), written as the harness hands them on: a trial
//! of any length is never held in memory. Once the trial is over its rows
//! are put in time order, if any came out of it, and the run appends them
//! to its events.csv.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::columns::header_of;
use super::csv::WriteError;
use super::measures::event_row;
use super::read::SORT_ROWS;
use super::rows::EventRow;
use crate::model::history::{Event, EventSink, ms_to_us};

pub struct EventSpool {
    path: PathBuf,
    trial: u32,
    /// Opened at the first event: the harness makes the trial's directory.
    writer: Option<csv::Writer<BufWriter<File>>>,
    last_us: i64,
    /// Whether every event came after the one before it in time.
    sorted: bool,
}

impl EventSpool {
    pub fn new(path: PathBuf, trial: u32) -> EventSpool {
        EventSpool { path, trial, writer: None, last_us: i64::MIN, sorted: true }
    }

    fn write(&mut self, event: &Event) -> io::Result<()> {
        if self.writer.is_none() {
            let file = BufWriter::new(File::create(&self.path)?);
            let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(file);
            w.write_record(header_of::<EventRow>())?;
            self.writer = Some(w);
        }
        let w = self.writer.as_mut().expect("opened above");
        w.serialize(event_row(self.trial, event))?;
        Ok(())
    }

    /// Its rows on disk in time order (a trial's rows at one µs in the
    /// order the harness handed them on): the file, or None if no event
    /// came.
    pub fn close(mut self) -> Result<Option<PathBuf>, WriteError> {
        let err = |source| WriteError { path: self.path.clone(), source };
        let Some(mut w) = self.writer.take() else { return Ok(None) };
        w.flush().map_err(err)?;
        drop(w);
        if !self.sorted {
            sort_rows(&self.path, SORT_ROWS).map_err(err)?;
        }
        Ok(Some(self.path))
    }
}

impl EventSink for EventSpool {
    fn event(&mut self, event: Event) -> io::Result<()> {
        self.sorted &= event.t_us >= self.last_us;
        self.last_us = self.last_us.max(event.t_us);
        self.write(&event).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }
}

/// An events.csv row's time, µs.
fn time_of(record: &csv::ByteRecord) -> io::Result<i64> {
    let t = record.get(1).and_then(|t| std::str::from_utf8(t).ok()).and_then(|t| t.parse::<f64>().ok());
    t.map(ms_to_us).ok_or_else(|| io::Error::other(format!("a row without a time: {record:?}")))
}

/// Sort an events file's rows by time, stably, in place (a new file renamed
/// over it): runs of `chunk` rows sorted in memory, each to a file of its
/// own beside it, then merged.
fn sort_rows(path: &Path, chunk: usize) -> io::Result<()> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_path(path)?;
    let header = reader.byte_headers()?.clone();
    let with_name = |suffix: String| {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        path.with_file_name(format!(".{name}.{suffix}"))
    };
    let mut runs: Vec<PathBuf> = Vec::new();
    let mut rows: Vec<(i64, csv::ByteRecord)> = Vec::new();
    let mut record = csv::ByteRecord::new();
    let mut more = true;
    while more {
        more = reader.read_byte_record(&mut record)?;
        if more {
            rows.push((time_of(&record)?, record.clone()));
        }
        if rows.len() == chunk || (!more && !rows.is_empty()) {
            rows.sort_by_key(|(t, _)| *t);
            let run = with_name(format!("run-{}", runs.len()));
            let mut w = csv::WriterBuilder::new().has_headers(false).from_path(&run)?;
            for (_, r) in rows.drain(..) {
                w.write_byte_record(&r)?;
            }
            w.flush()?;
            runs.push(run);
        }
    }
    let sorted = with_name("sorted".into());
    let mut out = csv::WriterBuilder::new().has_headers(false).from_path(&sorted)?;
    out.write_byte_record(&header)?;
    let mut readers: Vec<csv::Reader<File>> =
        runs.iter().map(|r| csv::ReaderBuilder::new().has_headers(false).from_path(r)).collect::<Result<_, _>>()?;
    // The earliest head of each run; equal times by run, the earlier run's
    // rows having come first.
    let mut heads = BinaryHeap::new();
    let mut current: Vec<csv::ByteRecord> = vec![csv::ByteRecord::new(); readers.len()];
    for (i, r) in readers.iter_mut().enumerate() {
        if r.read_byte_record(&mut current[i])? {
            heads.push(Reverse((time_of(&current[i])?, i)));
        }
    }
    while let Some(Reverse((_, i))) = heads.pop() {
        out.write_byte_record(&current[i])?;
        if readers[i].read_byte_record(&mut current[i])? {
            heads.push(Reverse((time_of(&current[i])?, i)));
        }
    }
    out.flush()?;
    drop(out);
    for run in &runs {
        std::fs::remove_file(run)?;
    }
    std::fs::rename(&sorted, path)
}

/// Copy an events file's rows (all but its header line) to `to`.
pub fn copy_rows(from: &Path, to: &mut impl Write) -> io::Result<()> {
    let reading = |e: io::Error| io::Error::new(e.kind(), format!("reading {}: {e}", from.display()));
    let mut reader = BufReader::new(File::open(from).map_err(reading)?);
    let mut header = Vec::new();
    reader.read_until(b'\n', &mut header).map_err(reading)?;
    io::copy(&mut reader, to)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::history::EventKind;

    fn event(t_us: i64, worker: usize) -> Event {
        Event::new(t_us, Some(worker), EventKind::Renewed)
    }

    fn times(path: &Path) -> Vec<(String, String)> {
        let mut r = csv::Reader::from_path(path).unwrap();
        r.records().map(|r| r.unwrap()).map(|r| (r[1].to_string(), r[2].to_string())).collect()
    }

    #[test]
    fn events_in_order_are_written_as_they_come() {
        let tmp = tempfile::tempdir().unwrap();
        let mut spool = EventSpool::new(tmp.path().join("events.csv"), 3);
        for (t, w) in [(1000, 0), (1000, 1), (2500, 0)] {
            spool.event(event(t, w)).unwrap();
        }
        let path = spool.close().unwrap().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("trial,t_ms,"), "{text}");
        assert_eq!(times(&path), [("1.0", "0"), ("1.0", "1"), ("2.5", "0")].map(|(a, b)| (a.into(), b.into())));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn rows_out_of_order_are_sorted_stably_however_many_runs_they_take() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.csv");
        let mut spool = EventSpool::new(path.clone(), 1);
        // Worker numbers say the order of arrival within a time.
        let arrivals = [(5, 0), (1, 1), (3, 2), (1, 3), (5, 4), (2, 5), (1, 6)];
        for (t, w) in arrivals {
            spool.event(event(t * 1000, w)).unwrap();
        }
        drop(spool.writer.take().map(|mut w| w.flush()));
        let want: Vec<(String, String)> = [(1, 1), (1, 3), (1, 6), (2, 5), (3, 2), (5, 0), (5, 4)]
            .map(|(t, w)| (format!("{t}.0"), w.to_string()))
            .into();
        for chunk in [1, 2, 3, 100] {
            sort_rows(&path, chunk).unwrap();
            assert_eq!(times(&path), want, "runs of {chunk}");
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "no run left behind");
        }
    }

    #[test]
    fn a_spool_that_cannot_be_written_is_an_error_naming_it() {
        let mut spool = EventSpool::new(PathBuf::from("/nonexistent/dir/events.csv"), 1);
        let e = spool.event(event(0, 0)).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/events.csv"), "{e}");
    }
}
