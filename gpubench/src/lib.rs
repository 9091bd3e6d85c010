//! topoplan's measurement loops on GPUs: what `topoplan bench`, `calibrate --measure` and
//! `doctor --measure` run, and the GPU tests check with.
//!
//! - [`harness`]: nccl-tests-style loops in one process (`CudaGroup`), our runtime and NCCL on
//!   the same inputs, every element checked (`harness/data.rs`, `harness/correctness.rs`);
//! - [`procs`]: the same with one process per GPU over CUDA IPC (`bench --procs`);
//! - [`nccl`]: NCCL loaded through cudarc, the baseline every table is a ratio against;
//! - [`detect`]: the local machine's topology, for `topoplan detect`.

pub mod detect;
pub mod harness;
pub mod nccl;
pub mod procs;
