//! leasequake's edge to the user's machine: reading a file a user hands us
//! (`files`: only a regular file, never past a limit) and writing to a
//! terminal that may have gone away (`console`: `say!`, `sayln!`,
//! `warnln!`). A crate of its own, below every side that reads input or
//! talks to the terminal; it imports nothing of leasequake.

pub mod console;
pub mod files;
