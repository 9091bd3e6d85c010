//! The direct-push path: the planner's one-shot schedules (`Algorithm::OneShot`) run on
//! `cuda/kernels/direct.cu` without any barrier. Every sender pushes its message into slots of
//! the receiver's scratch reserved for it; slots are recycled under credits (sequence numbers
//! in device memory), so a rank never waits for a peer to enter the call, only for data.
//!
//! What each rank does for a collective is a [`DirectRole`] (pure, emulated in the tests
//! against `runtime::reference`); [`enqueue`] turns it into one kernel launch, with programmatic
//! dependent launch (PDL) so the next call's grid is resident before this one ends.

use crate::abort::TpAbort;
use crate::device::{DevBuf, ExecModule};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::{Algorithm, CollectiveKind, Protocol, Schedule};
use runtime::types::ReduceOp;
use std::sync::Arc;

pub(crate) use crate::layout::DIRECT_MAX_CTAS as MAX_CTAS;
use crate::layout::{
    DIRECT_FLAG_WORDS as FLAG_WORDS, LL128_DATA, LL128_LINE, MAX_RANKS, OPT_AVG, OPT_COPY,
    OPT_INPLACE, OPT_LL_IMPLIED, PROTO_LL, PROTO_LL128, PROTO_PULL, PROTO_SIMPLE, RECV_STREAMS,
};
/// Slots per (sender, receiver, stream): how far a sender may run ahead of its receiver
/// (`TOPOPLAN_DIRECT_SLOTS`).
const NSLOTS: u32 = 2;
/// Simple slot (`TOPOPLAN_DIRECT_SLOT_KB`), for 2 ranks; divided among more peers. A sender
/// fences once per segment, so large messages want large segments (2×H200, 1 GiB: 350 GB/s
/// with 128 KiB, 357 with 256 KiB, 360 with 512 KiB).
const SIMPLE_SLOT_BYTES: u64 = 512 << 10;
/// Smallest Simple segment: below it the per-segment fence costs more than the pipelining wins
/// (32 KiB segments: 221 GB/s at 16 MiB against 266 with 128 KiB).
const MIN_SEG_BYTES: u64 = 64 << 10;
/// LL128 slot: 1024 lines of 128 bytes (120 KiB of data); LL128 has no fence, so segments can
/// be small: down to 64 lines.
const LL128_SLOT_LINES: u64 = 1024;
const LL128_MIN_SEG_LINES: u64 = 64;
/// LL slot: 32 KiB of 16-byte lines carrying 16 KiB of data.
const LL_SLOT_BYTES: u64 = 32 << 10;
/// LL grids: one CTA per 4 KiB up to this many (64 beat 32 at 256 KiB-1 MiB: 7.4 against
/// 8.4 µs at 256 KiB).
const LL_MAX_CTAS: u32 = 64;
const BLOCK: u32 = 512;

/// Whether the direct path runs `s` (a one-shot schedule of a collective it knows).
pub fn applies(s: &Schedule) -> bool {
    runs(s) && s.nranks >= 2 && s.nranks <= 8 && enabled()
}

/// Whether the direct path has a kernel role for `s`: the one-shot schedules of the five
/// collectives, and the direct all-to-all (`Algorithm::Direct`, every rank pushes block q of
/// its input to rank q).
fn runs(s: &Schedule) -> bool {
    match s.collective.kind {
        CollectiveKind::AllReduce
        | CollectiveKind::AllGather
        | CollectiveKind::ReduceScatter
        | CollectiveKind::Broadcast
        | CollectiveKind::Reduce => s.algorithm == Algorithm::OneShot,
        CollectiveKind::AllToAll => s.algorithm == Algorithm::Direct,
        CollectiveKind::SendRecv => false,
    }
}

/// `TOPOPLAN_DIRECT=0` sends one-shot schedules through the generic lowering instead.
pub fn enabled() -> bool {
    knobs().enabled
}

/// Environment knobs, read once (a call must not pay for `std::env::var`).
struct Knobs {
    enabled: bool,
    pdl: bool,
    ctas: Option<u32>,
    ll_ctas: Option<u32>,
    slot_bytes: Option<u64>,
    /// Fixed Simple segment (`TOPOPLAN_DIRECT_SEG_KB`), capped by the slot.
    seg_bytes: Option<u64>,
    nslots: u32,
    /// Threads per LL CTA (`TOPOPLAN_LL_BLOCK`, 32–512, a multiple of 32); default 512.
    ll_block: u32,
}

