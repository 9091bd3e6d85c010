//! NCCL 2.28's rules over its tables: the tuning table of latency and bandwidth per algorithm
//! and protocol, the time of one pair at a size, the channels and threads a size runs on, the
//! chunk a protocol pipelines, and the point-to-point channel and chunk choices.

use super::*;
use crate::schedule::{Algorithm, CollectiveKind, Protocol};
use crate::tuner::Hw;
use serde::Serialize;

/// `floor(log2(x))`, 0 for `x <= 1` (NCCL's `log2i`).
pub fn log2i(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

/// The next power of two at or above `x` (NCCL's `pow2Up`).
pub fn pow2_up(x: u32) -> u32 {
    x.max(1).next_power_of_two()
}

/// Row of [`HW_LAT`] for a hop class.
pub fn hw_row(hw: Hw) -> usize {
    match hw {
        Hw::NvLink => 0,
        Hw::Pci => 1,
        Hw::Net => 2,
    }
}

/// NCCL's per-hop latency of `hw` for `algo` (0 tree, 1 ring) and `proto` (µs).
pub fn hw_lat(hw: Hw, algo: usize, proto: Protocol) -> f64 {
    HW_LAT[hw_row(hw)][algo][proto_idx(proto)]
}

/// NCCL's LL bus-bandwidth cap for a GPU generation and node count (GB/s, `llMaxBws`): the
/// per-GPU ceiling of LL's flag-polling copy loop, whatever the channel count.
pub fn ll_max_bw(sm: u32, nnodes: u32) -> f64 {
    let row = if nnodes <= 1 { cc_idx(sm) } else { 0 };
    LL_MAX[row][nodes_idx(nnodes)]
}

/// One of NCCL's graphs as its tuner sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Graph {
    /// Channels the search found (the tuner's bandwidth is `search_channels × bw`).
    pub search_channels: u32,
    pub bw_intra_gbps: f64,
    pub bw_inter_gbps: f64,
    pub hw_intra: Hw,
    pub lat_inter_us: f64,
}

/// What NCCL's tuner reads of a communicator (`src/graph/tuning.cc`, `ncclTopoTuneModel`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comm {
    pub nranks: u32,
    pub nnodes: u32,
    pub sm: u32,
    pub ring: Graph,
    pub tree: Graph,
    /// LL128 enabled (NVLink within a host, sm70 and later).
    pub ll128: bool,
}

/// A tuning table: (latency µs, algorithm bandwidth GB/s) per [tree, ring][protocol], `None`
/// where NCCL disables the pair.
pub type Table = [[Option<(f64, f64)>; 3]; 2];

impl Comm {
    fn ppn(&self) -> u32 {
        self.nranks.div_ceil(self.nnodes.max(1))
    }

