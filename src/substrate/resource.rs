//! The protected resource ("report storage") that a leader writes to: a
//! directory holding the report. Unfenced, the last writer wins; fenced,
//! the store remembers the highest fencing token it has seen and rejects a
//! write carrying a lower one — the check that makes exclusion real even
//! when two workers believe they lead.

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    /// No leader work.
    None,
    /// Last writer wins.
    Unfenced,
    /// Rejects a write whose token is lower than the highest seen.
    Fenced,
}

/// Write the report as `pid` holding `token`. Ok(true) if the store took it.
pub fn write(dir: &Path, mode: Resource, token: u64, pid: i64) -> io::Result<bool> {
    fs::create_dir_all(dir)?;
    let report = format!("{{\"processId\":{pid},\"token\":{token}}}");
    match mode {
        Resource::None => Ok(false),
        Resource::Unfenced => fs::write(dir.join("report"), report).map(|()| true),
        Resource::Fenced => {
            // The store's own lock (flock on a guard file), so the check and
            // the write are one step for every writer.
            let guard = File::options().create(true).truncate(false).write(true).open(dir.join(".guard"))?;
            // Held until the end of this block (dropping it unlocks).
            let _held = Flock::lock(guard, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
            let highest = match fs::read_to_string(dir.join("highest")) {
                Ok(s) => s.trim().parse::<u64>().unwrap_or(0),
                Err(e) if e.kind() == ErrorKind::NotFound => 0,
                Err(e) => return Err(e),
            };
            if token < highest {
                return Ok(false);
            }
            fs::write(dir.join("report"), report)?;
            fs::write(dir.join("highest"), token.to_string())?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_rejects_an_older_token_and_unfenced_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let fenced = dir.path().join("f");
        assert!(write(&fenced, Resource::Fenced, 18, 2).unwrap());
        assert!(!write(&fenced, Resource::Fenced, 17, 1).unwrap(), "stale token 17 after 18");
        assert!(write(&fenced, Resource::Fenced, 18, 2).unwrap(), "the holder may write again");
        assert_eq!(fs::read_to_string(fenced.join("report")).unwrap(), r#"{"processId":2,"token":18}"#);
        let open = dir.path().join("u");
        assert!(write(&open, Resource::Unfenced, 18, 2).unwrap());
        assert!(write(&open, Resource::Unfenced, 17, 1).unwrap());
        assert_eq!(fs::read_to_string(open.join("report")).unwrap(), r#"{"processId":1,"token":17}"#);
    }
}
