//! The checks. Each is a small function of the inputs returning findings; each has its own test.
//! A check speaks only from evidence it can cite; what it cannot see it leaves alone.

use super::cost::Machine;
use super::env::Env;
use super::finding::Finding;
use super::nccl_log::{Graph, NcclLog};
use super::nccl_tests::Run;
use super::sysfs::Sysfs;

mod launch;
mod net;
mod p2p;
mod pcie;
pub mod perf;
mod tuning;

#[cfg(test)]
mod tests;

/// The name of every check a finding can carry (each has its row in docs/doctor.md).
pub const CHECKS: [&str; 23] = [
    "p2p-disabled",
    "p2p-level",
    "transport-downgrade",
    "rings-off-nvlink",
    "forced-algo-proto",
    "channel-limit",
    "fewer-channels",
    "socket-ifname",
    "ib-disabled",
    "master-addr",
    "rank-world",
    "ranks-joined",
    "torch-watchdog",
    "duplicate-gpu",
    "numa-nic",
    "acs-redirect",
    "iommu-translated",
    "link-width",
    "link-speed",
    "busbw-fraction",
    "wrong-results",
    "nccl-warn",
    "slow-init",
];

/// Everything the doctor read.
#[derive(Default)]
pub struct Inputs {
    pub env: Env,
    pub log: Option<NcclLog>,
    /// NCCL's graph dump: (file, graphs).
    pub graph_dump: Option<(String, Vec<Graph>)>,
    pub tests: Vec<Run>,
    pub sys: Option<Sysfs>,
    pub machine: Option<Machine>,
}

/// Every check, in report order within a severity.
pub fn run_all(i: &Inputs) -> Vec<Finding> {
    let checks: [fn(&Inputs) -> Vec<Finding>; 23] = [
        launch::duplicate_gpu,
        launch::rank_world,
        launch::ranks_joined,
        launch::torch_watchdog,
        net::master_addr,
        net::socket_ifname,
        net::ib_disabled,
        p2p::p2p_disabled,
        p2p::p2p_level,
        p2p::transport_downgrade,
        p2p::rings_off_nvlink,
        tuning::forced_algo_proto,
        tuning::channel_limit,
        tuning::fewer_channels,
        pcie::link_width,
        pcie::link_speed,
        pcie::acs_redirect,
        pcie::iommu_translated,
        pcie::numa_nic,
        perf::wrong_results,
        perf::busbw_fraction,
        perf::nccl_warnings,
        perf::slow_init,
    ];
    checks.iter().flat_map(|c| c(i)).collect()
}

impl Inputs {
    /// An NCCL variable from the environment, else from the log's echo: (value, evidence).
    pub fn nccl_var(&self, key: &str) -> Option<(String, String)> {
        if let Some(v) = self.env.get(key) {
            return Some((v.to_string(), self.env.cite(key)));
        }
        let log = self.log.as_ref()?;
        let (v, line) = log.env_value(key)?;
        Some((
            v.to_string(),
            format!("{}: {key} set by environment to {v}", log.cite(line)),
        ))
    }

    /// Evidence that the GPUs have NVLink: the topology, or NCCL's own paths or ring graph.
    pub fn nvlink(&self) -> Option<String> {
        if let Some(m) = &self.machine {
            if m.has_nvlink() {
                return Some(format!(
                    "{}: {:.1} GB/s of NVLink per GPU",
                    m.source,
                    m.nvlink_gbps()
                ));
            }
            return None;
        }
        let log = self.log.as_ref()?;
        if let Some(p) = log
            .gpu_paths
            .iter()
            .find(|p| p.kind == "NVL" || p.kind == "NVB")
        {
            return Some(format!(
                "{}: NCCL's path {} -> {} is {} at {:.1} GB/s",
                log.cite(p.line),
                p.from,
                p.to,
                p.kind,
                p.bw_gbps
            ));
        }
        if let Some(&(bw, line)) = log.nvl_links.first() {
            return Some(format!(
                "{}: NCCL's topology has NVL[{bw:.1}] links",
                log.cite(line)
            ));
        }
        None
    }

    /// NCCL's search results with where each was read: the log's, else the graph dump's.
    pub fn graphs(&self) -> Vec<(&Graph, String)> {
        if let Some(log) = &self.log {
            if !log.graphs.is_empty() {
                return log.graphs.iter().map(|g| (g, log.cite(g.line))).collect();
            }
        }
        match &self.graph_dump {
            Some((file, gs)) => gs
                .iter()
                .map(|g| (g, format!("{file}:{}", g.line)))
                .collect(),
            None => vec![],
        }
    }

    /// Nodes in the job and the evidence: NCCL's count, else the launcher's.
    pub fn nodes(&self) -> Option<(i64, String)> {
        if let Some(log) = &self.log {
            if let Some(c) = log.comms.iter().max_by_key(|c| c.nnodes) {
                return Some((
                    c.nnodes as i64,
                    format!("{}: nNodes {}", log.cite(c.line), c.nnodes),
                ));
            }
        }
        self.env.launcher_nodes()
    }

    /// Whether a finding about inter-node traffic matters: Some(true) several nodes,
    /// Some(false) one node, None unknown.
    pub fn multi_node(&self) -> Option<bool> {
        self.nodes().map(|(n, _)| n > 1)
    }
}

/// "1", "true", "yes" (NCCL reads integers: any non-zero value counts).
pub fn truthy(v: &str) -> bool {
    let v = v.trim();
    match v.parse::<i64>() {
        Ok(n) => n != 0,
        Err(_) => matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "on"),
    }
}

/// Formats GB/s.
pub fn gbps(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}
