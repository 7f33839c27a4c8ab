//! Reading a file a user hands us: only a regular file, and never more of
//! it than a limit. A FIFO would block the read forever and a device such
//! as /dev/zero never ends; the length in the metadata is 0 for both, so
//! the limit is held while reading, not checked beforehand.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most a text file read back (host.json, a README, a plot) may hold.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

/// Open `path` for reading, refused unless it is a regular file. Opened
/// without blocking: opening a FIFO nobody writes would wait forever.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{what}, where a regular file belongs")))
}

/// A regular file's bytes, refused past `limit`.
fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        let msg = format!("larger than {limit} bytes: such a file is at most {limit} bytes");
        return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    }
    Ok(bytes)
}

/// A regular file's text (UTF-8), refused past `limit`.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_regular(path, limit)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_is_read_and_never_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_text(&file, 5).unwrap(), "12345");
        let e = read_text(&file, 4).unwrap_err().to_string();
        assert!(e.contains("larger than 4 bytes: such a file is at most 4 bytes"), "{e}");
        // A FIFO nobody writes: refused at once, not waited on.
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_text(&fifo, 5).unwrap_err().to_string();
        assert!(e.contains("a FIFO, where a regular file belongs"), "{e}");
        let e = read_text(Path::new("/dev/zero"), 5).unwrap_err().to_string();
        assert!(e.contains("a character device"), "{e}");
        let e = read_text(dir.path(), 5).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        assert_eq!(read_text(&dir.path().join("none"), 5).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
