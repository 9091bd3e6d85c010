//! The tuner's constants: NCCL 2.28's tables (nccl-2.28-facts.md §5.2) plus the terms we
//! calibrated on the 2×H200 machine (tests/data/measurements/h200x2/, docs/tuner.md).

use crate::schedule::{CollectiveKind, Protocol};

/// Host-side cost of launching a collective (kernel launch + enqueue), µs. NCCL's model omits
/// it; nccl-tests' times include it. Fitted: measured all-reduce 8 B..32 KiB on 2×H200 averages
/// 12.4 µs, NCCL's model says 7.8 µs for ring LL.
pub const LAUNCH_US: f64 = 4.5;

/// NCCL's base latencies [tree, ring][LL, LL128, Simple] (µs).
pub const BASE_LAT: [[f64; 3]; 2] = [[6.8, 14.0, 8.4], [6.6, 14.0, 8.4]];

/// NCCL's per-hop latencies [NVLink, PCI, NET][tree, ring][LL, LL128, Simple] (µs).
pub const HW_LAT: [[[f64; 3]; 2]; 3] = [
    [[0.6, 1.25, 4.0], [0.6, 1.9, 3.4]],
    [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7]],
    [[5.0, 8.5, 14.0], [2.7, 4.0, 14.0]],
];

/// NCCL's LL bandwidth caps [compcap idx][nodes idx].
const LL_MAX: [[f64; 3]; 4] = [
    [39.0, 39.0, 20.4],
    [87.7, 22.5, 19.0],
    [141.0, 45.0, 35.0],
    [282.0, 90.0, 70.0],
];
/// Per-channel caps [compcap idx] (single-node column).
pub const PER_CH_RING_LL128: [f64; 4] = [20.0, 20.0, 36.7, 73.4];
pub const PER_CH_TREE_LL128: [f64; 4] = [20.0, 20.0, 36.7, 55.6];
pub const PER_CH_TREE: [f64; 4] = [26.5, 24.0, 38.7, 70.0];

pub fn cc_idx(sm: u32) -> usize {
    match sm {
        0..=79 => 0,
        80..=89 => 1,
        90..=99 => 2,
        _ => 3,
    }
}

/// NCCL's LL cap for this GPU generation and node count (GB/s).
pub fn ll_max_bw(sm: u32, nnodes: u32) -> f64 {
    let i2 = if nnodes <= 2 { nnodes as usize - 1 } else { 2 };
    let i1 = if nnodes == 1 { cc_idx(sm) } else { 0 };
    LL_MAX[i1][i2]
}

pub fn coll_idx(k: CollectiveKind) -> usize {
    match k {
        CollectiveKind::AllReduce => 0,
        CollectiveKind::AllGather => 1,
        CollectiveKind::ReduceScatter => 2,
        CollectiveKind::Broadcast => 3,
        CollectiveKind::Reduce => 4,
        CollectiveKind::AllToAll => 5,
        CollectiveKind::SendRecv => 6,
    }
}

/// Calibrated: achieved fraction of the ring's bus bandwidth per collective. All-reduce 1.0;
/// all-gather measured 276 GB/s busbw at 2 GiB where all-reduce reaches 340 (0.81); reduce-scatter
/// assumed like all-gather; the rest uncalibrated (1.0).
pub const COLL_EFF: [f64; 7] = [1.0, 0.81, 0.81, 1.0, 1.0, 1.0, 1.0];

/// Calibrated size ramp for Simple: the fraction of peak bandwidth reached at `bytes`,
/// `1 / (1 + (S0/bytes)^A)`. Pipelines fill, channels start unevenly and buffers are cold at
/// mid sizes; fitted to all-reduce busbw on 2×H200 (2 MiB 0.58 … 2 GiB 0.95 of 360 GB/s).
pub const RAMP_S0: f64 = 0.87e6;
pub const RAMP_A: f64 = 0.376;

pub fn ramp(proto: Protocol, bytes: u64) -> f64 {
    match proto {
        // LL runs small messages whose time is latency; NCCL's own factors stand.
        Protocol::LL => 1.0,
        // Simple and LL128 pipeline large steps through the ring or tree.
        Protocol::LL128 | Protocol::Simple => {
            1.0 / (1.0 + (RAMP_S0 / (bytes.max(1) as f64)).powf(RAMP_A))
        }
    }
}

/// SM peer loads/stores with every peer at once reach this fraction of the topology's NVLink
/// bandwidth (NCCL's 20.6 GB/s per H200 link × 18 = 370.8): probe 337 GB/s both ways. Used for
/// the patterns the generic executor runs (all-to-all, send/recv).
pub const SM_PEER_EFF: f64 = 0.91;

// topoplan's direct-push executor (`runtime::cuda::direct`), fitted on its one-shot all-reduce
// measured on 2×H200 (`docs/measurements/2026-11-30-h200x2-push-relaxed-credits/perf.log`, the closing run of session
// 10; `tests/plan_calibration.rs` checks every point): Simple within 2.8 %, LL within 7.8 %.

