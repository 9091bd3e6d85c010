//! NCCL 2.28's own choices on any topology, and their simulated time (`topoplan sim --as
//! nccl`). The choice is NCCL's: its ring and tree graphs (the planner's NCCL-style search,
//! with NCCL's post-search channel doubling), its tuner's latency/bandwidth model per algorithm
//! and protocol (`nccl-2.28-facts.md` §5), its channel and thread count per size (§5.7), its
//! chunk and slot sizes (§6.1). The time is the detailed engine's (or the aggregated model's at
//! scale) running that ring or tree schedule with the machine profile's protocol costs;
//! point-to-point (send/recv, all-to-all) is priced from NCCL's p2p channels and chunks
//! (§6.3). NVLS and CollNet are out of scope: a choice says when NCCL would consider them.

pub mod tables;

use crate::{simulate, SimConfig, SimError, SimResult};
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, OpKind, Protocol, Schedule};
use planner::topology::{NodeKind, Topology};
use planner::tuner::{Filter, Hw};
use serde::Serialize;
use tables::*;

/// Cuts a ring or tree schedule the way NCCL does (§6.1): the chunk per loop of its protocol
/// (ring Simple all-reduce / all-gather / reduce-scatter: 4 steps of 512 KiB; other Simple:
/// one step; LL 32 KiB; LL128 576 000 B) and 8 slots per connection (ring Simple: 2 chunks).
/// Schedules of other algorithms are left as they are.
pub fn chunk(s: &mut Schedule, elem_bytes: u32) {
    if !matches!(s.algorithm, Algorithm::Ring | Algorithm::Tree) {
        return;
    }
    let bytes = chunk_bytes(&s.algorithm, s.collective.kind, s.protocol);
    s.loop_elems = Some(bytes / elem_bytes.max(1) as u64 * s.chunks_per_block as u64);
    s.slots = if ring_chunked(&s.algorithm, s.collective.kind) && s.protocol == Protocol::Simple {
        STEPS / RING_CHUNK_STEPS as u32
    } else {
        STEPS
    };
}

/// Ring all-reduce, all-gather and reduce-scatter: NCCL's multi-step chunks.
fn ring_chunked(a: &Algorithm, kind: CollectiveKind) -> bool {
    *a == Algorithm::Ring
        && matches!(
            kind,
            CollectiveKind::AllReduce | CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        )
}

/// NCCL's chunk per loop (§6.1) for a ring or tree of `kind` in `proto`.
pub fn chunk_bytes(a: &Algorithm, kind: CollectiveKind, proto: Protocol) -> u64 {
    match proto {
        Protocol::LL => LL_CHUNK_BYTES,
        Protocol::LL128 => LL128_CHUNK_BYTES,
        Protocol::Simple if ring_chunked(a, kind) => SIMPLE_STEP_BYTES * RING_CHUNK_STEPS,
        Protocol::Simple => SIMPLE_STEP_BYTES,
    }
}

/// The size at which the profile's ramp is read for a channel carrying `channel_bytes` in
/// `chunk` byte chunks. The ramp was fitted on rings of 2 MiB chunks running all `channels` of
/// the communicator, so it is taken as a function of the chunks a channel pipelines: a channel
/// of smaller chunks (broadcast, reduce, trees, p2p: 512 KiB) is as far up the ramp as a ring
/// channel with as many chunks.
fn ramp_size(channel_bytes: u64, chunk: u64, channels: u32) -> u64 {
    let reference = SIMPLE_STEP_BYTES * RING_CHUNK_STEPS;
    (channel_bytes as f64 * channels.max(1) as f64 * reference as f64 / chunk.max(1) as f64)
        .min(u64::MAX as f64) as u64
}

