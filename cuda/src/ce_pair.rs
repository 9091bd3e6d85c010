//! The copy-engine pair all-reduce: the planner's `CopyEnginePipeline` schedule (all-reduce of
//! two ranks) with the copy engines moving every byte and SM kernels only reducing.
//!
//! The message is cut into chunks ([`chunks`]). For chunk `g` (numbered across calls), one of
//! rank r's private copy streams (`g % streams`) pushes its input chunk into slot `g % slots` of
//! the peer's scratch ring and then bumps two counters of that stream: `LANDED` in the peer's
//! flag words, `PUSHED` in its own (each write after a system-wide fence). The
//! caller's stream waits for both (the peer's data is here; our own input chunk has been read,
//! so an in-place reduce may overwrite it), reduces `out = in (op) scratch`, and bumps `FREED`
//! in the peer's flag words: the peer's copy stream waits for it before reusing that slot.
//!
//! Cross-GPU waits are stream memory operations (`cuStreamWaitValue64` on a counter in local
//! device memory, `cuStreamWriteValue64` into the peer's), executed by the GPUs' front ends:
//! no kernel spins, so the copy engines and the reduce kernels never queue behind a waiter.
//! Counters only grow, both ranks count the same chunks (same sizes, same knobs), and the host
//! never waits for the GPU.
//!
//! Copies k+1.. run while chunk k reduces; the chunks (64 MiB, `TOPOPLAN_CE_CHUNK_MB`) shrink
//! towards the end of the message (to 8 MiB, `TOPOPLAN_CE_MIN_KB`) so the last reduce, which
//! nothing overlaps, is short. Not shorter: each chunk pays its signalling, and in place its
//! reduce also waits for its own push (2×H200, the hybrid at 512 MiB in place: 371.6–371.9 GB/s
//! with 8 MiB against 370.2–370.6 with 2 MiB, docs/measurements/2026-11-30-h200x2-allreduce-vs-nccl/).
//! The scratch ring
//! (`TOPOPLAN_CE_SLOTS` chunks, default 4: 256 MiB per GPU) is allocated at the first call.
//!
//! Measured on 2×H200 it is correct but alone slower than the SM direct path at every size
//! (512 MiB: 345 against 359 GB/s): every chunk costs ~10 µs of fenced signalling on its copy
//! stream. `auto` runs it only as half of the hybrid all-reduce (`super::hybrid`); `--algo ce`
//! runs it alone.
//!
//! The counters live on the host between calls, so a CUDA graph replay would repeat stale
//! values: under stream capture `CudaGroup` runs the one-shot schedule instead.

use crate::abort::TpAbort;
use crate::device::{drv, DevBuf, ExecModule};
use crate::group::CudaGroup;
use crate::request::Request;
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::{Algorithm, CollectiveKind, Schedule};
use runtime::types::ReduceOp;
use state::{PairState, MAX_COPY_STREAMS};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

pub(crate) mod state;

use crate::layout::PAIR_FLAGS;
/// Chunks the peer has reduced out of its scratch, i.e. slots there this rank may refill
/// (written by the peer's compute stream, which reduces chunks in order).
const FREED: usize = 0;
/// Chunks the peer's copy stream `s` has pushed into this rank's scratch: word `LANDED + s`.
/// One counter per copy stream, because the streams finish in no fixed order.
const LANDED: usize = 1;
/// Chunks this rank's copy stream `s` has pushed (for its own compute stream): `PUSHED + s`.
const PUSHED: usize = 1 + MAX_COPY_STREAMS;

/// Message elements are grouped in grains of this many so that every chunk but the last starts
/// 16-byte aligned (when the buffers do) and the copies stay large.
const GRAIN_ELEMS: u64 = 4096;

struct Knobs {
    enabled: bool,
    chunk: u64,
    min_chunk: u64,
    slots: u64,
    streams: u64,
    kernel_signals: bool,
    /// Threads per reduce CTA (`TOPOPLAN_PAIR_BLOCK`, 128-512, default 512).
    block: u32,
}

