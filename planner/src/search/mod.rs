//! Channel search: rings and trees through every GPU, sized so that channels sharing a link never
//! ask for more than it carries (NCCL's `src/graph/search.cc`, `ncclTopoCompute`, re-derived; see
//! `docs/planner.md` for where we differ).
//!
//! The search runs on one host (host 0) and, when there are several, replicates the host's chains
//! by local GPU index: hosts built by `topo scale` are identical, and a 1024-host cluster then
//! costs one 8-GPU search plus O(ranks × channels) assembly. Across hosts a ring enters every host
//! through NIC k and leaves through NIC k (rail-aligned: NIC k of every host sits on rail k), and
//! trees are NCCL's double binary trees over hosts with each host's GPUs chained below its head.

mod chain;
mod trees;

pub use trees::{btree, dtree};

use crate::schedule::TreeChannel;
use crate::topology::{NodeKind, PathType, Topology};
use crate::tuner::{ChannelSet, Hw};
use chain::{ChainSearch, Found, Hop};
use serde::{Deserialize, Serialize};

/// What the search found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Channels {
    /// One rank order per ring channel NCCL runs: every searched ring `ring_runs` times.
    pub rings: Vec<Vec<u32>>,
    /// The searched ring graph: channel count and per-channel bandwidth before NCCL runs each
    /// channel `ring_runs` times (what NCCL's graph dump shows).
    pub ring: ChannelSet,
    /// How many times each searched ring runs ([`run_factor`]).
    #[serde(default = "one")]
    pub ring_runs: u32,
    /// Host-0 chain (local indices) of each searched ring channel.
    pub ring_chains: Vec<Vec<u32>>,
    /// The NIC each ring of `rings` uses (multi-host): the searched channels' NICs, repeated as
    /// the rings are.
    pub ring_nics: Vec<Option<String>>,
    /// One tree per tree channel (double binary trees come in pairs).
    pub trees: Vec<TreeChannel>,
    pub tree: ChannelSet,
    /// Host-0 chain of each tree channel (local indices, head first).
    pub tree_chains: Vec<Vec<u32>>,
    /// Ranks per host (ascending), host by host.
    pub hosts: Vec<Vec<u32>>,
    /// Every GPU pair of a single host joined over NVLink: per-GPU NVLink bandwidth to its peers.
    pub all_peers_nvlink_gbps: Option<f64>,
    /// Facts worth printing (fallbacks, asymmetries).
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SearchError {
    #[error("the topology has no GPU")]
    NoGpu,
    #[error("host {host} has {got} GPUs but host 0 has {want}; every host must have the same number of GPUs")]
    UnevenHosts { host: u32, got: usize, want: usize },
    #[error("{0}")]
    Path(String),
}

/// NCCL's per-channel speeds (GB/s) tried, fastest first.
fn speeds(sm: u32, inter: bool) -> &'static [f64] {
    crate::tuner::nccl::search_speeds(sm, inter)
}

pub use crate::tuner::nccl::MAX_SEARCH_CHANNELS;

fn hw_of(kind: PathType) -> Hw {
    match kind {
        PathType::Loc | PathType::Nvl | PathType::Nvb => Hw::NvLink,
        PathType::Net => Hw::Net,
        _ => Hw::Pci,
    }
}

/// Runs the ring and tree searches.
pub fn search(t: &Topology) -> Result<Channels, SearchError> {
    let hosts = host_ranks(t)?;
    let l = hosts[0].len();
    let sm = t.gpus().map(|(_, g)| g.sm).min().unwrap_or(0);
    let multi = hosts.len() > 1;
    let mut notes = Vec::new();
    let cs = ChainSearch::new(t, &hosts[0], multi)?;
    let speeds = speeds(sm, multi);

    // Rings.
    let ring = search_rings(&cs, speeds, l, &mut notes);
    let rings: Vec<Vec<u32>> = ring
        .chains
        .iter()
        .map(|ch| {
            hosts
                .iter()
                .flat_map(|g| ch.iter().map(move |&i| g[i as usize]))
                .collect()
        })
        .collect();
    let nic_name = |i: Option<usize>| {
        i.and_then(|i| match &t.graph[cs.nics[i]].kind {
            NodeKind::Nic(n) => Some(n.name.clone()),
            _ => None,
        })
    };
    let ring_nics: Vec<Option<String>> = ring.nics.iter().map(|i| nic_name(*i)).collect();
    let ring_set = ChannelSet {
        count: rings.len() as u32,
        bw_gbps: ring.speed,
        intra: hw_of(ring.worst),
    };

    // Trees: chains through each host (both directions of every hop carry data), double binary
    // trees over hosts.
    let (tree_chains, tree_bw, tree_kind) = search_tree_chains(&cs, speeds, multi, &ring);
    let (trees, chains_out) = host_trees(&hosts, &tree_chains, multi);
    // Pairs halve per-tree bandwidth: two trees share the chain's capacity.
    let tree_set = ChannelSet {
        count: trees.len() as u32,
        bw_gbps: tree_bw / 2.0,
        intra: hw_of(tree_kind),
    };
    // NCCL runs more channels than it searched (connect.cc): every ring channel twice, and on
    // sm90+ across hosts twice again while the rings are fast and few. `ring` and `ring_chains`
    // stay the searched graph (what NCCL's graph dump shows); `rings` is what runs.
    let ring_runs = run_factor(ring_set.count, ring_set.bw_gbps, sm, multi);
    let all_peers_nvlink_gbps = if multi || l < 2 {
        None
    } else {
        cs.all_peers_nvlink()
    };
    Ok(Channels {
        rings: repeat_each_run(rings, ring_runs),
        ring: ring_set,
        ring_runs,
        ring_chains: ring.chains,
        ring_nics: repeat_each_run(ring_nics, ring_runs),
        trees,
        tree: tree_set,
        tree_chains: chains_out,
        hosts,
        all_peers_nvlink_gbps,
        notes,
    })
}