/// Whether every rank of `s` only sends or only receives (a two-rank broadcast or reduce): its
/// GPUs' links carry the data one way.
fn one_way(s: &Schedule) -> bool {
    s.ranks.iter().all(|r| {
        let ops = || r.channels.iter().flat_map(|c| c.ops.iter());
        !(ops().any(|o| o.kind.sends()) && ops().any(|o| o.kind.receives()))
    })
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

/// What NCCL knows about a machine when it tunes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Model {
    pub nranks: u32,
    pub nnodes: u32,
    pub sm: u32,
    pub ring: Graph,
    pub tree: Graph,
    /// Channels collectives run on (`comm->nChannels`, after the doubling).
    pub comm_channels: u32,
    /// Tree channels the planner built (a pair per search channel).
    pub tree_channels: u32,
    pub ll128: bool,
    /// NVSwitch on sm90+ with more than two GPUs per host: NCCL would consider NVLS.
    pub nvls_possible: bool,
    /// Every GPU pair of the host is NVLinked: p2p uses 512 KiB chunks and NVLink channels.
    pub all_nvlink_gbps: Option<f64>,
    /// Point-to-point channels per peer and in all.
    pub p2p_channels_per_peer: u32,
    pub p2p_channels: u32,
    /// Slowest GPU-to-GPU path of a host (GB/s), NIC bandwidth per GPU across hosts.
    pub peer_gbps: f64,
    pub nic_gbps_per_gpu: f64,
}

/// NCCL's algorithms this module runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algo {
    Ring,
    Tree,
    /// Point-to-point (send/recv, all-to-all): no tuner, p2p channels.
    P2p,
}

impl Algo {
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::Tree => "tree",
            Algo::P2p => "p2p",
        }
    }
}

/// NCCL's choice for one collective and size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    pub algo: Algo,
    pub protocol: Protocol,
    pub channels: u32,
    pub threads: u32,
    /// NCCL's own estimate (its tuner's time, µs; launch not included, as in NCCL).
    pub model_us: f64,
    /// What is out of scope here (NVLS, CollNet) when NCCL would consider it.
    pub notes: Vec<String>,
}

/// A simulated NCCL run.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub choice: Choice,
    pub time_us: f64,
    pub events: u64,
    pub mode: crate::Mode,
}

fn hw_row(hw: Hw) -> usize {
    match hw {
        Hw::NvLink => 0,
        Hw::Pci => 1,
        Hw::Net => 2,
    }
}

fn pidx(p: Protocol) -> usize {
    match p {
        Protocol::LL => 0,
        Protocol::LL128 => 1,
        Protocol::Simple => 2,
    }
}

