//! topoplan's runtime: the [`Communicator`] a training binary embeds. It executes the planner's
//! schedule IR on CPUs (threads, processes, TCP); the `cuda` crate runs the same schedules on
//! GPUs, with this crate's reference and bootstrap.
//!
//! Module map: [`comm`] (public API), [`group`] (group calls, argument checks), [`plan`] (where
//! schedules come from), [`exec`] (runs one rank's schedule), [`protocol`] (the slot-FIFO step
//! protocol), [`transport`] (threads, shared memory, TCP), [`bootstrap`] (TCP rendezvous),
//! [`reference`](mod@reference) (serial oracle), [`element`] (types and reduction kernels), [`fp8`] (the FP8 formats and NCCL's arithmetic on them),
//! [`limits`] (sizes and rank counts the machine can hold), [`check`] and [`perf`] (checked runs and timing for tests and `topoplan run`).
//! Design: `docs/runtime.md`, `docs/protocol.md`.

pub mod bootstrap;
pub mod check;
pub mod comm;
pub mod config;
pub mod element;
pub mod error;
pub mod exec;
pub mod fp8;
pub mod group;
pub mod init;
pub mod limits;
pub mod perf;
pub mod plan;
pub mod protocol;
pub mod reference;
pub mod transport;
pub mod types;

pub use comm::{AbortHandle, Communicator, Group, UniqueId};
pub use config::Config;
pub use element::Element;
pub use error::CommError;
pub use init::EnvRank;
pub use types::{DataType, ReduceOp};
