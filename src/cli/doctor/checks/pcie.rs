//! PCIe as the kernel reports it: link width and speed below nominal, ACS redirecting P2P on
//! switch ports, a translating IOMMU, GPUs without a NIC on their NUMA node.

use super::Inputs;
use crate::cli::doctor::finding::{Finding, Severity};
use crate::cli::doctor::sysfs::PciDev;

/// GB/s of one direction for a width and a sysfs speed ("32.0 GT/s PCIe"), NCCL's table.
fn link_gbps(width: u32, speed: &str) -> Option<f64> {
    let gt: f64 = speed.split_whitespace().next()?.parse().ok()?;
    // Per-lane rate NCCL uses (x100 Mbps): 2.5→15, 5→30, 8→60, 16→120, 32→240, 64→480.
    let per = match gt {
        g if g >= 64.0 => 480.0,
        g if g >= 32.0 => 240.0,
        g if g >= 16.0 => 120.0,
        g if g >= 8.0 => 60.0,
        g if g >= 5.0 => 30.0,
        _ => 15.0,
    };
    Some(width as f64 * per / 80.0)
}

fn kind(d: &PciDev) -> &'static str {
    if d.is_gpu() {
        "GPU"
    } else {
        "NIC"
    }
}

/// A GPU or NIC link trained to fewer lanes than it has.
pub fn link_width(i: &Inputs) -> Vec<Finding> {
    let Some(s) = &i.sys else { return vec![] };
    s.pci
        .iter()
        .filter(|d| d.is_gpu() || d.is_nic())
        .filter_map(|d| {
            let (c, m) = (d.cur_width?, d.max_width?);
            if c == 0 || c >= m {
                return None;
            }
            let speed = d.max_speed.as_deref().unwrap_or("");
            let cost = match (link_gbps(c, speed), link_gbps(m, speed)) {
                (Some(a), Some(b)) => Some(format!("{a:.0} GB/s each way instead of {b:.0}: host copies, PCIe P2P and GPUDirect RDMA through it at {:.0}%", 100.0 * c as f64 / m as f64)),
                _ => None,
            };
            Some(
                Finding::new("link-width", Severity::Warning, format!("{} {} runs its PCIe link at x{c} of x{m}", kind(d), d.busid))
                    .evidence(format!("{}/current_link_width: {c}", d.path.display()))
                    .evidence(format!("{}/max_link_width: {m}", d.path.display()))
                    .cost(cost)
                    .fix("reseat the card or its riser, check the slot's wiring (some slots are x8) and the BIOS bifurcation setting; `lspci -vv` shows LnkSta against LnkCap"),
            )
        })
        .collect()
}

/// A GPU or NIC link below its maximum speed (GPUs slow their link when idle: info only).
pub fn link_speed(i: &Inputs) -> Vec<Finding> {
    let Some(s) = &i.sys else { return vec![] };
    s.pci
        .iter()
        .filter(|d| d.is_gpu() || d.is_nic())
        .filter_map(|d| {
            let (c, m) = (d.cur_speed.as_deref()?, d.max_speed.as_deref()?);
            let (cg, mg) = (c.split_whitespace().next()?.parse::<f64>().ok()?, m.split_whitespace().next()?.parse::<f64>().ok()?);
            if cg >= mg {
                return None;
            }
            Some(
                Finding::new("link-speed", Severity::Info, format!("{} {} links at {c} of {m}", kind(d), d.busid))
                    .evidence(format!("{}/current_link_speed: {c}", d.path.display()))
                    .evidence(format!("{}/max_link_speed: {m}", d.path.display()))
                    .fix("GPUs drop link speed when idle: read it again under load (during a transfer); if it stays low, check the slot, riser and BIOS PCIe generation setting"),
            )
        })
        .collect()
}

/// ACS P2P Request Redirect on a PCIe switch downstream port above a GPU.
pub fn acs_redirect(i: &Inputs) -> Vec<Finding> {
    let Some(s) = &i.sys else { return vec![] };
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for g in s.gpus() {
        for b in &g.upstream {
            let Some(br) = s.by_busid(b) else { continue };
            if br.port_type != Some(6) || !br.acs_redirects() || seen.contains(&br.busid) {
                continue;
            }
            seen.push(br.busid.clone());
            let nvl = i.nvlink();
            out.push(
                Finding::new(
                    "acs-redirect",
                    if nvl.is_some() { Severity::Warning } else { Severity::Error },
                    format!("PCIe switch port {} above GPU {} redirects peer-to-peer traffic to the root complex (ACS)", br.busid, g.busid),
                )
                .evidence(format!("{}/config: ACS control {:#06x} (P2P Request Redirect on)", br.path.display(), br.acs_ctrl.unwrap_or(0)))
                .evidence(format!("{}: GPU below it", g.path.display()))
                .cost(Some(if nvl.is_some() {
                    "GPU-to-GPU traffic rides NVLink, but GPUDirect RDMA to NICs under the same switch detours through the CPU".to_string()
                } else {
                    "PCIe P2P between GPUs under this switch detours through the CPU: slower, and with the IOMMU on it can hang".to_string()
                }))
                .fix("disable ACS on the switch ports (BIOS setting, or `setpci -s <port> ECAP_ACS+0x6.w=0000` at boot) on bare metal; in VMs keep it and use a topology file (NCCL_TOPO_FILE)"),
            );
        }
    }
    out
}

