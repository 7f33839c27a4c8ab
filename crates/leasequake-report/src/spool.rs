//! A running trial's events on disk (`trials/NNNN/events.csv`, in
//! events.csv's own format), written as the harness hands them on: a trial
//! of any length is never held in memory. An event that comes after a
//! later one has been written goes to a file of late events beside it;
//! once the trial is over the late ones are sorted and merged in, and the
//! run appends the rows to its events.csv. `Spooling` does the writing on a
//! thread of its own, off the trial loop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use super::columns::header_of;
use super::measures::event_row;
use super::read::SORT_ROWS;
use super::rows::EventRow;
use crate::model::history::{Detail, Event, EventKind, EventSink, TRIAL_CUT, ms_to_us};

/// Files merged at once, at most: a long trial's late events sorted in many
/// runs are merged in rounds, never holding a descriptor per run.
const FAN_IN: usize = 64;

type Rows = csv::Writer<BufWriter<File>>;

pub struct EventSpool {
    path: PathBuf,
    trial: u32,
    /// Opened at the first event: the harness makes the trial's directory.
    writer: Option<Rows>,
    /// Events that came after a later one had been written, in arrival
    /// order (no header): `.events.csv.late` beside it.
    late: Option<Rows>,
    last_us: i64,
}

impl EventSpool {
    pub fn new(path: PathBuf, trial: u32) -> EventSpool {
        EventSpool { path, trial, writer: None, late: None, last_us: i64::MIN }
    }

    fn write(&mut self, event: &Event) -> io::Result<()> {
        let open = |path: &Path| -> io::Result<Rows> {
            Ok(csv::WriterBuilder::new().has_headers(false).from_writer(BufWriter::new(File::create(path)?)))
        };
        let out = if event.t_us >= self.last_us || self.writer.is_none() {
            self.last_us = event.t_us;
            if self.writer.is_none() {
                let mut w = open(&self.path)?;
                w.write_record(header_of::<EventRow>())?;
                self.writer = Some(w);
            }
            self.writer.as_mut()
        } else {
            if self.late.is_none() {
                self.late = Some(open(&late_path(&self.path))?);
            }
            self.late.as_mut()
        };
        out.expect("opened above").serialize(event_row(self.trial, event))?;
        Ok(())
    }

    /// What was written so far on disk (a live reader sees it).
    pub fn flush(&mut self) -> io::Result<()> {
        // The late rows first: rows on disk after them never stand for a
        // late one still in memory.
        for w in [&mut self.late, &mut self.writer].into_iter().flatten() {
            w.flush()?;
        }
        Ok(())
    }

    /// Its rows on disk in time order (the rows of one µs as the harness
    /// handed them on, the late ones after them): the file, or None if no
    /// event came. An error names the file.
    pub fn close(mut self) -> io::Result<Option<PathBuf>> {
        let path = self.path.clone();
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        self.flush().map_err(named)?;
        let Some(w) = self.writer.take() else { return Ok(None) };
        drop(w);
        if let Some(late) = self.late.take() {
            drop(late);
            merge_late(&self.path, &late_path(&self.path), SORT_ROWS).map_err(named)?;
        }
        Ok(Some(self.path))
    }
}

impl EventSink for EventSpool {
    fn event(&mut self, event: Event) -> io::Result<()> {
        self.write(&event).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }
}

/// An `EventSpool` written by a thread of its own: the trial loop hands an
/// event over (waiting only when the thread is `BACKLOG` events behind, a
/// disk that stalls that long), and what was written is flushed every
/// second.
pub struct Spooling {
    tx: Option<SyncSender<Event>>,
    thread: Option<std::thread::JoinHandle<Result<EventSpool, io::Error>>>,
    /// What the thread ended with, once joined.
    ended: Option<io::Result<EventSpool>>,
}

/// Events handed over and not yet written, at most.
const BACKLOG: usize = 1 << 14;

impl Spooling {
    pub fn start(spool: EventSpool) -> io::Result<Spooling> {
        let (tx, rx) = std::sync::mpsc::sync_channel(BACKLOG);
        let thread = std::thread::Builder::new().name("events".into()).spawn(move || spool_from(spool, &rx))?;
        Ok(Spooling { tx: Some(tx), thread: Some(thread), ended: None })
    }

    /// Every event handed over written: the spool, or why it failed (a
    /// failed thread leaves the file as far as it got).
    pub fn finish(mut self) -> io::Result<EventSpool> {
        self.stop();
        self.ended.take().unwrap_or_else(|| Err(io::Error::other("the events writer did not end")))
    }

