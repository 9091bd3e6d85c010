//! NCCL 2.28's tuning tables (nccl-2.28-facts.md §5.2), which are NCCL's constants, not fits,
//! and the ramps that apply a profile's fitted terms (`TunerParams`, `profiles/`,
//! `docs/tuner.md`).

use super::profile::TunerParams;
use crate::schedule::{CollectiveKind, Protocol};

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

/// Fraction of peak bandwidth ring/tree Simple and LL128 reach at `bytes`,
/// `1 / (1 + (S0/bytes)^A)` with the profile's `ramp_s0`, `ramp_a`: pipelines fill, channels
/// start unevenly and buffers are cold at mid sizes. LL runs small messages whose time is
/// latency; NCCL's own factors stand.
pub fn ramp(c: &TunerParams, proto: Protocol, bytes: u64) -> f64 {
    match proto {
        Protocol::LL => 1.0,
        Protocol::LL128 | Protocol::Simple => {
            1.0 / (1.0 + (c.ramp_s0 / (bytes.max(1) as f64)).powf(c.ramp_a))
        }
    }
}

/// Size ramp of the Simple one-shot (`direct_ramp_s0`, `direct_ramp_a`): a stream's first
/// segment must land before its receiver starts.
pub fn direct_ramp(c: &TunerParams, proto: Protocol, bytes: u64) -> f64 {
    match proto {
        Protocol::LL => 1.0,
        Protocol::LL128 | Protocol::Simple => {
            1.0 / (1.0 + (c.direct_ramp_s0 / (bytes.max(1) as f64)).powf(c.direct_ramp_a))
        }
    }
}