fn knobs() -> &'static Knobs {
    static K: OnceLock<Knobs> = OnceLock::new();
    K.get_or_init(|| {
        use params::*;
        Knobs {
            enabled: CE_PAIR.flag_or_warn(),
            chunk: CE_CHUNK_MB.bytes_or_warn().unwrap_or(64 << 20),
            min_chunk: CE_MIN_KB.bytes_or_warn().unwrap_or(8192 << 10),
            slots: CE_SLOTS.u64_or_warn().unwrap_or(4),
            streams: CE_STREAMS
                .u64_or_warn()
                .map_or(1, |v| v.min(MAX_COPY_STREAMS as u64)),
            kernel_signals: CE_SIGNAL.choice_or_warn() == Some("kernel"),
            block: PAIR_BLOCK.u32_or_warn().map_or(512, |b| b / 32 * 32),
        }
    })
}

/// Whether this path runs `s` (`TOPOPLAN_CE_PAIR=0` sends it through the generic lowering).
pub fn applies(s: &Schedule) -> bool {
    s.algorithm == Algorithm::CopyEnginePipeline
        && s.nranks == 2
        && s.collective.kind == CollectiveKind::AllReduce
        && knobs().enabled
}

/// Chunks `(first element, elements)` of an `n`-element message of `elem`-byte elements, in
/// order: chunks of `max_bytes`, then halving towards the end down to `min_bytes`, so that the
/// final reduce (which no copy overlaps) is short. Sizes are whole grains of
/// [`GRAIN_ELEMS`] except the last chunk, which also takes the remainder.
pub fn chunks(n: u64, elem: u64, max_bytes: u64, min_bytes: u64) -> Vec<(u64, u64)> {
    let grains = n / GRAIN_ELEMS;
    let grain_bytes = GRAIN_ELEMS * elem;
    let max_g = (max_bytes / grain_bytes).max(1);
    let min_g = (min_bytes / grain_bytes).clamp(1, max_g);
    // Sizes from the end of the message backwards: min, 2·min, … up to max, then max.
    let mut sizes = Vec::new();
    let (mut left, mut t) = (grains, min_g);
    while left > 0 {
        let take = t.min(left);
        sizes.push(take * GRAIN_ELEMS);
        left -= take;
        t = (2 * t).min(max_g);
    }
    sizes.reverse();
    let rem = n - grains * GRAIN_ELEMS;
    match sizes.last_mut() {
        Some(last) => *last += rem,
        None if rem > 0 => sizes.push(rem),
        None => {}
    }
    let mut off = 0;
    sizes
        .into_iter()
        .map(|c| {
            let x = (off, c);
            off += c;
            x
        })
        .collect()
}

/// Bytes of one scratch slot: room for the largest chunk [`chunks`] makes, whatever the element
/// size (at most 8 bytes), so the ring is allocated once.
fn slot_bytes(k: &Knobs) -> u64 {
    k.chunk + GRAIN_ELEMS * 8
}

fn scratch_ptrs(g: &CudaGroup, bytes: u64) -> Result<Vec<u64>, CudaError> {
    let mut s = g.pair_scratch.lock().unwrap_or_else(|p| p.into_inner());
    if s.is_none() {
        let bufs: Vec<DevBuf> = g
            .ranks
            .iter()
            .map(|r| DevBuf::new(&r.ctx, bytes as usize))
            .collect::<Result<_, _>>()?;
        *s = Some(bufs);
    }
    Ok(s.as_ref()
        .map(|v| v.iter().map(|b| b.ptr).collect())
        .unwrap_or_default())
}

/// One cross-GPU counter operation on a stream.
struct Signals<'a> {
    ctx: &'a Arc<CudaContext>,
    m: &'a ExecModule,
    kernels: bool,
    /// The wait kernel's abort argument and the rank whose counters it awaits.
    ab: TpAbort,
    peer: u32,
}

