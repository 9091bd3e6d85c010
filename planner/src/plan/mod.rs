//! The planner: runs the channel search once per topology, then answers "how should this
//! collective of this size run here" (the tuner's choice, every candidate for `--explain`) and
//! builds the schedule for any (algorithm, protocol, channels), with transports set from the
//! topology.

mod describe;
mod p2p;
mod packed;
mod priced;

pub use describe::describe;
use packed::Lazy;
pub use packed::{plan_packed, PackedTrees, PACK_MAX_RANKS};
pub use priced::{PricedChoice, Pricer};

use crate::schedule::{
    build, Algorithm, Collective, CollectiveKind, Protocol, Schedule, ScheduleError, Transport,
    TreeChannel,
};
use crate::search::{self, Channels, SearchError};
use crate::topology::{PathType, Topology};
use crate::tuner::profile::{MachineFacts, Profile, ProfileChoice};
use crate::tuner::{self, Estimate, Filter, SystemModel};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error("channel search: {0}")]
    Search(#[from] SearchError),
    #[error("schedule: {0}")]
    Schedule(#[from] ScheduleError),
    #[error("{0}")]
    Unsupported(String),
}

/// The tuner's pick for one collective and size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    /// Predicted time (µs).
    pub est_us: f64,
    /// nccl-tests algorithm bandwidth: size / time (GB/s).
    pub algbw_gbps: f64,
    /// nccl-tests bus bandwidth (GB/s).
    pub busbw_gbps: f64,
}

/// One candidate for `--explain`.
pub type Candidate = Estimate;

/// The planner of one topology.
#[derive(Clone, Debug)]
pub struct Planner {
    channels: Channels,
    model: SystemModel,
    /// Path type between local GPU indices of host 0 (`[i][j]`), for transports.
    local_kind: Vec<Vec<PathType>>,
    /// Host of every rank.
    host_of: Vec<u32>,
    /// Local index of every rank within its host.
    local_of: Vec<u32>,
    /// Schedules' default copy-engine chunk count.
    pub ce_chunks: u32,
    /// The machine profile the tuner prices with, and how it was chosen.
    profile: ProfileChoice,
    /// Packed spanning trees (one host of 3 to `PACK_MAX_RANKS` GPUs), made at first use.
    packed: Lazy,
    /// Per-rank rate of an all-to-all (GB/s), its paths' shared links counted
    /// ([`p2p::all_to_all_bw`]); the tuner's `direct_gbps` for that collective.
    a2a_gbps: f64,
    /// All-to-all's and send/recv's messages measured over the whole communicator
    /// ([`p2p::measure`]; all-to-all's `None` past [`p2p::MEASURED_ALL_TO_ALL_RANKS`] ranks).
    p2p: [Option<tuner::P2pTerms>; 2],
}

impl Planner {
    /// Searches rings and trees on `t` and prepares the tuner's model, priced by the bundled
    /// profile where `t` is its machine, else by defaults derived from `t`.
    pub fn new(t: &Topology) -> Result<Self, PlanError> {
        Self::with_profile(t, None)
    }

    /// Like [`Planner::new`], priced by `profile` (a `--profile` file: the profile and its path)
    /// when given.
    pub fn with_profile(
        t: &Topology,
        profile: Option<(Profile, String)>,
    ) -> Result<Self, PlanError> {
        let channels = search::search(t)?;
        let facts = MachineFacts {
            ring_gbps_per_run_channel: channels.ring_run().bw_gbps,
            ..MachineFacts::of(t, channels.all_peers_nvlink_gbps)
        };
        let profile = Profile::choose(&facts, profile);
        let n = t.n_ranks() as u32;
        let nnodes = channels.hosts.len() as u32;
        let sm = t.gpus().map(|(_, g)| g.sm).min().unwrap_or(0);
        let mut host_of = vec![0; n as usize];
        let mut local_of = vec![0; n as usize];
        for (h, g) in channels.hosts.iter().enumerate() {
            for (i, &r) in g.iter().enumerate() {
                host_of[r as usize] = h as u32;
                local_of[r as usize] = i as u32;
            }
        }
        let h0 = &channels.hosts[0];
        let local_kind = h0
            .iter()
            .map(|&a| {
                h0.iter()
                    .map(|&b| {
                        if a == b {
                            PathType::Loc
                        } else {
                            t.gpu_path(a, b).map(|p| p.kind).unwrap_or(PathType::Dis)
                        }
                    })
                    .collect()
            })
            .collect();
        // Network latency per hop: the slowest NIC's plus the fabric's switch hops.
        let net_lat_us = if nnodes > 1 {
            let fab = t
                .fabric
                .as_ref()
                .map(|f| 2.0 * f.switch_lat_us)
                .unwrap_or(0.0);
            fab + t
                .gpus()
                .next()
                .and_then(|(g, _)| t.local_nic(g))
                .and_then(|nic| match &t.graph[nic].kind {
                    crate::topology::NodeKind::Nic(x) => Some(x.latency_us),
                    _ => None,
                })
                .unwrap_or(0.0)
        } else {
            0.0
        };
        let model = SystemModel {
            nranks: n,
            nnodes,
            sm,
            ring: Some(channels.ring_run()),
            tree: (n > 1).then(|| channels.tree.clone()),
            all_peers_nvlink_gbps: channels.all_peers_nvlink_gbps,
            net_lat_us,
            direct_gbps: direct_bw(t, &channels),
            nic_gbps_per_gpu: if nnodes > 1 {
                t.nics_of_host(0)
                    .iter()
                    .map(|n| match &t.graph[*n].kind {
                        crate::topology::NodeKind::Nic(x) => x.speed_gbps,
                        _ => 0.0,
                    })
                    .sum::<f64>()
                    / channels.hosts[0].len() as f64
            } else {
                0.0
            },
            calib: profile.profile.tuner.clone(),
            packed: None,
            p2p: None,
        };
        let packed = Lazy::new(t, &channels, &profile);
        let mut model = model;
        let (a2a_gbps, p2p) = measure_paths(t, &channels, &mut model);
        Ok(Planner {
            a2a_gbps,
            p2p,
            packed,
            channels,
            model,
            local_kind,
            host_of,
            local_of,
            ce_chunks: 8,
            profile,
        })
    }

