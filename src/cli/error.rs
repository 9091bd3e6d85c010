//! The CLI's error type and exit-code convention: 2 bad input or usage, 1 other failure.

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Bad input file, bad flag value, usage error: exit 2.
    Input(String),
    /// Anything else that failed (a schedule that does not verify, a device error, a rank 0
    /// whose given address is taken): exit 1.
    Failure(String),
}

impl CliError {
    pub fn input(msg: impl fmt::Display) -> Self {
        CliError::Input(msg.to_string())
    }
    pub fn failure(msg: impl fmt::Display) -> Self {
        CliError::Failure(msg.to_string())
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Failure(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(m) | CliError::Failure(m) => f.write_str(m),
        }
    }
}

pub type CliResult = Result<(), CliError>;
