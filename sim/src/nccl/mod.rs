//! NCCL 2.28's own choices on any topology, and their simulated time (`topoplan sim --as
//! nccl`). The choice is NCCL's: its ring and tree graphs (the planner's NCCL-style search,
//! with NCCL's post-search channel doubling), its tuner's latency/bandwidth model per algorithm
//! and protocol, its channel and thread count per size, its chunk and slot sizes (all from
//! `planner::tuner::nccl`, `docs/nccl-model.md`). The time is the detailed engine's (or the aggregated model's at
//! scale) running that ring or tree schedule with the machine profile's protocol costs;
//! point-to-point (send/recv, all-to-all) is priced from NCCL's p2p channels and chunks
//! NVLS and CollNet are out of scope: a choice says when NCCL would consider them.

use crate::{simulate, SimConfig, SimError, SimResult};
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, OpKind, Protocol, Schedule};
use planner::topology::{NodeKind, Topology};
use planner::tuner::nccl::channels_for as nccl_channels_for;
use planner::tuner::nccl::*;
use planner::tuner::{Filter, Hw};
use serde::Serialize;

pub use planner::tuner::nccl::{chunk_bytes, Graph};

/// Cuts a ring or tree schedule the way NCCL does: the chunk per loop of its protocol and
/// slots per connection (`nccl::chunk_bytes`, `nccl::slots`). Schedules of other algorithms
/// are left as they are.
pub fn chunk(s: &mut Schedule, elem_bytes: u32) {
    if !matches!(s.algorithm, Algorithm::Ring | Algorithm::Tree) {
        return;
    }
    let bytes = chunk_bytes(&s.algorithm, s.collective.kind, s.protocol);
    s.loop_elems = Some(bytes / elem_bytes.max(1) as u64 * s.chunks_per_block as u64);
    s.slots = slots(&s.algorithm, s.collective.kind, s.protocol);
}

/// NCCL's tree root receives its children's step, reduces it with its input, writes its output
/// and sends the sum down in one pass of all the channel's threads (`src/device/all_reduce.h`,
/// `runTreeSplit`: `directRecvReduceCopyDirectSend` where the tree has no parent). The IR's
/// root receives and reduces on the reduce channel, then sends on the broadcast channel, which
/// would add a local pass per step between the two halves. Timing only: the root's receive
/// becomes a plain receive (its reduction's traffic is the send's read) and the send down
/// carries the sum.
fn fuse_tree_roots(s: &mut Schedule) {
    for r in &mut s.ranks {
        let mut fused = Vec::new();
        for ch in &r.channels {
            for o in ch.ops.iter().filter(|o| o.kind == OpKind::Send) {
                fused.extend(o.deps.iter().map(|d| (d.channel, d.index)));
            }
        }
        for (c, i) in fused {
            let Some(op) = r
                .channels
                .get_mut(c as usize)
                .and_then(|ch| ch.ops.get_mut(i as usize))
            else {
                continue;
            };
            if op.kind == OpKind::RecvReduceCopy {
                op.kind = OpKind::Recv;
                op.src = None;
            }
        }
    }
}

/// NCCL's reduce root reads each step as it lands, reduces it with its input and writes its
/// output in one pass (`src/device/reduce.h`: `recvReduceCopy`). The IR's root receives, then
/// reduces in a local pass of its own per step, which the measurements do not show: NCCL's
/// two-rank reduce ran 2–14 µs faster than its broadcast from 4 MiB on 2×H200
/// (`docs/fidelity.md`), where a separate pass would make it slower. Timing only: the root's
/// receive carries the reduction.
fn fuse_reduce_root(s: &mut Schedule) {
    for op in s
        .ranks
        .iter_mut()
        .flat_map(|r| r.channels.iter_mut())
        .flat_map(|c| c.ops.iter_mut())
        .filter(|o| o.kind == OpKind::RecvReduceCopy)
    {
        op.kind = OpKind::Recv;
        op.src = None;
    }
}