    /// The machine profile this planner prices with, and how it was chosen.
    pub fn profile(&self) -> &ProfileChoice {
        &self.profile
    }

    pub fn channels(&self) -> &Channels {
        &self.channels
    }
    pub fn rings(&self) -> &[Vec<u32>] {
        &self.channels.rings
    }
    pub fn trees(&self) -> &[TreeChannel] {
        &self.channels.trees
    }
    pub fn model(&self) -> &SystemModel {
        &self.model
    }
    pub fn nranks(&self) -> u32 {
        self.model.nranks
    }

    /// Every candidate's estimate for `coll` at `bytes` (nccl-tests size), fastest first.
    pub fn candidates(&self, coll: &Collective, bytes: u64) -> Vec<Candidate> {
        self.candidates_filtered(coll, bytes, &Filter::default())
    }

    pub fn candidates_filtered(&self, coll: &Collective, bytes: u64, f: &Filter) -> Vec<Candidate> {
        let root = coll.root.unwrap_or(0);
        let packs = matches!(
            coll.kind,
            CollectiveKind::AllReduce | CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        ) && Protocol::ALL
            .iter()
            .any(|p| f.allows(&Algorithm::Packed, *p));
        let mut v = match self.packed.get().filter(|_| packs) {
            Some((set, _)) => {
                let m = SystemModel {
                    packed: Some(set.clone()),
                    ..self.model.clone()
                };
                tuner::candidates_rooted(&m, coll.kind, root, bytes, f)
            }
            None if matches!(
                coll.kind,
                CollectiveKind::AllToAll | CollectiveKind::SendRecv
            ) =>
            {
                let a2a = coll.kind == CollectiveKind::AllToAll;
                let m = SystemModel {
                    direct_gbps: if a2a {
                        self.a2a_gbps
                    } else {
                        self.model.direct_gbps
                    },
                    p2p: self.p2p[usize::from(!a2a)].clone(),
                    ..self.model.clone()
                };
                tuner::candidates_rooted(&m, coll.kind, root, bytes, f)
            }
            None => tuner::candidates_rooted(&self.model, coll.kind, root, bytes, f),
        };
        v.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
        v
    }

    /// The fastest candidate. Every collective has one (rings and direct patterns always exist).
    pub fn choose(&self, coll: &Collective, bytes: u64) -> Choice {
        self.choose_filtered(coll, bytes, &Filter::default())
            .expect("rings or direct patterns always give a candidate")
    }

    /// The fastest candidate the filter allows (`None`: the filter excludes them all).
    pub fn choose_filtered(&self, coll: &Collective, bytes: u64, f: &Filter) -> Option<Choice> {
        let e = self
            .candidates_filtered(coll, bytes, f)
            .into_iter()
            .next()?;
        let algbw = bytes as f64 / 1000.0 / e.time_us;
        Some(Choice {
            algorithm: e.algorithm,
            protocol: e.protocol,
            channels: e.channels,
            est_us: e.time_us,
            algbw_gbps: algbw,
            busbw_gbps: algbw * coll.kind.busbw_factor(self.model.nranks),
        })
    }

