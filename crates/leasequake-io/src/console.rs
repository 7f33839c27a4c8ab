//! Writing to the terminal without dying when it has gone away: a reader
//! that closed the pipe (`| head`) must not cost the run its files or its
//! exit code. What cannot be written is dropped.

use std::io::Write;

pub fn out(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stdout().lock().write_fmt(args);
}

pub fn err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `print!` that survives a closed stdout.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => { $crate::console::out(format_args!($($t)*)) };
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! sayln {
    () => { $crate::console::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::console::out(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprintln!` that survives a closed stderr.
#[macro_export]
macro_rules! warnln {
    ($($t:tt)*) => { $crate::console::err(format_args!("{}\n", format_args!($($t)*))) };
}