/// The size at which the profile's ramp is read for a ring channel carrying `channel_bytes` in
/// `chunk` byte chunks. The ramp was fitted on rings of 2 MiB chunks (4 steps, NCCL's ring
/// pattern) running all `channels` of the communicator, so it is taken as a function of the
/// chunks a channel pipelines.
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
            search_speeds(m.sm, false)
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
        let nvlink = m
            .all_peers_nvlink_gbps
            .map(|bw| (bw, planner::topology::gpus::nvlink_bw(m.sm)));
        let (p2p_channels, per_peer) = p2p_channels(comm_channels, nvlink, nnodes);
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

    /// The payload rate of one of `channels` LL channels: NCCL's LL ceiling for the GPU and
    /// node count, shared by the channels the call runs.
    pub fn ll_channel_gbps(&self, channels: u32) -> f64 {
        ll_max_bw(self.sm, self.nnodes) / channels.max(1) as f64
    }

    /// What NCCL's tuner reads of this communicator.
    pub fn comm(&self) -> Comm {
        Comm {
            nranks: self.nranks,
            nnodes: self.nnodes,
            sm: self.sm,
            ring: self.ring.clone(),
            tree: self.tree.clone(),
            ll128: self.ll128,
        }
    }

    /// NCCL's tuning table for `kind`: (latency µs, algorithm bandwidth GB/s) for
    /// [tree, ring] × [LL, LL128, Simple], `None` where NCCL disables the pair (what it prints
    /// with `NCCL_DEBUG_SUBSYS=TUNING`).
    pub fn table(&self, kind: CollectiveKind) -> Table {
        self.comm().table(kind)
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
            let proto = p2p_protocol(per_peer, self.p2p_channels_per_peer);
            let channels = self.p2p_op_channels(per_peer);
            return Some(Choice {
                algo: Algo::P2p,
                protocol: proto,
                channels,
                threads: P2P_THREADS,
                model_us: 0.0,
                notes,
            });
        }
        let comm = self.comm();
        let table = comm.table(kind);
        let mut best: Option<(f64, Algo, Protocol)> = None;
        for (a, algo, alg) in [
            (0usize, Algo::Tree, Algorithm::Tree),
            (1, Algo::Ring, Algorithm::Ring),
        ] {
            for p in Protocol::ALL {
                if !f.allows(&alg, p) {
                    continue;
                }
                let Some(entry) = table[a][proto_idx(p)].filter(|e| e.1 > 0.0) else {
                    continue;
                };
                let time = comm.time(kind, a == 0, p, bytes, entry, self.comm_channels);
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

    /// NCCL's channel and thread count for a size (`nccl::channels_for`).
    pub fn channels_for(&self, algo: Algo, proto: Protocol, bytes: u64) -> (u32, u32) {
        let (alg, max) = match algo {
            Algo::Tree => (
                Algorithm::Tree,
                self.comm_channels.min(self.tree_channels.max(1)),
            ),
            _ => (Algorithm::Ring, self.comm_channels),
        };
        let graph = self.ring.bw_intra_gbps * self.ring.search_channels as f64;
        nccl_channels_for(&alg, proto, bytes, max, self.nranks, graph)
    }

    fn p2p_bytes_per_peer(&self, kind: CollectiveKind, bytes: u64) -> u64 {
        match kind {
            CollectiveKind::AllToAll => bytes / self.nranks.max(1) as u64,
            _ => bytes,
        }
    }

    fn p2p_chunk(&self) -> u64 {
        p2p_chunk(self.all_nvlink_gbps.is_some())
    }

    /// Channels one send (or receive) of `bytes` is striped over (`nccl::p2p_op_channels`), in
    /// the protocol NCCL picks for it (`nccl::p2p_protocol`).
    pub fn p2p_op_channels(&self, bytes: u64) -> u32 {
        let proto = p2p_protocol(bytes, self.p2p_channels_per_peer);
        p2p_op_channels(
            bytes,
            self.p2p_channels_per_peer,
            self.p2p_channels,
            self.nranks,
            self.nnodes,
            p2p_step_bytes(proto, self.p2p_chunk()),
        )
    }

    /// Point-to-point time. Every peer's bytes are cut into `c.channels` parts (4 KiB
    /// aligned), one per channel; a channel moves its part in chunks through its slots at the
    /// profile's per-channel rate, all channels of a GPU sharing its links (and its NIC across
    /// hosts). A transfer crosses one hop: no ring pipeline fills, so neither the rings' size
    /// ramp nor their per-hop latency applies; its first bytes land one hand-off (the LL hop)
    /// after launch, and every chunk pays the protocol's step cost. A rank's send and receive
    /// run at once on separate warps; all-to-all's copy to self hides behind the peers' parts.
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
        let mut lat = cfg.launch_us + cfg.ll.hop_us;
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
        if s.algorithm == Algorithm::Tree && coll.kind == CollectiveKind::AllReduce {
            fuse_tree_roots(&mut s);
        }
        if coll.kind == CollectiveKind::Reduce {
            fuse_reduce_root(&mut s);
        }
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
        // The size ramp is read at the chunks a ring channel pipelines (`ramp_size`).
        let chunk = s.loop_elems.map_or_else(
            || chunk_bytes(&s.algorithm, coll.kind, c.protocol),
            |l| l / s.chunks_per_block.max(1) as u64 * cfg.elem_bytes as u64,
        );
        let per_channel = bytes / c.channels.max(1) as u64;
        let mut ramped = cfg
            .with_ring_ramp(&s, ramp_size(per_channel, chunk, self.comm_channels))
            .with_ll_channel_cap(self.ll_channel_gbps(c.channels));
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
