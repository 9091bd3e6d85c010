//! P2P between GPUs: disabled by the environment, limited by NCCL_P2P_LEVEL, channels that fall
//! back to SHM or NET where a direct path exists, and rings searched off NVLink.

use super::{gbps, truthy, Inputs};
use crate::cli::doctor::cost::{Machine, LARGE};
use crate::cli::doctor::finding::{Finding, Severity};
use planner::schedule::CollectiveKind;
use planner::tuner::Filter;

/// "rings through host memory over PCIe: 21 GB/s predicted, against 360 over NVLink".
fn p2p_cost(m: Option<&Machine>) -> Option<String> {
    let m = m?;
    let on = m.nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())?;
    let off = m.without_p2p()?;
    let bw = off.nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())?;
    Some(format!(
        "rings through host memory over PCIe: {} GB/s busbw predicted for a 256M all-reduce, against {} over NVLink ({:.0}% of it; planner on {})",
        gbps(bw),
        gbps(on),
        100.0 * bw / on,
        m.source
    ))
}

const P2P_FIX_HINT: &str = "if it was set to get past a hang, the hang's cause is usually PCIe ACS or the IOMMU (see the acs-redirect and iommu-translated checks)";

/// NCCL_P2P_DISABLE=1.
pub fn p2p_disabled(i: &Inputs) -> Vec<Finding> {
    let Some((v, ev)) = i.nccl_var("NCCL_P2P_DISABLE") else {
        return vec![];
    };
    if !truthy(&v) {
        return vec![];
    }
    let nvl = i.nvlink();
    let sev = if nvl.is_some() {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "p2p-disabled",
        sev,
        if nvl.is_some() {
            "P2P is disabled between NVLink peers: NCCL moves every byte through host memory"
        } else {
            "P2P is disabled: NCCL moves GPU-to-GPU traffic through host memory"
        },
    )
    .evidence(ev);
    if let Some(n) = nvl {
        f = f.evidence(n);
    }
    f.cost(p2p_cost(i.machine.as_ref())).fix(format!(
        "unset NCCL_P2P_DISABLE (look for it in the image's ENV, the job script, /etc/nccl.conf and ~/.nccl.conf); {P2P_FIX_HINT}"
    ))
    .into_vec()
}

/// NCCL path type order (LOC < NVL < ... < SYS), as NCCL_P2P_LEVEL compares them.
const PATHS: [&str; 10] = [
    "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS",
];

fn path_rank(s: &str) -> Option<usize> {
    PATHS.iter().position(|p| p.eq_ignore_ascii_case(s.trim()))
}

/// NCCL_P2P_LEVEL as a path rank: names, or the legacy integers 0..5.
fn level_rank(v: &str) -> Option<usize> {
    match v.trim().parse::<i64>() {
        Ok(0) => Some(0),
        Ok(1) => path_rank("PIX"),
        Ok(2) => path_rank("PXB"),
        Ok(3) => path_rank("PHB"),
        Ok(n) if n >= 4 => path_rank("SYS"),
        Ok(_) => None,
        Err(_) => path_rank(v),
    }
}