impl Signals<'_> {
    /// After the stream's prior work and a system-wide memory fence, `*addr = v`. (The
    /// unfenced variant, `CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER`, is refused by the v2 API.)
    fn write(&self, s: sys::CUstream, addr: u64, v: u64) -> Result<(), CudaError> {
        if self.kernels {
            return crate::ce::launch_small(self.ctx, &self.m.signal, addr, v, s);
        }
        // SAFETY: `addr` is a flag word in device memory mapped for this context (ours or a
        // peer's).
        unsafe { sys::cuStreamWriteValue64_v2(s, addr, v, 0) }
            .result()
            .map_err(drv)
    }

    /// The stream's later work waits until `*addr >= v` (counters only grow).
    fn wait(&self, s: sys::CUstream, addr: u64, v: u64) -> Result<(), CudaError> {
        if self.kernels {
            return crate::ce::launch_wait(self.ctx, &self.m.wait, addr, v, self.ab, self.peer, s);
        }
        let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: `addr` is a flag word in this context's device memory.
        unsafe { sys::cuStreamWaitValue64_v2(s, addr, v, geq) }
            .result()
            .map_err(drv)
    }
}

/// One rank's view of the pair path: its context, both ranks' scratch rings and pair counter
/// words (as this process addresses them) and its state. In one process (`CudaGroup`) the peer's
/// are peer-mapped; across processes (`CudaProcComm`) IPC-mapped.
pub(crate) struct PairSide<'a> {
    pub ctx: &'a Arc<CudaContext>,
    pub sm_count: u32,
    pub rank: usize,
    /// Each rank's scratch ring (`slot_bytes · slots` bytes, [`ring_bytes`]).
    pub scratch: [u64; 2],
    /// Each rank's first pair counter word (the FREED word; LANDED and PUSHED follow).
    pub flags: [u64; 2],
    pub state: &'a std::sync::Mutex<PairState>,
    /// The reduces run beside the register-capped direct kernels (the in-place hybrid): CTAs of
    /// [`SHARED_BLOCK`] threads, which fit on an SM beside one of theirs.
    pub shares_sms: bool,
    /// The call's abort argument, for the wait kernels (`TOPOPLAN_CE_SIGNAL=kernel`).
    pub ab: TpAbort,
}

/// Reduce CTA threads beside a register-capped direct CTA (512 threads at 96 registers leave
/// 16 Ki registers: 256 threads at the reduce's 56).
const SHARED_BLOCK: u32 = 256;

/// Bytes of one rank's scratch ring.
pub(crate) fn ring_bytes() -> u64 {
    let k = knobs();
    slot_bytes(k) * k.slots
}

pub(crate) use crate::layout::PAIR_WORDS;

/// Enqueues rank `rank`'s part of the pair all-reduce on `stream` (the caller's).
pub(crate) fn enqueue(
    g: &CudaGroup,
    rank: usize,
    req: &Request,
    m: &ExecModule,
    shares_sms: bool,
    stream: sys::CUstream,
    ab: TpAbort,
) -> Result<(), CudaError> {
    let scratch = scratch_ptrs(g, ring_bytes())?;
    let me = &g.ranks[rank];
    let flags = |r: usize| g.ranks[r].flags.ptr + (PAIR_FLAGS * 8) as u64;
    let side = PairSide {
        ctx: &me.ctx,
        sm_count: me.sm_count,
        rank,
        scratch: [scratch[0], scratch[1]],
        flags: [flags(0), flags(1)],
        state: &me.ce_pair,
        shares_sms,
        ab,
    };
    enqueue_on(
        &side,
        req.inputs[rank],
        req.outputs[rank],
        req.count,
        req.dtype,
        req.op,
        m,
        stream,
    )
}

