//! The one-paragraph topology summary `topoplan plan` prints first.

use crate::search::Channels;
use crate::topology::{NodeKind, PathType, Topology};

/// "2 × NVIDIA H200 (sm90) on 1 host; GPU pairs over NVL at 370.8 GB/s; ..." — what an engineer
/// needs to recognise the machine and judge the channels that follow.
pub fn describe(t: &Topology, ch: &Channels) -> String {
    let nhosts = ch.hosts.len();
    let l = ch.hosts[0].len();
    let mut models: Vec<String> = t
        .gpus()
        .map(|(_, g)| match &g.model {
            Some(m) => format!("{m} (sm{})", g.sm),
            None => format!("sm{}", g.sm),
        })
        .collect();
    models.sort();
    models.dedup();
    let mut s = format!(
        "{} GPU(s) [{}] on {} host(s), {} per host",
        t.n_ranks(),
        models.join(", "),
        nhosts,
        l
    );
    // Path classes between host 0's GPUs.
    let h0 = &ch.hosts[0];
    let mut kinds: Vec<(PathType, f64, usize)> = Vec::new();
    for (i, &a) in h0.iter().enumerate() {
        for &b in &h0[i + 1..] {
            // A pair is as good as its worse direction (NVLinks may be listed one way only).
            if let (Some(p), Some(q)) = (t.gpu_path(a, b), t.gpu_path(b, a)) {
                let (kind, bw) = (p.kind.max(q.kind), p.bw_gbps.min(q.bw_gbps));
                match kinds.iter_mut().find(|k| k.0 == kind) {
                    Some(k) => {
                        k.1 = k.1.min(bw);
                        k.2 += 1;
                    }
                    None => kinds.push((kind, bw, 1)),
                }
            }
        }
    }
    kinds.sort_by_key(|k| k.0);
    if !kinds.is_empty() {
        let parts: Vec<String> = kinds
            .iter()
            .map(|(k, bw, c)| format!("{c} over {k} (>= {bw:.1} GB/s)"))
            .collect();
        s += &format!("; GPU pairs in a host: {}", parts.join(", "));
    }
    let nvs = t
        .graph
        .node_indices()
        .filter(|n| t.graph[*n].host == Some(0) && matches!(t.graph[*n].kind, NodeKind::NvSwitch))
        .count();
    if nvs > 0 {
        s += "; NVSwitch present";
    }
    let nics: Vec<String> = t
        .nics_of_host(0)
        .iter()
        .filter_map(|n| match &t.graph[*n].kind {
            NodeKind::Nic(x) => Some(format!("{} {:.1} GB/s", x.name, x.speed_gbps)),
            _ => None,
        })
        .collect();
    if !nics.is_empty() {
        s += &format!("; {} NIC(s) per host ({})", nics.len(), nics.join(", "));
    }
    if let Some(f) = &t.fabric {
        s += &format!("; fabric {:?}, {:.1} GB/s ports", f.kind, f.port_gbps);
    }
    match ch.all_peers_nvlink_gbps {
        Some(bw) => {
            s += &format!(
                "; all GPUs are NVLink peers ({bw:.1} GB/s per GPU): direct patterns apply"
            )
        }
        None if nhosts == 1 => {
            s += "; not all GPUs are NVLink peers: no direct (one-shot/two-shot) patterns"
        }
        None => {}
    }
    s + "."
}
