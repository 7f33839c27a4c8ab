//! One error type for everything a command can fail with, and the exit
//! code of each: the contract scripts rely on.

/// Exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const EXPECT_FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HARNESS: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create a scratch directory: {0}")]
    Scratch(std::io::Error),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Scratch(_) => exit::HARNESS,
        }
    }
}