fn knobs() -> &'static Knobs {
    static K: std::sync::OnceLock<Knobs> = std::sync::OnceLock::new();
    K.get_or_init(|| {
        use params::*;
        Knobs {
            enabled: DIRECT.flag_or_warn(),
            pdl: PDL.flag_or_warn(),
            ctas: DIRECT_CTAS.u32_or_warn(),
            ll_ctas: DIRECT_LL_CTAS.u32_or_warn(),
            slot_bytes: DIRECT_SLOT_KB.bytes_or_warn(),
            seg_bytes: DIRECT_SEG_KB.bytes_or_warn(),
            nslots: DIRECT_SLOTS.u32_or_warn().unwrap_or(NSLOTS),
            ll_block: LL_BLOCK.u32_or_warn().map_or(BLOCK, |b| b / 32 * 32),
        }
    })
}

/// CTAs for a message of `bytes`: LL runs `grid` CTAs that push and consume; Simple and LL128
/// run `grid` sender CTAs (streams) and [`receivers`] receiver CTAs. The same on every rank, since
/// stream b pairs sender CTA b with the receiver serving b. `fixed` overrides the size rule
/// (`TOPOPLAN_DIRECT_CTAS`, `TOPOPLAN_DIRECT_LL_CTAS`).
pub fn grid(bytes: u64, ll: bool, min_sm: u32, fixed: Option<u32>) -> u32 {
    // LL: one 16-byte line per thread per 4 KiB CTA; Simple: a stream per 32 KiB, as many
    // receiver CTAs as senders (88 senders with 44 two-stream receivers measured slower at
    // 4-32 MiB and no faster at 1 GiB than 64 + 64 on 2×H200).
    let (per_cta, cap) = if ll {
        (4u64 << 10, LL_MAX_CTAS.min(min_sm))
    } else {
        (32u64 << 10, MAX_CTAS.min(min_sm / 2))
    };
    fixed
        .unwrap_or_else(|| bytes.div_ceil(per_cta).min(cap as u64) as u32)
        .clamp(1, cap.max(1))
}

/// Receiver CTAs for `senders` streams: one per stream while both fit on the GPU, else half as
/// many (each serving up to [`RECV_STREAMS`] streams).
pub fn receivers(senders: u32, min_sm: u32) -> u32 {
    if senders * 2 <= min_sm {
        senders
    } else {
        senders.div_ceil(2).max(senders.div_ceil(RECV_STREAMS))
    }
}

/// Simple segment in bytes for a message of `bytes` over `senders` streams: a quarter of a
/// stream's share (a receiver reduces one while the next arrives), between [`MIN_SEG_BYTES`]
/// and the slot (2×H200: 128 KiB at 16 MiB, 256 KiB at 64 MiB, 512 KiB from 256 MiB measured
/// best).
pub fn segment_bytes(bytes: u64, senders: u32, slot_bytes: u64) -> u64 {
    let quarter = bytes.div_ceil(senders.max(1) as u64).div_ceil(4);
    quarter
        .next_multiple_of(16 << 10)
        .clamp(MIN_SEG_BYTES.min(slot_bytes), slot_bytes)
}

/// LL128 segment in lines for a message of `bytes` over `senders` streams: a quarter of a
/// stream's lines, between [`LL128_MIN_SEG_LINES`] and the slot.
pub fn ll128_segment_lines(bytes: u64, senders: u32) -> u64 {
    let lines = bytes.div_ceil(LL128_DATA).div_ceil(senders.max(1) as u64);
    lines
        .div_ceil(4)
        .clamp(LL128_MIN_SEG_LINES, LL128_SLOT_LINES)
}

/// Simple slot bytes for `peers` peers: [`SIMPLE_SLOT_BYTES`] shared among them, so the slot
/// region stays 64 MiB per GPU whatever the rank count.
fn simple_slot_bytes(peers: u64, knob: Option<u64>) -> u64 {
    knob.unwrap_or((SIMPLE_SLOT_BYTES / peers.max(1)).next_multiple_of(16 << 10))
}

/// Bytes of one protocol's slot region: `slot` bytes for every (peer, stream, slot).
fn region_bytes(peers: u64, slot: u64) -> u64 {
    peers * MAX_CTAS as u64 * knobs().nslots as u64 * slot
}

/// Per-rank device memory of the direct path: Simple slots followed by LL128 slots (zeroed:
/// sequence 0 never matches), LL slots (zeroed) and the flag words.
#[derive(Debug)]
pub(crate) struct DirectBufs {
    simple: DevBuf,
    ll: DevBuf,
    flags: DevBuf,
}

