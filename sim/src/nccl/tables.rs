//! NCCL 2.28's own constants (`../shared/reference/nccl-2.28-facts.md` §3.3, §5.2, §5.7, §6.1):
//! NCCL's tables, not fits, so they live in code. Indices: compute capability
//! (Volta, Ampere, Hopper, Blackwell), node count (1, 2, more), protocol (LL, LL128, Simple).

/// Per-channel speeds (GB/s) NCCL's search tries within one host, fastest first.
pub fn intra_speeds(sm: u32) -> &'static [f64] {
    if sm >= 100 {
        &[
            90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
        ]
    } else if sm >= 90 {
        &[
            60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
        ]
    } else {
        &[
            40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
        ]
    }
}

pub fn cc_idx(sm: u32) -> usize {
    match sm {
        0..=79 => 0,
        80..=89 => 1,
        90..=99 => 2,
        _ => 3,
    }
}

pub fn nodes_idx(nnodes: u32) -> usize {
    match nnodes {
        0 | 1 => 0,
        2 => 1,
        _ => 2,
    }
}

pub const LL_MAX: [[f64; 3]; 4] = [
    [39.0, 39.0, 20.4],
    [87.7, 22.5, 19.0],
    [141.0, 45.0, 35.0],
    [282.0, 90.0, 70.0],
];
pub const PER_CH_RING_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 36.7],
    [73.4, 34.6, 73.4],
];
pub const PER_CH_TREE_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 29.0],
    [55.6, 31.67, 20.0],
];
pub const PER_CH_TREE: [[f64; 3]; 4] = [
    [26.5, 18.5, 10.0],
    [24.0, 23.6, 17.8],
    [38.7, 41.4, 36.0],
    [70.0, 42.8, 24.0],
];

/// Base latencies [tree, ring][proto], µs.
pub const BASE_LAT: [[f64; 3]; 2] = [[6.8, 14.0, 8.4], [6.6, 14.0, 8.4]];
/// Per-hop latencies [NVLink, PCI, NET][tree, ring][proto], µs.
pub const HW_LAT: [[[f64; 3]; 2]; 3] = [
    [[0.6, 1.25, 4.0], [0.6, 1.9, 3.4]],
    [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7]],
    [[5.0, 8.5, 14.0], [2.7, 4.0, 14.0]],
];

/// Tree all-reduce bandwidth correction by `log2(bytes / 64)`, index 0 = 64 B … 22 = 256 MiB.
pub const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

/// Most threads of a channel [LL, LL128, Simple].
pub const MAX_THREADS: [u32; 3] = [512, 640, 512];
/// Bytes each thread must have before another channel is used [LL, LL128, Simple] (ring LL is
/// multiplied by the rank count).
pub const THREAD_THRESHOLD: [u64; 3] = [8, 8, 64];

/// Simple buffer per connection (4 MiB) in NCCL_STEPS = 8 slots: one step is 512 KiB.
pub const SIMPLE_STEP_BYTES: u64 = 512 << 10;
/// Ring Simple all-reduce / all-gather / reduce-scatter: 4 steps a chunk (2 MiB).
pub const RING_CHUNK_STEPS: u64 = 4;
/// LL payload per step (64 KiB buffer step, half of it flags).
pub const LL_CHUNK_BYTES: u64 = 32 << 10;
/// LL128 payload per step (614 400 B step, 15 of 16 words data).
pub const LL128_CHUNK_BYTES: u64 = 576_000;
/// NCCL_STEPS: slots per connection.
pub const STEPS: u32 = 8;

/// Point-to-point: chunk size on an all-NVLink host, elsewhere; LL while a transfer has at most
/// this many bytes per channel (NCCL_P2P_LL_THRESHOLD).
pub const P2P_NVL_CHUNK_BYTES: u64 = 512 << 10;
pub const P2P_OTHER_CHUNK_BYTES: u64 = 128 << 10;
pub const P2P_LL_THRESHOLD: u64 = 16 << 10;
/// Point-to-point parts (one per channel) are aligned to 4 KiB.
pub const P2P_PART_ALIGN: u64 = 4 << 10;
/// Threads of NCCL's point-to-point kernel (NCCL_MAX_NTHREADS).
pub const P2P_THREADS: u32 = 640;
/// NVLink bandwidth of one link as NCCL counts it on sm90 (GB/s): p2p channels per NVLink peer
/// are `2 × path bw / this`.
pub const NVLINK_LINK_GBPS_SM90: f64 = 20.6;
pub const MAX_P2P_CHANNELS: u32 = 64;
