//! Multi-node clusters: `nodes` copies of one machine joined by a network fabric.
//!
//! Fabrics (docs/topology.md, "Clusters"):
//! - `switch`: every NIC on one switch;
//! - `rail`: NIC i of every host on leaf switch i (rail i); with several rails, every leaf joins
//!   every spine (one per rail, at most one per node, so that each link carries a whole port),
//!   non-blocking;
//! - `fat-tree`: `hosts_per_leaf` hosts per leaf, every leaf joins every spine (one spine per NIC
//!   of a host); leaf uplinks carry 1/`oversubscription` of the leaf's host-facing bandwidth.
//!
//! Switch radix is not modelled: a leaf holds as many ports as needed; uplinks between a leaf
//! and a spine are one aggregated link.

use super::doc::{ClusterDoc, TopoDoc};
use super::error::TopoError;
use super::model::*;

/// The fabric names the CLI and the JSON `cluster.fabric` field accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricChoice {
    Switch,
    Rail,
    FatTree,
}

impl FabricChoice {
    pub fn parse(s: &str) -> Option<FabricChoice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "switch" | "single-switch" => Some(FabricChoice::Switch),
            "rail" | "rail-optimized" => Some(FabricChoice::Rail),
            "fat-tree" | "fattree" => Some(FabricChoice::FatTree),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FabricChoice::Switch => "switch",
            FabricChoice::Rail => "rail",
            FabricChoice::FatTree => "fat-tree",
        }
    }
}

/// Largest cluster `scale` builds (hosts).
pub const MAX_NODES: u32 = 65_536;

/// The model's fabric for a `cluster` section (errors are plain messages naming the field).
pub fn fabric_of(c: &ClusterDoc, node: &Topology) -> Result<Fabric, String> {
    let choice = FabricChoice::parse(&c.fabric).ok_or_else(|| {
        format!(
            "fabric \"{}\" is not one of \"switch\", \"rail\", \"fat-tree\"",
            c.fabric
        )
    })?;
    if !(c.nic_gbps.is_finite() && c.nic_gbps > 0.0) {
        return Err(format!("nic_gbps {} must be finite and > 0", c.nic_gbps));
    }
    if !(c.oversubscription.is_finite() && c.oversubscription >= 1.0) {
        return Err(format!(
            "oversubscription {} must be finite and >= 1 (1 = non-blocking)",
            c.oversubscription
        ));
    }
    if choice != FabricChoice::FatTree && c.oversubscription != 1.0 {
        return Err(format!(
            "oversubscription {} applies to the fat-tree fabric only",
            c.oversubscription
        ));
    }
    if !(c.switch_lat_us.is_finite() && c.switch_lat_us >= 0.0) {
        return Err(format!(
            "switch_lat_us {} must be finite and >= 0",
            c.switch_lat_us
        ));
    }
    let nics = node.nics_of_host(0).len().max(1) as u32;
    let kind = match choice {
        FabricChoice::Switch => FabricKind::SingleSwitch,
        FabricChoice::Rail => FabricKind::RailOptimized,
        FabricChoice::FatTree => {
            let hpl = c.hosts_per_leaf.unwrap_or((32 / nics).max(1));
            if hpl == 0 {
                return Err("hosts_per_leaf must be >= 1".to_string());
            }
            FabricKind::FatTree {
                hosts_per_leaf: hpl,
                oversubscription: c.oversubscription,
            }
        }
    };
    Ok(Fabric {
        kind,
        port_gbps: c.nic_gbps / 8.0,
        switch_lat_us: c.switch_lat_us,
    })
}

/// Adds a `cluster` section to a single-machine document (what `topoplan topo scale` writes).
pub fn scale_doc(doc: &TopoDoc, cluster: ClusterDoc) -> Result<TopoDoc, TopoError> {
    if doc.cluster.is_some() {
        return Err(TopoError::Unsupported(
            "the input is already a cluster; scale its single-node file instead".to_string(),
        ));
    }
    let mut out = doc.clone();
    out.cluster = Some(cluster);
    Ok(out)
}

