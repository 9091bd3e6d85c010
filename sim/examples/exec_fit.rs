//! Fits `sim::ExecParams` (the model of topoplan's CUDA executor) to measured one-shot all-reduce
//! points by grid search, minimising the worst relative error: `cargo run --release -p sim
//! --example exec_fit`.
//!
//! By default it fits the direct-push executor's points (`fidelity::OWN_DIRECT_H200X2`), starting
//! from `ExecParams::default()` (so the grid rules, `cta_bytes`, `max_ctas`, `ll_cta_bytes`,
//! `ll_ctas`, are the runtime's and not fitted): the Simple floor and GPU rate, then the per-CTA
//! rate, on the Simple points (coordinate descent, twice), then the LL floor and rate on the LL
//! points. `--previous` refits the previous (pull-based) executor's points (final run and run 3
//! together) from `ExecParams::pull_h200x2()` instead. Both also fit the copy-engine rate on run
//! 3's copy-engine points.
//!
//! Prints the fitted values (the defaults in `sim/src/config.rs` are these), a warning if one lies
//! on the edge of its search range, the worst and mean |error| per protocol, and the table that
//! `docs/fidelity.md` shows.
use planner::schedule::Protocol;
use planner::topology::Topology;
use sim::fidelity::{
    compare_own_one_shot, markdown, OWN_DIRECT_H200X2, OWN_ONE_SHOT_H200X2,
    OWN_ONE_SHOT_H200X2_RUN3,
};
use sim::{ExecParams, SimConfig};

type Points = Vec<(u64, Protocol, f64)>;
/// Labelled measured sets.
type Sets = Vec<(&'static str, &'static [(u64, Protocol, f64)])>;

fn rows(topo: &Topology, pts: &[(u64, Protocol, f64)], x: &ExecParams) -> Vec<sim::fidelity::Row> {
    let cfg = SimConfig {
        exec: Some(x.clone()),
        ..Default::default()
    };
    compare_own_one_shot(topo, pts, &cfg).expect("simulates")
}

fn worst(topo: &Topology, pts: &[(u64, Protocol, f64)], x: &ExecParams) -> f64 {
    rows(topo, pts, x)
        .iter()
        .map(|r| r.error.abs())
        .fold(0.0, f64::max)
}

/// A search range: (low, high, step).
type Range = (f64, f64, f64);

fn values(r: Range) -> Vec<f64> {
    let n = ((r.1 - r.0) / r.2 + 1e-9).floor() as usize;
    (0..=n).map(|i| r.0 + i as f64 * r.2).collect()
}

/// Best (a, b) on the grid for `set(x, a, b)`; warns when the best lies on an edge of a range
/// that has more than one value.
fn search(
    topo: &Topology,
    pts: &[(u64, Protocol, f64)],
    x: &mut ExecParams,
    names: (&str, &str),
    a: Range,
    b: Range,
    set: fn(&mut ExecParams, f64, f64),
) -> f64 {
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for va in values(a) {
        for vb in values(b) {
            let mut y = x.clone();
            set(&mut y, va, vb);
            let w = worst(topo, pts, &y);
            if w < best.0 {
                best = (w, va, vb);
            }
        }
    }
    for (name, r, v) in [(names.0, a, best.1), (names.1, b, best.2)] {
        let edge = |e: f64| (v - e).abs() < r.2 / 2.0;
        if r.1 > r.0 && (edge(r.0) || edge(r.1)) {
            println!(
                "warning: {name} = {v} is on the edge of its range {}..{}",
                r.0, r.1
            );
        }
    }
    set(x, best.1, best.2);
    best.0
}

fn summary(topo: &Topology, label: &str, pts: &[(u64, Protocol, f64)], x: &ExecParams) {
    let r = rows(topo, pts, x);
    for p in [Protocol::LL, Protocol::Simple] {
        let e: Vec<f64> = r
            .iter()
            .filter(|r| r.protocol == p)
            .map(|r| r.error.abs())
            .collect();
        if e.is_empty() {
            continue;
        }
        println!(
            "{label}, {} ({} points): worst |error| {:.1}%, mean |error| {:.1}%",
            p.name(),
            e.len(),
            e.iter().fold(0.0, |a: f64, &b| a.max(b)) * 100.0,
            e.iter().sum::<f64>() / e.len() as f64 * 100.0
        );
    }
}

fn main() {
    let previous = std::env::args().any(|a| a == "--previous");
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    let (sets, mut x): (Sets, ExecParams) = if previous {
        (
            vec![
                ("pull final run", OWN_ONE_SHOT_H200X2),
                ("pull run 3", OWN_ONE_SHOT_H200X2_RUN3),
            ],
            ExecParams::pull_h200x2(),
        )
    } else {
        (vec![("direct", OWN_DIRECT_H200X2)], ExecParams::default())
    };
    let pick = |p: Protocol| -> Points {
        sets.iter()
            .flat_map(|s| s.1.iter().copied())
            .filter(|x| x.1 == p)
            .collect()
    };
    let (simple, ll) = (pick(Protocol::Simple), pick(Protocol::LL));
    // Coordinate descent: (floor, GPU rate), then the per-CTA rate, twice.
    for _ in 0..2 {
        search(
            &topo,
            &simple,
            &mut x,
            ("launch_simple_us", "gpu_gbps"),
            (8.0, 16.0, 0.1),
            (280.0, 420.0, 1.0),
            |x, a, b| {
                x.launch_simple_us = a;
                x.gpu_gbps = b;
            },
        );
        search(
            &topo,
            &simple,
            &mut x,
            ("cta_gbps", "-"),
            (4.0, 80.0, 1.0),
            (0.0, 0.0, 1.0),
            |x, a, _| {
                x.cta_gbps = a;
            },
        );
    }
    search(
        &topo,
        &ll,
        &mut x,
        ("launch_ll_us", "ll_gpu_gbps"),
        (4.0, 8.0, 0.05),
        (150.0, 500.0, 2.0),
        |x, a, b| {
            x.launch_ll_us = a;
            x.ll_gpu_gbps = b;
        },
    );
    // The copy-engine path: its per-copy rate on run 3's two points.
    let mut best = (f64::INFINITY, 0.0);
    for g in values((100.0, 300.0, 1.0)) {
        let cfg = SimConfig {
            exec: Some(ExecParams {
                ce_gbps: g,
                ..x.clone()
            }),
            ..Default::default()
        };
        let w = sim::fidelity::compare_own_ce(&topo, sim::fidelity::OWN_CE_H200X2_RUN3, &cfg)
            .expect("simulates")
            .iter()
            .map(|r| r.error.abs())
            .fold(0.0, f64::max);
        if w < best.0 {
            best = (w, g);
        }
    }
    x.ce_gbps = best.1;
    println!(
        "ce_gbps {:.0}: worst |error| on run 3's copy-engine points {:.1}%",
        x.ce_gbps,
        best.0 * 100.0
    );
    println!(
        "launch_simple_us {:.2}, gpu_gbps {:.0}, cta_gbps {:.0}, launch_ll_us {:.2}, ll_gpu_gbps {:.0}",
        x.launch_simple_us, x.gpu_gbps, x.cta_gbps, x.launch_ll_us, x.ll_gpu_gbps
    );
    for (label, pts) in &sets {
        summary(&topo, label, pts, &x);
    }
    for (label, pts) in &sets {
        println!("\n{label}:\n{}", markdown(&rows(&topo, pts, &x)));
    }
}
