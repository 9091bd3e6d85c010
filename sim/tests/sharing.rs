//! Quantised bandwidth sharing (`SimConfig::rate_quantum_us`) against exact max-min sharing on
//! the same schedule: many concurrent flows share anew at most once per quantum, yet each flow
//! finishes on time, so the quantum costs a step at most the wait of a flow started between two
//! recomputations (`docs/sim.md`, "Sharing").

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::{load_file, scale, Fabric, FabricKind, Topology};
use planner::tuner::Filter;
use sim::price::{EnginePricer, Schedules};
use sim::{Mode, SimConfig};

fn topology(file: &str) -> Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/topologies")
        .join(file);
    load_file(&path, &Default::default()).unwrap().topology
}

/// The engine's time for `t`'s `algo`/`proto` all-reduce candidate at `bytes`, sharing quantised
/// (the profile's default) and exactly, run whole.
fn quantised_and_exact(t: &Topology, algo: Algorithm, proto: Protocol, bytes: u64) -> (f64, f64) {
    quantised_and_exact_of(t, CollectiveKind::AllReduce, algo, proto, bytes)
}

/// [`quantised_and_exact`] for a `kind` candidate.
fn quantised_and_exact_of(
    t: &Topology,
    kind: CollectiveKind,
    algo: Algorithm,
    proto: Protocol,
    bytes: u64,
) -> (f64, f64) {
    let p = Planner::new(t).unwrap();
    let mut cfg = SimConfig::from_profile(&p.profile().profile, "profile").unwrap();
    cfg.mode = Mode::Detailed;
    assert!(cfg.rate_quantum_us > 0.0, "the default quantises");
    let coll = Collective::as_nccl_tests(kind, p.nranks(), 0);
    let c = p
        .candidates_filtered(&coll, bytes, &Filter::default())
        .into_iter()
        .find(|c| c.algorithm == algo && c.protocol == proto)
        .expect("candidate");
    let cache = Schedules::default();
    let s = EnginePricer::with_cache(t, &p, &cfg, &cache)
        .schedule(&coll, &c, None)
        .unwrap();
    let quantised = sim::simulate(t, &s, bytes, &cfg).unwrap().time_us;
    cfg.rate_quantum_us = 0.0;
    let exact = sim::simulate(t, &s, bytes, &cfg).unwrap().time_us;
    (quantised, exact)
}

/// An LL tree on one 8-GPU NVSwitch host: 96 flows of 3-4 µs steps. Each flow used to run on
/// until the next recomputation, and each step after it waited for the one after: 17 % slower
/// than exact at 128 MiB.
#[test]
fn an_ll_tree_on_an_nvswitch_host_shares_within_four_percent_of_exact() {
    let t = topology("aws-p5-48xl-topo-2023.xml");
    let (q, e) = quantised_and_exact(&t, Algorithm::Tree, Protocol::LL, 128 << 20);
    assert!(
        (q / e - 1.0).abs() <= 0.04,
        "quantised {q:.1} µs, exact {e:.1}"
    );
}

/// Packed trees on one 8-GPU NVSwitch host, LL reduce-scatter: 32 trees' sends up, steps of
/// about 1.5 µs, 16 a tree. A quantum of at least 0.25 µs (a sixth of a step) held each flow
/// started between two recomputations back long enough to make the call 5.8 % slower than
/// exact at 16 MiB (and 9 % from 128 MiB).
#[test]
fn packed_ll_trees_on_an_nvswitch_host_share_within_four_percent_of_exact() {
    let t = topology("aws-p5-48xl-topo-2023.xml");
    let kind = CollectiveKind::ReduceScatter;
    let (q, e) = quantised_and_exact_of(&t, kind, Algorithm::Packed, Protocol::LL, 16 << 20);
    assert!(
        (q / e - 1.0).abs() <= 0.04,
        "quantised {q:.1} µs, exact {e:.1}"
    );
}

/// A congested fabric: 8 NDv4 hosts on a fat tree of 2 hosts per leaf, uplinks thinned 4:1,
/// an LL tree of 4 MiB across it (7 % slower than exact before flows finished on time).
#[test]
fn an_ll_tree_across_an_oversubscribed_fat_tree_shares_within_four_percent_of_exact() {
    let node = topology("azure-ndv4-topo.xml");
    let fabric = Fabric {
        kind: FabricKind::FatTree {
            hosts_per_leaf: 2,
            oversubscription: 4.0,
        },
        port_gbps: 25.0,
        switch_lat_us: 0.6,
    };
    let t = scale(&node, 8, fabric).unwrap();
    let (q, e) = quantised_and_exact(&t, Algorithm::Tree, Protocol::LL, 4 << 20);
    assert!(
        (q / e - 1.0).abs() <= 0.04,
        "quantised {q:.1} µs, exact {e:.1}"
    );
}