/// [`enqueue`] for the rank `side` describes: `count` elements from `input` to `output`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue_on(
    side: &PairSide,
    input: u64,
    output: u64,
    count: u64,
    dtype: runtime::types::DataType,
    op: ReduceOp,
    m: &ExecModule,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    let k = knobs();
    let elem = dtype.size() as u64;
    let slot = slot_bytes(k);
    let scratch = side.scratch;
    let rank = side.rank;
    let peer = 1 - rank;
    let ctx = side.ctx;
    let flags = |r: usize, w: usize| side.flags[r] + (w * 8) as u64;
    let sig = Signals {
        ctx,
        m,
        kernels: k.kernel_signals,
        ab: side.ab,
        peer: peer as u32,
    };
    let list = chunks(count, elem, k.chunk, k.min_chunk);
    let f = &m.pair[crate::device::op_index(op)];
    let block = if side.shares_sms {
        SHARED_BLOCK
    } else {
        k.block
    };
    let avg = u32::from(op == ReduceOp::Avg);

    let mut st = side.state.lock().unwrap_or_else(|p| p.into_inner());
    let ns = k.streams;
    let g0 = st.chunks_done;
    ctx.bind_to_thread().map_err(drv)?;
    start_copies(&st, ns, stream)?;
    for (i, &(off, n)) in list.iter().enumerate() {
        let c = g0 + i as u64;
        let (s, nth) = protocol::stream_of(c, ns);
        let copy = st.copy[s].raw();
        if let Some(w) = protocol::refill_wait(c, k.slots) {
            sig.wait(copy, flags(rank, FREED), w)?;
        }
        let dst = scratch[peer] + protocol::slot(c, k.slots) * slot;
        // SAFETY: the source lies in the caller's input ((off + n) ≤ count elements), the
        // destination in the peer's scratch slot (n·elem ≤ slot bytes); unified addressing
        // sends a peer destination through this GPU's copy engine.
        unsafe { sys::cuMemcpyAsync(dst, input + off * elem, (n * elem) as usize, copy) }
            .result()
            .map_err(drv)?;
        sig.write(copy, flags(peer, LANDED + s), nth)?;
        sig.write(copy, flags(rank, PUSHED + s), nth)?;
    }
    for (i, &(off, n)) in list.iter().enumerate() {
        let c = g0 + i as u64;
        let (s, nth) = protocol::stream_of(c, ns);
        sig.wait(stream, flags(rank, LANDED + s), nth)?;
        sig.wait(stream, flags(rank, PUSHED + s), nth)?;
        let grid = ((n * elem).div_ceil(64 << 10) as u32).clamp(1, 2 * side.sm_count);
        let args: (u64, u64, u64, u64, u32) = (
            output + off * elem,
            input + off * elem,
            scratch[rank] + protocol::slot(c, k.slots) * slot,
            n,
            avg,
        );
        launch_reduce(f, grid, block, stream, args)?;
        // The reduce has finished reading the slot; the peer writes it only after this.
        sig.write(stream, flags(peer, FREED), c + 1)?;
    }
    st.chunks_done = g0 + list.len() as u64;
    Ok(())
}

/// The copy streams start where the caller's stream is (its input is ready).
fn start_copies(st: &PairState, ns: u64, stream: sys::CUstream) -> Result<(), CudaError> {
    st.start.record(stream)?;
    for c in &st.copy[..ns as usize] {
        // SAFETY: an event and a stream of this context.
        unsafe { sys::cuStreamWaitEvent(c.raw(), st.start.raw(), 0) }
            .result()
            .map_err(drv)?;
    }
    Ok(())
}