/// Each host's ranks; every host must have as many GPUs as host 0, and at least one.
fn host_ranks(t: &Topology) -> Result<Vec<Vec<u32>>, SearchError> {
    let nhosts = t.n_hosts.max(1);
    let hosts: Vec<Vec<u32>> = (0..nhosts).map(|h| t.gpus_of_host(h)).collect();
    let l = hosts[0].len();
    if l == 0 || t.n_ranks() == 0 {
        return Err(SearchError::NoGpu);
    }
    for (h, g) in hosts.iter().enumerate() {
        if g.len() != l {
            return Err(SearchError::UnevenHosts {
                host: h as u32,
                got: g.len(),
                want: l,
            });
        }
    }
    Ok(hosts)
}

/// Host 0's ring chains, duplicated as NCCL does; one ring in rank order (and a note) when no
/// ring fits.
fn search_rings(cs: &ChainSearch, speeds: &[f64], l: usize, notes: &mut Vec<String>) -> Found {
    let (chains, nics, speed, worst) = match cs.best(speeds, Hop::Ring, MAX_SEARCH_CHANNELS) {
        Some(r) => (r.chains, r.nics, r.speed, r.worst),
        None => {
            notes.push(
                "no ring fits the link capacities; falling back to one ring in rank order".into(),
            );
            (
                vec![(0..l as u32).collect()],
                vec![None],
                0.1,
                PathType::Sys,
            )
        }
    };
    let (chains, nics, speed) = duplicate(chains, nics, speed);
    Found {
        chains,
        nics,
        speed,
        worst,
    }
}

/// Host 0's tree chains, their bandwidth and worst path type. Across hosts each host's head
/// talks to the network through the ring channel's NIC: reuse the ring chains, as NCCL sizes
/// trees with the ring's channel count. On one host: a chain search, else the ring chains.
fn search_tree_chains(
    cs: &ChainSearch,
    speeds: &[f64],
    multi: bool,
    ring: &Found,
) -> (Vec<Vec<u32>>, f64, PathType) {
    if multi {
        return (ring.chains.clone(), ring.speed, ring.worst);
    }
    match cs.best(speeds, Hop::Chain, MAX_SEARCH_CHANNELS) {
        Some(c) => {
            let (ch, _, bw) = duplicate(c.chains, c.nics, c.speed);
            (ch, bw, c.worst)
        }
        None => (ring.chains.clone(), ring.speed, ring.worst),
    }
}

/// Two trees per chain (a double binary tree across hosts) and the host-0 chain of each.
fn host_trees(
    hosts: &[Vec<u32>],
    tree_chains: &[Vec<u32>],
    multi: bool,
) -> (Vec<TreeChannel>, Vec<Vec<u32>>) {
    let mut trees = Vec::with_capacity(tree_chains.len() * 2);
    let mut chains_out = Vec::new();
    for chain in tree_chains.iter() {
        for which in 0..2u32 {
            // Single host: the second tree of a pair runs the chain backwards so roots alternate.
            let chain: Vec<u32> = if !multi && which == 1 {
                chain.iter().rev().copied().collect()
            } else {
                chain.clone()
            };
            trees.push(trees::host_tree(hosts, &chain, which));
            chains_out.push(chain);
        }
    }
    (trees, chains_out)
}

/// The whole list `runs` times over: the channels NCCL runs from the ones it searched.
fn repeat_each_run<T: Clone>(v: Vec<T>, runs: u32) -> Vec<T> {
    let n = v.len();
    v.into_iter().cycle().take(n * runs as usize).collect()
}

/// How many times NCCL runs each searched ring channel (NCCL's `src/graph/connect.cc`,
/// `ncclTopoPostset`): twice, up to 64 channels; on sm90+ across hosts with rings faster than
/// 45 GB/s per channel and fewer than 16 of them (after the first doubling), twice again.
pub fn run_factor(searched: u32, bw_gbps: f64, sm: u32, multi_host: bool) -> u32 {
    let searched = searched.max(1);
    let mut n = (2 * searched).min(MAX_RUN_CHANNELS);
    if sm >= 90 && multi_host && bw_gbps > 45.0 && n < 16 {
        n = (2 * n).min(MAX_RUN_CHANNELS);
    }
    (n / searched).max(1)
}

fn one() -> u32 {
    1
}

impl Channels {
    /// The ring channels as they run: `ring_runs` times the searched count, each carrying its
    /// share of the searched bandwidth (the total stays the searched one, as in NCCL's tuner).
    pub fn ring_run(&self) -> ChannelSet {
        let k = self.ring_runs.max(1);
        ChannelSet {
            count: self.ring.count * k,
            bw_gbps: self.ring.bw_gbps / k as f64,
            intra: self.ring.intra,
        }
    }
}

/// Most channels NCCL runs (MAXCHANNELS).
pub const MAX_RUN_CHANNELS: u32 = 64;

/// NCCL duplicates fast channels (halving their bandwidth) so more SMs drive the links: only when
/// the per-channel speed is at least 25 GB/s.
fn duplicate(
    chains: Vec<Vec<u32>>,
    nics: Vec<Option<usize>>,
    bw: f64,
) -> (Vec<Vec<u32>>, Vec<Option<usize>>, f64) {
    if bw < 25.0 || chains.len() * 2 > 2 * MAX_SEARCH_CHANNELS {
        return (chains, nics, bw);
    }
    let mut c2 = chains.clone();
    c2.extend(chains);
    let mut n2 = nics.clone();
    n2.extend(nics);
    (c2, n2, bw / 2.0)
}
