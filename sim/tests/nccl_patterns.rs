//! `--as nccl` on 2×H200: NCCL's pipeline and tree patterns run one-step chunks, and only the
//! ring pattern the size ramp was fitted on takes it (`docs/fidelity.md`, "Decisions").

mod common;

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::Topology;
use planner::tuner::Filter;
use sim::nccl::Model;
use sim::SimConfig;

/// The 18 NVLinks between the two GPUs as the topology loader models them, GB/s per direction.
const LINK_GBPS: f64 = 370.8;

fn h200() -> (Topology, Planner) {
    let t = common::topo();
    let p = Planner::new(&t).unwrap();
    (t, p)
}

fn link_us(bytes: u64) -> f64 {
    bytes as f64 / 1000.0 / LINK_GBPS
}

/// A two-rank broadcast or reduce of 8 MiB moves one-step chunks one way at the link's rate:
/// launch plus the bytes over the link, with a quarter of that for the pipeline's hop and steps.
/// Ramped as a ring channel, it took 43 µs (broadcast) and 49 µs (reduce). The reduce root's
/// pass rides on its receive, so reduce costs what broadcast does.
#[test]
fn broadcast_and_reduce_run_at_the_link_unramped() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    let bytes = 8 << 20;
    let mut times = Vec::new();
    for kind in [CollectiveKind::Broadcast, CollectiveKind::Reduce] {
        let coll = Collective::as_nccl_tests(kind, 2, 0);
        let r = m
            .run(&t, &p, &coll, bytes, &Filter::default(), &cfg)
            .unwrap();
        assert_eq!(r.choice.protocol, Protocol::Simple, "{}", kind.name());
        let bound = cfg.launch_us + 1.25 * link_us(bytes);
        assert!(
            r.time_us < bound,
            "{}: {:.2} µs, bound {bound:.2}",
            kind.name(),
            r.time_us
        );
        times.push(r.time_us);
    }
    assert!((times[1] / times[0] - 1.0).abs() < 0.01, "{times:?}");
}

/// NCCL 2.28 keeps a tree Simple chunk at one 512 KiB step (`calcCollChunking` has no tree
/// Simple rule), so up to 12 MiB each of the 24 channels carries one chunk whose sum crosses up
/// and then down in turn: an 8 MiB tree all-reduce costs at least both crossings after launch.
/// A chunk shrunk to pipeline the chain (NCCL 2.18's rule) would overlap them.
#[test]
fn tree_simple_keeps_the_whole_step() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    let f = Filter::only(Algorithm::Tree, Protocol::Simple);
    let coll = Collective::new(CollectiveKind::AllReduce);
    let bytes = 8 << 20;
    let r = m.run(&t, &p, &coll, bytes, &f, &cfg).unwrap();
    assert_eq!(r.choice.channels, 24);
    let floor = cfg.launch_us + 2.0 * link_us(bytes);
    assert!(r.time_us > floor, "{:.2} µs, floor {floor:.2}", r.time_us);
    // From 128 MiB both halves stream: no ramp holds the tree below the link.
    let big = 128 << 20;
    let r = m.run(&t, &p, &coll, big, &f, &cfg).unwrap();
    let bound = cfg.launch_us + 1.2 * link_us(big);
    assert!(r.time_us < bound, "{:.2} µs, bound {bound:.2}", r.time_us);
}
