//! The measurement formats topoplan reads and writes, one strict reader each (and the writer
//! where topoplan writes the format): nccl-tests output ([`nccl_tests`], `docs/nccl-tests-format.md`).
//! Errors name the file and line; a reader never skips a line it does not understand silently.

pub mod nccl_tests;

/// A measurement file that cannot be read as its format.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MeasureError {
    /// A line that breaks the format.
    #[error("{file}:{line}: {msg}")]
    Line {
        file: String,
        line: usize,
        msg: String,
    },
    /// The file as a whole (no rows, unknown collective).
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
}
