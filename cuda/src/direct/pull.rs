//! Pull mode of the direct path (`cuda/kernels/direct_pull.cu`, `TdArgs.ll == 3`): every rank
//! reads its peers' inputs over NVLink instead of being pushed copies of them. It trades the
//! push path's slots, per-segment system fence and ready words for two per-CTA handshakes
//! (arrive, done) per call, which pays off where a message is too small to fill the push
//! pipeline (1–32 MiB on 2×H200).
//!
//! Pull mode needs every rank's input pointer, so it runs in one process only (a
//! `CudaGroup`); across processes the inputs are not mapped. Every input must be readable from
//! every peer GPU ([`inputs_readable`]: `cuMemAlloc` memory under the group's peer access, or
//! pool / VMM memory whose access the caller granted); a peer load from memory it may not read
//! would fault the context, so other inputs go through the push path, which never reads a
//! peer's buffer. In place it needs 16-byte aligned buffers (its pass-by-pass guard works on
//! whole vectors).

use super::call::DirectCall;
use super::role::DirectRole;
use planner::schedule::{CollectiveKind, Protocol};

use crate::layout::PULL_MAX_CTAS as MAX_CTAS;
/// Bytes of a message per CTA: one pass of 512 threads with one or two vectors each, so a CTA's
/// loads are one NVLink round trip (`TOPOPLAN_PULL_CTA_KB`).
const CTA_BYTES: u64 = 8 << 10;
/// Threads per CTA the kernel's launch bounds allow (one such CTA per SM).
const BLOCK: u32 = 512;
/// Threads per pull CTA: two CTAs per SM load more at once (2×H200, 16 MiB: 56.4 µs against
/// 60.0 with 512).
const DEFAULT_BLOCK: u32 = 256;
/// Sizes (bytes per rank) where `auto` pulls (`TOPOPLAN_PULL_MIN_KB`, `TOPOPLAN_PULL_MAX_KB`).
const MIN_BYTES: u64 = 512 << 10;
const MAX_BYTES: u64 = 16 << 20;

/// `TOPOPLAN_PULL`: `0` never, `1` every Simple one-shot call it can run, unset: all-reduce
/// between [`MIN_BYTES`] and [`MAX_BYTES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Off,
    Force,
    Auto,
}

struct Knobs {
    mode: Mode,
    min_bytes: u64,
    max_bytes: u64,
    cta_bytes: u64,
    ctas: Option<u32>,
    /// Threads per CTA (`TOPOPLAN_PULL_BLOCK`, 128–512, a multiple of 32): smaller blocks run
    /// several CTAs per SM.
    block: u32,
}

fn knobs() -> &'static Knobs {
    static K: std::sync::OnceLock<Knobs> = std::sync::OnceLock::new();
    K.get_or_init(|| {
        use params::*;
        Knobs {
            mode: match PULL.choice_or_warn() {
                Some("0") => Mode::Off,
                Some("1") => Mode::Force,
                _ => Mode::Auto,
            },
            min_bytes: PULL_MIN_KB.bytes_or_warn().unwrap_or(MIN_BYTES),
            max_bytes: PULL_MAX_KB.bytes_or_warn().unwrap_or(MAX_BYTES),
            cta_bytes: PULL_CTA_KB.bytes_or_warn().unwrap_or(CTA_BYTES),
            ctas: PULL_CTAS.u32_or_warn(),
            block: PULL_BLOCK
                .u32_or_warn()
                .map_or(DEFAULT_BLOCK, |b| b / 32 * 32),
        }
    })
}

/// Whether `call` (this rank's `role`, `bytes` per rank) runs in pull mode.
pub(crate) fn chosen(call: &DirectCall, role: &DirectRole, bytes: u64) -> bool {
    wanted(call.kind, call.protocol, bytes) && runnable(call, role)
}

/// Whether the knobs ask for pull mode for a one-shot `kind` of `bytes` per rank under
/// `protocol` (in one process with aligned buffers, as the benches have, it then runs).
pub fn wanted(kind: CollectiveKind, protocol: Protocol, bytes: u64) -> bool {
    let k = knobs();
    protocol == Protocol::Simple
        && match k.mode {
            Mode::Off => false,
            Mode::Force => true,
            Mode::Auto => {
                kind == CollectiveKind::AllReduce && (k.min_bytes..=k.max_bytes).contains(&bytes)
            }
        }
}