fn log2i(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

fn pow2_up(x: u32) -> u32 {
    x.max(1).next_power_of_two()
}

impl Model {
    /// NCCL's view of `t`, from the planner's search of it.
    pub fn new(t: &Topology, p: &Planner) -> Self {
        let ch = p.channels();
        let m = p.model();
        let n = m.nranks.max(1);
        let nnodes = m.nnodes.max(1);
        let ppn = n.div_ceil(nnodes);
        let ring = Graph {
            search_channels: ch.ring.count.max(1),
            bw_intra_gbps: ch.ring.bw_gbps,
            bw_inter_gbps: ch.ring.bw_gbps,
            hw_intra: ch.ring.intra,
            lat_inter_us: m.net_lat_us,
        };
        // NCCL's tree graph has the ring's channel count (min = max = ring channels); on one
        // host its speed is the fastest whose total fits the GPU's bandwidth scaled by
        // n/(n−1) (a chain's ends use one direction of their links).
        let total = m
            .all_peers_nvlink_gbps
            .unwrap_or(ch.ring.count as f64 * ch.ring.bw_gbps);
        let tree_bw = if nnodes == 1 && ppn > 1 {
            let scaled = total * ppn as f64 / (ppn - 1) as f64;
            intra_speeds(m.sm)
                .iter()
                .copied()
                .find(|&s| s <= total + 1e-9 && s * ring.search_channels as f64 <= scaled + 1e-9)
                .unwrap_or(ch.ring.bw_gbps)
        } else {
            ch.ring.bw_gbps
        };
        let tree = Graph {
            bw_intra_gbps: tree_bw,
            bw_inter_gbps: tree_bw.min(ch.ring.bw_gbps.max(tree_bw)),
            ..ring.clone()
        };
        let nvswitch = t
            .graph
            .node_weights()
            .any(|w| matches!(w.kind, NodeKind::NvSwitch));
        let comm_channels = ch.rings.len() as u32;
        let p2p_channels = pow2_up(comm_channels.clamp(1, MAX_P2P_CHANNELS));
        let per_peer = match m.all_peers_nvlink_gbps {
            Some(bw) if nnodes == 1 => {
                let links = (bw / NVLINK_LINK_GBPS_SM90).max(1.0);
                pow2_up((2.0 * links).round() as u32).min(p2p_channels)
            }
            _ => 2u32.min(p2p_channels),
        };
        Model {
            nranks: n,
            nnodes,
            sm: m.sm,
            ll128: m.sm >= 70 && ch.ring.intra == Hw::NvLink,
            nvls_possible: nvswitch && m.sm >= 90 && ppn > 2,
            all_nvlink_gbps: m.all_peers_nvlink_gbps,
            comm_channels,
            tree_channels: ch.trees.len() as u32,
            ring,
            tree,
            p2p_channels_per_peer: per_peer,
            p2p_channels,
            peer_gbps: m.direct_gbps,
            nic_gbps_per_gpu: m.nic_gbps_per_gpu,
        }
    }

    fn ppn(&self) -> u32 {
        self.nranks.div_ceil(self.nnodes.max(1))
    }

    /// NCCL's tuning table for `kind`: (latency µs, algorithm bandwidth GB/s) for
    /// [tree, ring] × [LL, LL128, Simple], `None` where NCCL disables the pair (what it prints
    /// with `NCCL_DEBUG_SUBSYS=TUNING`).
    pub fn table(&self, kind: CollectiveKind) -> [[Option<(f64, f64)>; 3]; 2] {
        let mut out = [[None; 3]; 2];
        let n = self.nranks;
        if n <= 1 || matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
            return out;
        }
        let nnodes = self.nnodes;
        let ppn = self.ppn();
        let cc = cc_idx(self.sm);
        let ni = nodes_idx(nnodes);
        let ll_max = LL_MAX[if nnodes == 1 { cc } else { 0 }][ni];
        let nsteps = match kind {
            CollectiveKind::AllReduce => 2 * (n - 1),
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => n - 1,
            _ => n,
        } as f64;
        for (a, g) in [(0usize, &self.tree), (1, &self.ring)] {
            if a == 0 && kind != CollectiveKind::AllReduce {
                continue;
            }
            for p in Protocol::ALL {
                let pi = pidx(p);
                if p == Protocol::LL128 && !self.ll128 {
                    continue;
                }
                let nch = g.search_channels as f64;
                let bw = if nnodes <= 2 {
                    g.bw_intra_gbps
                } else {
                    g.bw_inter_gbps
                };
                let mut bus = nch * bw;
                if a == 1 {
                    bus = match p {
                        Protocol::LL => ll_max.min(bus * 0.5),
                        Protocol::LL128 => (bus * 0.92).min(nch * PER_CH_RING_LL128[cc][ni]),
                        Protocol::Simple => bus,
                    };
                } else {
                    bus = (bus * 0.92).min(nch * PER_CH_TREE[cc][ni]);
                    bus = match p {
                        Protocol::LL => (bus / 3.8).min(ll_max),
                        Protocol::LL128 => (bus
                            * if nnodes == 1 {
                                7.0 / 9.0
                            } else {
                                120.0 / 128.0
                            })
                        .min(nch * PER_CH_TREE_LL128[cc][ni]),
                        Protocol::Simple => bus,
                    };
                }
                let alg = if a == 1 {
                    bus * n as f64 / nsteps
                } else {
                    bus * 0.5
                };
                // Latency.
                let intra_hw = if nnodes == 1 || g.hw_intra != Hw::Net {
                    g.hw_intra
                } else {
                    Hw::Pci
                };
                let mut intra = HW_LAT[hw_row(intra_hw)][a][pi];
                let mut inter = if ppn == 1 {
                    HW_LAT[2][0][pi]
                } else {
                    HW_LAT[2][a][pi]
                } + g.lat_inter_us;
                if p == Protocol::Simple && nnodes > 1 {
                    inter += g.lat_inter_us;
                }
                let mut lat = BASE_LAT[a][pi];
                if a == 1 {
                    if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
                        // sameChannels: one hop's latency.
                        let hw = if nnodes == 1 { intra_hw } else { Hw::Net };
                        lat += HW_LAT[hw_row(hw)][1][pi];
                    } else {
                        let overhead = if nnodes > 1 {
                            if p == Protocol::Simple {
                                3.0
                            } else {
                                1.0
                            }
                        } else {
                            0.0
                        };
                        intra = intra.max(overhead);
                        let ninter = if nnodes == 1 {
                            0.0
                        } else if kind == CollectiveKind::AllReduce {
                            2.0 * (nnodes - 1) as f64
                        } else {
                            (nnodes - 1) as f64
                        };
                        lat += (nsteps - ninter) * intra + ninter * inter;
                    }
                } else {
                    inter = inter.max(0.0);
                    lat += 2.0 * ((ppn - 1) as f64 * intra + log2i(nnodes as u64) as f64 * inter);
                }
                out[a][pi] = Some((lat, alg));
            }
        }
        out
    }

    /// NCCL's choice for `kind` at `bytes` (nccl-tests size) among what `f` allows
    /// (`NCCL_ALGO` / `NCCL_PROTO`: ring, tree; LL, LL128, Simple).
    pub fn choose(&self, kind: CollectiveKind, bytes: u64, f: &Filter) -> Option<Choice> {
        let mut notes = Vec::new();
        if self.nvls_possible
            && matches!(
                kind,
                CollectiveKind::AllReduce
                    | CollectiveKind::AllGather
                    | CollectiveKind::ReduceScatter
            )
        {
            notes.push(
                "NCCL would also consider NVLS (NVLink SHARP) on this NVSwitch machine where the GPUs support multicast; NVLS is out of scope, the best ring/tree is shown".into(),
            );
        }
        if self.nnodes > 1 && kind == CollectiveKind::AllReduce {
            notes.push(
                "with a SHARP-capable network plugin NCCL would also consider CollNet; out of scope".into(),
            );
        }
        if matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
            let per_peer = self.p2p_bytes_per_peer(kind, bytes);
            let channels = self.p2p_op_channels(per_peer);
            // LL while every channel of the transfer carries at most the LL threshold.
            let proto = if per_peer <= channels as u64 * P2P_LL_THRESHOLD {
                Protocol::LL
            } else {
                Protocol::Simple
            };
            return Some(Choice {
                algo: Algo::P2p,
                protocol: proto,
                channels,
                threads: P2P_THREADS,
                model_us: 0.0,
                notes,
            });
        }
        let table = self.table(kind);
        let mut best: Option<(f64, Algo, Protocol)> = None;
        for (a, algo) in [(0usize, Algo::Tree), (1, Algo::Ring)] {
            let alg = if a == 0 {
                Algorithm::Tree
            } else {
                Algorithm::Ring
            };
            for p in Protocol::ALL {
                if !f.allows(&alg, p) {
                    continue;
                }
                let Some((lat, mut bw)) = table[a][pidx(p)] else {
                    continue;
                };
                if bw <= 0.0 {
                    continue;
                }
                if a == 0 {
                    let i = log2i((bytes >> 6).max(1)).min(22) as usize;
                    bw *= TREE_CORRECTION[pidx(p)][i];
                }
                let mut lat = lat;
                if a == 1
                    && p == Protocol::Simple
                    && kind == CollectiveKind::AllReduce
                    && self.nnodes > 1
                    && bytes / (self.comm_channels.max(1) as u64 * self.nranks as u64) >= 64
                {
                    lat *= if self.sm < 80 { 1.9 } else { 1.4 };
                }
                let time = lat + bytes as f64 / (1000.0 * bw);
                if best.is_none_or(|b| time < b.0) {
                    best = Some((time, algo, p));
                }
            }
        }
        let (time, algo, proto) = best?;
        let (channels, threads) = self.channels_for(algo, proto, bytes);
        Some(Choice {
            algo,
            protocol: proto,
            channels,
            threads,
            model_us: time,
            notes,
        })
    }

    /// NCCL's channel and thread count for a size (§5.7).
    pub fn channels_for(&self, algo: Algo, proto: Protocol, bytes: u64) -> (u32, u32) {
        let pi = pidx(proto);
        let mut nt = MAX_THREADS[pi] as u64;
        if algo == Algo::Ring
            && proto == Protocol::Simple
            && self.ring.bw_intra_gbps * self.ring.search_channels as f64 <= 12.0
        {
            nt = 256;
        }
        let mut thr = THREAD_THRESHOLD[pi];
        if algo == Algo::Ring && proto == Protocol::LL {
            thr *= self.nranks as u64;
        }
        let max = match algo {
            Algo::Tree => self.comm_channels.min(self.tree_channels.max(1)),
            _ => self.comm_channels,
        };
        let mut nc = max.max(1) as u64;
        while nc >= 2 && bytes < nc * nt * thr {
            nc -= 1;
        }
        while bytes < nc * nt * thr && nt.is_multiple_of(128) && nt > 96 {
            nt /= 2;
        }
        (nc as u32, nt as u32)
    }

    fn p2p_bytes_per_peer(&self, kind: CollectiveKind, bytes: u64) -> u64 {
        match kind {
            CollectiveKind::AllToAll => bytes / self.nranks.max(1) as u64,
            _ => bytes,
        }
    }

    fn p2p_chunk(&self) -> u64 {
        if self.all_nvlink_gbps.is_some() {
            P2P_NVL_CHUNK_BYTES
        } else {
            P2P_OTHER_CHUNK_BYTES
        }
    }

    /// Channels one send (or receive) of `bytes` is striped over, NCCL's rule (`addP2pToPlan`):
    /// start from the per-peer channels, halved until one transfer per peer fits the p2p
    /// channels at once; use one channel per `min_part` bytes up to that; double (up to the
    /// per-peer channels) while a part would exceed `max_part`. On one host parts are 1/8 to
    /// 32 chunks, across hosts 1/2 to 1 chunk.
    pub fn p2p_op_channels(&self, bytes: u64) -> u32 {
        let max = self.p2p_channels_per_peer.max(1);
        let mut min = max;
        while min * self.nranks.max(1) > self.p2p_channels && min > 1 {
            min /= 2;
        }
        if bytes == 0 {
            return 1;
        }
        let step = self.p2p_chunk();
        let (min_part, max_part) = if self.nnodes > 1 {
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

    /// Point-to-point time. Every peer's bytes are cut into `c.channels` parts (4 KiB
    /// aligned), one per channel; a channel moves its part in chunks through its slots at the
    /// profile's per-channel rate (Simple and LL128 with the rings' size ramp, `ramp_size`),
    /// all channels of a GPU sharing its links (and its NIC across hosts). All-to-all's copy to self runs on
    /// other warps of the same kernel at local memory speed and hides behind the peers' parts.
    fn p2p_time(&self, kind: CollectiveKind, bytes: u64, c: &Choice, cfg: &SimConfig) -> f64 {
        let n = self.nranks.max(1) as u64;
        let per_peer = self.p2p_bytes_per_peer(kind, bytes);
        let peers = if kind == CollectiveKind::AllToAll {
            n - 1
        } else {
            1
        };
        let parts = c.channels.max(1) as u64;
        let part = per_peer.div_ceil(parts).div_ceil(P2P_PART_ALIGN) * P2P_PART_ALIGN;
        let part = part.min(per_peer);
        let step = if c.protocol == Protocol::LL {
            LL_CHUNK_BYTES
        } else {
            self.p2p_chunk()
        };
        let cfg = cfg.with_nccl_ramp(ramp_size(part, step, self.comm_channels));
        let pp = cfg.proto(c.protocol);
        let wire = pp.wire_factor.max(1e-9);
        let in_use = (parts * peers).min(self.p2p_channels as u64).max(1);
        // Channels carrying several peers' parts share their warps among them.
        let per_channel = pp.channel_gbps * in_use as f64 / (parts * peers) as f64;
        let link = self.all_nvlink_gbps.unwrap_or(self.peer_gbps) * cfg.sm_link_efficiency;
        let rate = (in_use as f64 * pp.channel_gbps).min(link) / wire;
        let out_bytes = (per_peer * peers) as f64;
        let mut data_us =
            (out_bytes / 1000.0 / rate.max(1e-9)).max(part as f64 * wire / 1000.0 / per_channel);
        let mut lat = cfg.launch_us + pp.hop_us;
        if self.nnodes > 1 && self.nic_gbps_per_gpu > 0.0 {
            let ppn = self.ppn() as u64;
            let off = match kind {
                CollectiveKind::AllToAll => per_peer * (n - ppn),
                _ => per_peer,
            } as f64;
            data_us = data_us.max(off / 1000.0 / (self.nic_gbps_per_gpu / wire));
            lat += self.ring.lat_inter_us + cfg.net_step_us;
        }
        let steps = part.div_ceil(step).max(1) as f64;
        lat + steps * pp.step_us + data_us
    }

    /// NCCL's tree all-reduce as a pipeline: each of `c.channels` channels carries its share of
    /// the message in chunks through `2 × depth` hops (reduce up, broadcast down, run at once by
    /// NCCL's split tree), depth = ppn − 1 + log2(nodes); a chunk crosses a hop at the channel's
    /// rate, or across hosts at its share of the NIC (an interior host's NIC carries a parent
    /// and two children: three shares), plus the protocol's per-step cost; the pipeline fills in
    /// `2 × depth` chunk times and then delivers one chunk per chunk time.
    pub fn tree_pipeline_us(&self, bytes: u64, c: &Choice, cfg: &SimConfig) -> f64 {
        let pp = cfg.proto(c.protocol);
        let nc = c.channels.max(1) as f64;
        let chunk = match c.protocol {
            Protocol::LL => LL_CHUNK_BYTES,
            Protocol::LL128 => LL128_CHUNK_BYTES,
            Protocol::Simple => SIMPLE_STEP_BYTES,
        } as f64;
        let per_channel = bytes as f64 / nc;
        let chunk = chunk.min(per_channel.max(1.0));
        let chunks = (per_channel / chunk).ceil().max(1.0);
        let ppn = self.ppn() as f64;
        let levels = log2i(self.nnodes.max(1) as u64) as f64;
        let depth = (ppn - 1.0) + levels;
        let mut rate = pp.channel_gbps / pp.wire_factor.max(1e-9);
        if self.nnodes > 1 && self.nic_gbps_per_gpu > 0.0 {
            let nic_share = self.nic_gbps_per_gpu * ppn / (3.0 * nc) / pp.wire_factor.max(1e-9);
            rate = rate.min(nic_share);
        }
        let t_chunk = pp.step_us + chunk / 1000.0 / rate.max(1e-9);
        let hop_lat = pp.hop_us
            + if self.nnodes > 1 {
                self.ring.lat_inter_us
            } else {
                0.0
            };
        cfg.launch_us + 2.0 * depth * hop_lat + (chunks + 2.0 * depth - 1.0) * t_chunk
    }

    /// The ring or tree schedule NCCL runs for `c`: the planner's channels, NCCL's chunk per
    /// loop and slots.
    pub fn schedule(
        &self,
        planner: &Planner,
        coll: &Collective,
        c: &Choice,
        elem_bytes: u32,
    ) -> Result<Schedule, String> {
        let algo = match c.algo {
            Algo::Ring => Algorithm::Ring,
            Algo::Tree => Algorithm::Tree,
            Algo::P2p => return Err("point-to-point is priced without a schedule".into()),
        };
        let mut s = planner
            .schedule(coll, &algo, c.protocol, Some(c.channels))
            .map_err(|e| e.to_string())?;
        chunk(&mut s, elem_bytes);
        if coll.kind == CollectiveKind::Broadcast {
            // NCCL's broadcast root copies its input to its output in the same pass that sends
            // it (one fused copy-send); the IR's root copies, then sends, which would serialise
            // a local pass per chunk. Timing only: the copy's traffic is the send's read.
            for r in &mut s.ranks {
                for ch in &mut r.channels {
                    if ch.ops.iter().any(|o| o.kind == OpKind::Send) {
                        ch.ops.retain(|o| o.kind != OpKind::Copy);
                    }
                }
            }
        }
        Ok(s)
    }

    /// NCCL's choice for `coll` at `bytes` and its simulated time.
    pub fn run(
        &self,
        topo: &Topology,
        planner: &Planner,
        coll: &Collective,
        bytes: u64,
        f: &Filter,
        cfg: &SimConfig,
    ) -> Result<Run, SimError> {
        let c = self.choose(coll.kind, bytes, f).ok_or_else(|| {
            SimError::Unsupported(format!(
                "--algo/--proto leave NCCL no algorithm for {} (NCCL runs ring and tree; tree only for all-reduce)",
                coll.kind.name()
            ))
        })?;
        if c.algo == Algo::P2p {
            let time_us = self.p2p_time(coll.kind, bytes, &c, cfg);
            return Ok(Run {
                choice: c,
                time_us,
                events: 0,
                mode: crate::Mode::Aggregated,
            });
        }
        let s = self
            .schedule(planner, coll, &c, cfg.elem_bytes)
            .map_err(SimError::Unsupported)?;
        // The size ramp is a channel's, read at the chunks it pipelines (`ramp_size`).
        let chunk = chunk_bytes(&s.algorithm, coll.kind, c.protocol);
        let per_channel = bytes / c.channels.max(1) as u64;
        let mut ramped = cfg.with_nccl_ramp(ramp_size(per_channel, chunk, self.comm_channels));
        if one_way(&s) {
            ramped = ramped.one_way();
        }
        match simulate(topo, &s, bytes, &ramped) {
            Ok(r) => {
                let r: SimResult = r;
                Ok(Run {
                    choice: c,
                    time_us: r.time_us,
                    events: r.events,
                    mode: r.mode,
                })
            }
            // Trees are not symmetric, so at thousands of ranks the aggregated model cannot run
            // them and the detailed engine would need minutes: their pipeline is priced in
            // closed form instead (and the choice says so).
            Err(SimError::TooLarge(_) | SimError::NotSymmetric(_)) if c.algo == Algo::Tree => {
                let mut c = c;
                let time_us = self.tree_pipeline_us(bytes, &c, &ramped);
                c.notes.push(
                    "the tree is too large for the detailed engine here: its pipeline is priced in closed form (docs/sim.md)".into(),
                );
                Ok(Run {
                    choice: c,
                    time_us,
                    events: 0,
                    mode: crate::Mode::Aggregated,
                })
            }
            Err(e) => Err(e),
        }
    }
}
