//! A history table (events.csv, faults.csv) as stretches of its file, each
//! one trial's rows in file order: what putting it in trial order, setting
//! an unfinished trial's rows aside or merging shards needs of it, without
//! holding a row (a soak's events.csv is larger than memory).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// One trial's rows next to each other: their bytes `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stretch {
    pub trial: u32,
    pub start: u64,
    pub end: u64,
}

pub struct Stretches {
    pub header: csv::StringRecord,
    /// In file order.
    pub list: Vec<Stretch>,
}

/// A table's stretches, read as every table is: up to its last newline (a
/// torn last line is no row), every row's trial read, one that cannot be
/// refused at its line.
pub fn stretches_of(path: &Path) -> io::Result<Stretches> {
    let mut reader = csv::Reader::from_reader(super::read::whole_lines(path)?);
    let header = reader.headers().map_err(io::Error::other)?.clone();
    trial_first(&header)?;
    let mut list: Vec<Stretch> = Vec::new();
    let mut record = csv::ByteRecord::new();
    while reader.read_byte_record(&mut record).map_err(io::Error::other)? {
        let (line, start) = record.position().map_or((0, 0), |p| (p.line(), p.byte()));
        let trial = trial_of(&String::from_utf8_lossy(record.get(0).unwrap_or_default()), line)?;
        if let Some(last) = list.last_mut() {
            last.end = start;
        }
        if list.last().is_none_or(|s| s.trial != trial) {
            list.push(Stretch { trial, start, end: start });
        }
    }
    if let Some(last) = list.last_mut() {
        last.end = reader.position().byte();
    }
    Ok(Stretches { header, list })
}

/// A per-trial table's header: its first column is the trial.
pub fn trial_first(header: &csv::StringRecord) -> io::Result<()> {
    match header.get(0) {
        Some("trial") => Ok(()),
        other => Err(io::Error::other(format!("line 1: the first column is {:?}, not \"trial\"", other.unwrap_or("")))),
    }
}

/// A row's trial, from its first field, or why not (at its `line`).
pub fn trial_of(field: &str, line: u64) -> io::Result<u32> {
    field
        .parse::<u32>()
        .ok()
        .filter(|t| *t > 0)
        .ok_or_else(|| io::Error::other(format!("line {line}: {field:?} is not a trial number")))
}

impl Stretches {
    /// The trials' rows, in trial order (a trial's own rows in file order).
    pub fn sorted(&self, pick: impl Fn(u32) -> bool) -> Vec<Stretch> {
        let mut picked: Vec<Stretch> = self.list.iter().copied().filter(|s| pick(s.trial)).collect();
        picked.sort_by_key(|s| (s.trial, s.start));
        picked
    }
}

/// Copy stretches of the file at `from` to `to`, in the order given.
pub fn copy(from: &Path, stretches: &[Stretch], to: &mut impl Write) -> io::Result<()> {
    let mut file = File::open(from)?;
    for s in stretches {
        file.seek(SeekFrom::Start(s.start))?;
        let copied = io::copy(&mut (&mut file).take(s.end - s.start), to)?;
        if copied != s.end - s.start {
            return Err(io::Error::other(format!("{} is shorter than when it was read", from.display())));
        }
    }
    Ok(())
}

/// Copy an events file's rows (all but its header line) to `to`.
pub fn copy_rows(from: &Path, to: &mut impl Write) -> io::Result<()> {
    let reading = |e: io::Error| io::Error::new(e.kind(), format!("reading {}: {e}", from.display()));
    let mut reader = csv::Reader::from_path(from).map_err(|e| reading(io::Error::other(e)))?;
    reader.byte_headers().map_err(|e| reading(io::Error::other(e)))?;
    let start = reader.position().byte();
    let end = std::fs::metadata(from).map_err(reading)?.len();
    copy(from, &[Stretch { trial: 0, start, end }], to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_rows_come_as_stretches_of_one_trial_and_copy_back_in_trial_order() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.csv");
        let text = "trial,t_ms,x\n2,1,\"a\nb\"\n2,2,c\n1,0,d\n3,0,e\n1,5,f\n3,1,torn";
        std::fs::write(&path, text).unwrap();
        let s = stretches_of(&path).unwrap();
        let trials: Vec<u32> = s.list.iter().map(|s| s.trial).collect();
        assert_eq!(trials, [2, 1, 3, 1], "the torn last line is no row");
        let mut out = Vec::new();
        copy(&path, &s.sorted(|t| t != 3), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "1,0,d\n1,5,f\n2,1,\"a\nb\"\n2,2,c\n");
    }

    #[test]
    fn a_row_whose_trial_cannot_be_read_is_refused_at_its_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.csv");
        std::fs::write(&path, "trial,t_ms\n1,0\nx,1\n").unwrap();
        let e = stretches_of(&path).err().unwrap();
        assert!(e.to_string().contains("line 3: \"x\" is not a trial number"), "{e}");
    }
}
