//! The tuner: for a collective and a message size, an estimated time for every algorithm ×
//! protocol the machine supports, and the fastest. The model is NCCL's latency/bandwidth model
//! (`tuner::nccl`, `docs/nccl-model.md`) with our direct and copy-engine patterns added; the terms fitted on a
//! machine come from its profile (`SystemModel::calib`, `profiles/`); `docs/tuner.md` states
//! every term and the fit.
//!
//! `time = launch + latency(algo, proto) + bytes / (bandwidth(algo, proto) × ramp(bytes))`
//! where `bytes` is the nccl-tests size of the operation.

mod calib;
pub mod nccl;
pub mod profile;

pub use calib::*;
use nccl::{
    cc_idx, hw_lat, ll_max_bw, nodes_idx, proto_idx, BASE_LAT, LL128_BW_FACTOR, LL_BW_FACTOR,
    PER_CH_RING_LL128, PER_CH_TREE, PER_CH_TREE_LL128, TREE_LL128_INTER, TREE_LL128_INTRA,
    TREE_LL_DIVISOR,
};
pub use profile::{Profile, ProfileChoice, ProfileError, ProfileSource, TunerParams};

use crate::schedule::{Algorithm, CollectiveKind, Protocol};
use serde::{Deserialize, Serialize};

/// The hardware class a channel's hops run over (NCCL's hw index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hw {
    NvLink,
    Pci,
    Net,
}

/// A set of channels the search found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelSet {
    pub count: u32,
    /// Bandwidth of one channel (GB/s) after link-sharing accounting.
    pub bw_gbps: f64,
    /// Worst intra-node hop class.
    pub intra: Hw,
}

/// What the tuner knows about the system: sizes, channel sets, direct-pattern capabilities.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemModel {
    pub nranks: u32,
    pub nnodes: u32,
    /// Compute capability × 10 of the slowest GPU.
    pub sm: u32,
    pub ring: Option<ChannelSet>,
    pub tree: Option<ChannelSet>,
    /// Every GPU pair is joined by NVLink (direct or NVSwitch) on a single host: direct
    /// (one-shot / two-shot) patterns are possible. The value is the smallest per-GPU NVLink
    /// bandwidth to all peers together (GB/s, one direction).
    pub all_peers_nvlink_gbps: Option<f64>,
    /// Extra per-hop latency of the network (µs), 0 on one host.
    pub net_lat_us: f64,
    /// Per-rank injection bandwidth of direct point-to-point patterns (GB/s): NVLink to all
    /// peers, else the slowest GPU-to-GPU path, capped by the host's NIC share across hosts.
    pub direct_gbps: f64,
    /// NIC bandwidth per GPU across hosts (GB/s, one direction); 0 on one host.
    #[serde(default)]
    pub nic_gbps_per_gpu: f64,
    /// The machine profile's fitted terms.
    #[serde(default = "bundled_calib")]
    pub calib: TunerParams,
    /// Spanning trees packed on one host (`planner::bound::pack`).
    #[serde(default)]
    pub packed: Option<PackedSet>,
}

/// What packed trees reach over the topology's paths.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PackedSet {
    /// Trees (= IR channels of all-gather and reduce-scatter; all-reduce uses two per tree).
    pub trees: u32,
    pub ag_busbw_gbps: f64,
    pub rs_busbw_gbps: f64,
    pub ar_busbw_gbps: f64,
    /// Deepest tree, in hops.
    pub depth: u32,
    pub intra: Hw,
}

fn bundled_calib() -> TunerParams {
    Profile::bundled().tuner.clone()
}

/// One candidate's estimate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    /// Predicted time (µs).
    pub time_us: f64,
    /// Its latency part (µs).
    pub lat_us: f64,
    /// Peak algorithm bandwidth the model allows (GB/s), before the size ramp.
    pub peak_algbw_gbps: f64,
}

/// Restricts the candidates like NCCL_ALGO / NCCL_PROTO: `None` allows everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub algorithms: Option<Vec<Algorithm>>,
    pub protocols: Option<Vec<Protocol>>,
}

impl Filter {
    pub fn allows(&self, a: &Algorithm, p: Protocol) -> bool {
        self.algorithms.as_ref().is_none_or(|v| v.contains(a))
            && self.protocols.as_ref().is_none_or(|v| v.contains(&p))
    }
}

fn log2i(x: u32) -> u32 {
    nccl::log2i(x as u64)
}

/// Channels NCCL would actually use for `bytes` on `set` (`nccl::channels_for`).
pub fn channels_for(
    m: &SystemModel,
    algorithm: &Algorithm,
    set: &ChannelSet,
    proto: Protocol,
    bytes: u64,
) -> u32 {
    let graph = set.bw_gbps * set.count as f64;
    nccl::channels_for(algorithm, proto, bytes, set.count, m.nranks, graph).0
}