    fn stop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            self.ended = Some(thread.join().unwrap_or_else(|_| Err(io::Error::other("the events writer panicked"))));
        }
    }
}

fn spool_from(mut spool: EventSpool, rx: &Receiver<Event>) -> Result<EventSpool, io::Error> {
    const EVERY: Duration = Duration::from_secs(1);
    let mut flushed = std::time::Instant::now();
    loop {
        let wait = EVERY.saturating_sub(flushed.elapsed());
        match rx.recv_timeout(wait) {
            Ok(event) => spool.event(event)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(spool),
        }
        if flushed.elapsed() >= EVERY {
            spool.flush().map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", spool.path.display())))?;
            flushed = std::time::Instant::now();
        }
    }
}

impl EventSink for Spooling {
    fn event(&mut self, event: Event) -> io::Result<()> {
        if self.tx.as_ref().is_some_and(|tx| tx.send(event).is_ok()) {
            return Ok(());
        }
        // The thread stopped at an error: that is the answer (and
        // `finish` gives it again).
        self.stop();
        Err(match &self.ended {
            Some(Err(e)) => io::Error::new(e.kind(), e.to_string()),
            _ => io::Error::other("the events file was closed"),
        })
    }
}

impl Drop for Spooling {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The file of late events beside an events file.
fn late_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.late"))
}

/// How a soak's trial that its run was stopped in is kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kept {
    /// It had run to its end (the run stopped before writing it down):
    /// kept whole.
    Whole,
    /// Kept up to here (µs), its last whole window.
    Cut(i64),
}

/// A soak's trial whose run was stopped (`kill -9` included), kept: whole
/// if `whole` allows and its file ends it at `most_us` or later (where it
/// was to end), else up to its last whole window: the rows before the last
/// multiple of `window_us` that a written row reached, short of where the
/// harness saw the stop (its `trial_end`) and of `most_us`, the late rows
/// before it merged in, and a `trial_end` there whose reason is `cut`.
/// None if no window was whole (the trial is then run again from its
/// start). A row the stop left half-written is not read; an event stamped
/// before the cut and not yet on disk when the run stopped is not there to
/// keep. The file as the stop left it is kept beside as
/// `events.stopped.csv` (and its late rows as `.events.stopped.csv.late`),
/// and every cut is made from it: cutting again gives the same file.
pub fn keep_stopped(path: &Path, trial: u32, window_us: i64, most_us: i64, whole: bool) -> io::Result<Option<Kept>> {
    cut_at_window(path, trial, (window_us.max(1), most_us), whole)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn cut_at_window(path: &Path, trial: u32, (window_us, most_us): (i64, i64), whole: bool) -> io::Result<Option<Kept>> {
    let parent = path.parent().unwrap_or(Path::new("."));
    finish_merge(path)?;
    // What an earlier cut left unfinished.
    for entry in std::fs::read_dir(parent)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".events-sort") || name.starts_with(".events-cut") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let (stopped, late) = (path.with_file_name(STOPPED), late_path(path));
    let stopped_late = late_path(&stopped);
    // The late rows first: a stop between the two leaves the events file
    // where it was, to be moved next time.
    if late.exists() && !stopped_late.exists() {
        std::fs::rename(&late, &stopped_late)?;
    }
    if !stopped.exists() {
        if !path.exists() {
            return Ok(None);
        }
        std::fs::rename(path, &stopped)?;
    }
    let (last, end) = last_and_end(&stopped)?;
    let Some(last) = last else { return Ok(None) };
    let kept = match end {
        Some(end) if whole && end >= most_us => Kept::Whole,
        _ => {
            let cut = end.unwrap_or(last).min(last).min(most_us - 1).div_euclid(window_us) * window_us;
            if cut <= 0 {
                return Ok(None);
            }
            Kept::Cut(cut)
        }
    };
    let limit = if let Kept::Cut(cut) = kept { cut } else { i64::MAX };
    let scratch = tempfile::Builder::new().prefix(".events-cut").tempdir_in(parent)?;
    let (out, out_late) = (scratch.path().join("events.csv"), scratch.path().join("late"));
    let mut rows = copy_before(&stopped, &out, limit, true)?;
    if stopped_late.exists() {
        copy_before(&stopped_late, &out_late, limit, false)?;
        merge_late(&out, &out_late, SORT_ROWS)?;
    }
    if let Kept::Cut(cut) = kept {
        rows = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(std::fs::OpenOptions::new().append(true).open(&out).map(BufWriter::new)?);
        let detail = Detail { reason: Some(TRIAL_CUT.into()), ..Detail::default() };
        rows.serialize(event_row(trial, &Event::new(cut, None, EventKind::TrialEnd).with_detail(detail)))?;
    }
    rows.flush()?;
    drop(rows);
    std::fs::rename(&out, path)?;
    Ok(Some(kept))
}

