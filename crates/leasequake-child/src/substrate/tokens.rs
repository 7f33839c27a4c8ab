//! Fencing tokens for the lock file: a number per grant, strictly greater
//! than every earlier grant of the same lease, even when two watchers win
//! the takeover race at once.
//!
//! Token N is claimed by creating the file `N` with O_EXCL in a directory
//! beside the lock. A claimer starts just above the highest token it has
//! seen and takes the first number nobody has claimed. Every claimer starts
//! above a claimed number and claims are contiguous from 1, so the first
//! free number is always the largest so far plus one: claim order is token
//! order. The claim is the moment of the grant.

use std::fs::OpenOptions;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// The token directory of a lock file: `<lock>.tokens/`.
pub fn dir_for(lock: &Path) -> PathBuf {
    let mut name = lock.as_os_str().to_owned();
    name.push(".tokens");
    name.into()
}

/// Claim the next token, scanning up from `after + 1`.
pub fn claim(dir: &Path, after: u64) -> io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let mut n = after + 1;
    loop {
        match OpenOptions::new().write(true).create_new(true).open(dir.join(n.to_string())) {
            Ok(_) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_claims_get_distinct_contiguous_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut tokens: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|_| s.spawn(|| claim(&path, 0).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        tokens.sort();
        assert_eq!(tokens, (1..=8).collect::<Vec<_>>());
    }

    #[test]
    fn a_stale_claimer_still_gets_the_next_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        assert_eq!(claim(&path, 0).unwrap(), 1);
        assert_eq!(claim(&path, 1).unwrap(), 2);
        // Saw only token 1 (stale read): still above every earlier grant.
        assert_eq!(claim(&path, 1).unwrap(), 3);
        assert_eq!(claim(&path, 0).unwrap(), 4);
    }
}