impl DirectBufs {
    pub(crate) fn new(ctx: &Arc<CudaContext>, nranks: usize) -> Result<Self, CudaError> {
        let peers = nranks.saturating_sub(1).max(1) as u64;
        let region = |slot: u64| region_bytes(peers, slot) as usize;
        let simple_bytes = region(simple_slot_bytes(peers, knobs().slot_bytes));
        let simple = DevBuf::new(ctx, simple_bytes + region(LL128_SLOT_LINES * LL128_LINE))?;
        simple.fill(0)?;
        let ll = DevBuf::new(ctx, region(LL_SLOT_BYTES))?;
        ll.fill(0)?;
        let flags = DevBuf::new(ctx, FLAG_WORDS * 8)?;
        flags.fill(0)?;
        Ok(Self { simple, ll, flags })
    }
}

/// `TdArgs` of direct.cuh, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TdArgs {
    input: u64,
    output: u64,
    scratch: [u64; MAX_RANKS],
    flags: [u64; MAX_RANKS],
    n: u64,
    seg: u64,
    slot_bytes: u64,
    send_stride: u64,
    local_off: u64,
    gather_stride: u64,
    copy_dst: u64,
    copy_src: u64,
    rank: u32,
    nranks: u32,
    send_mask: u32,
    recv_mask: u32,
    mode: u32,
    ll: u32,
    nslots: u32,
    opts: u32,
    senders: u32,
    pad: u32,
    ab: TpAbort,
}

/// What a direct launch needs to know about the ranks: every rank's slot regions and flag
/// words (peer-mapped in one process, IPC-mapped across processes) and the smallest SM count
/// (grids must agree on every rank).
#[derive(Clone, Copy, Debug)]
pub struct DirectPeers {
    pub nranks: u32,
    pub min_sm: u32,
    pub simple: [u64; MAX_RANKS],
    pub ll: [u64; MAX_RANKS],
    pub flags: [u64; MAX_RANKS],
}

impl DirectBufs {
    /// This rank's (Simple slots, LL slots, flags) device pointers.
    pub(crate) fn ptrs(&self) -> (u64, u64, u64) {
        (self.simple.ptr, self.ll.ptr, self.flags.ptr)
    }

    /// The allocations, for exporting them to other processes (`super::ipc`).
    pub(crate) fn bufs(&self) -> [&DevBuf; 3] {
        [&self.simple, &self.ll, &self.flags]
    }
}

/// Enqueues `rank`'s part of `call` on `stream` of `ctx` (the context of that rank's GPU).
pub fn launch_call(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    peers: &DirectPeers,
    rank: u32,
    call: &DirectCall,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    launch_call_pdl(ctx, module, peers, rank, call, stream, true)
}

/// [`launch_call`], with programmatic dependent launch only where `pdl` allows it: not on a
/// GPU that ranks share, where the next call's grid would hold SMs another rank's current call
/// waits for (`super::residency`).
pub(crate) fn launch_call_pdl(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    peers: &DirectPeers,
    rank: u32,
    call: &DirectCall,
    stream: sys::CUstream,
    pdl: bool,
) -> Result<(), CudaError> {
    let p = plan_launch(peers, rank, call)?;
    let kernels = if call.shares_sms {
        module.direct_shared()?
    } else {
        &module.direct
    };
    let f = &kernels[crate::device::op_index(call.op)];
    launch::launch(ctx, f, p.ctas, p.block, &p.args, stream, knobs().pdl && pdl)
}

/// One direct kernel launch: its arguments, grid and block.
#[derive(Clone, Copy, Debug)]
struct LaunchPlan {
    args: TdArgs,
    ctas: u32,
    block: u32,
}

/// The launch of `rank`'s part of `call`: its grid (from the size and knobs) and parameters.
fn plan_launch(peers: &DirectPeers, rank: u32, call: &DirectCall) -> Result<LaunchPlan, CudaError> {
    let n = peers.nranks;
    let role = role(
        call.kind,
        call.root,
        rank,
        n,
        call.count,
        call.in_place,
        call.op == ReduceOp::Avg,
    )
    .ok_or_else(|| CudaError::Lower("the direct path does not run this collective".into()))?;
    let ll = call.protocol == Protocol::LL;
    let elem = call.dtype.size() as u64;
    let k = knobs();
    let min_sm = peers.min_sm;
    let bytes = role.n * elem;
    let grid = grid(bytes, ll, min_sm, if ll { k.ll_ctas } else { k.ctas });
    let t = transport(peers, call, &role, bytes, grid);
    let (proto, scratch, slot_bytes, seg, ctas) = (t.proto, t.scratch, t.slot_bytes, t.seg, t.ctas);
    let args = TdArgs {
        input: call.input,
        output: call.output,
        scratch,
        flags: peers.flags,
        n: role.n,
        seg,
        slot_bytes,
        send_stride: role.send_stride,
        local_off: role.local_off,
        gather_stride: role.gather_stride,
        copy_dst: role.copy_dst.unwrap_or(0),
        copy_src: role.copy_src,
        rank,
        nranks: n,
        send_mask: role.send_mask,
        recv_mask: role.recv_mask,
        mode: u32::from(!role.reduce),
        ll: proto,
        nslots: k.nslots,
        opts: if role.avg { OPT_AVG } else { 0 }
            | if role.copy_dst.is_some() { OPT_COPY } else { 0 }
            | if call.in_place && role.overwrites_what_it_pushes() {
                OPT_INPLACE
            } else {
                0
            }
            | if proto == PROTO_LL && ll_credit_implied(&role, elem, ctas, k.nslots) {
                OPT_LL_IMPLIED
            } else {
                0
            },
        senders: grid,
        pad: 0,
        ab: call.ab,
    };
    let block = match proto {
        PROTO_LL => k.ll_block,
        PROTO_PULL => pull::block(),
        _ => BLOCK,
    };
    Ok(LaunchPlan { args, ctas, block })
}

