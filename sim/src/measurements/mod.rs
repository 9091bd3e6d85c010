//! The measurement formats topoplan reads and writes, one strict reader each (and the writer
//! where topoplan writes the format): nccl-tests output ([`nccl_tests`],
//! `docs/nccl-tests-format.md`), and `topoplan bench`'s JSON and printed tables ([`bench`],
//! `docs/bench-json-format.md`).
//! Errors name the file and line; a reader never skips a line it does not understand silently.

pub mod bench;
pub mod nccl_tests;

/// The format tag of `topoplan bench --json` files (`docs/bench-json-format.md`): written by the
/// CLI's `bench`, read by `sim::calibrate::parse_bench_json` and `bench --from-json`.
pub const BENCH_FORMAT: &str = "topoplan-bench/1";

/// Why a measurement file cannot be read; every variant names the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MeasurementError {
    /// The file as a whole (unreadable, no rows, unknown collective).
    #[error("{file}: {msg}")]
    Read { file: String, msg: String },
    /// A line that breaks a text format.
    #[error("{file}:{line}: {msg}")]
    Line {
        file: String,
        line: usize,
        msg: String,
    },
    #[error("{file}: not JSON: {msg}")]
    Json { file: String, msg: String },
    #[error("{file}: field `{field}`: {msg}")]
    Field {
        file: String,
        field: String,
        msg: String,
    },
    #[error(
        "{file}: no NCCL times to fit (written by `topoplan bench --json FILE --vs-nccl`? tables timed under a CUDA graph are left out)"
    )]
    NoNccl { file: String },
}
