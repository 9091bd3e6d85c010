//! The document form of a topology: a typed mirror of NCCL's topology XML tree, which is also
//! topoplan's JSON form (`docs/topology-json.md`).
//!
//! The document keeps every element and attribute NCCL reads, spelled as written (strings stay
//! strings, so `link_speed="32 GT/s PCIe/s"` survives a round trip), plus unknown attributes in
//! `extra`. Interpretation (bandwidths, defaults, skeleton completion) happens in `build`, never
//! here, so XML → JSON → XML is lossless. Element positions (`at`) are kept for error messages
//! and never compared or serialized.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON form written in `"version"`.
pub const JSON_VERSION: u32 = 1;

/// Where an element was read from: a line/column in an XML file, and/or a path in a JSON
/// document. Always compares equal, so documents compare by content only.
#[derive(Clone, Debug, Default)]
pub struct At {
    pub line: u32,
    pub col: u32,
}

impl PartialEq for At {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Unknown attributes, kept verbatim so nothing is lost in a round trip.
pub type Extra = BTreeMap<String, String>;

fn is_empty_extra(e: &Extra) -> bool {
    e.is_empty()
}

/// A whole topology file: one machine (`system`), optional skeleton assumptions, and optionally a
/// `cluster` section that replicates the machine over a network fabric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopoDoc {
    /// Format version of the JSON form; must be 1.
    pub version: u32,
    pub system: SystemDoc,
    /// Assumptions for skeleton files (cloud `NCCL_TOPO_FILE`s without `<gpu>` elements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume: Option<Assume>,
    /// Multi-node cluster built from `system` (written by `topoplan topo scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterDoc>,
}

/// `<system version="1">`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SystemDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub cpus: Vec<CpuDoc>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<cpu>`: a NUMA domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CpuDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numaid: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub familyid: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelid: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci: Vec<PciDoc>,
    /// NICs attached to the CPU without a PCI device (virtual NICs such as virtio `eth0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<NicDoc>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<pci>`: a PCI switch/bridge, or the PCI function of a GPU (`gpu` set) or NIC (`nic` set).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PciDoc {
    pub busid: String,
    #[serde(default, rename = "class", skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsystem_vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsystem_device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_width: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci: Vec<PciDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicDoc>,
    /// `<pcilink target="busid"/>` children (Broadcom virtual-switch P2P links).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pcilinks: Vec<PciLinkDoc>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PciLinkDoc {
    pub target: String,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<gpu>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct GpuDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm: Option<i64>,
    /// NCCL skips a `<gpu>` without a rank entirely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdr: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlinks: Vec<NvLinkDoc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub c2c: Vec<C2cDoc>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<nvlink target count tclass>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NvLinkDoc {
    pub target: String,
    pub count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tclass: Option<String>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<c2c bw count>`: bw is per link in MB/s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct C2cDoc {
    pub bw: i64,
    pub count: i64,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<nic>`: groups the `<net>` ports of one NIC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NicDoc {
    #[serde(default)]
    pub nets: Vec<NetDoc>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// `<net>`: one network port. `speed` is in Mb/s as NCCL writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NetDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// NCCL ignores a `<net>` without `dev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxconn: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdr: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coll: Option<i64>,
    #[serde(default, skip_serializing_if = "is_empty_extra")]
    pub extra: Extra,
    #[serde(skip)]
    pub at: At,
}

/// Assumptions applied to skeleton files (see `docs/topology.md`, "Skeleton files").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Assume {
    /// GPU model name (`h100-sxm`, `a100-sxm`, ...; `topoplan topo show --help` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Speed of skeleton NICs in Gbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_gbps: Option<f64>,
}

/// The `cluster` section: `nodes` copies of `system` joined by a fabric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDoc {
    pub nodes: u32,
    /// `"switch"`, `"rail"` or `"fat-tree"`.
    pub fabric: String,
    /// NIC port speed in Gbit/s (every NIC of every node is set to it).
    pub nic_gbps: f64,
    /// Leaf uplink oversubscription (down:up bandwidth); 1 = non-blocking.
    #[serde(default = "one")]
    pub oversubscription: f64,
    /// Hosts per leaf switch (fat tree only); default 32 / NICs per host, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<u32>,
    /// Latency of one switch hop in µs.
    #[serde(default = "default_switch_lat")]
    pub switch_lat_us: f64,
}

fn one() -> f64 {
    1.0
}

/// Default per-hop switch latency (µs): a typical InfiniBand/RoCE switch port-to-port figure.
pub const DEFAULT_SWITCH_LAT_US: f64 = 0.6;

fn default_switch_lat() -> f64 {
    DEFAULT_SWITCH_LAT_US
}

impl TopoDoc {
    pub fn new(system: SystemDoc) -> Self {
        TopoDoc {
            version: JSON_VERSION,
            system,
            assume: None,
            cluster: None,
        }
    }
}
