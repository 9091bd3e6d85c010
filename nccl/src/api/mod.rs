//! The exported C functions: each checks its arguments, then hands the work to
//! [`crate::comm`], [`crate::group`] and [`crate::exec`]. `calls` holds the collectives,
//! point to point and groups; `comms` communicators, errors and queries; `memory`
//! registration, allocation, PreMulSum ops and the calls only NCCL runs. Every entry returns an
//! `ncclResult_t` and never unwinds into C; a failure's message, prefixed with the call's
//! name, is what `ncclGetLastError` returns (process-wide and for the communicator).

#![allow(non_snake_case)]

mod entry;

mod calls;
mod comms;
mod memory;

pub use calls::*;
pub use comms::*;
pub use memory::*;
