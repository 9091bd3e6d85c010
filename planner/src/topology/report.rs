//! A readable (and machine-readable) report of a topology: what `topoplan topo show` prints.

use super::model::*;
use super::paths::PathType;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub hosts: u32,
    pub gpus: usize,
    pub numa_domains: usize,
    pub pci_switches: usize,
    pub nvswitches: usize,
    pub nics: usize,
    pub fabric: Option<FabricReport>,
    /// GPUs of host 0.
    pub gpu_list: Vec<GpuRow>,
    pub cpu_list: Vec<CpuRow>,
    pub nic_list: Vec<NicRow>,
    pub links: Vec<LinkSummary>,
    /// Host 0: `gpu_gpu[a][b]` = path from GPU a to GPU b (by rank).
    pub gpu_gpu: Vec<Vec<Cell>>,
    /// Host 0: `gpu_nic[g][n]` = path from GPU g to NIC n (in `nic_list` order).
    pub gpu_nic: Vec<Vec<Cell>>,
    /// With several hosts: rank 0 to the first GPU of host 1.
    pub cross_host: Option<Cell>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FabricReport {
    pub kind: String,
    pub port_gbps: f64,
    pub switch_lat_us: f64,
    pub switches: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GpuRow {
    pub rank: u32,
    pub dev: u32,
    pub busid: String,
    pub model: Option<String>,
    pub sm: u32,
    pub mem_bw_gbps: f64,
    pub nvlinks: u32,
    pub nvlink_gbps: f64,
    pub numa: Option<i32>,
    pub gdr: bool,
    /// Name of the NIC this GPU sends through.
    pub nic: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    pub numa_id: i32,
    pub arch: String,
    pub vendor: String,
    pub family_id: u32,
    pub model_id: u32,
    /// Bandwidth to the other NUMA domains (GB/s), if any.
    pub inter_cpu_gbps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NicRow {
    pub name: String,
    pub dev: u32,
    pub busid: Option<String>,
    pub speed_gbps: f64,
    pub gdr: bool,
    pub coll: bool,
    pub numa: Option<i32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LinkSummary {
    pub kind: String,
    /// Directional links of this kind.
    pub links: usize,
    pub min_gbps: f64,
    pub max_gbps: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    #[serde(rename = "type")]
    pub kind: PathType,
    pub bw_gbps: f64,
    pub hops: usize,
}

fn cell(t: &Topology, a: NodeId, b: NodeId) -> Cell {
    match t.path(a, b) {
        Some(p) => Cell {
            kind: p.kind,
            bw_gbps: p.bw_gbps,
            hops: p.hops(),
        },
        None => Cell {
            kind: PathType::Dis,
            bw_gbps: 0.0,
            hops: 0,
        },
    }
}

/// The NUMA domain (CPU) with the fewest hops from a node.
fn numa_of(t: &Topology, n: NodeId, cpus: &[(NodeId, i32)]) -> Option<i32> {
    cpus.iter()
        .filter_map(|(c, id)| t.path(n, *c).map(|p| (p.hops(), *id)))
        .min_by_key(|x| x.0)
        .map(|x| x.1)
}

/// One row per GPU of host 0: its links, NUMA domain and nearest NIC.
fn gpu_rows(t: &Topology, gpu_nodes: &[NodeId], cpus: &[(NodeId, i32)]) -> Vec<GpuRow> {
    let g = &t.graph;
    gpu_nodes
        .iter()
        .map(|&n| {
            let gpu = t.gpu(n).expect("gpu node");
            let (mut links, mut bw) = (0, 0.0);
            for e in g.edges(n) {
                if e.weight().kind == LinkKind::NvLink {
                    links += e.weight().count;
                    bw += e.weight().bw_gbps;
                }
            }
            GpuRow {
                rank: gpu.rank,
                dev: gpu.dev,
                busid: gpu.busid.clone(),
                model: gpu.model.clone(),
                sm: gpu.sm,
                mem_bw_gbps: gpu.mem_bw_gbps,
                nvlinks: links,
                nvlink_gbps: bw,
                numa: numa_of(t, n, cpus),
                gdr: gpu.gdr,
                nic: t.local_nic(n).and_then(|x| match &g[x].kind {
                    NodeKind::Nic(nic) => Some(nic.name.clone()),
                    _ => None,
                }),
            }
        })
        .collect()
}

/// One row per NUMA domain of host 0.
fn cpu_rows(t: &Topology, cpus: &[(NodeId, i32)]) -> Vec<CpuRow> {
    let g = &t.graph;
    cpus.iter()
        .map(|&(n, _)| {
            let NodeKind::Cpu(c) = &g[n].kind else {
                unreachable!("filtered to CPUs")
            };
            let inter = g
                .edges(n)
                .filter(|e| e.weight().kind == LinkKind::InterCpu)
                .map(|e| e.weight().bw_gbps)
                .reduce(f64::min);
            CpuRow {
                numa_id: c.numa_id,
                arch: format!("{:?}", c.arch),
                vendor: format!("{:?}", c.vendor),
                family_id: c.family_id,
                model_id: c.model_id,
                inter_cpu_gbps: inter,
            }
        })
        .collect()
}

/// One row per NIC port of host 0.
fn nic_rows(t: &Topology, nics: &[NodeId], cpus: &[(NodeId, i32)]) -> Vec<NicRow> {
    let g = &t.graph;
    nics.iter()
        .map(|&n| {
            let NodeKind::Nic(nic) = &g[n].kind else {
                unreachable!("nics_of_host returns NICs")
            };
            NicRow {
                name: nic.name.clone(),
                dev: nic.dev,
                busid: nic.busid.clone(),
                speed_gbps: nic.speed_gbps,
                gdr: nic.gdr,
                coll: nic.coll,
                numa: numa_of(t, n, cpus),
            }
        })
        .collect()
}

/// Links by kind: how many, and their bandwidth range.
fn link_summaries(t: &Topology) -> Vec<LinkSummary> {
    let g = &t.graph;
    let mut links: Vec<LinkSummary> = Vec::new();
    for l in g.edge_weights() {
        let kind = format!("{:?}", l.kind);
        match links.iter_mut().find(|s| s.kind == kind) {
            Some(s) => {
                s.links += 1;
                s.min_gbps = s.min_gbps.min(l.bw_gbps);
                s.max_gbps = s.max_gbps.max(l.bw_gbps);
            }
            None => links.push(LinkSummary {
                kind,
                links: 1,
                min_gbps: l.bw_gbps,
                max_gbps: l.bw_gbps,
            }),
        }
    }
    links
}

pub fn report(t: &Topology) -> Report {
    let g = &t.graph;
    let count = |f: &dyn Fn(&NodeKind) -> bool| g.node_weights().filter(|n| f(&n.kind)).count();
    let host0 = |n: NodeId| g[n].host.unwrap_or(0) == 0;
    let cpus: Vec<(NodeId, i32)> = g
        .node_indices()
        .filter(|n| host0(*n))
        .filter_map(|n| match &g[n].kind {
            NodeKind::Cpu(c) => Some((n, c.numa_id)),
            _ => None,
        })
        .collect();
    let ranks = t.gpus_of_host(0);
    let gpu_nodes: Vec<NodeId> = ranks.iter().filter_map(|r| t.gpu_of_rank(*r)).collect();
    let nics = t.nics_of_host(0);
    let gpu_list = gpu_rows(t, &gpu_nodes, &cpus);
    let cpu_list = cpu_rows(t, &cpus);
    let nic_list = nic_rows(t, &nics, &cpus);
    let links = link_summaries(t);
    let gpu_gpu = gpu_nodes
        .iter()
        .map(|&a| gpu_nodes.iter().map(|&b| cell(t, a, b)).collect())
        .collect();
    let gpu_nic = gpu_nodes
        .iter()
        .map(|&a| nics.iter().map(|&b| cell(t, a, b)).collect())
        .collect();
    let cross_host = if t.n_hosts > 1 {
        let other = t.gpus_of_host(1);
        match (ranks.first(), other.first()) {
            (Some(&a), Some(&b)) => Some(cell(
                t,
                t.gpu_of_rank(a).expect("rank"),
                t.gpu_of_rank(b).expect("rank"),
            )),
            _ => None,
        }
    } else {
        None
    };
    Report {
        hosts: t.n_hosts,
        gpus: t.n_ranks(),
        numa_domains: count(&|k| matches!(k, NodeKind::Cpu(_))),
        pci_switches: count(&|k| matches!(k, NodeKind::PciSwitch(_))),
        nvswitches: count(&|k| matches!(k, NodeKind::NvSwitch)),
        nics: count(&|k| matches!(k, NodeKind::Nic(_))),
        fabric: t.fabric.as_ref().map(|f| FabricReport {
            kind: match &f.kind {
                FabricKind::SingleSwitch => "switch".to_string(),
                FabricKind::RailOptimized => "rail".to_string(),
                FabricKind::FatTree {
                    hosts_per_leaf,
                    oversubscription,
                } => format!(
                    "fat-tree ({hosts_per_leaf} hosts per leaf, oversubscription {oversubscription}:1)"
                ),
            },
            port_gbps: f.port_gbps,
            switch_lat_us: f.switch_lat_us,
            switches: count(&|k| matches!(k, NodeKind::NetSwitch { .. })),
        }),
        gpu_list,
        cpu_list,
        nic_list,
        links,
        gpu_gpu,
        gpu_nic,
        cross_host,
    }
}

fn fmt_cell(c: &Cell) -> String {
    match c.kind {
        PathType::Loc => "X".to_string(),
        PathType::Dis => "-".to_string(),
        k => format!("{} {}", k, fmt_bw(c.bw_gbps)),
    }
}

fn fmt_bw(bw: f64) -> String {
    if bw >= 10.0 {
        format!("{bw:.1}")
    } else {
        format!("{bw:.2}")
    }
}

fn matrix(out: &mut String, rows: &[String], cols: &[String], cells: &[Vec<Cell>]) {
    let body: Vec<Vec<String>> = cells
        .iter()
        .map(|r| r.iter().map(fmt_cell).collect())
        .collect();
    let w0 = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols.len())
        .map(|j| {
            body.iter()
                .map(|r| r[j].len())
                .chain([cols[j].len()])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let _ = write!(out, "  {:w0$}", "");
    for (j, c) in cols.iter().enumerate() {
        let _ = write!(out, "  {:>w$}", c, w = widths[j]);
    }
    out.push('\n');
    for (i, r) in rows.iter().enumerate() {
        let _ = write!(out, "  {r:w0$}");
        for (j, c) in body[i].iter().enumerate() {
            let _ = write!(out, "  {:>w$}", c, w = widths[j]);
        }
        out.push('\n');
    }
}

/// The human-readable form.
/// The GPU, NUMA domain and NIC tables of `render`.
fn render_devices(s: &mut String, r: &Report, host: &str) {
    let _ = writeln!(s, "\nGPUs{host}:");
    let _ = writeln!(
        s,
        "  rank  dev  bus id        model      sm  mem GB/s  NVLink                NUMA  GDR  NIC"
    );
    for g in &r.gpu_list {
        let nv = if g.nvlinks > 0 {
            format!("{} links {} GB/s", g.nvlinks, fmt_bw(g.nvlink_gbps))
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            s,
            "  {:<4}  {:<3}  {:<12}  {:<9}  {:<3} {:>8}  {:<20}  {:<4}  {:<3}  {}",
            g.rank,
            g.dev,
            g.busid,
            g.model.as_deref().unwrap_or("?"),
            g.sm,
            format!("{:.0}", g.mem_bw_gbps),
            nv,
            g.numa.map(|n| n.to_string()).unwrap_or("-".into()),
            if g.gdr { "yes" } else { "no" },
            g.nic.as_deref().unwrap_or("-"),
        );
    }
    let _ = writeln!(s, "\nNUMA domains{host}:");
    for c in &r.cpu_list {
        let _ = writeln!(
            s,
            "  CPU{}  {} {} family {} model {}{}",
            c.numa_id,
            c.arch,
            c.vendor,
            c.family_id,
            c.model_id,
            c.inter_cpu_gbps
                .map(|b| format!(", {} GB/s to the other domains", fmt_bw(b)))
                .unwrap_or_default()
        );
    }
    if !r.nic_list.is_empty() {
        let _ = writeln!(s, "\nNIC ports{host}:");
        for n in &r.nic_list {
            let _ = writeln!(
                s,
                "  {:<16} dev {:<3} {:<14} {:>7} GB/s ({} Gb/s)  NUMA {}  GDR {}{}",
                n.name,
                n.dev,
                n.busid.as_deref().unwrap_or("(on CPU)"),
                fmt_bw(n.speed_gbps),
                n.speed_gbps * 8.0,
                n.numa.map(|n| n.to_string()).unwrap_or("-".into()),
                if n.gdr { "yes" } else { "no" },
                if n.coll { "  CollNet" } else { "" },
            );
        }
    }
}

pub fn render(r: &Report, name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{name}: {} host{}, {} GPU{}, {} NUMA domain{}, {} PCIe switch{}, {} NVSwitch node{}, {} NIC port{}",
        r.hosts,
        if r.hosts == 1 { "" } else { "s" },
        r.gpus,
        if r.gpus == 1 { "" } else { "s" },
        r.numa_domains,
        if r.numa_domains == 1 { "" } else { "s" },
        r.pci_switches,
        if r.pci_switches == 1 { "" } else { "es" },
        r.nvswitches,
        if r.nvswitches == 1 { "" } else { "s" },
        r.nics,
        if r.nics == 1 { "" } else { "s" },
    );
    if let Some(f) = &r.fabric {
        let _ = writeln!(
            s,
            "fabric: {}, {} switches, NIC ports {} GB/s ({} Gb/s), {} µs per switch hop",
            f.kind,
            f.switches,
            fmt_bw(f.port_gbps),
            f.port_gbps * 8.0,
            f.switch_lat_us
        );
    }
    let host = if r.hosts > 1 { " (host 0)" } else { "" };
    render_devices(&mut s, r, host);
    let _ = writeln!(s, "\nLinks (directional):");
    for l in &r.links {
        let bw = if (l.max_gbps - l.min_gbps).abs() < 1e-9 {
            format!("{} GB/s", fmt_bw(l.min_gbps))
        } else {
            format!("{}–{} GB/s", fmt_bw(l.min_gbps), fmt_bw(l.max_gbps))
        };
        let _ = writeln!(s, "  {:<9} {:>6}  {}", l.kind, l.links, bw);
    }
    let gnames: Vec<String> = r
        .gpu_list
        .iter()
        .map(|g| format!("GPU{}", g.rank))
        .collect();
    if !gnames.is_empty() {
        let _ = writeln!(s, "\nGPU × GPU{host}: NCCL path type and bottleneck GB/s");
        matrix(&mut s, &gnames, &gnames, &r.gpu_gpu);
    }
    if !r.nic_list.is_empty() && !gnames.is_empty() {
        let nnames: Vec<String> = r.nic_list.iter().map(|n| n.name.clone()).collect();
        let _ = writeln!(s, "\nGPU × NIC{host}:");
        matrix(&mut s, &gnames, &nnames, &r.gpu_nic);
    }
    if let Some(c) = &r.cross_host {
        let _ = writeln!(
            s,
            "\nAcross hosts (GPU{} of host 0 → first GPU of host 1): {}",
            r.gpu_list.first().map(|g| g.rank).unwrap_or(0),
            fmt_cell(c)
        );
    }
    let _ = writeln!(
        s,
        "\nPath types, best to worst: LOC self, NVL NVLink (direct or NVSwitch), NVB NVLink via one GPU, \
         C2C, PIX one PCIe switch, PXB several PCIe switches, P2C, PXN NVLink to a GPU next to the NIC, \
         PHB through the CPU, SYS across NUMA domains, NET across hosts."
    );
    s
}
