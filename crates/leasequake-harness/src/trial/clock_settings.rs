//! A moved clock's settings, as the harness writes them and the clocks in
//! a program read them (the preloaded shim from a control file, the vDSO
//! clock from the program's own memory): four 64-bit words, a sequence
//! number odd while the harness writes, the offset, the anchor of the rate
//! and the rate.

use std::io;
use std::os::unix::fs::FileExt;

const SEQ: u64 = 0;
const OFFSET: u64 = 8;

/// Their size.
pub const SETTINGS_LEN: usize = 32;

/// The settings at no jump yet: `offset_ns`, and `rate` from the true wall
/// time `anchor_wall_ns`.
pub fn encode(offset_ns: i64, anchor_wall_ns: i64, rate: f64) -> Vec<u8> {
    let mut words = Vec::with_capacity(SETTINGS_LEN);
    words.extend_from_slice(&0u64.to_ne_bytes());
    words.extend_from_slice(&offset_ns.to_ne_bytes());
    words.extend_from_slice(&anchor_wall_ns.to_ne_bytes());
    words.extend_from_slice(&rate.to_ne_bytes());
    words
}

/// Set the offset of the settings at `base` in `f` (a control file, or a
/// program's memory) under the seqlock: the sequence odd while the offset
/// is written. The one writer (the trial's nemesis) starts from an even
/// sequence whatever it finds, so a write it never finished is not taken
/// for one in progress.
pub fn write_offset(f: &impl FileExt, base: u64, offset_ns: i64) -> io::Result<()> {
    let mut seq = [0u8; 8];
    f.read_exact_at(&mut seq, base + SEQ)?;
    let seq = u64::from_ne_bytes(seq) & !1;
    f.write_all_at(&(seq + 1).to_ne_bytes(), base + SEQ)?;
    f.write_all_at(&offset_ns.to_ne_bytes(), base + OFFSET)?;
    f.write_all_at(&(seq + 2).to_ne_bytes(), base + SEQ)
}
