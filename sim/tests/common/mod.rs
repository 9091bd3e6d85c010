//! Helpers shared by the simulator's tests (`pull.rs`, `hybrid.rs`, `as_run.rs`, `nccl.rs`,
//! `nccl_patterns.rs`, `clusters.rs`).
#![allow(dead_code)] // each test binary uses its own subset

pub mod clusters;

use planner::schedule::{build, Collective, CollectiveKind, Protocol, Schedule};
use sim::fidelity::Row;
use sim::{ExecParams, SimConfig};

/// NCCL's own topology dump of the measured 2×H200 machine.
pub fn topo() -> planner::topology::Topology {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/measurements/h200x2/topo.xml"
    );
    planner::topology::load_file(std::path::Path::new(path), &Default::default())
        .unwrap()
        .topology
}

/// The default configuration with executor parameters `x`.
pub fn with(x: ExecParams) -> SimConfig {
    SimConfig {
        exec: Some(x),
        ..Default::default()
    }
}

pub fn one_shot_n(kind: CollectiveKind, n: u32, proto: Protocol) -> Schedule {
    build::one_shot(&Collective::new(kind), n, proto).unwrap()
}

pub fn one_shot(kind: CollectiveKind, proto: Protocol) -> Schedule {
    one_shot_n(kind, 2, proto)
}

/// Every row within `bound` (a fraction); the failure message carries the whole table.
pub fn assert_within(r: &[Row], bound: f64) {
    if let Err(e) = sim::fidelity::within(r, 0, bound) {
        panic!("{e}");
    }
}
