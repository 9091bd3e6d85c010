//! What the kernel says about the machine, read under a root directory (`/sys`, or a planted
//! tree in tests): PCI devices with their link width and speed, NUMA node, IOMMU group type and
//! ACS control; network interfaces; RDMA devices. Missing files mean "not known", never a guess.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub struct PciDev {
    pub busid: String,
    /// The device's directory (cited as evidence).
    pub path: PathBuf,
    pub class: u32,
    pub vendor: u32,
    pub numa: Option<i32>,
    pub cur_width: Option<u32>,
    pub max_width: Option<u32>,
    pub cur_speed: Option<String>,
    pub max_speed: Option<String>,
    /// `iommu_group/type`: "identity" (pass-through), "DMA", "DMA-FQ" (translated).
    pub iommu_type: Option<String>,
    /// PCIe port type from the PCIe capability (4 root port, 5 switch upstream, 6 switch downstream).
    pub port_type: Option<u8>,
    /// ACS control register, when the config space shows the ACS capability.
    pub acs_ctrl: Option<u16>,
    /// Bus ids of the bridges above it, nearest first.
    pub upstream: Vec<String>,
}

impl PciDev {
    pub fn is_gpu(&self) -> bool {
        self.vendor == 0x10de && (self.class >> 16) == 0x03
    }
    pub fn is_nic(&self) -> bool {
        (self.class >> 16) == 0x02
    }
    /// ACS P2P Request Redirect is on: peer-to-peer requests go up to the root complex.
    pub fn acs_redirects(&self) -> bool {
        self.acs_ctrl.is_some_and(|c| c & 0x0004 != 0)
    }
}

#[derive(Debug, Clone, Default)]
pub struct NetIf {
    pub name: String,
    pub path: PathBuf,
    pub operstate: Option<String>,
    /// ARPHRD type: 772 is loopback.
    pub kind: Option<u32>,
    /// Has a `bridge` directory (docker0, virbr0, cni0 are bridges).
    pub bridge: bool,
}

