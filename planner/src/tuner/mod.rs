//! The tuner: for a collective and a message size, an estimated time for every algorithm ×
//! protocol the machine supports, and the fastest. The model is NCCL's latency/bandwidth model
//! (`tuner::nccl`, `docs/nccl-model.md`) with our direct and copy-engine patterns added; the terms fitted on a
//! machine come from its profile (`SystemModel::calib`, `profiles/`); `docs/tuner.md` states
//! every term and the fit.
//!
//! `time = launch + latency(algo, proto) + bytes / (bandwidth(algo, proto) × ramp(bytes))`
//! where `bytes` is the nccl-tests size of the operation.

mod calib;
mod candidates;
mod chain_costs;
mod chain_paths;
mod drift;
mod engine_terms;
mod hier_costs;
mod hier_ops;
pub mod nccl;
mod packed_fill;
mod packed_paths;
pub mod profile;
mod ring_credits;
mod rooted_chain;
mod tree_pipeline;

pub use calib::*;
pub use chain_paths::ChainPaths;
pub use drift::{dag_time, sequential_sends_time, DagFlow, RankMessages};
use nccl::{
    cc_idx, hw_lat, ll_max_bw, nodes_idx, proto_idx, BASE_LAT, LL128_BW_FACTOR, LL_BW_FACTOR,
    PER_CH_RING_LL128, PER_CH_TREE, PER_CH_TREE_LL128, TREE_LL128_INTER, TREE_LL128_INTRA,
    TREE_LL_DIVISOR,
};
pub use packed_fill::{wave_flows, PackedWave};
pub use packed_paths::{PackedPaths, PathCost};
pub use profile::{
    EngineTerms, Profile, ProfileChoice, ProfileError, ProfileSource, TunerParams,
    ENGINE_ELEM_BYTES,
};
pub use tree_pipeline::{TreeSend, TreeSends, STEADY_ITERS};

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
    /// The point-to-point collective's messages measured on the topology (`None`: the closed
    /// form), which the planner sets for all-to-all and send/recv.
    #[serde(default)]
    pub p2p: Option<P2pTerms>,
}

/// A point-to-point collective (all-to-all, send/recv) measured over the communicator's paths
/// as the engine runs topoplan's direct schedule (`planner::plan::p2p`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pTerms {
    /// What one message moves at, per rank (GB/s): its share of the links it crosses.
    pub gbps: f64,
    /// Latency beyond the executor's launch (µs): the network steps of the slowest rank's
    /// messages and the slowest message's landing.
    pub lat_us: f64,
    /// The slowest message's landing (its route's latency), µs.
    #[serde(default)]
    pub landing_us: f64,
    /// The messages themselves, which the tuner runs at each size (`None`: `gbps` and
    /// `lat_us` price it).
    #[serde(skip)]
    pub messages: Option<std::sync::Arc<RankMessages>>,
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
    /// The trees' paths that can be slowest at small sizes (empty: not measured).
    #[serde(default)]
    pub paths: PackedPaths,
    /// One message per tree through the trees, for the pipeline's fill (empty: not measured).
    #[serde(default)]
    pub wave: PackedWave,
    /// The trees' sends over the topology's routes and, per tree and rank, the down lane of the
    /// edge from its parent (`schedule::build::lanes`), for running a call op by op (empty: not
    /// measured).
    #[serde(skip)]
    pub sends: Vec<tree_pipeline::TreeSends>,
    #[serde(skip)]
    pub lanes: Vec<Vec<Option<u32>>>,
    /// What pricing calls op by op keeps across sizes.
    #[serde(skip)]
    pub memo: tree_pipeline::Memo,
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
    /// Ring, hierarchical and tree candidates on exactly this many channels (NCCL_MIN_NCHANNELS
    /// and NCCL_MAX_NCHANNELS both set; `sim --channels`), in the sense their schedules are
    /// built with; `None`: NCCL's count for the size. Other algorithms keep their own.
    pub channels: Option<u32>,
}

impl Filter {
    /// Only `algorithm`, in any protocol (`NCCL_ALGO` alone).
    pub fn algorithm(algorithm: Algorithm) -> Filter {
        Filter {
            algorithms: Some(vec![algorithm]),
            protocols: None,
            channels: None,
        }
    }

    /// Only `algorithm` in `protocol` (`NCCL_ALGO` and `NCCL_PROTO` both set).
    pub fn only(algorithm: Algorithm, protocol: Protocol) -> Filter {
        Filter {
            algorithms: Some(vec![algorithm]),
            protocols: Some(vec![protocol]),
            channels: None,
        }
    }

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

/// Every feasible candidate for `kind` at `bytes` (nccl-tests size), unsorted; a broadcast or
/// reduce is rooted at rank 0.
pub fn candidates(m: &SystemModel, kind: CollectiveKind, bytes: u64, f: &Filter) -> Vec<Estimate> {
    candidates_rooted(m, kind, 0, bytes, f)
}

/// [`candidates`] of a broadcast or reduce rooted at `root` (the other collectives ignore it).
pub fn candidates_rooted(
    m: &SystemModel,
    kind: CollectiveKind,
    root: u32,
    bytes: u64,
    f: &Filter,
) -> Vec<Estimate> {
    let c = &m.calib;
    if m.nranks <= 1 {
        // A local copy.
        let algbw = c.local_copy_gbps;
        return vec![Estimate {
            algorithm: Algorithm::Ring,
            protocol: Protocol::Simple,
            channels: 1,
            time_us: c.launch_us + bytes as f64 / 1000.0 / algbw,
            lat_us: c.launch_us,
            peak_algbw_gbps: algbw,
        }];
    }
    let mut cands = candidates::Cands::new(m, kind, root, bytes, f);
    cands.all();
    cands.out
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