    /// NCCL's tuning table for `kind` (what it prints with `NCCL_DEBUG_SUBSYS=TUNING`;
    /// `src/graph/tuning.cc`, `ncclTopoTuneModel`).
    pub fn table(&self, kind: CollectiveKind) -> Table {
        let mut out = [[None; 3]; 2];
        if self.nranks <= 1 || matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
            return out;
        }
        for (a, g) in [(0usize, &self.tree), (1, &self.ring)] {
            if a == 0 && kind != CollectiveKind::AllReduce {
                continue;
            }
            for p in Protocol::ALL {
                if p == Protocol::LL128 && !self.ll128 {
                    continue;
                }
                let bw = self.bandwidth(kind, a, g, p);
                out[a][proto_idx(p)] = Some((self.latency(kind, a, g, p), bw));
            }
        }
        out
    }

    fn nsteps(&self, kind: CollectiveKind) -> f64 {
        let n = self.nranks;
        (match kind {
            CollectiveKind::AllReduce => 2 * (n - 1),
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => n - 1,
            _ => n,
        }) as f64
    }

    /// Algorithm bandwidth of `algo` (0 tree, 1 ring) in `p` (GB/s).
    fn bandwidth(&self, kind: CollectiveKind, a: usize, g: &Graph, p: Protocol) -> f64 {
        let nnodes = self.nnodes;
        let cc = cc_idx(self.sm);
        let ni = nodes_idx(nnodes);
        let nch = g.search_channels as f64;
        let bw = if nnodes <= 2 {
            g.bw_intra_gbps
        } else {
            g.bw_inter_gbps
        };
        let bus = nch * bw;
        let ll_max = ll_max_bw(self.sm, nnodes);
        if a == 1 {
            let bus = match p {
                Protocol::LL => ll_max.min(bus * LL_BW_FACTOR),
                Protocol::LL128 => (bus * LL128_BW_FACTOR).min(nch * PER_CH_RING_LL128[cc][ni]),
                Protocol::Simple => bus,
            };
            return bus * self.nranks as f64 / self.nsteps(kind);
        }
        let bus = (bus * LL128_BW_FACTOR).min(nch * PER_CH_TREE[cc][ni]);
        let bus = match p {
            Protocol::LL => (bus / TREE_LL_DIVISOR).min(ll_max),
            Protocol::LL128 => {
                let f = if nnodes == 1 {
                    TREE_LL128_INTRA
                } else {
                    TREE_LL128_INTER
                };
                (bus * f).min(nch * PER_CH_TREE_LL128[cc][ni])
            }
            Protocol::Simple => bus,
        };
        bus * 0.5
    }

    /// Latency of `algo` (0 tree, 1 ring) in `p` (µs).
    fn latency(&self, kind: CollectiveKind, a: usize, g: &Graph, p: Protocol) -> f64 {
        let nnodes = self.nnodes;
        let pi = proto_idx(p);
        let intra_hw = if nnodes == 1 || g.hw_intra != Hw::Net {
            g.hw_intra
        } else {
            Hw::Pci
        };
        let mut intra = HW_LAT[hw_row(intra_hw)][a][pi];
        let mut inter = if self.ppn() == 1 {
            HW_LAT[2][0][pi]
        } else {
            HW_LAT[2][a][pi]
        } + g.lat_inter_us;
        if p == Protocol::Simple && nnodes > 1 {
            inter += g.lat_inter_us;
        }
        let lat = BASE_LAT[a][pi];
        if a == 0 {
            let levels = log2i(nnodes as u64) as f64;
            return lat + 2.0 * ((self.ppn() - 1) as f64 * intra + levels * inter.max(0.0));
        }
        if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
            // Same channels for every step: one hop's latency.
            let hw = if nnodes == 1 { intra_hw } else { Hw::Net };
            return lat + HW_LAT[hw_row(hw)][1][pi];
        }
        if nnodes > 1 {
            // The network's overhead per step (NCCL_NET_OVERHEAD's default).
            intra = intra.max(if p == Protocol::Simple { 3.0 } else { 1.0 });
        }
        let ninter = if nnodes == 1 {
            0.0
        } else if kind == CollectiveKind::AllReduce {
            2.0 * (nnodes - 1) as f64
        } else {
            (nnodes - 1) as f64
        };
        lat + (self.nsteps(kind) - ninter) * intra + ninter * inter
    }

    /// NCCL's time for one table entry at `bytes` (`src/graph/tuning.cc`,
    /// `ncclTopoGetAlgoTime`): the tree correction by size, and multi-node ring Simple
    /// all-reduce's latency factor. `channels` is `comm->nChannels`.
    pub fn time(
        &self,
        kind: CollectiveKind,
        tree: bool,
        p: Protocol,
        bytes: u64,
        entry: (f64, f64),
        channels: u32,
    ) -> f64 {
        let (mut lat, mut bw) = entry;
        if tree {
            bw *= tree_correction(p, bytes);
        }
        if !tree
            && p == Protocol::Simple
            && kind == CollectiveKind::AllReduce
            && self.nnodes > 1
            && bytes / (channels.max(1) as u64 * self.nranks as u64) >= 64
        {
            lat *= if self.sm < 80 { 1.9 } else { 1.4 };
        }
        lat + bytes as f64 / (1000.0 * bw)
    }
}