/// The IOMMU translating GPU DMA (not pass-through).
pub fn iommu_translated(i: &Inputs) -> Vec<Finding> {
    let Some(s) = &i.sys else { return vec![] };
    let gpus: Vec<&PciDev> = s
        .gpus()
        .filter(|g| matches!(g.iommu_type.as_deref(), Some("DMA") | Some("DMA-FQ")))
        .collect();
    let Some(g) = gpus.first() else { return vec![] };
    let nvl = i.nvlink();
    let mut f = Finding::new(
        "iommu-translated",
        if nvl.is_some() {
            Severity::Info
        } else {
            Severity::Warning
        },
        format!(
            "the IOMMU translates DMA for {} GPU(s): PCIe P2P between them may fail or crawl",
            gpus.len()
        ),
    )
    .evidence(format!(
        "{}/iommu_group/type: {}",
        g.path.display(),
        g.iommu_type.as_deref().unwrap_or("")
    ));
    if let Some(n) = nvl {
        f = f.evidence(n);
    }
    f.fix("boot with iommu=pt (Intel: intel_iommu=on iommu=pt; AMD: amd_iommu=on iommu=pt), or turn the IOMMU off in the BIOS where isolation is not needed")
        .into_vec()
}

/// A GPU whose NUMA node has no RDMA NIC while another node has one: from sysfs, or from
/// NCCL's own GPU-to-NIC paths crossing the CPU interconnect (SYS) while it uses RDMA NICs.
pub fn numa_nic(i: &Inputs) -> Vec<Finding> {
    let mut out = numa_nic_from_log(i);
    if out.is_empty() {
        out = numa_nic_from_sysfs(i);
    }
    out
}

fn numa_nic_from_log(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let Some(dev) = log.ib_devices.first() else {
        return vec![];
    };
    let mut out: Vec<Finding> = Vec::new();
    for gpu in log
        .net_paths
        .iter()
        .map(|p| p.from.as_str())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let paths: Vec<_> = log.net_paths.iter().filter(|p| p.from == gpu).collect();
        // Only when every NIC is across the socket link from this GPU.
        if paths.is_empty() || !paths.iter().all(|p| p.kind == "SYS") {
            continue;
        }
        let p = paths[0];
        out.push(
            Finding::new("numa-nic", Severity::Warning, format!("NCCL finds every NIC of {gpu} across the CPU interconnect (SYS): its network traffic crosses sockets"))
                .evidence(format!("{}: {gpu} -> {} ({}/{:.1} GB/s)", log.cite(p.line), p.to, p.kind, p.bw_gbps))
                .evidence(format!("{}: NET/IB : Using {}", log.cite(dev.line), dev.text))
                .cost(Some(format!("this GPU's inter-node traffic limited to {:.1} GB/s by the path NCCL computed", p.bw_gbps)))
                .fix("put a NIC on each socket's PCIe tree and bind each rank to its GPU's NUMA node; in a VM, expose the NUMA layout (or pass NCCL_TOPO_FILE)"),
        );
    }
    out
}

fn numa_nic_from_sysfs(i: &Inputs) -> Vec<Finding> {
    let Some(s) = &i.sys else { return vec![] };
    let nics: Vec<(i32, String)> =
        s.ib.iter()
            .filter_map(|d| {
                d.numa
                    .filter(|&n| n >= 0)
                    .map(|n| (n, format!("{}/device/numa_node: {n}", d.path.display())))
            })
            .collect();
    if nics.is_empty() {
        return vec![];
    }
    s.gpus()
        .filter_map(|g| {
            let n = g.numa.filter(|&n| n >= 0)?;
            if nics.iter().any(|x| x.0 == n) {
                return None;
            }
            Some(
                Finding::new("numa-nic", Severity::Warning, format!("GPU {} is on NUMA node {n}, which has no RDMA NIC: its network traffic crosses the CPU interconnect", g.busid))
                    .evidence(format!("{}/numa_node: {n}", g.path.display()))
                    .evidence(nics[0].1.clone())
                    .cost(Some("inter-node bandwidth of this GPU bounded by the socket link and the remote NIC it shares".into()))
                    .fix("bind each rank to its GPU's NUMA node (numactl --cpunodebind, or the launcher's --cpu-bind) and give each socket a NIC; NCCL pairs GPUs with the nearest NIC by PCI distance"),
            )
        })
        .collect()
}
