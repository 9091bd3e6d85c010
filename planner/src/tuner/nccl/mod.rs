//! NCCL 2.28's model of a machine: its constants, tables and rules, in one place, used by the
//! planner's tuner, its channel search and the simulator's `--as nccl` mode. These are NCCL's
//! numbers, not fits (fitted terms live in machine profiles, `profiles/`). Each item names the
//! NCCL source file and function it restates; `docs/nccl-model.md` describes the whole model.
//!
//! Table indices: compute capability (Volta, Ampere, Hopper, Blackwell: [`cc_idx`]), node count
//! (1, 2, more: [`nodes_idx`]), algorithm (tree, ring), protocol (LL, LL128, Simple: [`proto_idx`]).

mod rules;
#[cfg(test)]
mod tests;

pub use rules::*;

use crate::schedule::Protocol;

/// Per-channel speeds (GB/s) NCCL's graph search tries, fastest first, within one host (`inter`
/// false) or across hosts (`src/graph/search.cc`, `speedArrayIntra`, `speedArrayInter`,
/// `sm90SpeedArray*`, `sm100SpeedArray*`).
pub fn search_speeds(sm: u32, inter: bool) -> &'static [f64] {
    match (sm >= 100, sm >= 90, inter) {
        (true, _, false) => &[
            90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
        ],
        (true, _, true) => &[
            96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
            1.2, 0.24, 0.12,
        ],
        (false, true, false) => &[
            60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
        ],
        (false, true, true) => &[
            48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
            0.24, 0.12,
        ],
        (false, false, false) => &[
            40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
        ],
        (false, false, true) => &[
            48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
            2.4, 1.2, 0.24, 0.12,
        ],
    }
}

/// Most channels the search returns before NCCL duplicates them (`MAXCHANNELS / 2`,
/// `src/graph/search.cc`, `ncclTopoCompute`).
pub const MAX_SEARCH_CHANNELS: usize = 16;

/// Compute-capability index of NCCL's tuning tables (`src/graph/tuning.cc`, `ncclTopoTuneModel`).
pub fn cc_idx(sm: u32) -> usize {
    match sm {
        0..=79 => 0,
        80..=89 => 1,
        90..=99 => 2,
        _ => 3,
    }
}

/// Node-count index of NCCL's tuning tables: one node, two, more.
pub fn nodes_idx(nnodes: u32) -> usize {
    match nnodes {
        0 | 1 => 0,
        2 => 1,
        _ => 2,
    }
}

/// Protocol index of NCCL's tables (`NCCL_PROTO_LL`, `NCCL_PROTO_LL128`, `NCCL_PROTO_SIMPLE`).
pub fn proto_idx(p: Protocol) -> usize {
    match p {
        Protocol::LL => 0,
        Protocol::LL128 => 1,
        Protocol::Simple => 2,
    }
}

/// Base latencies [tree, ring][protocol] (µs; `src/graph/tuning.cc`, `baseLat`).
pub const BASE_LAT: [[f64; 3]; 2] = [[6.8, 14.0, 8.4], [6.6, 14.0, 8.4]];

/// Per-hop latencies [NVLink, PCI, network][tree, ring][protocol] (µs; `src/graph/tuning.cc`,
/// `hwLat`).
pub const HW_LAT: [[[f64; 3]; 2]; 3] = [
    [[0.6, 1.25, 4.0], [0.6, 1.9, 3.4]],
    [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7]],
    [[5.0, 8.5, 14.0], [2.7, 4.0, 14.0]],
];

/// LL bus-bandwidth caps of a communicator [cc][nodes] (GB/s; `src/graph/tuning.cc`, `llMaxBws`).
/// Across nodes NCCL reads the first row whatever the GPU.
pub const LL_MAX: [[f64; 3]; 4] = [
    [39.0, 39.0, 20.4],
    [87.7, 22.5, 19.0],
    [141.0, 45.0, 35.0],
    [282.0, 90.0, 70.0],
];

/// Ring LL128 per-channel caps [cc][nodes] (GB/s; `src/graph/tuning.cc`, `perChMaxRingLL128Bws`).
pub const PER_CH_RING_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 36.7],
    [73.4, 34.6, 73.4],
];

/// Tree LL128 per-channel caps [cc][nodes] (GB/s; `src/graph/tuning.cc`, `perChMaxTreeLL128Bws`).
pub const PER_CH_TREE_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 29.0],
    [55.6, 31.67, 20.0],
];

/// Tree per-channel caps [cc][nodes] (GB/s; `src/graph/tuning.cc`, `perChMaxTreeBws`).
pub const PER_CH_TREE: [[f64; 3]; 4] = [
    [26.5, 18.5, 10.0],
    [24.0, 23.6, 17.8],
    [38.7, 41.4, 36.0],
    [70.0, 42.8, 24.0],
];

/// Tree all-reduce bandwidth correction [protocol][log2(bytes / 64)], index 0 = 64 B … 22 =
/// 256 MiB (`src/graph/tuning.cc`, `treeCorrectionFactor`, read in `ncclTopoGetAlgoTime`).
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