/// NCCL's tree bandwidth correction at `bytes`.
pub fn tree_correction(p: Protocol, bytes: u64) -> f64 {
    let i = log2i((bytes >> 6).max(1)).min(22) as usize;
    TREE_CORRECTION[proto_idx(p)][i]
}

/// Channels and threads per channel NCCL runs `algorithm` in `proto` on at `bytes`
/// (`src/enqueue.cc`, `topoGetAlgoInfo`): one channel less while the size is below `channels ×
/// threads × threshold`, then half the threads while that still holds. Ring LL's threshold is
/// multiplied by the rank count; ring Simple on slow graphs (≤ 12 GB/s in all) starts at 256
/// threads. A Simple ring then adds a sync warp, every call runs at least three warps, and a
/// tree runs [`MAX_NTHREADS`] (640) whatever the size. `max` is the communicator's channel
/// count.
pub fn channels_for(
    algorithm: &Algorithm,
    proto: Protocol,
    bytes: u64,
    max: u32,
    nranks: u32,
    graph_gbps: f64,
) -> (u32, u32) {
    let pi = proto_idx(proto);
    let ring = *algorithm == Algorithm::Ring;
    let mut nt = MAX_THREADS[pi] as u64;
    if ring && proto == Protocol::Simple && graph_gbps <= 12.0 {
        nt = 256;
    }
    let mut thr = THREAD_THRESHOLD[pi];
    if ring && proto == Protocol::LL {
        thr *= nranks.max(1) as u64;
    }
    let mut nc = max.max(1) as u64;
    while nc >= 2 && bytes < nc * nt * thr {
        nc -= 1;
    }
    while bytes < nc * nt * thr && nt.is_multiple_of(128) && nt > 96 {
        nt /= 2;
    }
    let warp = WARP as u64;
    if proto == Protocol::Simple {
        // A Simple ring adds a warp for the send flags; a tree four for its split halves.
        nt += if ring { warp } else { 4 * warp };
    }
    nt = nt.max(3 * warp);
    if *algorithm == Algorithm::Tree {
        // Both halves of a tree share one channel's threads: all of them, whatever the size.
        nt = MAX_NTHREADS as u64;
    }
    (nc as u32, nt as u32)
}

/// NCCL's chunk per loop for a ring or tree of `kind` in `proto` (`src/enqueue.cc`,
/// `calcCollChunking`): ring Simple all-reduce / all-gather / reduce-scatter take 4 steps of
/// 512 KiB, other Simple one step, LL 32 KiB, LL128 576 000 B.
pub fn chunk_bytes(a: &Algorithm, kind: CollectiveKind, proto: Protocol) -> u64 {
    match proto {
        Protocol::LL => LL_CHUNK_BYTES,
        Protocol::LL128 => LL128_CHUNK_BYTES,
        Protocol::Simple if ring_chunked(a, kind) => SIMPLE_STEP_BYTES * RING_CHUNK_STEPS,
        Protocol::Simple => SIMPLE_STEP_BYTES,
    }
}

/// Depth of NCCL's trees: the chain inside a host, then the double binary tree across hosts
/// (`src/graph/connect.cc`, `connectTrees`).
pub fn tree_depth(nranks: u32, nnodes: u32) -> u32 {
    let nnodes = nnodes.max(1);
    (nranks / nnodes).saturating_sub(1) + log2i(nnodes as u64)
}

/// Ring all-reduce, all-gather and reduce-scatter: NCCL's multi-step chunks
/// (`src/include/collectives.h`, `*_CHUNKSTEPS`).
pub fn ring_chunked(a: &Algorithm, kind: CollectiveKind) -> bool {
    *a == Algorithm::Ring
        && matches!(
            kind,
            CollectiveKind::AllReduce | CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        )
}

