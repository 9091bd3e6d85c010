//! `topoplan detect`: the local machine's topology in NCCL's XML form (what
//! `NCCL_TOPO_DUMP_FILE` writes), from CUDA device attributes, NVML (NVLink state and peers,
//! loaded at run time when present) and sysfs (PCI class, ids and link; NICs; CPU).
//!
//! The probing is split from the writing: [`Machine`] is plain data, [`Machine::to_xml`] is pure
//! and tested against the dump NCCL wrote on the lent 2×H200 machine.

// Unsafe: the driver and NVML queries go through their raw C API; each block states why it is sound.
#![allow(unsafe_code)]

use cuda::device::{driver_present, drv};
use cuda::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq)]
pub struct GpuInfo {
    /// `dddd:bb:dd.f`, lower case.
    pub busid: String,
    pub sm: u32,
    pub class: String,
    pub vendor: String,
    pub device: String,
    pub subsystem_vendor: String,
    pub subsystem_device: String,
    pub link_speed: String,
    pub link_width: String,
    /// NVLink peers: (target bus id, link count).
    pub nvlinks: Vec<(String, u32)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NicInfo {
    pub name: String,
    /// Mbit/s.
    pub speed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub arch: String,
    pub vendor: String,
    pub family: String,
    pub model: String,
    pub gpus: Vec<GpuInfo>,
    pub nics: Vec<NicInfo>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

impl Machine {
    /// NCCL's topology XML (version 1): one CPU holding every GPU's PCI device and the NICs.
    pub fn to_xml(&self) -> String {
        let mut x = String::from("<system version=\"1\">\n");
        let _ = writeln!(
            x,
            "  <cpu numaid=\"-1\" arch=\"{}\" vendor=\"{}\" familyid=\"{}\" modelid=\"{}\">",
            esc(&self.arch),
            esc(&self.vendor),
            esc(&self.family),
            esc(&self.model)
        );
        for (i, g) in self.gpus.iter().enumerate() {
            let _ = writeln!(
                x,
                "    <pci busid=\"{}\" class=\"{}\" vendor=\"{}\" device=\"{}\" subsystem_vendor=\"{}\" subsystem_device=\"{}\" link_speed=\"{}\" link_width=\"{}\">",
                esc(&g.busid), esc(&g.class), esc(&g.vendor), esc(&g.device), esc(&g.subsystem_vendor), esc(&g.subsystem_device), esc(&g.link_speed), esc(&g.link_width)
            );
            let _ = writeln!(
                x,
                "      <gpu dev=\"{i}\" sm=\"{}\" rank=\"{i}\" gdr=\"1\">",
                g.sm
            );
            for (t, c) in &g.nvlinks {
                let _ = writeln!(
                    x,
                    "        <nvlink target=\"{}\" count=\"{c}\" tclass=\"0x068000\"/>",
                    esc(t)
                );
            }
            x += "      </gpu>\n    </pci>\n";
        }
        if !self.nics.is_empty() {
            x += "    <nic>\n";
            for (i, n) in self.nics.iter().enumerate() {
                let _ = writeln!(
                    x,
                    "      <net name=\"{}\" dev=\"{i}\" latency=\"0\" speed=\"{}\" port=\"0\" guid=\"0x0\" maxconn=\"65536\" gdr=\"0\"/>",
                    esc(&n.name),
                    n.speed
                );
            }
            x += "    </nic>\n";
        }
        x += "  </cpu>\n</system>\n";
        x
    }
}

fn sysfs(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cpuinfo_field(text: &str, key: &str) -> String {
    text.lines()
        .find(|l| {
            l.split(':')
                .next()
                .map(|k| k.trim() == key)
                .unwrap_or(false)
        })
        .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_default()
}

/// NVML, loaded at run time (no build-time dependency; absent on machines without a driver).
mod nvml {
    use libloading::{Library, Symbol};
    use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

    #[repr(C)]
    pub struct PciInfo {
        bus_id_legacy: [c_char; 16],
        domain: c_uint,
        bus: c_uint,
        device: c_uint,
        pci_device_id: c_uint,
        pci_sub_system_id: c_uint,
        bus_id: [c_char; 32],
    }

    pub struct Nvml {
        lib: Library,
    }

    impl Nvml {
        pub fn open() -> Option<Self> {
            // SAFETY: loading the vendor library; nvmlInit has no preconditions.
            unsafe {
                let lib = Library::new("libnvidia-ml.so.1").ok()?;
                let init: Symbol<unsafe extern "C" fn() -> c_int> = lib.get(b"nvmlInit_v2").ok()?;
                if init() != 0 {
                    return None;
                }
                Some(Self { lib })
            }
        }

        /// Active NVLinks of the GPU at `busid`: the remote bus id of each.
        pub fn nvlink_targets(&self, busid: &str) -> Option<Vec<String>> {
            // SAFETY: signatures as in nvml.h; out-pointers valid for the calls.
            unsafe {
                let by_bus: Symbol<unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int> =
                    self.lib.get(b"nvmlDeviceGetHandleByPciBusId_v2").ok()?;
                let state: Symbol<unsafe extern "C" fn(*mut c_void, c_uint, *mut c_int) -> c_int> =
                    self.lib.get(b"nvmlDeviceGetNvLinkState").ok()?;
                let remote: Symbol<
                    unsafe extern "C" fn(*mut c_void, c_uint, *mut PciInfo) -> c_int,
                > = self.lib.get(b"nvmlDeviceGetNvLinkRemotePciInfo_v2").ok()?;
                let id = CString::new(busid).ok()?;
                let mut dev: *mut c_void = std::ptr::null_mut();
                if by_bus(id.as_ptr(), &mut dev) != 0 {
                    return None;
                }
                let mut out = Vec::new();
                for link in 0..18u32 {
                    let mut active = 0;
                    if state(dev, link, &mut active) != 0 || active == 0 {
                        continue;
                    }
                    let mut pi: PciInfo = std::mem::zeroed();
                    if remote(dev, link, &mut pi) != 0 {
                        continue;
                    }
                    let s = CStr::from_ptr(pi.bus_id.as_ptr())
                        .to_string_lossy()
                        .to_lowercase();
                    out.push(normalize_busid(&s));
                }
                Some(out)
            }
        }
    }

    /// NVML writes `00000000:07:00.0`; NCCL's XML uses a 4-digit domain, or its own
    /// `fffffff:ff:ff.0` for targets it cannot name.
    pub fn normalize_busid(s: &str) -> String {
        match s.split_once(':') {
            Some((dom, rest)) if dom.len() == 8 && dom.starts_with("0000") => {
                format!("{}:{rest}", &dom[4..])
            }
            Some((dom, rest)) if dom.len() == 8 && dom.chars().all(|c| c == 'f') => {
                format!("fffffff:{rest}")
            }
            _ => s.to_string(),
        }
    }
}

pub use nvml::normalize_busid;

/// Probes this machine.
pub fn probe() -> Result<Machine, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    let n = CudaContext::device_count().map_err(drv)? as usize;
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let nvml = nvml::Nvml::open();
    let mut gpus = Vec::new();
    for i in 0..n {
        let mut dev: sys::CUdevice = 0;
        // SAFETY: out-pointer valid; ordinal in range.
        unsafe { sys::cuDeviceGet(&mut dev, i as i32) }
            .result()
            .map_err(drv)?;
        let attr = |a: sys::CUdevice_attribute| -> Result<i32, CudaError> {
            let mut v = 0;
            // SAFETY: out-pointer valid.
            unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) }
                .result()
                .map_err(drv)?;
            Ok(v)
        };
        use sys::CUdevice_attribute as A;
        let busid = format!(
            "{:04x}:{:02x}:{:02x}.0",
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        );
        let sm = (attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? * 10
            + attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?) as u32;
        let p = format!("/sys/bus/pci/devices/{busid}");
        let get = |f: &str, d: &str| sysfs(&format!("{p}/{f}")).unwrap_or_else(|| d.to_string());
        let mut nvlinks: Vec<(String, u32)> = Vec::new();
        if let Some(targets) = nvml
            .as_ref()
            .and_then(|m| m.nvlink_targets(&format!("0000{busid}")))
        {
            for t in targets {
                match nvlinks.iter_mut().find(|(x, _)| *x == t) {
                    Some(e) => e.1 += 1,
                    None => nvlinks.push((t, 1)),
                }
            }
        }
        gpus.push(GpuInfo {
            busid: busid.clone(),
            sm,
            class: get("class", "0x030200"),
            vendor: get("vendor", "0x10de"),
            device: get("device", "0x0000"),
            subsystem_vendor: get("subsystem_vendor", "0x10de"),
            subsystem_device: get("subsystem_device", "0x0000"),
            // NCCL reads the maximum link speed and width (a VM may report width 0).
            link_speed: get("max_link_speed", "32.0 GT/s PCIe"),
            link_width: get("max_link_width", "16"),
            nvlinks,
        });
    }
    let mut nics = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/sys/class/net") {
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            // NCCL's socket interfaces: not loopback, docker or virtual bridges; up.
            if name == "lo"
                || ["docker", "virbr", "veth", "br-"]
                    .iter()
                    .any(|p| name.starts_with(p))
            {
                continue;
            }
            if sysfs(&format!("/sys/class/net/{name}/operstate")).is_some_and(|s| s == "down") {
                continue;
            }
            // Speed in Mbit/s; unreadable (virtual NICs) counts as 10 Gbit/s, as NCCL assumes.
            let speed = sysfs(&format!("/sys/class/net/{name}/speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .filter(|s| *s > 0)
                .unwrap_or(10_000);
            nics.push(NicInfo {
                name,
                speed: speed as u64,
            });
        }
    }
    Ok(Machine {
        arch: std::env::consts::ARCH.to_string(),
        vendor: cpuinfo_field(&cpu, "vendor_id"),
        family: cpuinfo_field(&cpu, "cpu family"),
        model: cpuinfo_field(&cpu, "model"),
        gpus,
        nics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_follow_nccl() {
        assert_eq!(normalize_busid("00000000:07:00.0"), "0000:07:00.0");
        assert_eq!(normalize_busid("ffffffff:ff:ff.0"), "fffffff:ff:ff.0");
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;
    use planner::topology::{load_file, load_str, same_topology, LoadOptions};

    /// What `probe` reads on the lent 2×H200 machine (bus ids, ids and links as NCCL dumped).
    fn h200x2() -> Machine {
        let gpu = |bus: &str| GpuInfo {
            busid: bus.into(),
            sm: 90,
            class: "0x030200".into(),
            vendor: "0x10de".into(),
            device: "0x2335".into(),
            subsystem_vendor: "0x10de".into(),
            subsystem_device: "0x18bf".into(),
            link_speed: "32.0 GT/s PCIe".into(),
            link_width: "0".into(),
            nvlinks: vec![("fffffff:ff:ff.0".into(), 18)],
        };
        Machine {
            arch: "x86_64".into(),
            vendor: "GenuineIntel".into(),
            family: "6".into(),
            model: "207".into(),
            gpus: vec![gpu("0000:00:06.0"), gpu("0000:00:07.0")],
            nics: vec![NicInfo {
                name: "eth0".into(),
                speed: 10000,
            }],
        }
    }

    #[test]
    fn written_xml_is_the_same_topology_as_nccls_dump() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/measurements/h200x2/topo.xml");
        let nccl = load_file(&dir, &LoadOptions::default()).expect("fixture");
        let ours = load_str(&h200x2().to_xml(), "detected.xml", &LoadOptions::default())
            .expect("our XML parses");
        assert!(
            same_topology(&nccl.topology, &ours.topology),
            "detected topology differs from NCCL's dump"
        );
        // And one NVLink fewer is noticed.
        let mut m = h200x2();
        m.gpus[1].nvlinks[0].1 = 17;
        let other = load_str(&m.to_xml(), "d.xml", &LoadOptions::default()).unwrap();
        assert!(!same_topology(&nccl.topology, &other.topology));
    }
}