/// Simple one-shot: fraction of the NVLink bandwidth its senders' stores reach (365 of 370.8).
pub const DIRECT_PEER_EFF: f64 = 0.984;
/// LL one-shot: payload rate as a fraction of the Simple rate (160 of 365 GB/s: 8 data bytes
/// per 16-byte line, and every line is polled).
pub const DIRECT_LL_FRACTION: f64 = 0.438;
/// Fixed cost on top of [`LAUNCH_US`] per protocol [LL, LL128, Simple] (µs): LL one flag-in-data
/// crossing; Simple (and LL128, which runs like it here) a fence and a ready flag.
pub const DIRECT_LAT_US: [f64; 3] = [0.3, 3.5, 3.5];
/// Size ramp of the Simple one-shot, `1 / (1 + (S0/bytes)^A)`: a stream's first segment must
/// land before its receiver starts (1 MiB reaches 0.70 of the peak, 16 MiB 0.90).
pub const DIRECT_RAMP_S0: f64 = 2.0e5;
pub const DIRECT_RAMP_A: f64 = 0.5;

pub fn direct_ramp(proto: Protocol, bytes: u64) -> f64 {
    match proto {
        Protocol::LL => 1.0,
        Protocol::LL128 | Protocol::Simple => {
            1.0 / (1.0 + (DIRECT_RAMP_S0 / (bytes.max(1) as f64)).powf(DIRECT_RAMP_A))
        }
    }
}

// topoplan's pull mode of the direct path (`runtime::cuda::direct::pull`: in one process, a
// one-shot Simple all-reduce of 512 KiB–16 MiB per rank reads the peers' inputs instead of being
// pushed copies), fitted (minimax) on session 11's closing run on 2×H200, two 256-thread CTAs per
// SM (`docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`): within 2.3 % at every size.

/// Per-rank sizes the runtime runs a one-shot all-reduce in pull mode (its defaults).
pub const DIRECT_PULL_MIN_BYTES: u64 = 512 << 10;
pub const DIRECT_PULL_MAX_BYTES: u64 = 16 << 20;
/// Peer loads, both GPUs at once: fraction of the NVLink bandwidth (322 of 370.8 GB/s; the
/// probe's SM peer reads reach 337).
pub const DIRECT_PULL_EFF: f64 = 0.868;
/// Fixed cost on top of [`LAUNCH_US`] (µs): the arrive and done handshakes.
pub const DIRECT_PULL_LAT_US: f64 = 1.28;

// topoplan's hybrid all-reduce (`runtime::cuda::hybrid`: on 2 GPUs from 512 MiB per rank the
// one-shot runs half its message on the copy engines while the SM path runs the other half),
// fitted on its two measured sizes (`docs/measurements/2026-11-30-h200x2-hybrid-adoption/hybrid-vs-nccl.log`:
// 512 MiB 1446.6 µs, 1 GiB 2854.9 µs; two points, two terms, so the fit is exact there).

/// Smallest per-rank all-reduce the runtime runs as a hybrid (its default).
pub const HYBRID_MIN_BYTES: u64 = 512 << 20;
/// Both engines at once: fraction of the NVLink bandwidth (381 of 370.8 GB/s).
pub const HYBRID_EFF: f64 = 1.028;
/// Fixed cost on top of [`LAUNCH_US`] (µs): the copy-engine half's start and last reduce.
pub const HYBRID_LAT_US: f64 = 33.8;

// topoplan's copy-engine pair all-reduce (`runtime::cuda::ce_pair`), fitted on its 2×H200
// measurements with the runtime's default chunks (`docs/measurements/2026-11-30-h200x2-ce-pair/chunks.log`,
// `TOPOPLAN_CE_CHUNK_MB=64`): every point within 2.1 %.

/// Copy engines both ways: fraction of the NVLink bandwidth (376 of 370.8 GB/s; the probe's
/// raw copies reach 392).
pub const CE_EFF: f64 = 1.014;
/// Cost of each chunk (µs): the copy's start and the fenced stream writes after it.
pub const CE_COPY_OVERHEAD_US: f64 = 11.0;
/// Fixed cost of a call on top of [`LAUNCH_US`] (µs): forking the copy stream, the first
/// cross-GPU wait.
pub const CE_LAUNCH_US: f64 = 8.0;
/// The runtime's chunking: chunks of at most this many bytes, halving towards the end of the
/// message down to [`CE_MIN_CHUNK_BYTES`] (`ce_pair::chunks`).
pub const CE_CHUNK_BYTES: u64 = 64 << 20;
pub const CE_MIN_CHUNK_BYTES: u64 = 2 << 20;
/// Cross-GPU flag synchronisation of a direct pattern (µs).
pub const DIRECT_SYNC_US: f64 = 2.0;
/// Extra latency per additional peer of a direct pattern (µs): one more flag to set and poll
/// and one more remote read to start. An estimate, not measured (only 2-GPU probes exist).
pub const DIRECT_PEER_US: f64 = 0.3;
/// Local device copy bandwidth (GB/s): probe ~1960 on H200.
pub const LOCAL_COPY_GBPS: f64 = 1960.0;
