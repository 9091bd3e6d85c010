//! Lowering a schedule (planner IR) into device work for ranks that share one address space
//! (one process driving several GPUs with peer access, or IPC-mapped peers).
//!
//! Every matched send/receive pair becomes a *work item* that reads the sender's payload where it
//! lives and writes the receiver's destination: the receiver's SMs load it (`P2pLoad`), the
//! sender's SMs store it (`P2pStore`, for receives that only copy), or a copy engine moves it
//! (`CopyEngine`, staged in scratch when the receive also reduces). A payload that the sender never
//! stores (`RecvReduceSend`) is materialised in the sender's scratch ring first.
//!
//! Items are placed into *phases*. Inside a phase items have no order, so every read-after-write,
//! write-after-read and write-after-write on the same memory goes across a phase boundary. A
//! boundary carries the weakest barrier that orders the dependency: none when the same rank's same
//! CTA produced the data (same item length and offset, hence the same split into CTAs), a per-CTA
//! barrier across ranks under the same condition, and a full barrier otherwise. Remote access in
//! the first phase needs a barrier (the peer's stream must have reached the collective), and a
//! final barrier keeps a rank from finishing while peers still touch its memory.
//!
//! The lowering is pure and CPU-testable: [`emulate`] runs a lowered plan on host vectors, reading
//! every phase's inputs before writing its outputs, so an ordering bug shows as a wrong result.
//!
//! The parts:
//! - `program`: the driver — runs every rank's program in rounds, pairs sends with receives,
//!   and finishes with averaging, the end barrier and the LL checks;
//! - `ops`: one schedule op → work items, by transport;
//! - `memory`: the lowering state, logical → physical buffers (in-place aliasing), scratch
//!   renaming and the hazard helpers used to hold back clobbering ops;
//! - `place`: phase placement, barrier strength and copy elision;
//! - `snapshot`: copies taken so an op may overwrite memory that is still needed;
//! - `ll`: the LL protocol (pushes into LL buffers, and what the kernel needs of them);
//! - `emulate`: the CPU emulator the tests run lowered plans on, and `check` the comparison of
//!   its result with `runtime::reference` that every lowering test makes;
//! - `item`: the lowered form (work items, phases, barriers), a leaf every part imports.

mod check;
mod emulate;
mod item;
mod ll;
mod memory;
mod ops;
mod place;
mod program;
mod snapshot;

pub use check::{check_against_reference, Mismatch};
pub use emulate::emulate;
pub use program::lower;

pub use item::{
    Barrier, Buf, Item, ItemKind, LowerError, LowerParams, Lowered, Operand, LL_DATA_BYTES,
};

// The tests (`use super::*`) name these, as they did when lowering was one file.
#[cfg(test)]
use planner::schedule::{CollectiveKind, Schedule};

#[cfg(test)]
mod tests;