/// Joins every host's NICs (`host_nics`, each host's in the same order) with the fabric's
/// switches and links.
fn wire_fabric(t: &mut Topology, fabric: &Fabric, host_nics: &[Vec<NodeId>], nodes: u32) {
    let net_link = |bw: f64| Link {
        kind: LinkKind::Network,
        bw_gbps: bw,
        lat_us: fabric.switch_lat_us,
        count: 1,
    };
    let k = host_nics.first().map_or(0, Vec::len);
    let port = fabric.port_gbps;
    let switch = |t: &mut Topology, level: u32, index: u32| {
        t.graph.add_node(Node {
            host: None,
            kind: NodeKind::NetSwitch { level, index },
        })
    };
    match &fabric.kind {
        FabricKind::SingleSwitch => {
            let s = switch(t, 0, 0);
            for hn in host_nics {
                for &nic in hn {
                    t.graph.add_edge(nic, s, net_link(port));
                    t.graph.add_edge(s, nic, net_link(port));
                }
            }
        }
        FabricKind::RailOptimized => {
            let leaves: Vec<NodeId> = (0..k).map(|i| switch(t, 0, i as u32)).collect();
            for hn in host_nics {
                for (i, &nic) in hn.iter().enumerate() {
                    t.graph.add_edge(nic, leaves[i], net_link(port));
                    t.graph.add_edge(leaves[i], nic, net_link(port));
                }
            }
            if k > 1 && nodes > 1 {
                // Non-blocking: each leaf's uplinks carry its `nodes` ports, spread over at most
                // `k` spines, so that one flow through a spine still gets a whole port.
                let n_spines = k.min(nodes as usize);
                let spines: Vec<NodeId> = (0..n_spines).map(|i| switch(t, 1, i as u32)).collect();
                let up = nodes as f64 * port / n_spines as f64;
                for &l in &leaves {
                    for &s in &spines {
                        t.graph.add_edge(l, s, net_link(up));
                        t.graph.add_edge(s, l, net_link(up));
                    }
                }
            }
        }
        FabricKind::FatTree {
            hosts_per_leaf,
            oversubscription,
        } => {
            let hpl = (*hosts_per_leaf).max(1);
            let n_leaves = nodes.div_ceil(hpl);
            let leaves: Vec<NodeId> = (0..n_leaves).map(|i| switch(t, 0, i)).collect();
            for (h, hn) in host_nics.iter().enumerate() {
                let l = leaves[h / hpl as usize];
                for &nic in hn {
                    t.graph.add_edge(nic, l, net_link(port));
                    t.graph.add_edge(l, nic, net_link(port));
                }
            }
            if n_leaves > 1 {
                let n_spines = k as u32;
                let spines: Vec<NodeId> = (0..n_spines).map(|i| switch(t, 1, i)).collect();
                let up = hpl as f64 * k as f64 * port / (oversubscription * n_spines as f64);
                for &l in &leaves {
                    for &s in &spines {
                        t.graph.add_edge(l, s, net_link(up));
                        t.graph.add_edge(s, l, net_link(up));
                    }
                }
            }
        }
    }
}

/// Replicates a single-machine topology `nodes` times and joins the hosts' NICs with `fabric`.
/// Rank r of host h becomes rank h × (GPUs per host) + r; every NIC runs at the fabric's port
/// speed.
pub fn scale(node: &Topology, nodes: u32, fabric: Fabric) -> Result<Topology, TopoError> {
    if node.n_hosts > 1 || node.fabric.is_some() {
        return Err(TopoError::Unsupported(
            "scale takes a single machine; this topology already has several hosts".to_string(),
        ));
    }
    if nodes == 0 || nodes > MAX_NODES {
        return Err(TopoError::Unsupported(format!(
            "nodes must be between 1 and {MAX_NODES}, not {nodes}"
        )));
    }
    if !(fabric.port_gbps.is_finite() && fabric.port_gbps > 0.0) {
        return Err(TopoError::Unsupported(format!(
            "NIC port speed {} GB/s must be finite and > 0",
            fabric.port_gbps
        )));
    }
    let nics: Vec<NodeId> = node.nics_of_host(0);
    if nics.is_empty() {
        return Err(TopoError::Unsupported(
            "the machine has no NIC to join the fabric with (a <nic> element is needed)"
                .to_string(),
        ));
    }
    let n_gpus = node.gpus().count() as u32;
    let mut t = Topology::new();
    t.graph
        .reserve_nodes(node.graph.node_count() * nodes as usize + 64);
    t.graph
        .reserve_edges(node.graph.edge_count() * nodes as usize + 4 * nics.len() * nodes as usize);
    // host → its NIC node ids in the new graph, in `nics` order.
    let mut host_nics: Vec<Vec<NodeId>> = Vec::with_capacity(nodes as usize);
    let base_of_nic: Vec<usize> = nics.iter().map(|n| n.index()).collect();
    for h in 0..nodes {
        let first = t.graph.node_count();
        for n in node.graph.node_indices() {
            let mut kind = node.graph[n].kind.clone();
            match &mut kind {
                NodeKind::Gpu(g) => g.rank += h * n_gpus,
                NodeKind::Nic(nic) => nic.speed_gbps = fabric.port_gbps,
                _ => {}
            }
            t.graph.add_node(Node {
                host: Some(h),
                kind,
            });
        }
        for e in node.graph.edge_indices() {
            let (a, b) = node.graph.edge_endpoints(e).expect("edge exists");
            t.graph.add_edge(
                NodeId::new(first + a.index()),
                NodeId::new(first + b.index()),
                node.graph[e].clone(),
            );
        }
        host_nics.push(base_of_nic.iter().map(|i| NodeId::new(first + i)).collect());
    }
    wire_fabric(&mut t, &fabric, &host_nics, nodes);
    t.n_hosts = nodes;
    t.fabric = Some(fabric);
    t.validate()
        .map_err(|e| TopoError::Unsupported(format!("scaled topology is invalid: {e}")))?;
    Ok(t)
}
