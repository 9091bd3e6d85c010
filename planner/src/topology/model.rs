//! The topology model: a directed graph of hardware components joined by links.
//!
//! Every link is directional (NCCL models each physical connection as two links, one per
//! direction), carries a [`LinkKind`], a bandwidth in GB/s (1 GB = 1e9 B) and a latency in µs.
//! A multi-node system holds one set of nodes per host plus the network fabric's switches.
//!
//! Invariants (checked by [`Topology::validate`]):
//! - every bandwidth is finite and > 0, every latency finite and >= 0;
//! - GPU ranks are unique and dense (0..n_gpus);
//! - GPU bus ids are unique within a host.

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

/// Index of a node in the topology graph.
pub type NodeId = NodeIndex<u32>;
/// Index of a directional link in the topology graph.
pub type LinkId = EdgeIndex<u32>;

/// A hardware component.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Host (machine) this node belongs to; `None` for network fabric switches.
    pub host: Option<u32>,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeKind {
    Gpu(Gpu),
    Cpu(Cpu),
    PciSwitch(PciSwitch),
    NvSwitch,
    Nic(Nic),
    /// A switch of the network fabric joining hosts; `level` 0 is a leaf (top of rack).
    NetSwitch {
        level: u32,
        index: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Global rank of the GPU.
    pub rank: u32,
    /// Device index on its host (NVML / CUDA ordinal).
    pub dev: u32,
    /// PCI bus id, lower case, `DDDD:BB:DD.F`.
    pub busid: String,
    /// Compute capability × 10 (90 for sm_90).
    pub sm: u32,
    /// GPUDirect RDMA capable.
    pub gdr: bool,
    /// Device memory bandwidth in GB/s (bounds local reduce speed).
    pub mem_bw_gbps: f64,
    /// Marketing model when known (e.g. "h200-sxm").
    pub model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub numa_id: i32,
    pub arch: CpuArch,
    pub vendor: CpuVendor,
    pub family_id: u32,
    pub model_id: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpuArch {
    X86_64,
    Arm64,
    Ppc64,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpuVendor {
    Intel,
    Amd,
    Zhaoxin,
    Other,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PciSwitch {
    pub busid: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// PCI bus id, or `None` for a CPU-attached virtual NIC.
    pub busid: Option<String>,
    /// Network device name (`mlx5_0`, `eth0`).
    pub name: String,
    /// Net plugin device index.
    pub dev: u32,
    /// Port speed in GB/s.
    pub speed_gbps: f64,
    pub port: u32,
    pub guid: u64,
    pub max_conn: u32,
    pub gdr: bool,
    pub coll: bool,
    pub latency_us: f64,
}

/// What a link physically is. Order matters nowhere; path types are in [`crate::topology::PathType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkKind {
    NvLink,
    C2c,
    Pcie,
    /// Between NUMA domains (UPI, xGMI, ...), NCCL's SYS link.
    InterCpu,
    Network,
    /// NCCL's LOC link (e.g. Broadcom virtual switch P2P links, CPU-attached NICs).
    Local,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub kind: LinkKind,
    /// Bandwidth of this direction in GB/s.
    pub bw_gbps: f64,
    /// One-way latency in µs.
    pub lat_us: f64,
    /// Number of parallel physical links aggregated (NVLink count); 1 otherwise.
    pub count: u32,
}

/// How hosts are joined. Carried so planners know the fabric shape without re-deriving it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FabricKind {
    /// All NICs on one switch.
    SingleSwitch,
    /// NIC i of every host on leaf switch i (rail i), rails joined by spines.
    RailOptimized,
    /// Two-level fat tree: leaves hold `hosts_per_leaf` hosts, uplinks thinned by `oversubscription`.
    FatTree {
        hosts_per_leaf: u32,
        oversubscription: f64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fabric {
    pub kind: FabricKind,
    /// NIC port speed in GB/s.
    pub port_gbps: f64,
    /// Per switch hop latency in µs.
    pub switch_lat_us: f64,
}

/// A machine or a cluster of machines.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub graph: DiGraph<Node, Link, u32>,
    /// Number of hosts (1 for a single machine).
    pub n_hosts: u32,
    pub fabric: Option<Fabric>,
    /// GPU node of each rank, indexed by rank.
    gpus_by_rank: Vec<NodeId>,
    /// Path caches (see `paths`); reset by every mutation through the methods below. After
    /// editing `graph` directly, call `validate` (or `reindex`) before asking for paths.
    pub(crate) cache: super::paths::CacheCell,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("link {from} -> {to}: bandwidth {bw} GB/s must be finite and > 0")]
    BadBandwidth { from: String, to: String, bw: f64 },
    #[error("link {from} -> {to}: latency {lat} µs must be finite and >= 0")]
    BadLatency { from: String, to: String, lat: f64 },
    #[error("GPU rank {0} appears more than once")]
    DuplicateRank(u32),
    #[error("GPU ranks are not dense: rank {0} is missing")]
    MissingRank(u32),
    #[error("host {host}: bus id {busid} appears more than once")]
    DuplicateBusId { host: u32, busid: String },
    #[error("{0} has no route to any other GPU")]
    Unreachable(String),
}

impl Topology {
    pub fn new() -> Self {
        Self {
            n_hosts: 1,
            ..Default::default()
        }
    }

    pub fn add_node(&mut self, host: Option<u32>, kind: NodeKind) -> NodeId {
        if let Some(h) = host {
            self.n_hosts = self.n_hosts.max(h + 1);
        }
        let id = self.graph.add_node(Node { host, kind });
        self.gpus_by_rank.clear(); // rebuilt lazily by `reindex`
        self.cache.reset();
        id
    }

    /// Adds a link in one direction.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, link: Link) -> LinkId {
        self.cache.reset();
        self.graph.add_edge(from, to, link)
    }

    /// Adds the same link in both directions.
    pub fn add_duplex(&mut self, a: NodeId, b: NodeId, link: Link) {
        self.cache.reset();
        self.graph.add_edge(a, b, link.clone());
        self.graph.add_edge(b, a, link);
    }

    /// Rebuilds the rank → node index. Call after adding GPUs; `validate` does it too.
    pub fn reindex(&mut self) {
        let mut v: Vec<(u32, NodeId)> = self
            .graph
            .node_indices()
            .filter_map(|n| match &self.graph[n].kind {
                NodeKind::Gpu(g) => Some((g.rank, n)),
                _ => None,
            })
            .collect();
        v.sort_by_key(|(r, _)| *r);
        self.gpus_by_rank = v.into_iter().map(|(_, n)| n).collect();
        self.cache.reset();
    }

    /// Checks the model's invariants (see module docs) and rebuilds indexes.
    pub fn validate(&mut self) -> Result<(), ModelError> {
        for e in self.graph.edge_references() {
            let l = e.weight();
            let (from, to) = (self.describe(e.source()), self.describe(e.target()));
            if !(l.bw_gbps.is_finite() && l.bw_gbps > 0.0) {
                return Err(ModelError::BadBandwidth {
                    from,
                    to,
                    bw: l.bw_gbps,
                });
            }
            if !(l.lat_us.is_finite() && l.lat_us >= 0.0) {
                return Err(ModelError::BadLatency {
                    from,
                    to,
                    lat: l.lat_us,
                });
            }
        }
        let mut ranks: Vec<u32> = self.gpus().map(|(_, g)| g.rank).collect();
        ranks.sort_unstable();
        for (i, r) in ranks.iter().enumerate() {
            if i > 0 && ranks[i - 1] == *r {
                return Err(ModelError::DuplicateRank(*r));
            }
            if *r != i as u32 {
                return Err(ModelError::MissingRank(i as u32));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for n in self.graph.node_indices() {
            let node = &self.graph[n];
            // The ports of one multi-port NIC share its bus id; they differ by name.
            let busid = match &node.kind {
                NodeKind::Gpu(g) => Some(g.busid.clone()),
                NodeKind::PciSwitch(p) => Some(p.busid.clone()),
                NodeKind::Nic(nic) => nic.busid.as_ref().map(|b| format!("{b} {}", nic.name)),
                _ => None,
            };
            if let Some(b) = busid {
                let host = node.host.unwrap_or(0);
                if !seen.insert((host, b.clone(), std::mem::discriminant(&node.kind))) {
                    return Err(ModelError::DuplicateBusId { host, busid: b });
                }
            }
        }
        self.reindex();
        self.check_gpus_connected()?;
        Ok(())
    }

    /// Every GPU must reach the others (links taken in either direction; one pass, O(V+E)).
    fn check_gpus_connected(&self) -> Result<(), ModelError> {
        let Some(&first) = self.gpus_by_rank.first() else {
            return Ok(());
        };
        if self.gpus_by_rank.len() < 2 {
            return Ok(());
        }
        let mut seen = vec![false; self.graph.node_count()];
        let mut stack = vec![first];
        seen[first.index()] = true;
        while let Some(n) = stack.pop() {
            for m in self.graph.neighbors_undirected(n) {
                if !seen[m.index()] {
                    seen[m.index()] = true;
                    stack.push(m);
                }
            }
        }
        match self.gpus_by_rank.iter().find(|n| !seen[n.index()]) {
            Some(n) => Err(ModelError::Unreachable(self.describe(*n))),
            None => Ok(()),
        }
    }

    /// GPUs in graph order with their node ids.
    pub fn gpus(&self) -> impl Iterator<Item = (NodeId, &Gpu)> + '_ {
        self.graph
            .node_indices()
            .filter_map(move |n| match &self.graph[n].kind {
                NodeKind::Gpu(g) => Some((n, g)),
                _ => None,
            })
    }

    /// Number of GPUs (= ranks).
    pub fn n_ranks(&self) -> usize {
        self.gpus().count()
    }

    /// GPU node of a rank. Requires `reindex`/`validate` to have run after the last GPU was added.
    pub fn gpu_of_rank(&self, rank: u32) -> Option<NodeId> {
        self.gpus_by_rank.get(rank as usize).copied()
    }

    pub fn gpu(&self, n: NodeId) -> Option<&Gpu> {
        match &self.graph[n].kind {
            NodeKind::Gpu(g) => Some(g),
            _ => None,
        }
    }

    /// Nodes of one host.
    pub fn host_nodes(&self, host: u32) -> impl Iterator<Item = NodeId> + '_ {
        self.graph
            .node_indices()
            .filter(move |n| self.graph[*n].host == Some(host))
    }

    /// A short human name for a node, used in errors and tables ("GPU3", "NIC mlx5_0", "CPU0").
    pub fn describe(&self, n: NodeId) -> String {
        let node = &self.graph[n];
        let host = match (node.host, self.n_hosts > 1) {
            (Some(h), true) => format!("host{h}/"),
            _ => String::new(),
        };
        let what = match &node.kind {
            NodeKind::Gpu(g) => format!("GPU{}", g.rank),
            NodeKind::Cpu(c) => format!("CPU{}", c.numa_id),
            NodeKind::PciSwitch(p) => format!("PCI {}", p.busid),
            NodeKind::NvSwitch => "NVSwitch".to_string(),
            NodeKind::Nic(nic) => format!("NIC {}", nic.name),
            NodeKind::NetSwitch { level, index } => format!("switch L{level}.{index}"),
        };
        format!("{host}{what}")
    }
}
