use std::path::PathBuf;

use super::inputs::expand;
use crate::error::Error;
use crate::experiment::{Overrides, load};
use crate::sayln;

/// Load every file and report each; every invalid one is in the error.
pub fn validate(files: &[PathBuf]) -> Result<(), Error> {
    let mut errors = Vec::new();
    for f in &expand(files)? {
        match load(f, &Overrides { seed: Some(0), ..Overrides::default() }) {
            Ok(e) => sayln!("ok: {} ({}: {})", f.display(), e.name, size(&e)),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(Error::Experiments(errors)) }
}

/// How much running it is: trials (× sweep points), workers, faults, and
/// the trials' time end to end at one trial at a time.
fn size(e: &crate::model::Experiment) -> String {
    let units = crate::report::summary::units(e);
    let trials = u64::from(e.trials) * units.len() as u64;
    let total_s: f64 = units.iter().map(|(u, _)| u.duration.as_ms_f64() / 1000.0 * f64::from(e.trials)).sum();
    let points =
        if e.points.is_empty() { String::new() } else { format!(" × {} points = {trials} trials", e.points.len()) };
    let scale = if e.time_scale == 1.0 { String::new() } else { format!(", time scale {}", e.time_scale) };
    format!(
        "{} trials{points} of {}, {} workers, {}; {} of trials{}{scale}",
        e.trials,
        e.duration,
        e.workers,
        match &e.random {
            None => format!("{} faults", e.faults.len()),
            Some(r) => format!("a campaign of {} kinds of fault", r.kinds.len()),
        },
        human(total_s),
        if e.jobs > 1 {
            format!(" ({} with --jobs {})", human(total_s / e.jobs as f64), e.jobs)
        } else {
            String::new()
        },
    )
}

/// Seconds as a person reads them: 75 s, 12.5 min, 4.2 h.
fn human(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}
