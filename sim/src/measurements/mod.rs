//! The measurement formats topoplan reads and writes, one strict reader each (and the writer
//! where topoplan writes the format): nccl-tests output ([`nccl_tests`], `docs/nccl-tests-format.md`).
//! Errors name the file and line; a reader never skips a line it does not understand silently.

pub mod nccl_tests;

/// The format tag of `topoplan bench --json` files (`docs/bench-json-format.md`): written by the
/// CLI's `bench`, read by `sim::calibrate::parse_bench_json` and `bench --from-json`.
pub const BENCH_FORMAT: &str = "topoplan-bench/1";

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
