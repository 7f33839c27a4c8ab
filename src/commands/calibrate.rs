//! `leasequake calibrate`: the measurement (the harness side's
//! `calibrate`), and `--csv`, checked before anything is measured and
//! written whole after.

use std::path::PathBuf;

use crate::error::Error;
use crate::model::calibration::FigureRow;

pub fn calibrate(lines: usize, load: Option<Option<usize>>, csv: Option<PathBuf>) -> Result<(), Error> {
    if let Some(path) = &csv {
        super::export::file_target_ok("--csv", path)?;
    }
    let rows = crate::calibrate::run(lines, load)?;
    let Some(path) = csv else { return Ok(()) };
    super::report::write_whole(&path, &to_csv(&rows)).map_err(|source| Error::Io { path: path.clone(), source })?;
    crate::warnln!("leasequake: wrote {}", path.display());
    Ok(())
}

fn to_csv(rows: &[FigureRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).expect("a calibration row serialises");
    }
    String::from_utf8(w.into_inner().expect("an in-memory writer flushes")).expect("CSV of UTF-8 strings")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_not_measured_has_empty_cells_and_the_rest_read_back() {
        let row = |by: &str, d: Option<f64>| FigureRow {
            load: "2 hogs".into(),
            scheduling: "real-time".into(),
            figure: "start spread, 3 workers".into(),
            by: by.into(),
            n: d.map(|_| 10),
            median_us: d,
            p99_us: d.map(|d| d * 2.0),
            max_us: d.map(|d| d * 3.0),
        };
        let rows = vec![row("leasequake", Some(6.5)), row("shell", None)];
        let text = to_csv(&rows);
        assert_eq!(
            text,
            "load,scheduling,figure,by,n,median_us,p99_us,max_us\n\
             2 hogs,real-time,\"start spread, 3 workers\",leasequake,10,6.5,13.0,19.5\n\
             2 hogs,real-time,\"start spread, 3 workers\",shell,,,,\n"
        );
        let back: Vec<FigureRow> =
            csv::Reader::from_reader(text.as_bytes()).deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, rows);
    }
}