    /// Builds the schedule of `algo` with `nchannels` channels (default: all the search found;
    /// for the copy-engine pipeline it is the chunk count) and sets every transfer's transport.
    pub fn schedule(
        &self,
        coll: &Collective,
        algo: &Algorithm,
        proto: Protocol,
        nchannels: Option<u32>,
    ) -> Result<Schedule, PlanError> {
        let n = self.model.nranks;
        let pick = |avail: usize| -> Result<usize, PlanError> {
            match nchannels {
                None => Ok(avail),
                Some(0) => Err(PlanError::Unsupported("channel count must be >= 1".into())),
                Some(c) if c as usize > avail => Err(PlanError::Unsupported(format!(
                    "{} has {avail} channel(s) here; {c} asked",
                    algo.name()
                ))),
                Some(c) => Ok(c as usize),
            }
        };
        let direct_ok = || -> Result<(), PlanError> {
            if self.model.all_peers_nvlink_gbps.is_none() {
                return Err(PlanError::Unsupported(format!(
                    "{} needs every GPU pair joined by NVLink on one host",
                    algo.name()
                )));
            }
            Ok(())
        };
        let mut s = match algo {
            Algorithm::Ring => {
                let c = pick(self.channels.rings.len())?;
                build::ring(coll, &self.channels.rings[..c], proto)?
            }
            Algorithm::Tree => {
                // Trees come in pairs; a count names trees.
                let c = pick(self.channels.trees.len())?;
                build::tree(coll, &self.channels.trees[..c], proto)?
            }
            Algorithm::OneShot => {
                direct_ok()?;
                let c = nchannels.unwrap_or(1).max(1);
                build::one_shot_channels(coll, n, proto, c)?
            }
            Algorithm::TwoShot => {
                direct_ok()?;
                let c = nchannels.unwrap_or(1).max(1);
                build::two_shot_channels(coll, n, proto, c)?
            }
            Algorithm::CopyEnginePipeline => {
                direct_ok()?;
                if n != 2 {
                    return Err(PlanError::Unsupported(
                        "the copy-engine pipeline is for two GPUs".into(),
                    ));
                }
                build::copy_engine_pipeline(coll, nchannels.unwrap_or(self.ce_chunks))?
            }
            Algorithm::Direct => build::direct(coll, n)?,
            Algorithm::Hierarchical => {
                if self.channels.hosts.len() < 2 {
                    return Err(PlanError::Unsupported(
                        "hierarchical schedules need several hosts".into(),
                    ));
                }
                // The host chains run as many times as the rings do (NCCL's doubling).
                let runs = self.channels.ring_runs.max(1) as usize;
                let chains: Vec<Vec<u32>> = self
                    .channels
                    .ring_chains
                    .iter()
                    .cycle()
                    .take(self.channels.ring_chains.len() * runs)
                    .cloned()
                    .collect();
                let c = pick(chains.len())?;
                build::hierarchical(coll, &self.channels.hosts, &chains[..c], proto)?
            }
            Algorithm::Packed => {
                let Some((_, p)) = self.packed.get() else {
                    return Err(PlanError::Unsupported(format!(
                        "packed trees are planned on one host of 3 to {PACK_MAX_RANKS} GPUs"
                    )));
                };
                build::packed(coll, &p.trees, p.copies, proto)?
            }
            Algorithm::Msccl(_) => {
                return Err(PlanError::Unsupported(format!(
                    "{} schedules are imported (planner::schedule::msccl), not planned",
                    algo.name()
                )))
            }
        };
        self.set_transports(&mut s);
        Ok(s)
    }

    /// How a transfer from rank a to rank b travels.
    pub fn transport(&self, a: u32, b: u32) -> Transport {
        let (ha, hb) = (self.host_of[a as usize], self.host_of[b as usize]);
        if ha != hb {
            return Transport::Network;
        }
        let k =
            self.local_kind[self.local_of[a as usize] as usize][self.local_of[b as usize] as usize];
        match k {
            PathType::Loc
            | PathType::Nvl
            | PathType::Nvb
            | PathType::C2c
            | PathType::Pix
            | PathType::Pxb => Transport::P2pStore,
            _ => Transport::HostStaged,
        }
    }

    /// Rewrites sending ops' transports from the topology; keeps copy-engine and p2p-load choices
    /// where P2P is possible.
    fn set_transports(&self, s: &mut Schedule) {
        let n = s.nranks;
        for rp in &mut s.ranks {
            let a = rp.rank;
            for ch in &mut rp.channels {
                for op in &mut ch.ops {
                    let Some(to) = op.send_to else { continue };
                    // A peer-strided op reaches several peers: the worst of them decides.
                    let copies = if op.peer_stride != 0 { op.repeat } else { 1 };
                    let mut t = Transport::P2pStore;
                    for k in 0..copies {
                        let b = (to as i64 + k as i64 * op.peer_stride as i64).rem_euclid(n as i64);
                        let tk = self.transport(a, b as u32);
                        if rank_of(tk) > rank_of(t) {
                            t = tk;
                        }
                        if t == Transport::Network {
                            break;
                        }
                    }
                    op.transport = match (t, op.transport) {
                        (
                            Transport::P2pStore,
                            keep @ (Transport::P2pLoad | Transport::CopyEngine),
                        ) => keep,
                        (t, _) => t,
                    };
                }
            }
        }
    }
}