/// The file a stopped trial's events are kept in, as the stop left them.
pub const STOPPED: &str = "events.stopped.csv";

/// The last whole row's time in an events file, and its `trial_end`'s
/// (where the harness saw the trial end, or the run stop), if it has one.
fn last_and_end(path: &Path) -> io::Result<(Option<i64>, Option<i64>)> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(super::read::whole_lines(path)?);
    let (mut last, mut end) = (None, None);
    let mut record = csv::ByteRecord::new();
    while reader.read_byte_record(&mut record)? {
        let t = time_of(&record)?;
        last = Some(t);
        if end.is_none() && record.get(4) == Some(EventKind::TrialEnd.name().as_bytes()) {
            end = Some(t);
        }
    }
    Ok((last, end))
}

/// The whole rows of `from` (with its header if `header`) before `limit`
/// into a new file `to`, whose writer is returned for more.
fn copy_before(from: &Path, to: &Path, limit: i64, header: bool) -> io::Result<csv::Writer<BufWriter<File>>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(header).from_reader(super::read::whole_lines(from)?);
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(BufWriter::new(File::create(to)?));
    if header {
        w.write_byte_record(reader.byte_headers()?)?;
    }
    let mut record = csv::ByteRecord::new();
    while reader.read_byte_record(&mut record)? {
        if time_of(&record)? < limit {
            w.write_byte_record(&record)?;
        }
    }
    w.flush()?;
    Ok(w)
}

/// An events.csv row's time, µs.
fn time_of(record: &csv::ByteRecord) -> io::Result<i64> {
    let t = record.get(1).and_then(|t| std::str::from_utf8(t).ok()).and_then(|t| t.parse::<f64>().ok());
    t.map(ms_to_us).ok_or_else(|| io::Error::other(format!("a row without a time: {record:?}")))
}

/// Merge the late events (rows without a header, in arrival order) into
/// the events file at `path` (in time order), in place: the late ones
/// sorted in runs of `chunk` rows, the runs merged in rounds of at most
/// `FAN_IN`, everything in a scratch directory beside the file (removed
/// whatever happens) and the result renamed over it.
fn merge_late(path: &Path, late: &Path, chunk: usize) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let scratch = tempfile::Builder::new().prefix(".events-sort").tempdir_in(parent)?;
    let mut runs = sorted_runs(File::open(late)?, chunk, scratch.path())?;
    let mut round = 0;
    while runs.len() + 1 > FAN_IN {
        let mut merged = Vec::new();
        for (i, group) in runs.chunks(FAN_IN).enumerate() {
            let out = scratch.path().join(format!("round-{round}-{i}"));
            let mut w = csv::WriterBuilder::new().has_headers(false).from_path(&out)?;
            merge(group.iter().map(|p| headless(p)).collect::<io::Result<_>>()?, &mut w)?;
            w.flush()?;
            merged.push(out);
        }
        for r in &runs {
            std::fs::remove_file(r)?;
        }
        runs = merged;
        round += 1;
    }
    let mut main: csv::Reader<Box<dyn Read>> =
        csv::ReaderBuilder::new().has_headers(true).from_reader(Box::new(File::open(path)?));
    let header = main.byte_headers()?.clone();
    let sorted = scratch.path().join("sorted");
    let mut w = csv::WriterBuilder::new().has_headers(false).from_path(&sorted)?;
    w.write_byte_record(&header)?;
    let mut inputs = vec![main];
    for r in &runs {
        inputs.push(headless(r)?);
    }
    merge(inputs, &mut w)?;
    w.flush()?;
    drop(w);
    // Whole, it takes a name beside the file; from then on a stop is
    // rolled forward (`finish_merge`): the late rows are never merged twice.
    std::fs::rename(&sorted, merged_path(path))?;
    finish_merge(path)
}

/// The events file with its late rows merged in, before it replaces it.
fn merged_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.merged"))
}

/// A merge that was whole when its run stopped, finished: the late rows
/// removed, the merged file put in place.
fn finish_merge(path: &Path) -> io::Result<()> {
    let merged = merged_path(path);
    if merged.exists() {
        let late = late_path(path);
        if late.exists() {
            std::fs::remove_file(late)?;
        }
        std::fs::rename(merged, path)?;
    }
    Ok(())
}