/// How a call's data travels: protocol code, the scratch bases (pull: the peers' inputs),
/// slot bytes, segment elements and CTAs.
struct Transport {
    proto: u32,
    scratch: [u64; MAX_RANKS],
    slot_bytes: u64,
    seg: u64,
    ctas: u32,
}

fn transport(
    peers: &DirectPeers,
    call: &DirectCall,
    role: &DirectRole,
    bytes: u64,
    grid: u32,
) -> Transport {
    let k = knobs();
    let min_sm = peers.min_sm;
    let elem = call.dtype.size() as u64;
    let peers_n = peers.nranks as u64 - 1;
    let simple_slot = simple_slot_bytes(peers_n, k.slot_bytes);
    // (protocol code, scratch bases, slot bytes, segment elements, CTAs)
    let pulls = pull::chosen(call, role, bytes);
    let (proto, scratch, slot_bytes, seg, ctas) = match call.protocol {
        // Pull mode reads the peers' inputs: their pointers take the scratch bases' place.
        _ if pulls => (
            PROTO_PULL,
            call.inputs.unwrap_or_default(),
            0,
            0,
            pull::grid(bytes, min_sm),
        ),
        Protocol::LL => (
            PROTO_LL,
            peers.ll,
            LL_SLOT_BYTES,
            LL_SLOT_BYTES / 2 / elem,
            grid,
        ),
        Protocol::LL128 => {
            // LL128 slots follow the Simple slots in the same allocation.
            let skip = region_bytes(peers_n, simple_slot);
            let bases = peers.simple.map(|b| if b == 0 { 0 } else { b + skip });
            let lines = ll128_segment_lines(bytes, grid);
            let seg = lines * (LL128_DATA / elem);
            (
                PROTO_LL128,
                bases,
                LL128_SLOT_LINES * LL128_LINE,
                seg,
                grid + receivers(grid, min_sm),
            )
        }
        Protocol::Simple => {
            let seg = k.seg_bytes.map_or_else(
                || segment_bytes(bytes, grid, simple_slot),
                |b| b.min(simple_slot),
            ) / elem;
            (
                PROTO_SIMPLE,
                peers.simple,
                simple_slot,
                seg,
                grid + receivers(grid, min_sm),
            )
        }
    };
    Transport {
        proto,
        scratch,
        slot_bytes,
        seg,
        ctas,
    }
}

/// Whether an LL call may leave its credits implied (`TD_LL_IMPLIED`): every peer this rank
/// pushes to also pushes to it in the same call (so its data proves it finished the previous
/// call), every CTA's share is one segment, and there are at least 2 slots (the next call's
/// segment then needs only the credit the previous call's data implied).
/// `protocol::implied_credit` states the rule; loom_direct checks it.
pub fn ll_credit_implied(role: &DirectRole, elem: u64, grid: u32, nslots: u32) -> bool {
    let vec = (16 / elem).max(1);
    let share = role.n.div_ceil(vec).div_ceil(grid.max(1) as u64) * vec;
    let seg = LL_SLOT_BYTES / 2 / elem;
    protocol::credit_implied_ok(
        role.send_mask != 0 && role.send_mask == role.recv_mask,
        share.div_ceil(seg),
        nslots,
    )
}

mod call;
mod launch;
pub(crate) mod local;
pub mod p2p;
pub use call::DirectCall;
pub use launch::take_launch_ns;
pub mod protocol;
pub mod pull;
mod role;
pub use role::{is_in_place, rank_ptrs, role, DirectRole};

#[cfg(test)]
mod tests;