fn rank_of(t: Transport) -> u8 {
    match t {
        Transport::Local | Transport::P2pStore | Transport::P2pLoad | Transport::CopyEngine => 0,
        Transport::HostStaged => 1,
        Transport::Network => 2,
    }
}

/// Per-rank injection bandwidth for direct point-to-point patterns (all-to-all, send/recv), GB/s.
fn direct_bw(t: &Topology, ch: &Channels) -> f64 {
    if let Some(nv) = ch.all_peers_nvlink_gbps {
        return nv;
    }
    let h0 = &ch.hosts[0];
    let mut bw = f64::INFINITY;
    for &a in h0 {
        for &b in h0 {
            if a != b {
                if let Some(p) = t.gpu_path(a, b) {
                    bw = bw.min(p.bw_gbps);
                }
            }
        }
    }
    if ch.hosts.len() > 1 {
        let nics: f64 = t
            .nics_of_host(0)
            .iter()
            .map(|n| match &t.graph[*n].kind {
                crate::topology::NodeKind::Nic(x) => x.speed_gbps,
                _ => 0.0,
            })
            .sum();
        bw = bw.min(nics / h0.len() as f64);
    }
    if bw.is_finite() && bw > 0.0 {
        bw
    } else {
        1.0
    }
}

/// Most ranks whose rings' and trees' every hop the planner routes for the tuner (`ChainPaths`);
/// past them the tuner keeps NCCL's latency table and the search's bandwidth per channel.
pub const CHAIN_PATH_RANKS: u32 = 2048;

/// Sets the topology's terms the tuner reads beside the engine's (`EngineTerms`): the slowest
/// route's latency and, up to [`CHAIN_PATH_RANKS`] ranks on one host or several, the rings'
/// and trees' paths (a route through the network costs its step `sim.net_step_us` more, as in
/// the engine). Returns all-to-all's per-rank rate ([`p2p::all_to_all_bw`]) and all-to-all's and
/// send/recv's messages over the whole communicator ([`p2p::measure`]), flows capped at the
/// executor's rate.
fn measure_paths(
    t: &Topology,
    channels: &Channels,
    model: &mut SystemModel,
) -> (f64, [Option<tuner::P2pTerms>; 2]) {
    let flow_cap = match model.calib.engine.gpu_gbps[0] {
        x if x > 0.0 => x,
        _ => f64::INFINITY,
    };
    let (a2a_gbps, route_lat_us) = p2p::all_to_all_bw(t, channels, model.direct_gbps, flow_cap);
    model.calib.engine.route_lat_us = route_lat_us;
    let net_step_us = model.calib.engine.net_step_us;
    if model.nranks <= CHAIN_PATH_RANKS {
        let route = |a: u32, b: u32| {
            t.gpu_path(a, b).map_or((0.0, Vec::new(), 0.0), |p| {
                let links = p.links.iter().map(|&l| (l.index(), t.graph[l].bw_gbps));
                let net = if p.kind == PathType::Net {
                    net_step_us
                } else {
                    0.0
                };
                (p.lat_us, links.collect(), net)
            })
        };
        model.calib.engine.paths = tuner::ChainPaths::of(&channels.rings, &channels.trees, route);
        if let Some(first) = channels.hosts.first().filter(|_| channels.hosts.len() > 1) {
            let intra: Vec<Vec<u32>> = channels
                .ring_chains
                .iter()
                .map(|c| c.iter().map(|&j| first[j as usize]).collect())
                .collect();
            let rails: Vec<Vec<u32>> = (0..first.len())
                .map(|j| {
                    channels
                        .hosts
                        .iter()
                        .filter_map(|h| h.get(j).copied())
                        .collect()
                })
                .collect();
            model.calib.engine.hier_paths = [
                tuner::ChainPaths::of(&intra, &[], route),
                tuner::ChainPaths::of(&rails, &[], route),
            ];
        }
    }
    let p2p = [CollectiveKind::AllToAll, CollectiveKind::SendRecv]
        .map(|k| p2p::measure(t, k, flow_cap, net_step_us));
    (a2a_gbps, p2p)
}

/// nccl-tests' size for a collective given the per-rank element count and element size.
pub fn nccl_tests_bytes(kind: CollectiveKind, nranks: u32, count: u64, elem: u64) -> u64 {
    match kind {
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            count * elem * nranks as u64
        }
        _ => count * elem,
    }
}