/// A headerless rows file to merge.
fn headless(path: &Path) -> io::Result<csv::Reader<Box<dyn Read>>> {
    Ok(csv::ReaderBuilder::new().has_headers(false).from_reader(Box::new(File::open(path)?)))
}

/// Rows (no header) sorted by time, stably, into files of `chunk` rows
/// each in `dir`.
fn sorted_runs(from: impl Read, chunk: usize, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(from);
    let mut runs = Vec::new();
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
            let run = dir.join(format!("run-{}", runs.len()));
            let mut w = csv::WriterBuilder::new().has_headers(false).from_path(&run)?;
            for (_, r) in rows.drain(..) {
                w.write_byte_record(&r)?;
            }
            w.flush()?;
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Rows in time order from each input merged into `out`, stably: equal
/// times in the order of the inputs.
fn merge<R: Read, W: Write>(mut inputs: Vec<csv::Reader<R>>, out: &mut csv::Writer<W>) -> io::Result<()> {
    let mut heads = BinaryHeap::new();
    let mut current: Vec<csv::ByteRecord> = vec![csv::ByteRecord::new(); inputs.len()];
    for (i, r) in inputs.iter_mut().enumerate() {
        if r.read_byte_record(&mut current[i])? {
            heads.push(Reverse((time_of(&current[i])?, i)));
        }
    }
    while let Some(Reverse((_, i))) = heads.pop() {
        out.write_byte_record(&current[i])?;
        if inputs[i].read_byte_record(&mut current[i])? {
            heads.push(Reverse((time_of(&current[i])?, i)));
        }
    }
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

    fn pairs(list: &[(i64, usize)]) -> Vec<(String, String)> {
        list.iter().map(|(t, w)| (format!("{t}.0"), w.to_string())).collect()
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
    fn late_events_are_merged_in_by_time_after_those_of_their_instant() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.csv");
        let mut spool = Spooling::start(EventSpool::new(path.clone(), 1)).unwrap();
        // Worker numbers say the order of arrival.
        let arrivals = [(1, 0), (3, 1), (2, 2), (5, 3), (1, 4), (3, 5), (4, 6), (6, 7)];
        for (t, w) in arrivals {
            spool.event(event(t * 1000, w)).unwrap();
        }
        spool.finish().unwrap().close().unwrap();
        let want = [(1, 0), (1, 4), (2, 2), (3, 1), (3, 5), (4, 6), (5, 3), (6, 7)];
        assert_eq!(times(&path), pairs(&want));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "nothing left beside it");
    }

    #[test]
    fn many_runs_are_merged_in_rounds_stably() {
        let tmp = tempfile::tempdir().unwrap();
        let late = tmp.path().join("late");
        let arrivals: Vec<(i64, usize)> = (0..300).map(|i| ((i * 7919 % 50) as i64, i as usize)).collect();
        let mut w = csv::WriterBuilder::new().has_headers(false).from_path(&late).unwrap();
        for (t, i) in &arrivals {
            w.serialize(event_row(1, &event(t * 1000, *i))).unwrap();
        }
        w.flush().unwrap();
        let path = tmp.path().join("events.csv");
        std::fs::write(&path, "trial,t_ms,worker,pid,event,detail\n").unwrap();
        // Runs of one row each: 300 runs, more than FAN_IN at once.
        assert!(arrivals.len() > FAN_IN * 2);
        merge_late(&path, &late, 1).unwrap();
        let mut want = arrivals.clone();
        want.sort_by_key(|(t, _)| *t);
        assert_eq!(times(&path), pairs(&want));
    }

    /// A stopped trial's spool: rows up to 2.5 s, two of them late (one
    /// before 2 s, one after), and half a row the stop left.
    fn stopped(dir: &Path, more: &[(i64, EventKind)]) -> PathBuf {
        let path = dir.join("events.csv");
        let mut spool = EventSpool::new(path.clone(), 4);
        for (t, w) in [(-5_000, 0), (0, 1), (900_000, 0), (1_500_000, 1), (2_100_000, 0), (1_800_000, 1)] {
            spool.event(event(t, w)).unwrap();
        }
        spool.event(event(950_000, 0)).unwrap();
        spool.event(event(2_500_000, 1)).unwrap();
        for (t, kind) in more {
            spool.event(Event::new(*t, None, *kind)).unwrap();
        }
        spool.flush().unwrap();
        drop(spool);
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"4,2600.0,1,wat").unwrap();
        path
    }

    fn ms(list: &[(i64, usize)]) -> Vec<(String, String)> {
        list.iter().map(|(t, w)| (format!("{:?}", *t as f64 / 1000.0), w.to_string())).collect()
    }

    #[test]
    fn a_stopped_soaks_trial_is_kept_up_to_its_last_whole_window_and_its_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = stopped(dir.path(), &[]);
        let before = (std::fs::read(&path).unwrap(), std::fs::read(late_path(&path)).unwrap());
        let mut rows = ms(&[(-5_000, 0), (0, 1), (900_000, 0), (950_000, 0), (1_500_000, 1), (1_800_000, 1)]);
        rows.push(("2000.0".into(), String::new()));
        for again in [false, true] {
            let kept = keep_stopped(&path, 4, 1_000_000, 60_000_000, true).unwrap();
            assert_eq!(kept, Some(Kept::Cut(2_000_000)), "{again}");
            assert_eq!(times(&path), rows, "cut twice, cut where it was: {again}");
            assert!(!late_path(&path).exists());
        }
        let end = std::fs::read_to_string(&path).unwrap().lines().last().unwrap().to_string();
        assert!(end.contains("trial_end") && end.contains(TRIAL_CUT), "{end}");
        // Nothing the run wrote is gone: the file as the stop left it.
        let stopped = dir.path().join(STOPPED);
        assert_eq!((std::fs::read(&stopped).unwrap(), std::fs::read(late_path(&stopped)).unwrap()), before);
        // Short of where the trial would have ended; nothing whole, nothing kept.
        assert_eq!(keep_stopped(&path, 4, 1_000_000, 1_500_000, true).unwrap(), Some(Kept::Cut(1_000_000)));
        assert_eq!(keep_stopped(&path, 4, 5_000_000, 60_000_000, true).unwrap(), None);
        assert_eq!(keep_stopped(&dir.path().join("none/events.csv"), 4, 1, 10, true).unwrap_or(None), None);
    }

    #[test]
    fn a_stopped_trial_is_cut_before_the_harness_saw_the_stop_and_kept_whole_if_it_had_ended() {
        let dir = tempfile::tempdir().unwrap();
        // Stopped at 2.6 s: what follows is its clean-up, not the trial.
        let path = stopped(dir.path(), &[(2_600_000, EventKind::TrialEnd), (3_100_000, EventKind::Exit)]);
        assert_eq!(keep_stopped(&path, 4, 1_000_000, 60_000_000, true).unwrap(), Some(Kept::Cut(2_000_000)));
        // Ended where it was to end: whole, every row, the late ones merged.
        let dir = tempfile::tempdir().unwrap();
        let path = stopped(dir.path(), &[(2_600_000, EventKind::TrialEnd), (2_650_000, EventKind::Exit)]);
        assert_eq!(keep_stopped(&path, 4, 1_000_000, 2_000_000, true).unwrap(), Some(Kept::Whole));
        assert_eq!(times(&path).len(), 10, "{:?}", times(&path));
        assert_eq!(keep_stopped(&path, 4, 1_000_000, 2_000_000, false).unwrap(), Some(Kept::Cut(1_000_000)));
    }

    #[test]
    fn a_merge_stopped_once_whole_is_finished_never_repeated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.csv");
        let mut spool = EventSpool::new(path.clone(), 1);
        for t in [1_000, 3_000, 2_000] {
            spool.event(event(t, 0)).unwrap();
        }
        spool.flush().unwrap();
        drop(spool);
        // The merged file in place beside it, the late file not yet gone:
        // where a stop between the two leaves them.
        std::fs::write(
            merged_path(&path),
            "trial,t_ms,worker,pid,event,detail\n1,1.0,0,,renewed,\n1,2.0,0,,renewed,\n1,3.0,0,,renewed,\n",
        )
        .unwrap();
        finish_merge(&path).unwrap();
        assert!(!late_path(&path).exists() && !merged_path(&path).exists());
        assert_eq!(times(&path), ms(&[(1_000, 0), (2_000, 0), (3_000, 0)]));
    }

    #[test]
    fn a_spool_that_cannot_be_written_is_an_error_naming_it() {
        let mut spool = EventSpool::new(PathBuf::from("/nonexistent/dir/events.csv"), 1);
        let e = spool.event(event(0, 0)).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/events.csv"), "{e}");
        let mut threaded = Spooling::start(EventSpool::new(PathBuf::from("/nonexistent/dir/events.csv"), 1)).unwrap();
        // Handed over, then found unwritable by the thread: finishing says so.
        let _ = threaded.event(event(0, 0));
        let e = threaded.finish().err().unwrap();
        assert!(e.to_string().contains("/nonexistent/dir/events.csv"), "{e}");
    }
}
