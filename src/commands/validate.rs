use std::path::PathBuf;

use super::inputs::expand;
use crate::error::exit;
use crate::experiment::{Overrides, load};

/// Load every file; report each; exit 2 if any is invalid.
pub fn validate(files: &[PathBuf]) -> u8 {
    let files = match expand(files) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let mut bad = 0;
    for f in &files {
        match load(f, &Overrides { seed: Some(0), ..Overrides::default() }) {
            Ok(e) => println!(
                "ok: {} ({}: {} trials × {}, {} workers, {} faults)",
                f.display(),
                e.name,
                e.trials,
                e.duration,
                e.workers,
                e.faults.len()
            ),
            Err(e) => {
                eprintln!("error: {e}");
                bad += 1;
            }
        }
    }
    if bad > 0 { exit::BAD_INPUT } else { exit::OK }
}