/// Launches the pair reduce `f` of one chunk on `stream`, `args` being (output, input, scratch
/// slot, elements, avg).
fn launch_reduce(
    f: &cudarc::driver::CudaFunction,
    grid: u32,
    block: u32,
    stream: sys::CUstream,
    mut args: (u64, u64, u64, u64, u32),
) -> Result<(), CudaError> {
    let mut params: [*mut c_void; 5] = [
        &mut args.0 as *mut u64 as *mut c_void,
        &mut args.1 as *mut u64 as *mut c_void,
        &mut args.2 as *mut u64 as *mut c_void,
        &mut args.3 as *mut u64 as *mut c_void,
        &mut args.4 as *mut u32 as *mut c_void,
    ];
    // SAFETY: (T*, const T*, const T*, u64, u32) matches td_pair_*; the three ranges hold
    // n elements each (output/input chunks of the request, a scratch slot).
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (grid, 1, 1),
            (block, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
    .map_err(drv)
}

/// Whether `stream` is being captured into a CUDA graph (where this path must not run).
pub(crate) fn capturing(stream: sys::CUstream) -> Result<bool, CudaError> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: out-pointer valid; a stream of the current context.
    unsafe { sys::cuStreamIsCapturing(stream, &mut status) }
        .result()
        .map_err(drv)?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// The pair path's counter rules as pure decisions (`enqueue` makes them; the loom model
/// `cuda/tests/loom_ce_pair.rs` checks them). Chunks are numbered across calls from 0.
pub mod protocol {
    /// Scratch slot of chunk `c` in a ring of `slots`.
    pub fn slot(c: u64, slots: u64) -> u64 {
        c % slots
    }

    /// Whether chunk `c` may be pushed into the peer's slot, given the peer's `freed` count (the
    /// chunks it has reduced out of its scratch, in order): the chunk that last used that slot,
    /// `c - slots`, must have been reduced.
    pub fn may_refill(freed: u64, c: u64, slots: u64) -> bool {
        refill_wait(c, slots).is_none_or(|w| freed >= w)
    }

    /// The `FREED` value chunk `c`'s push waits for; `None`: its slot is fresh.
    pub fn refill_wait(c: u64, slots: u64) -> Option<u64> {
        (c >= slots).then(|| c - slots + 1)
    }

    /// The copy stream of chunk `c` among `streams`, and the value that stream's `LANDED` and
    /// `PUSHED` counters hold once `c` is pushed (each stream counts its own chunks).
    pub fn stream_of(c: u64, streams: u64) -> (usize, u64) {
        ((c % streams) as usize, c / streams + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_gibibyte_ends_in_halving_chunks() {
        let n = (1u64 << 30) / 4;
        let c = chunks(n, 4, 32 << 20, 2 << 20);
        let mib: Vec<u64> = c.iter().map(|&(_, x)| (x * 4) >> 20).collect();
        assert_eq!(&mib[mib.len() - 5..], &[32, 16, 8, 4, 2]);
        assert!(mib.iter().all(|&x| x <= 32));
        assert_eq!(mib.iter().sum::<u64>(), 1024);
    }

    #[test]
    fn the_refill_rule_is_the_wait_enqueue_issues() {
        use super::protocol::*;
        for slots in 1..5u64 {
            for c in 0..20u64 {
                match refill_wait(c, slots) {
                    // The wait enqueue issues is exactly where may_refill turns.
                    Some(w) => {
                        assert_eq!(w, c - slots + 1);
                        assert!(!may_refill(w - 1, c, slots));
                        assert!(may_refill(w, c, slots));
                    }
                    None => assert!(c < slots && may_refill(0, c, slots)),
                }
                assert_eq!(slot(c, slots), c % slots);
            }
        }
        assert_eq!(stream_of(5, 2), (1, 3));
        assert_eq!(stream_of(4, 1), (0, 5));
    }

    proptest! {
        #[test]
        fn chunks_tile_the_message(n in 0u64..50_000_000, e in prop::sample::select(vec![1u64, 2, 4, 8]),
                                   max_mb in 1u64..64, min_kb in 64u64..4096) {
            let (max, min) = (max_mb << 20, min_kb << 10);
            let c = chunks(n, e, max, min);
            let mut next = 0;
            for (i, &(off, len)) in c.iter().enumerate() {
                prop_assert_eq!(off, next);
                prop_assert!(len > 0);
                let last = i + 1 == c.len();
                if !last {
                    prop_assert_eq!(off % GRAIN_ELEMS, 0);
                    prop_assert_eq!(len % GRAIN_ELEMS, 0);
                }
                let k = Knobs { enabled: true, chunk: max, min_chunk: min, slots: 4, streams: 2, kernel_signals: false, block: 512 };
                prop_assert!(len * e <= slot_bytes(&k), "chunk {} of {} bytes", i, len * e);
                next = off + len;
            }
            prop_assert_eq!(next, n);
        }
    }
}
