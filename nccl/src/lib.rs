//! topoplan's NCCL-compatible C library: `libnccl.so.2` with NCCL 2.28's ABI
//! (`include/nccl.h`), so unmodified programs that link or preload NCCL (PyTorch, nccl-tests,
//! vLLM) call topoplan.
//!
//! Module map: [`api`] (the exported functions and their argument checks), [`abi`] (NCCL's
//! types, enum values, the versioned config and the unique id), [`comm`] (handles, joining,
//! splitting), [`group`] (deferral to `ncclGroupEnd`), [`exec`] (where each call runs, and
//! running it on topoplan's CPU runtime), [`gpu`] (device buffers on topoplan's CUDA backend,
//! opt-in), [`forward`] (calls on the real NCCL), [`real`] (loading the real NCCL by path),
//! [`premul`] (PreMulSum ops), [`cuda`] (the few driver queries), [`error`] (codes and
//! `ncclGetLastError`), [`knobs`] (settings and the `TOPOPLAN_DEBUG` log), [`hang`] (each
//! rank's current call in shared memory, and rank 0's report of a hang).
//! What runs where: `docs/nccl-library.md`.

pub mod abi;
pub mod api;
pub mod comm;
pub mod error;
pub mod exec;
pub mod forward;
pub mod gpu;
pub mod group;
pub mod hang;
pub mod knobs;
pub mod op;
pub mod premul;
pub mod real;
pub mod staged;