/// Whether pull mode can run `call` at all: Simple one-shot, every input known, and 16-byte
/// aligned buffers where this rank's result overwrites what its peers read.
pub(crate) fn runnable(call: &DirectCall, role: &DirectRole) -> bool {
    let Some(inputs) = call.inputs else {
        return false;
    };
    let aligned = |p: u64| p.is_multiple_of(16);
    // Pull mode guards an in-place result only where it is a reduction (its gather copies would
    // overwrite blocks the peers still read).
    let in_place_gather = call.in_place && !role.reduce && role.overwrites_what_it_pushes();
    call.protocol == Protocol::Simple
        && !in_place_gather
        && (!(call.in_place && role.overwrites_what_it_pushes())
            || (inputs.iter().all(|&p| aligned(p)) && aligned(call.output)))
}

/// Whether GPU `reader` may load from device pointer `ptr`: legacy (`cuMemAlloc`) memory, which
/// the group's context-wide peer access covers, or stream-ordered pool / VMM memory whose access
/// descriptor grants `reader` at least read access. Anything else, or a failed query, is `false`.
pub fn readable_from(ptr: u64, reader: i32) -> bool {
    use cudarc::driver::sys;
    use std::ffi::c_void;
    let attr = |a: sys::CUpointer_attribute, out: *mut c_void| {
        // SAFETY: `out` points to storage of the attribute's documented type (an int or a
        // pool handle) that outlives the call; an unknown pointer makes the call fail.
        unsafe { sys::cuPointerGetAttribute(out, a, ptr) }
            .result()
            .is_ok()
    };
    let mut legacy: i32 = 0;
    if !attr(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        &mut legacy as *mut i32 as *mut c_void,
    ) {
        return false;
    }
    if legacy != 0 {
        return true;
    }
    let mut loc = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: reader,
    };
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    if attr(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
        &mut pool as *mut sys::CUmemoryPool as *mut c_void,
    ) && !pool.is_null()
    {
        let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
        // SAFETY: out-pointers valid for the call; `pool` came from the driver.
        let ok = unsafe { sys::cuMemPoolGetAccess(&mut flags, pool, &mut loc) }.result();
        return ok.is_ok() && flags != sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    }
    let mut flags: std::ffi::c_ulonglong = 0;
    // SAFETY: out-pointer and location valid for the call; for memory not mapped through the
    // VMM API the driver returns an error.
    let ok = unsafe { sys::cuMemGetAccess(&mut flags, &loc, ptr) }.result();
    ok.is_ok() && flags != 0
}

/// Whether every rank's input can be loaded by every other rank's GPU (`readers[r]`: rank r's
/// device ordinal). The same answer on every rank of a call, as pull and push must not mix.
pub(crate) fn inputs_readable(inputs: &[u64], readers: &[i32]) -> bool {
    // Pointer queries touch no stream: a caller's capture must not be lost to them.
    let _relaxed = crate::capture::RelaxedCapture::enter();
    inputs.iter().enumerate().all(|(s, &p)| {
        readers
            .iter()
            .enumerate()
            .all(|(r, &dev)| r == s || readable_from(p, dev))
    })
}

/// Threads per CTA.
pub(crate) fn block() -> u32 {
    knobs().block
}

/// CTAs for a message of `bytes` per rank: one per [`CTA_BYTES`], at most as many as fit at
/// once on the smallest GPU (one 512-thread CTA per SM; CTA b of every rank meets CTA b of its
/// peers, so all must be resident).
pub(crate) fn grid(bytes: u64, min_sm: u32) -> u32 {
    let k = knobs();
    let cap = (min_sm * (BLOCK / k.block)).clamp(1, MAX_CTAS);
    k.ctas
        .unwrap_or_else(|| bytes.div_ceil(k.cta_bytes).min(cap as u64) as u32)
        .clamp(1, cap)
}
