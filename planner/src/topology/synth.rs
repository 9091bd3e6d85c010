//! Synthetic topologies for tests, property tests and the runtime's CPU backend.

use super::doc::*;
use super::model::*;
use super::{nccl, topology_of, LoadOptions};

/// A small deterministic PRNG (SplitMix64): no dependency, same sequence everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 99) < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.range(0, xs.len() as u64 - 1) as usize]
    }
}

fn lnk(kind: LinkKind, bw: f64, count: u32) -> Link {
    Link {
        kind,
        bw_gbps: bw,
        lat_us: nccl::default_lat(kind),
        count,
    }
}

/// One host with `n_gpus` GPUs (sm 90) under one CPU and one 400 Gb/s NIC.
/// `LinkKind::NvLink`: every GPU joined to one NVSwitch by a `bw_gbps` link each way
/// (all-to-all NVLink). Any other kind: a PCIe tree, four GPUs per switch, every PCIe link
/// `bw_gbps`.
pub fn single_host(n_gpus: u32, link: LinkKind, bw_gbps: f64) -> Topology {
    let mut t = Topology::new();
    let cpu = t.add_node(
        Some(0),
        NodeKind::Cpu(Cpu {
            numa_id: 0,
            arch: CpuArch::X86_64,
            vendor: CpuVendor::Intel,
            family_id: 6,
            model_id: 143,
        }),
    );
    let nvs = (link == LinkKind::NvLink).then(|| t.add_node(Some(0), NodeKind::NvSwitch));
    let mut sw = None;
    for i in 0..n_gpus {
        let parent = if nvs.is_some() {
            cpu
        } else {
            if i % 4 == 0 {
                let s = t.add_node(
                    Some(0),
                    NodeKind::PciSwitch(PciSwitch {
                        busid: format!("0000:{:02x}:00.0", 0x80 + i / 4),
                    }),
                );
                t.add_duplex(cpu, s, lnk(LinkKind::Pcie, bw_gbps, 1));
                sw = Some(s);
            }
            sw.expect("switch made at i % 4 == 0")
        };
        let g = t.add_node(
            Some(0),
            NodeKind::Gpu(Gpu {
                rank: i,
                dev: i,
                busid: format!("0000:{:02x}:00.0", 0x10 + i),
                sm: 90,
                gdr: true,
                mem_bw_gbps: 3350.0,
                model: None,
            }),
        );
        match nvs {
            Some(nvs) => {
                t.add_duplex(cpu, g, lnk(LinkKind::Pcie, 48.0, 1));
                t.add_duplex(g, nvs, lnk(LinkKind::NvLink, bw_gbps, 1));
            }
            None => t.add_duplex(parent, g, lnk(LinkKind::Pcie, bw_gbps, 1)),
        }
    }
    let nic = t.add_node(
        Some(0),
        NodeKind::Nic(Nic {
            busid: Some("0000:f0:00.0".into()),
            name: "mlx5_0".into(),
            dev: 0,
            speed_gbps: 50.0,
            port: 1,
            guid: 1,
            max_conn: 64,
            gdr: true,
            coll: false,
            latency_us: 0.0,
        }),
    );
    t.add_duplex(cpu, nic, lnk(LinkKind::Pcie, 48.0, 1));
    t.validate().expect("synthetic single host is valid");
    t
}

/// A random topology: 1–8 hosts, 2–64 GPUs in all, random CPUs, PCIe trees, NVLink (none,
/// NVSwitch or GPU pairs) and NICs; valid and connected. Deterministic in `seed`.
pub fn random(seed: u64) -> Topology {
    let mut doc = random_doc(seed);
    let mut w = Vec::new();
    topology_of(&mut doc, "synth", &LoadOptions::default(), &mut w)
        .unwrap_or_else(|e| panic!("synth::random({seed}) built an invalid topology: {e}"))
}

/// Link speeds a synthetic PCI device reports, in the spellings seen in real topology files.
const PCI_SPEEDS: [&str; 7] = [
    "8 GT/s",
    "16 GT/s",
    "16.0 GT/s PCIe",
    "32.0 GT/s PCIe",
    "32 GT/s PCIe/s",
    "64.0 GT/s PCIe",
    "",
];

/// Link widths a synthetic GPU reports (0: unknown).
const PCI_WIDTHS: [i64; 4] = [0, 4, 8, 16];

/// Hands out consecutive PCI bus ids, one per synthetic device.
struct BusIds(u32);

impl BusIds {
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("0000:{:02x}:00.0", self.0)
    }
}

