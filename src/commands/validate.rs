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
            Ok(e) => sayln!(
                "ok: {} ({}: {} trials × {}, {} workers, {} faults)",
                f.display(),
                e.name,
                e.trials,
                e.duration,
                e.workers,
                e.faults.len()
            ),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(Error::Experiments(errors)) }
}
