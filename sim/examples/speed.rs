//! Speed benchmark of issue 5: 1 GiB ring all-reduce on NODES × 8 GPUs × 16 channels
//! (aggregated model), plus the detailed engine on a small ring for events/s.
//! `cargo run --release -p sim --example speed [NODES]` (default 1024); wrap in
//! `/usr/bin/time -v` for peak RSS.
use planner::schedule::Protocol;
use sim::reference::{cluster_ring_all_reduce, rail_cluster};
use sim::{simulate, Mode, SimConfig};
use std::time::Instant;

fn main() {
    let nodes: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let (gpus, nch) = (8u32, 16u32);
    let t0 = Instant::now();
    let topo = rail_cluster(nodes, gpus, 478.0, 50.0);
    let mut s = cluster_ring_all_reduce(nodes, gpus, nch, Protocol::Simple);
    s.loop_elems = Some(128 * 1024 * s.chunks_per_block as u64);
    let build = t0.elapsed();
    let cfg = SimConfig {
        mode: Mode::Aggregated,
        ..SimConfig::default()
    };
    let t1 = Instant::now();
    let r = simulate(&topo, &s, 1 << 30, &cfg).expect("simulates");
    let el = t1.elapsed().as_secs_f64();
    let busbw = (1u64 << 30) as f64 / r.time_us / 1e3 * 2.0 * (nodes * gpus - 1) as f64
        / (nodes * gpus) as f64;
    println!(
        "aggregated: {} ranks x {nch} channels, 1 GiB ring all-reduce: predicted {:.1} us (busbw {busbw:.1} GB/s); \
         simulated in {el:.2} s (+{:.2} s building topology/schedule); {} flow evaluations, {} protocol steps represented ({:.3e} steps/s)",
        nodes * gpus,
        r.time_us,
        build.as_secs_f64(),
        r.events,
        r.represented_steps,
        r.represented_steps as f64 / el
    );
    // Detailed engine on 2 nodes for events/s.
    let topo = rail_cluster(2, gpus, 478.0, 50.0);
    let mut s = cluster_ring_all_reduce(2, gpus, nch, Protocol::Simple);
    s.loop_elems = Some(128 * 1024 * s.chunks_per_block as u64);
    let cfg = SimConfig {
        mode: Mode::Detailed,
        ..SimConfig::default()
    };
    let t2 = Instant::now();
    let d = simulate(&topo, &s, 1 << 30, &cfg).expect("simulates");
    let el = t2.elapsed().as_secs_f64();
    let a = simulate(
        &topo,
        &s,
        1 << 30,
        &SimConfig {
            mode: Mode::Aggregated,
            ..SimConfig::default()
        },
    )
    .unwrap();
    println!(
        "detailed: 16 ranks x {nch} channels, 1 GiB: {:.1} us in {el:.2} s, {} events ({:.3e} events/s); aggregated says {:.1} us ({:+.1}%)",
        d.time_us,
        d.events,
        d.events as f64 / el,
        a.time_us,
        (a.time_us / d.time_us - 1.0) * 100.0
    );
}