/// NCCL_P2P_LEVEL below the path type between some GPUs: P2P off for them.
pub fn p2p_level(i: &Inputs) -> Vec<Finding> {
    let Some((v, ev)) = i.nccl_var("NCCL_P2P_LEVEL") else {
        return vec![];
    };
    let Some(level) = level_rank(&v) else {
        return Finding::new("p2p-level", Severity::Warning, format!("NCCL_P2P_LEVEL={v} is not a level NCCL knows"))
            .evidence(ev)
            .fix("use one of LOC, NVL, PIX, PXB, PHB, SYS, or unset it (NCCL's default allows P2P up to PXB)")
            .into_vec();
    };
    // The worst GPU-to-GPU path: NCCL's printed paths, else the topology's.
    let mut worst: Option<(usize, String)> = None;
    if let Some(log) = &i.log {
        for p in &log.gpu_paths {
            if let Some(r) = path_rank(&p.kind) {
                if worst.as_ref().is_none_or(|w| r > w.0) {
                    worst = Some((
                        r,
                        format!(
                            "{}: NCCL's path {} -> {} is {}",
                            log.cite(p.line),
                            p.from,
                            p.to,
                            p.kind
                        ),
                    ));
                }
            }
        }
    }
    if worst.is_none() {
        if let Some(m) = &i.machine {
            let n = m.nranks();
            for a in 0..n {
                for b in 0..n {
                    if a == b {
                        continue;
                    }
                    if let Some(p) = m.topo.gpu_path(a, b) {
                        let name = format!("{:?}", p.kind).to_ascii_uppercase();
                        if let Some(r) = path_rank(&name) {
                            if worst.as_ref().is_none_or(|w| r > w.0) {
                                worst = Some((
                                    r,
                                    format!("{}: path rank {a} -> {b} is {name}", m.source),
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    let Some((w, wev)) = worst else {
        return vec![];
    };
    if w <= level {
        return vec![];
    }
    let nvl = i.nvlink();
    let sev = if w <= 2 {
        Severity::Error
    } else {
        Severity::Warning
    };
    Finding::new(
        "p2p-level",
        sev,
        format!(
            "NCCL_P2P_LEVEL={v} turns P2P off for GPUs joined by {} paths",
            PATHS[w]
        ),
    )
    .evidence(ev)
    .evidence(wev)
    .cost(if nvl.is_some() {
        p2p_cost(i.machine.as_ref())
    } else {
        None
    })
    .fix(format!(
        "unset NCCL_P2P_LEVEL, or set it to at least {} ({P2P_FIX_HINT})",
        PATHS[w]
    ))
    .into_vec()
}

/// Channels between ranks of one host that use SHM or NET where P2P is possible.
pub fn transport_downgrade(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let host_of = |r: u32| {
        log.inits
            .iter()
            .find(|x| x.rank == r)
            .map(|x| x.at.host.clone())
    };
    let one_node = log.nnodes() == Some(1);
    let mut out = Vec::new();
    for kind in ["SHM", "NET"] {
        let lines: Vec<_> = log
            .transports
            .iter()
            .filter(|t| t.transport == kind)
            .filter(|t| {
                // SHM only ever joins ranks of one host; NET does between hosts too.
                kind == "SHM"
                    || one_node
                    || matches!((host_of(t.from), host_of(t.to)), (Some(a), Some(b)) if a == b)
            })
            .collect();
        let Some(first) = lines.first() else { continue };
        let nvl = i.nvlink();
        let sev = if nvl.is_some() {
            Severity::Error
        } else {
            Severity::Warning
        };
        let p2p_off = i.nccl_var("NCCL_P2P_DISABLE").filter(|(v, _)| truthy(v));
        let shm_off = i.nccl_var("NCCL_SHM_DISABLE").filter(|(v, _)| truthy(v));
        let mut f = Finding::new(
            "transport-downgrade",
            sev,
            format!(
                "{} of {} channel connection(s) within one host go over {kind}{}",
                lines.len(),
                log.transports.len(),
                if nvl.is_some() {
                    " although the GPUs share NVLink"
                } else {
                    " instead of P2P"
                }
            ),
        )
        .evidence(format!(
            "{}: Channel {:02} : {} -> {} via {kind}/{}",
            log.cite(first.at.line),
            first.channel,
            first.from,
            first.to,
            first.detail
        ));
        if let Some(n) = &nvl {
            f = f.evidence(n.clone());
        }
        for (_, e) in p2p_off.iter().chain(shm_off.iter()) {
            f = f.evidence(e.clone());
        }
        let cuda_denies = log.all_cuda_p2p.filter(|c| c.0 == 0);
        if let Some((_, line)) = cuda_denies {
            f = f.evidence(format!(
                "{}: isAllCudaP2p 0 (CUDA reports no peer access between some GPUs)",
                log.cite(line)
            ));
        }
        let fix = if p2p_off.is_some() {
            "unset NCCL_P2P_DISABLE (see the p2p-disabled finding)".to_string()
        } else if kind == "NET" && shm_off.is_some() {
            "unset NCCL_SHM_DISABLE and let P2P or SHM carry local traffic".to_string()
        } else if cuda_denies.is_some() {
            format!(
                "CUDA denies peer access: check `nvidia-smi topo -p2p rw` (and that every process sees its peers' GPUs in CUDA_VISIBLE_DEVICES); {P2P_FIX_HINT}"
            )
        } else {
            format!(
                "find why CUDA P2P fails between these GPUs: `nvidia-smi topo -p2p rw` should say OK; containers need the GPUs of all local ranks visible and --ipc=host; {P2P_FIX_HINT}"
            )
        };
        out.push(
            f.cost(if nvl.is_some() {
                p2p_cost(i.machine.as_ref())
            } else {
                None
            })
            .fix(fix),
        );
    }
    out
}

/// NCCL's ring search settled on a path type other than NVL while NVLink exists.
pub fn rings_off_nvlink(i: &Inputs) -> Vec<Finding> {
    let Some(nvl) = i.nvlink() else { return vec![] };
    let graphs = i.graphs();
    let Some((g, at)) = graphs.iter().find(|g| g.0.pattern == 4) else {
        return vec![];
    };
    if g.type_intra == "NVL" || g.type_intra == "NVB" || g.type_intra == "LOC" {
        return vec![];
    }
    Finding::new(
        "rings-off-nvlink",
        Severity::Error,
        format!("NCCL's rings run over {} although NVLink joins the GPUs", g.type_intra),
    )
    .evidence(format!(
        "{at}: Pattern 4, nChannels {}, bw {}/{}, type {}/{}",
        g.nchannels,
        g.bw_intra,
        g.bw_inter,
        g.type_intra,
        g.type_inter
    ))
    .evidence(nvl)
    .cost(p2p_cost(i.machine.as_ref()))
    .fix("P2P is off or failing between NVLink peers (see the p2p-* findings); if none applies, check `nvidia-smi nvlink -s` for inactive links and NCCL_TOPO_FILE for a stale topology file")
    .into_vec()
}

impl Finding {
    pub fn into_vec(self) -> Vec<Finding> {
        vec![self]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2p_levels_parse_like_nccl() {
        assert_eq!(level_rank("LOC"), Some(0));
        assert_eq!(level_rank("nvl"), Some(1));
        assert_eq!(level_rank("0"), Some(0));
        assert_eq!(level_rank("2"), path_rank("PXB"));
        assert_eq!(level_rank("5"), path_rank("SYS"));
        assert_eq!(level_rank("fast"), None);
    }
}
