//! Coordinate-descent calibration of SimConfig against the h200x2 nccl-tests curves (all-reduce
//! weighted fully, all-gather as a check): `cargo run --release -p sim --example calibrate`.
//! Prints the parameters minimising the worst relative error over all-reduce sizes.
use planner::schedule::CollectiveKind;
use sim::fidelity::*;
use sim::SimConfig;

fn score(cfg: &SimConfig, data: &[(CollectiveKind, Vec<(u64, f64)>)]) -> f64 {
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/topologies/h200x2-topo.xml"),
        &Default::default(),
    )
    .unwrap()
    .topology;
    let mut worst: f64 = 0.0;
    let mut sum = 0.0;
    for (k, m) in data {
        let rows = compare(&topo, *k, m, cfg).unwrap();
        // Two all-gather points (512 B: 14.1 µs, 8 KiB: 17.3 µs) sit 20-45% above both
        // neighbours (11.5-12.1 µs): run-to-run noise, left out of the fit, reported as misses.
        let ar = *k == CollectiveKind::AllReduce;
        for r in rows {
            if !ar && (r.bytes == 512 || r.bytes == 8192) {
                continue;
            }
            worst = worst.max(r.error.abs());
            sum += r.error * r.error * if ar { 1.0 } else { 0.5 };
        }
    }
    worst + 0.1 * sum.sqrt()
}

fn main() {
    let dir = "tests/data/measurements/h200x2";
    let data: Vec<(CollectiveKind, Vec<(u64, f64)>)> = [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ]
    .iter()
    .map(|(k, f)| {
        (
            *k,
            parse_nccl_tests(&std::fs::read_to_string(format!("{dir}/{f}")).unwrap(), f).unwrap(),
        )
    })
    .collect();
    let mut cfg = SimConfig::default();
    type Get = fn(&mut SimConfig) -> &mut f64;
    let knobs: Vec<(&str, Get)> = vec![
        ("launch_us", |c| &mut c.launch_us),
        ("ll.step_us", |c| &mut c.ll.step_us),
        ("ll.hop_us", |c| &mut c.ll.hop_us),
        ("ll.channel_gbps", |c| &mut c.ll.channel_gbps),
        ("ll.wire_factor", |c| &mut c.ll.wire_factor),
        ("simple.channel_gbps", |c| &mut c.simple.channel_gbps),
        ("simple.step_us", |c| &mut c.simple.step_us),
        ("simple.hop_us", |c| &mut c.simple.hop_us),
        ("simple.channel_gbps", |c| &mut c.simple.channel_gbps),
        ("sm_link_efficiency", |c| &mut c.sm_link_efficiency),
        ("local_channel_gbps", |c| &mut c.local_channel_gbps),
    ];
    let mut best = score(&cfg, &data);
    for round in 0..4 {
        for (name, get) in &knobs {
            for f in [0.5, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 2.0] {
                let mut c = cfg.clone();
                *get(&mut c) *= f;
                // Physical bounds: links give at most their nominal bandwidth; LL moves at
                // least its payload.
                c.sm_link_efficiency = c.sm_link_efficiency.min(1.0);
                c.ll.wire_factor = c.ll.wire_factor.max(1.0);
                let sc = score(&c, &data);
                if sc < best {
                    best = sc;
                    cfg = c;
                    eprintln!("round {round} {name} x{f} -> {best:.4}");
                }
            }
        }
    }
    println!("{}", serde_json::to_string_pretty(&cfg).unwrap());
}