/// Slots in flight per connection: ring Simple's multi-step chunks take 4 of the 8 each.
pub fn slots(a: &Algorithm, kind: CollectiveKind, proto: Protocol) -> u32 {
    if ring_chunked(a, kind) && proto == Protocol::Simple {
        STEPS / RING_CHUNK_STEPS as u32
    } else {
        STEPS
    }
}

/// Point-to-point channels: in all, and per peer (`src/graph/paths.cc`,
/// `ncclTopoComputeP2pChannels`). On one all-NVLink host a peer gets two channels per NVLink
/// (`link_gbps` is one link's bandwidth), elsewhere two.
pub fn p2p_channels(comm_channels: u32, nvlink: Option<(f64, f64)>, nnodes: u32) -> (u32, u32) {
    let all = pow2_up(comm_channels.clamp(1, MAX_P2P_CHANNELS));
    let per_peer = match nvlink {
        Some((bw, link_gbps)) if nnodes == 1 => {
            let links = (bw / link_gbps).max(1.0);
            pow2_up((2.0 * links).round() as u32).min(all)
        }
        _ => 2u32.min(all),
    };
    (all, per_peer)
}

/// The point-to-point chunk: 512 KiB on an all-NVLink host, else 128 KiB.
pub fn p2p_chunk(all_nvlink: bool) -> u64 {
    if all_nvlink {
        P2P_NVL_CHUNK_BYTES
    } else {
        P2P_OTHER_CHUNK_BYTES
    }
}

/// The step a point-to-point transfer in `proto` sizes its parts from (`src/enqueue.cc`,
/// `addP2pToPlan`): the p2p chunk in Simple, the LL buffer's slot (64 KiB, flags included) in LL.
pub fn p2p_step_bytes(proto: Protocol, chunk: u64) -> u64 {
    match proto {
        Protocol::LL => LL_STEP_BYTES,
        _ => chunk,
    }
}

/// Channels one send (or receive) of `bytes` is striped over (`src/enqueue.cc`,
/// `addP2pToPlan`): start from the per-peer channels, halved until one transfer per peer fits
/// the p2p channels at once; use one channel per `min_part` bytes up to that; double (up to
/// the per-peer channels) while a part would exceed `max_part`. On one host parts are 1/8 to
/// 32 steps, across hosts 1/2 to 1 step; `step` is the protocol's ([`p2p_step_bytes`]).
pub fn p2p_op_channels(
    bytes: u64,
    per_peer: u32,
    all: u32,
    nranks: u32,
    nnodes: u32,
    step: u64,
) -> u32 {
    let max = per_peer.max(1);
    let mut min = max;
    while min * nranks.max(1) > all && min > 1 {
        min /= 2;
    }
    if bytes == 0 {
        return 1;
    }
    let (min_part, max_part) = if nnodes > 1 {
        (step / 2, step)
    } else {
        (step / 8, step * 32)
    };
    let mut nc = (min as u64).min(bytes.div_ceil(min_part.max(1))).max(1);
    let mut part = min_part.max(bytes.div_ceil(nc));
    while part > max_part && nc <= max as u64 / 2 {
        nc *= 2;
        part = bytes.div_ceil(nc);
    }
    nc as u32
}

/// Point-to-point protocol: LL while the transfer is at most [`P2P_LL_THRESHOLD`] bytes per
/// channel a peer may use (`per_peer`, `p2pnChannelsPerPeer`), whatever it is then striped
/// over; NCCL decides the protocol before the channels.
pub fn p2p_protocol(bytes: u64, per_peer: u32) -> Protocol {
    if bytes <= per_peer.max(1) as u64 * P2P_LL_THRESHOLD {
        Protocol::LL
    } else {
        Protocol::Simple
    }
}
