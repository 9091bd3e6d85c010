//! Prints the fidelity tables of docs/fidelity.md:
//! `cargo run -p sim --example fidelity [DATA_DIR]` (default tests/data/measurements/h200x2).
use planner::schedule::CollectiveKind;
use sim::fidelity::*;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/data/measurements/h200x2".into());
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/topologies/h200x2-topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    let cfg = sim::SimConfig::default();
    for (kind, file) in [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).expect("measurement file");
        let rows = compare(&topo, kind, &parse_nccl_tests(&text), &cfg).expect("simulates");
        let worst = rows.iter().map(|r| r.error.abs()).fold(0.0, f64::max);
        println!(
            "### {} ({file}); worst |error| {:.1}%\n",
            kind.name(),
            worst * 100.0
        );
        println!("{}", markdown(&rows));
    }
    let own = planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    let pull = sim::SimConfig {
        exec: Some(sim::ExecParams::pull_h200x2()),
        ..Default::default()
    };
    for (name, points, cfg) in [
        (
            "direct-push executor (docs/measurements/direct-run4.log LL, direct-run5.log Simple)",
            OWN_DIRECT_H200X2,
            &cfg,
        ),
        (
            "previous pull-based executor, final run, ExecParams::pull_h200x2",
            OWN_ONE_SHOT_H200X2,
            &pull,
        ),
        (
            "previous pull-based executor, run 3 (docs/measurements/run3-perf.log), ExecParams::pull_h200x2",
            OWN_ONE_SHOT_H200X2_RUN3,
            &pull,
        ),
    ] {
        let rows = compare_own_one_shot(&own, points, cfg).expect("simulates");
        let worst = rows.iter().map(|r| r.error.abs()).fold(0.0, f64::max);
        println!(
            "### topoplan one-shot all-reduce, CUDA runtime, {name}; worst |error| {:.1}%\n",
            worst * 100.0
        );
        println!("{}", markdown(&rows));
    }
    for (name, points) in [("run 3", OWN_CE_H200X2_RUN3), ("run 2", OWN_CE_H200X2_RUN2)] {
        let rows = compare_own_ce(&own, points, &cfg).expect("simulates");
        let worst = rows.iter().map(|r| r.error.abs()).fold(0.0, f64::max);
        println!(
            "### topoplan copy-engine pipeline all-reduce, CUDA runtime, {name}; worst |error| {:.1}%\n",
            worst * 100.0
        );
        println!("{}", markdown(&rows));
    }
}