#[derive(Debug, Clone, Default)]
pub struct IbDev {
    pub name: String,
    pub path: PathBuf,
    pub numa: Option<i32>,
    /// `ports/1/state` ("4: ACTIVE").
    pub state: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Sysfs {
    pub pci: Vec<PciDev>,
    pub nets: Vec<NetIf>,
    pub ib: Vec<IbDev>,
}

fn text(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn hex(p: &Path) -> Option<u32> {
    let s = text(p)?;
    u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn num<T: std::str::FromStr>(p: &Path) -> Option<T> {
    text(p)?.parse().ok()
}

/// "0000:1b:00.0".
fn is_busid(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

impl Sysfs {
    /// Reads what exists under `root`; an absent tree gives empty lists.
    pub fn read(root: &Path) -> Sysfs {
        let mut s = Sysfs::default();
        if let Ok(rd) = std::fs::read_dir(root.join("devices")) {
            let mut tops: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("pci"))
                .map(|e| e.path())
                .collect();
            tops.sort();
            for t in tops {
                walk(&t, &mut Vec::new(), &mut s.pci, 0);
            }
        }
        for (name, p) in entries(&root.join("class/net")) {
            s.nets.push(NetIf {
                operstate: text(&p.join("operstate")),
                kind: num(&p.join("type")),
                bridge: p.join("bridge").is_dir(),
                name,
                path: p,
            });
        }
        for (name, p) in entries(&root.join("class/infiniband")) {
            s.ib.push(IbDev {
                numa: num(&p.join("device/numa_node")),
                state: text(&p.join("ports/1/state")),
                name,
                path: p,
            });
        }
        s
    }

    pub fn gpus(&self) -> impl Iterator<Item = &PciDev> {
        self.pci.iter().filter(|d| d.is_gpu())
    }
    pub fn by_busid(&self, b: &str) -> Option<&PciDev> {
        self.pci.iter().find(|d| d.busid == b)
    }
    pub fn net(&self, name: &str) -> Option<&NetIf> {
        self.nets.iter().find(|n| n.name == name)
    }
}

fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| (e.file_name().to_string_lossy().to_string(), e.path()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Depth-first over PCI device directories (children named by bus id), bridges above first.
fn walk(dir: &Path, up: &mut Vec<String>, out: &mut Vec<PciDev>, depth: usize) {
    if depth > 32 {
        return;
    }
    for (name, p) in entries(dir) {
        if !is_busid(&name) || !p.is_dir() {
            continue;
        }
        let config = std::fs::read(p.join("config")).unwrap_or_default();
        let (port_type, acs_ctrl) = parse_config(&config);
        let mut upstream = up.clone();
        upstream.reverse();
        out.push(PciDev {
            busid: name.clone(),
            class: hex(&p.join("class")).unwrap_or(0),
            vendor: hex(&p.join("vendor")).unwrap_or(0),
            numa: num(&p.join("numa_node")),
            cur_width: num(&p.join("current_link_width")),
            max_width: num(&p.join("max_link_width")),
            cur_speed: text(&p.join("current_link_speed")),
            max_speed: text(&p.join("max_link_speed")),
            iommu_type: text(&p.join("iommu_group/type")),
            port_type,
            acs_ctrl,
            upstream,
            path: p.clone(),
        });
        up.push(name);
        walk(&p, up, out, depth + 1);
        up.pop();
    }
}

/// PCIe port type (capability 0x10) and ACS control (extended capability 0x000D) from a config
/// space image; either is `None` when the image is too short (unprivileged reads stop at 64 or
/// 256 bytes) or lacks it. Loops are bounded: a corrupt chain cannot hang.
pub fn parse_config(c: &[u8]) -> (Option<u8>, Option<u16>) {
    let rd16 = |o: usize| c.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let rd32 = |o: usize| {
        c.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut port = None;
    // Capabilities list present (status bit 4)?
    if rd16(6).is_some_and(|s| s & 0x10 != 0) {
        let mut p = c.get(0x34).copied().unwrap_or(0) as usize & !3;
        for _ in 0..48 {
            if p < 0x40 || p + 4 > c.len().min(256) {
                break;
            }
            if c[p] == 0x10 {
                port = rd16(p + 2).map(|f| ((f >> 4) & 0xf) as u8);
                break;
            }
            p = c[p + 1] as usize & !3;
        }
    }
    let mut acs = None;
    let mut p = 0x100;
    for _ in 0..96 {
        let Some(h) = rd32(p) else { break };
        if h == 0 || h == 0xffff_ffff {
            break;
        }
        if h & 0xffff == 0x000d {
            acs = rd16(p + 6);
            break;
        }
        let next = (h >> 20) as usize & !3;
        if next < 0x100 {
            break;
        }
        p = next;
    }
    (port, acs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
        /// Any config image (corrupt capability chains included) parses without panic or hang.
        #[test]
        fn random_config_space_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
            let _ = parse_config(&bytes);
        }
    }

    /// A 4 KiB config image: PCIe capability at 0x40 with `port` type, ACS at 0x100 with `ctrl`.
    pub fn config(port: u8, ctrl: u16) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        c[6] = 0x10;
        c[0x34] = 0x40;
        c[0x40] = 0x10;
        c[0x41] = 0;
        c[0x42] = port << 4;
        c[0x100..0x104].copy_from_slice(&0x0001_000du32.to_le_bytes());
        c[0x106..0x108].copy_from_slice(&ctrl.to_le_bytes());
        c
    }

    #[test]
    fn config_space_port_type_and_acs() {
        assert_eq!(parse_config(&config(6, 0x1d)), (Some(6), Some(0x1d)));
        assert_eq!(parse_config(&config(4, 0)), (Some(4), Some(0)));
        // An unprivileged 64-byte read shows neither.
        assert_eq!(parse_config(&config(6, 0x1d)[..64]), (None, None));
        assert_eq!(parse_config(&[]), (None, None));
    }

    #[test]
    fn corrupt_capability_chains_end() {
        let mut c = config(6, 4);
        c[0x41] = 0x40; // points at itself
        c[0x100..0x104].copy_from_slice(&0x1000_0001u32.to_le_bytes()); // next = 0x100, not ACS
        let (p, a) = parse_config(&c);
        assert_eq!(p, Some(6));
        assert_eq!(a, None);
    }

    #[test]
    fn an_absent_root_reads_as_nothing() {
        let s = Sysfs::read(Path::new("/nonexistent/sysfs/root"));
        assert!(s.pci.is_empty() && s.nets.is_empty() && s.ib.is_empty());
    }
}
