//! Predicted vs measured: reads nccl-tests output and simulates NCCL's own ring schedule
//! ([`crate::reference::nccl_ring`]) at every size, for `docs/fidelity.md`.

use crate::reference::{nccl_ring, NcclTable};
use crate::{simulate, SimConfig, SimError};
use planner::schedule::{CollectiveKind, Protocol};
use planner::topology::Topology;

/// One nccl-tests row: size in bytes and out-of-place time in µs.
pub fn parse_nccl_tests(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some((f[0].parse().ok()?, f[5].parse().ok()?))
        })
        .collect()
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bytes: u64,
    pub protocol: Protocol,
    pub channels: u32,
    pub measured_us: f64,
    pub predicted_us: f64,
    /// (predicted − measured) / measured
    pub error: f64,
}

/// Compares every measured size (size 0 rows are skipped) with the simulated NCCL ring.
pub fn compare(
    topo: &Topology,
    kind: CollectiveKind,
    measured: &[(u64, f64)],
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let table = NcclTable::h200x2(kind);
    let n = topo.n_ranks() as u32;
    let mut rows = Vec::new();
    for &(bytes, us) in measured {
        if bytes == 0 {
            continue;
        }
        let s = nccl_ring(kind, n, bytes, cfg.elem_bytes, &table);
        let r = simulate(topo, &s, bytes, cfg)?;
        rows.push(Row {
            bytes,
            protocol: s.protocol,
            channels: s.channels,
            measured_us: us,
            predicted_us: r.time_us,
            error: (r.time_us - us) / us,
        });
    }
    Ok(rows)
}

/// Markdown table of `rows`.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| size (B) | proto | channels | measured µs | predicted µs | error |\n|---:|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:+.1}% |\n",
            r.bytes,
            r.protocol.name(),
            r.channels,
            r.measured_us,
            r.predicted_us,
            r.error * 100.0
        );
    }
    s
}