/// What every GPU of a synthetic host shares.
struct GpuShape {
    gpus_per_host: usize,
    n_cpus: usize,
    sm: i64,
    arch: &'static str,
    nvlink: &'static str,
}

/// The document behind [`random`]: what the JSON/XML round-trip property tests start from.
pub fn random_doc(seed: u64) -> TopoDoc {
    let mut r = Rng::new(seed);
    let hosts = r.range(1, 8) as u32;
    let min_gpus = if hosts == 1 { 2 } else { 1 };
    let gpus_per_host = r.range(min_gpus, 8) as usize;
    let n_cpus = r.range(1, 2) as usize;
    let sm = *r.pick(&[70i64, 80, 86, 89, 90, 100]);
    let (arch, vendor, family, model) = *r.pick(&[
        ("x86_64", "GenuineIntel", 6i64, 143i64),
        ("x86_64", "GenuineIntel", 6, 207),
        ("x86_64", "AuthenticAMD", 175, 1),
        ("arm64", "", 0, 0),
    ]);
    let mut bus = BusIds(0x10);
    let mut cpus: Vec<CpuDoc> = (0..n_cpus)
        .map(|i| CpuDoc {
            numaid: Some(i as i64),
            arch: Some(arch.into()),
            vendor: (!vendor.is_empty()).then(|| vendor.to_string()),
            familyid: Some(family),
            modelid: Some(model),
            affinity: r.chance(50).then(|| format!("{:08x}", r.next_u64() as u32)),
            ..Default::default()
        })
        .collect();
    let nvlink = *r.pick(&["none", "nvswitch", "pairs"]);
    let shape = GpuShape {
        gpus_per_host,
        n_cpus,
        sm,
        arch,
        nvlink,
    };
    let mut pcis = random_gpu_leaves(&mut r, &shape, &mut bus);
    add_random_nics(&mut r, hosts, &mut cpus, &mut pcis, &mut bus);
    place_leaves_under_switches(&mut r, &mut cpus, pcis, &mut bus);
    let mut doc = TopoDoc::new(SystemDoc {
        cpus,
        ..Default::default()
    });
    if hosts > 1 {
        doc.cluster = Some(random_cluster(&mut r, hosts));
    }
    doc
}

/// One PCI leaf per GPU, each with the CPU it hangs under, NVLinks as `shape.nvlink` says.
fn random_gpu_leaves(r: &mut Rng, shape: &GpuShape, bus: &mut BusIds) -> Vec<(usize, PciDoc)> {
    let mut gpu_bus = Vec::new();
    // Place GPUs under random switches (possibly nested) or directly under a CPU.
    let mut pcis: Vec<(usize, PciDoc)> = Vec::new();
    for g in 0..shape.gpus_per_host {
        let gb = bus.next();
        gpu_bus.push(gb.clone());
        let mut gpu = GpuDoc {
            dev: Some(g as i64),
            sm: Some(shape.sm),
            rank: Some(g as i64),
            gdr: Some(r.range(0, 1) as i64),
            ..Default::default()
        };
        if shape.nvlink == "nvswitch" {
            gpu.nvlinks.push(NvLinkDoc {
                target: "fffffff:ff:ff.0".into(),
                count: r.range(1, 18) as i64,
                tclass: Some("0x068000".into()),
                ..Default::default()
            });
        }
        if shape.sm >= 90 && shape.arch == "arm64" && r.chance(50) {
            gpu.c2c.push(C2cDoc {
                bw: 22500,
                count: r.range(1, 10) as i64,
                ..Default::default()
            });
        }
        let leaf = PciDoc {
            busid: gb,
            class: Some("0x030200".into()),
            device: r.chance(50).then(|| "0x2335".to_string()),
            vendor: Some("0x10de".into()),
            link_speed: Some(r.pick(&PCI_SPEEDS).to_string()),
            link_width: Some(*r.pick(&PCI_WIDTHS)),
            gpu: Some(gpu),
            ..Default::default()
        };
        pcis.push((r.range(0, shape.n_cpus as u64 - 1) as usize, leaf));
    }
    if shape.nvlink == "pairs" {
        link_gpu_pairs(r, &mut pcis, &gpu_bus);
    }
    pcis
}