/// Every feasible candidate for `kind` at `bytes` (nccl-tests size), unsorted.
pub fn candidates(m: &SystemModel, kind: CollectiveKind, bytes: u64, f: &Filter) -> Vec<Estimate> {
    let mut out = Vec::new();
    let c = &m.calib;
    let n = m.nranks.max(1);
    let b = bytes as f64;
    if n == 1 {
        // A local copy.
        out.push(Estimate {
            algorithm: Algorithm::Ring,
            protocol: Protocol::Simple,
            channels: 1,
            time_us: c.launch_us + b / 1000.0 / c.local_copy_gbps,
            lat_us: c.launch_us,
            peak_algbw_gbps: c.local_copy_gbps,
        });
        return out;
    }
    let nnodes = m.nnodes.max(1);
    let ppn = n.div_ceil(nnodes);
    let busf = kind.busbw_factor(n);
    let mut push_r = |algorithm: Algorithm,
                      protocol: Protocol,
                      channels: u32,
                      lat: f64,
                      algbw: f64,
                      ramp: f64| {
        if algbw > 0.0 && f.allows(&algorithm, protocol) {
            out.push(Estimate {
                time_us: c.launch_us + lat + b / 1000.0 / (algbw * ramp),
                lat_us: c.launch_us + lat,
                algorithm,
                protocol,
                channels,
                peak_algbw_gbps: algbw,
            });
        }
    };
    let llmax = ll_max_bw(m.sm, nnodes);
    let cc = cc_idx(m.sm);
    let ni = nodes_idx(nnodes);
    // Ring: every collective but all-to-all and send/recv.
    if let Some(r) = &m.ring {
        if !matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
            let nsteps = match kind {
                CollectiveKind::AllReduce => 2 * (n - 1),
                _ => n - 1,
            };
            let ninter = if nnodes == 1 {
                0
            } else if kind == CollectiveKind::AllReduce {
                2 * (nnodes - 1)
            } else {
                nnodes - 1
            };
            for p in Protocol::ALL {
                let nc = channels_for(m, &Algorithm::Ring, r, p, bytes);
                let mut bus = nc as f64 * r.bw_gbps * c.coll_eff[coll_idx(kind)];
                bus = match p {
                    Protocol::LL => llmax.min(bus * LL_BW_FACTOR),
                    Protocol::LL128 => {
                        (bus * LL128_BW_FACTOR).min(nc as f64 * PER_CH_RING_LL128[cc][ni])
                    }
                    Protocol::Simple => bus,
                };
                let intra = hw_lat(r.intra, 1, p);
                let inter = hw_lat(Hw::Net, 1, p) + m.net_lat_us;
                let lat = BASE_LAT[1][proto_idx(p)]
                    + (nsteps - ninter) as f64 * intra
                    + ninter as f64 * inter;
                push_r(
                    Algorithm::Ring,
                    p,
                    nc,
                    lat,
                    bus / busf.max(1e-9),
                    ramp(c, p, bytes),
                );
            }
        }
    }
    // Hierarchical all-reduce: ring reduce-scatter in each host, ring all-reduce of each GPU's
    // 1/L piece across hosts on its own rail, ring all-gather in each host; phases in sequence.
    if let Some(r) = &m.ring {
        if kind == CollectiveKind::AllReduce && nnodes > 1 && m.nic_gbps_per_gpu > 0.0 {
            let (l, h) = (ppn as f64, nnodes as f64);
            for p in Protocol::ALL {
                let nc = channels_for(m, &Algorithm::Hierarchical, r, p, bytes);
                let eff = match p {
                    Protocol::LL => LL_BW_FACTOR,
                    Protocol::LL128 => LL128_BW_FACTOR,
                    Protocol::Simple => 1.0,
                };
                let intra_bw = nc as f64 * r.bw_gbps * eff;
                let inter_bw = (nc as f64 * r.bw_gbps).min(m.nic_gbps_per_gpu) * eff;
                // Seconds per byte of S, as an algorithm bandwidth.
                let per_byte =
                    2.0 * (l - 1.0) / l / intra_bw + 2.0 * (h - 1.0) / h / (l * inter_bw);
                let mut algbw = 1.0 / per_byte;
                if p == Protocol::LL {
                    algbw = algbw.min(llmax);
                }
                let lat = BASE_LAT[1][proto_idx(p)]
                    + 2.0 * (l - 1.0) * hw_lat(r.intra, 1, p)
                    + 2.0 * (h - 1.0) * (hw_lat(Hw::Net, 1, p) + m.net_lat_us);
                push_r(
                    Algorithm::Hierarchical,
                    p,
                    nc,
                    lat,
                    algbw,
                    ramp(c, p, bytes),
                );
            }
        }
    }
    // Tree: all-reduce (reduce up, broadcast down; each link carries the data once each way).
    if let Some(t) = &m.tree {
        if kind == CollectiveKind::AllReduce {
            for p in Protocol::ALL {
                let nc = channels_for(m, &Algorithm::Tree, t, p, bytes);
                // One host: a chain carries the data once each way per link. Across hosts a
                // double binary tree's interior host forwards to two children and a parent, so
                // its NICs carry twice the data (`src/graph/trees.cc`, `ncclGetDtree`).
                let fanout = if nnodes > 1 { 0.5 } else { 1.0 };
                let mut bw = nc as f64 * t.bw_gbps * LL128_BW_FACTOR * fanout;
                bw = bw.min(nc as f64 * PER_CH_TREE[cc][ni]);
                bw = match p {
                    Protocol::LL => (bw / TREE_LL_DIVISOR).min(llmax),
                    Protocol::LL128 => (bw
                        * if nnodes == 1 {
                            TREE_LL128_INTRA
                        } else {
                            TREE_LL128_INTER
                        })
                    .min(nc as f64 * PER_CH_TREE_LL128[cc][ni]),
                    Protocol::Simple => bw,
                };
                let intra = hw_lat(t.intra, 0, p);
                let inter = hw_lat(Hw::Net, 0, p) + m.net_lat_us;
                let lat = BASE_LAT[0][proto_idx(p)]
                    + 2.0 * ((ppn - 1) as f64 * intra + log2i(nnodes) as f64 * inter);
                push_r(Algorithm::Tree, p, nc, lat, bw, ramp(c, p, bytes));
            }
        }
    }
    // Packed trees: the busbw their link loads allow, with the protocols' efficiencies as for
    // rings; a tree's depth in hops is its latency (twice for all-reduce's two halves).
    if let Some(pk) = &m.packed {
        let (bus, halves) = match kind {
            CollectiveKind::AllGather => (pk.ag_busbw_gbps, 1.0),
            CollectiveKind::ReduceScatter => (pk.rs_busbw_gbps, 1.0),
            CollectiveKind::AllReduce => (pk.ar_busbw_gbps, 2.0),
            _ => (0.0, 1.0),
        };
        for p in Protocol::ALL {
            let b = bus * c.coll_eff[coll_idx(kind)];
            let b = match p {
                Protocol::LL => llmax.min(b * 0.5),
                Protocol::LL128 => b * 0.92,
                Protocol::Simple => b,
            };
            let lat = BASE_LAT[0][proto_idx(p)] + halves * pk.depth as f64 * hw_lat(pk.intra, 0, p);
            push_r(
                Algorithm::Packed,
                p,
                pk.trees,
                lat,
                b / busf.max(1e-9),
                ramp(c, p, bytes),
            );
        }
    }
    // Direct patterns on an all-NVLink host: what topoplan's direct-push executor measured
    // (the profile's `direct_*` terms), and its copy-engine pair all-reduce (`ce_*`).
    if let Some(gbw) = m.all_peers_nvlink_gbps {
        let peer = gbw * c.direct_peer_eff; // what the senders' stores achieve, all peers at once
        let extra = c.direct_peer_us * (n as f64 - 2.0).max(0.0);
        let nf = n as f64;
        // One-shot: every rank pushes its block to every peer; AR/RS reduce on the receiver.
        let (one_algbw, ok) = match kind {
            CollectiveKind::AllReduce => (peer / (nf - 1.0), true),
            CollectiveKind::AllGather => (peer * nf / (nf - 1.0), true),
            CollectiveKind::ReduceScatter => (peer * nf / (nf - 1.0), true),
            CollectiveKind::Broadcast => (peer / (nf - 1.0), true),
            CollectiveKind::Reduce => (peer / (nf - 1.0), true),
            CollectiveKind::AllToAll => (gbw * c.sm_peer_eff * nf / (nf - 1.0), true),
            CollectiveKind::SendRecv => (gbw * c.sm_peer_eff, true),
        };
        if ok {
            let algo = match kind {
                CollectiveKind::AllToAll | CollectiveKind::SendRecv => Algorithm::Direct,
                _ => Algorithm::OneShot,
            };
            for p in [Protocol::LL, Protocol::Simple] {
                if algo == Algorithm::Direct {
                    // All-to-all and send/recv run on the generic executor: probe rates and
                    // an estimated flag round, not the direct-push fit.
                    let bw = if p == Protocol::LL {
                        one_algbw.min(llmax) * 0.5
                    } else {
                        one_algbw
                    };
                    let lat = c.direct_sync_us + extra + BASE_LAT[1][proto_idx(p)] * 0.5;
                    push_r(algo.clone(), p, 1, lat, bw, 1.0);
                    continue;
                }
                if p == Protocol::Simple
                    && kind == CollectiveKind::AllReduce
                    && (c.pull_min_bytes..=c.pull_max_bytes).contains(&bytes)
                {
                    // The runtime runs this one-shot in pull mode (in one process): every rank
                    // loads its peers' inputs, behind two per-CTA handshakes.
                    let bw = gbw * c.pull_eff / (nf - 1.0);
                    push_r(algo.clone(), p, 1, c.pull_lat_us + extra, bw, 1.0);
                    continue;
                }
                if p == Protocol::Simple
                    && n == 2
                    && kind == CollectiveKind::AllReduce
                    && bytes >= c.hybrid_min_bytes
                {
                    // The runtime runs this one-shot as its hybrid (half on the copy engines).
                    push_r(algo.clone(), p, 1, c.hybrid_lat_us, gbw * c.hybrid_eff, 1.0);
                    continue;
                }
                // LL's cap bounds what one GPU sends; a collective's algorithm bandwidth is
                // `one_algbw / peer` times that.
                let bw = if p == Protocol::LL {
                    one_algbw * c.direct_ll_fraction.min(llmax / peer.max(1e-9))
                } else {
                    one_algbw
                };
                let lat = c.direct_lat_us[proto_idx(p)] + extra;
                push_r(algo.clone(), p, 1, lat, bw, direct_ramp(c, p, bytes));
            }
        }
        if kind == CollectiveKind::AllReduce {
            // Two-shot: reduce-scatter then all-gather, each moving (n−1)/n of the data.
            let bw = peer * nf / (2.0 * (nf - 1.0));
            push_r(
                Algorithm::TwoShot,
                Protocol::Simple,
                1,
                2.0 * (c.direct_lat_us[2] + extra),
                bw,
                direct_ramp(c, Protocol::Simple, bytes),
            );
            if n == 2 {
                // Chunked peer copies as the runtime cuts them: a fixed cost per chunk, the
                // last (smallest) chunk's reduce exposed.
                let ce = gbw * c.ce_eff;
                let chunks = ce_chunks(c, bytes) as f64;
                let time = chunks * c.ce_copy_overhead_us + b / 1000.0 / ce;
                let tail =
                    bytes.min(c.ce_min_chunk_bytes) as f64 * 3.0 / 1000.0 / c.local_copy_gbps;
                push_r(
                    Algorithm::CopyEnginePipeline,
                    Protocol::Simple,
                    2,
                    c.ce_launch_us + tail,
                    b / 1000.0 / time.max(1e-9),
                    1.0,
                );
            }
        }
    }
    // Point-to-point patterns without all-peer NVLink (PCIe machines, clusters).
    if m.all_peers_nvlink_gbps.is_none()
        && matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv)
    {
        let nf = n as f64;
        let bw = m.direct_gbps * c.sm_peer_eff;
        let algbw = if kind == CollectiveKind::AllToAll {
            bw * nf / (nf - 1.0)
        } else {
            bw
        };
        let net = if nnodes > 1 {
            hw_lat(Hw::Net, 1, Protocol::Simple) + m.net_lat_us
        } else {
            0.0
        };
        push_r(
            Algorithm::Direct,
            Protocol::Simple,
            1,
            c.direct_sync_us
                + c.direct_peer_us * (n as f64 - 2.0).max(0.0)
                + BASE_LAT[1][2] * 0.5
                + net,
            algbw,
            1.0,
        );
    }
    out
}

/// Chunks the copy-engine pair all-reduce cuts a message of `bytes` into (`cuda::
/// ce_pair::chunks`): `ce_chunk_bytes` each, halving towards the end down to
/// `ce_min_chunk_bytes`.
pub fn ce_chunks(c: &TunerParams, bytes: u64) -> u64 {
    let (mut left, mut t, mut n) = (bytes, c.ce_min_chunk_bytes.max(1), 0);
    while left > 0 {
        left -= t.min(left);
        n += 1;
        t = (2 * t).min(c.ce_chunk_bytes.max(1));
    }
    n
}

/// The fastest candidate (ties: first in algorithm order).
pub fn best(m: &SystemModel, kind: CollectiveKind, bytes: u64, f: &Filter) -> Option<Estimate> {
    candidates(m, kind, bytes, f)
        .into_iter()
        .min_by(|a, b| a.time_us.total_cmp(&b.time_us))
}