/// The fraction of a bus bandwidth LL128 keeps (`src/graph/tuning.cc`, `ncclTopoTuneModel`:
/// 120 of 128 bytes are data, the tuner rounds that down).
pub const LL128_BW_FACTOR: f64 = 0.92;
/// The fraction of a bus bandwidth LL keeps: half of every line is flag.
pub const LL_BW_FACTOR: f64 = 0.5;
/// Tree LL's divisor of the tree bandwidth (`src/graph/tuning.cc`, `ncclTopoTuneModel`).
pub const TREE_LL_DIVISOR: f64 = 3.8;
/// Tree LL128 on one node keeps 7/9 of the tree bandwidth, across nodes 120/128.
pub const TREE_LL128_INTRA: f64 = 7.0 / 9.0;
pub const TREE_LL128_INTER: f64 = 120.0 / 128.0;

/// Most threads of a channel [protocol] (`src/include/device.h`, `NCCL_LL_MAX_NTHREADS`,
/// `NCCL_LL128_MAX_NTHREADS`, `NCCL_SIMPLE_MAX_NTHREADS`).
pub const MAX_THREADS: [u32; 3] = [512, 640, 512];
/// Bytes each thread must have before another channel is used [protocol] (`src/include/comm.h`,
/// `NCCL_LL_THREAD_THRESHOLD` etc.; ring LL multiplies it by the rank count in
/// `src/graph/tuning.cc`, `ncclTopoTuneModel`).
pub const THREAD_THRESHOLD: [u64; 3] = [8, 8, 64];

/// Slots per connection (`src/include/device.h`, `NCCL_STEPS`).
pub const STEPS: u32 = 8;
/// Simple buffer per connection, 4 MiB, in [`STEPS`] slots: one step is 512 KiB (`src/init.cc`,
/// `computeBuffSizes`, `DEFAULT_BUFFSIZE`).
pub const SIMPLE_STEP_BYTES: u64 = 512 << 10;
/// Ring Simple all-reduce / all-gather / reduce-scatter: steps per chunk (`src/include/
/// collectives.h`, `ALLREDUCE_CHUNKSTEPS` = `NCCL_STEPS / 2`).
pub const RING_CHUNK_STEPS: u64 = 4;
/// LL line: 8 bytes, 4 of data and 4 of flag (`src/include/device.h`, `union ncclLLFifoLine`,
/// two such halves per 16-byte store).
pub const LL_LINE_BYTES: u64 = 8;
pub const LL_LINE_DATA_BYTES: u64 = 4;
/// LL payload per step: a 64 KiB step, half of it flags (`src/enqueue.cc`, `calcCollChunking`).
pub const LL_CHUNK_BYTES: u64 = 32 << 10;
/// LL step as it sits in the buffer, flags included: the LL buffer (8 lines of 16 bytes for
/// each of 512 threads, `DEFAULT_LL_BUFFSIZE` in `src/init.cc`) over [`STEPS`] slots, 64 KiB.
/// Point-to-point sizes its LL parts from it (`src/enqueue.cc`, `addP2pToPlan`).
pub const LL_STEP_BYTES: u64 = LL_CHUNK_BYTES * LL_LINE_BYTES / LL_LINE_DATA_BYTES;
/// LL128 line: 128 bytes, 120 of data (`src/include/device.h`, `NCCL_LL128_LINEELEMS`,
/// `NCCL_LL128_DATAELEMS`).
pub const LL128_LINE_BYTES: u64 = 128;
pub const LL128_LINE_DATA_BYTES: u64 = 120;
/// LL128 payload per step: a 614 400 B step, 15 of 16 words data (`src/enqueue.cc`,
/// `calcCollChunking`).
pub const LL128_CHUNK_BYTES: u64 = 576_000;

/// Point-to-point chunk on an all-NVLink host and elsewhere (`src/init.cc`,
/// `NCCL_P2P_NVL_CHUNKSIZE`, `NCCL_P2P_PCI_CHUNKSIZE`, `NCCL_P2P_NET_CHUNKSIZE`).
pub const P2P_NVL_CHUNK_BYTES: u64 = 512 << 10;
pub const P2P_OTHER_CHUNK_BYTES: u64 = 128 << 10;
/// LL while a transfer has at most this many bytes per channel a peer may use
/// (`src/enqueue.cc`, `NCCL_P2P_LL_THRESHOLD`, multiplied by `p2pnChannelsPerPeer`).
pub const P2P_LL_THRESHOLD: u64 = 16 << 10;
/// Point-to-point parts (one per channel) are aligned to 4 KiB (`src/enqueue.cc`,
/// `addP2pToPlan`).
pub const P2P_PART_ALIGN: u64 = 4 << 10;
/// Most threads of any NCCL kernel (`src/include/device.h`, `NCCL_MAX_NTHREADS`): what the
/// point-to-point kernel and every tree run.
pub const MAX_NTHREADS: u32 = 640;
/// Threads of NCCL's point-to-point kernel (`src/enqueue.cc`, `scheduleP2pTasksToPlan`).
pub const P2P_THREADS: u32 = MAX_NTHREADS;
/// A warp (`WARP_SIZE`).
pub const WARP: u32 = 32;
/// Most point-to-point channels (`src/include/device.h`, `MAXCHANNELS`;
/// `NCCL_MAX_P2P_NCHANNELS`).
pub const MAX_P2P_CHANNELS: u32 = 64;