/// Symmetric NVLinks between neighbours 2i, 2i+1 of the GPU leaves.
fn link_gpu_pairs(r: &mut Rng, pcis: &mut [(usize, PciDoc)], gpu_bus: &[String]) {
    for i in (0..gpu_bus.len().saturating_sub(1)).step_by(2) {
        let c = r.range(1, 12) as i64;
        for (a, b) in [(i, i + 1), (i + 1, i)] {
            let target = gpu_bus[b].clone();
            pcis[a]
                .1
                .gpu
                .as_mut()
                .expect("gpu leaf")
                .nvlinks
                .push(NvLinkDoc {
                    target,
                    count: c,
                    tclass: Some("0x030200".into()),
                    ..Default::default()
                });
        }
    }
}

/// NICs, at least one when there are several hosts: some straight on a CPU, the rest as PCI
/// leaves.
fn add_random_nics(
    r: &mut Rng,
    hosts: u32,
    cpus: &mut [CpuDoc],
    pcis: &mut Vec<(usize, PciDoc)>,
    bus: &mut BusIds,
) {
    let n_cpus = cpus.len();
    let n_nics = r.range(if hosts > 1 { 1 } else { 0 }, 4) as usize;
    for k in 0..n_nics {
        let nets = (0..r.range(1, 2))
            .map(|p| NetDoc {
                name: Some(format!("mlx5_{k}_{p}")),
                dev: Some((k * 2 + p as usize) as i64),
                latency: Some(0.0),
                speed: Some(*r.pick(&[100000i64, 200000, 400000])),
                port: Some(p as i64 + 1),
                guid: Some(format!("{:#x}", r.next_u64() >> 8)),
                maxconn: Some(65536),
                gdr: Some(r.range(0, 1) as i64),
                coll: r.chance(30).then_some(1),
                ..Default::default()
            })
            .collect();
        let nic = NicDoc {
            nets,
            ..Default::default()
        };
        let cpu = r.range(0, n_cpus as u64 - 1) as usize;
        if r.chance(20) {
            cpus[cpu].nics.push(nic);
        } else {
            pcis.push((
                cpu,
                PciDoc {
                    busid: bus.next(),
                    class: Some("0x020700".into()),
                    link_speed: Some(r.pick(&PCI_SPEEDS).to_string()),
                    link_width: Some(16),
                    nic: Some(nic),
                    ..Default::default()
                },
            ));
        }
    }
}

/// Group leaves under switches: each leaf goes under a new switch, the previous switch of its
/// CPU, or straight under the CPU.
fn place_leaves_under_switches(
    r: &mut Rng,
    cpus: &mut [CpuDoc],
    pcis: Vec<(usize, PciDoc)>,
    bus: &mut BusIds,
) {
    let mut open: Vec<Option<PciDoc>> = vec![None; cpus.len()];
    for (cpu, leaf) in pcis {
        match r.range(0, 2) {
            0 => cpus[cpu].pci.push(leaf),
            1 => {
                if let Some(sw) = open[cpu].take() {
                    cpus[cpu].pci.push(sw);
                }
                let mut sw = PciDoc {
                    busid: bus.next(),
                    class: Some("0x060400".into()),
                    link_speed: Some(r.pick(&PCI_SPEEDS).to_string()),
                    link_width: Some(16),
                    ..Default::default()
                };
                if r.chance(30) {
                    // A nested switch level.
                    let inner = PciDoc {
                        busid: bus.next(),
                        class: Some("0x060400".into()),
                        link_speed: Some("32.0 GT/s PCIe".into()),
                        link_width: Some(16),
                        pci: vec![leaf],
                        ..Default::default()
                    };
                    sw.pci.push(inner);
                } else {
                    sw.pci.push(leaf);
                }
                open[cpu] = Some(sw);
            }
            _ => match open[cpu].as_mut() {
                Some(sw) => sw.pci.push(leaf),
                None => cpus[cpu].pci.push(leaf),
            },
        }
    }
    for (cpu, sw) in open.into_iter().enumerate() {
        if let Some(sw) = sw {
            cpus[cpu].pci.push(sw);
        }
    }
}

/// The fabric joining several hosts.
fn random_cluster(r: &mut Rng, hosts: u32) -> ClusterDoc {
    let fabric = r.pick(&["switch", "rail", "fat-tree"]).to_string();
    let fat = fabric == "fat-tree";
    ClusterDoc {
        nodes: hosts,
        fabric,
        nic_gbps: *r.pick(&[100.0, 200.0, 400.0]),
        oversubscription: if fat { *r.pick(&[1.0, 2.0, 3.0]) } else { 1.0 },
        hosts_per_leaf: fat.then(|| r.range(1, 4) as u32),
        switch_lat_us: DEFAULT_SWITCH_LAT_US,
    }
}
