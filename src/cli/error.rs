//! The CLI's error type and exit-code convention: 2 bad input or usage, 1 other failure, 75 a
//! rank of a multi-process run whose bootstrap address was taken (its launcher retries).

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Bad input file, bad flag value, usage error: exit 2.
    Input(String),
    /// Anything else that failed (a schedule that does not verify, a device error): exit 1.
    Failure(String),
    /// Rank 0 of a multi-process run could not listen at the address its launcher chose:
    /// exit [`EXIT_ADDRESS_IN_USE`], which the launcher (`--mode procs`, `--procs`) retries.
    AddressInUse(String),
}

/// Exit code of a rank whose bootstrap address was taken (EX_TEMPFAIL).
pub const EXIT_ADDRESS_IN_USE: i32 = 75;

/// Launches of a multi-process run before giving up on finding a free port.
const PORT_TRIES: u32 = 4;

/// Runs `launch` (one start of every rank of a multi-process run, on a port it chooses free
/// and releases) again while it returns `None`, i.e. while rank 0 found that port taken before
/// it could listen (exit [`EXIT_ADDRESS_IN_USE`]), at most [`PORT_TRIES`] times.
pub fn retry_taken_port(
    mut launch: impl FnMut() -> Result<Option<CliResult>, CliError>,
) -> CliResult {
    for attempt in 1..=PORT_TRIES {
        match launch()? {
            Some(r) => return r,
            None => eprintln!(
                "note: rank 0's port was taken before it could listen; starting the ranks again \
                 on another ({attempt} of {PORT_TRIES})"
            ),
        }
    }
    Err(CliError::failure(format!(
        "rank 0's port was taken {PORT_TRIES} times in a row"
    )))
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
            CliError::AddressInUse(_) => EXIT_ADDRESS_IN_USE,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(m) | CliError::Failure(m) | CliError::AddressInUse(m) => f.write_str(m),
        }
    }
}

pub type CliResult = Result<(), CliError>;
