//! Fits `sim::ExecParams` (the model of topoplan's CUDA executor) to the measured one-shot
//! all-reduce points (final run and run 3 together) by grid search, minimising the worst
//! relative error: `cargo run -p sim --example exec_fit`. The Simple floor, GPU rate and per-CTA
//! rate on the Simple points (coordinate descent), the LL floor and rate on the LL points.
//! Prints the fitted values (the defaults in `sim/src/config.rs` are these) and the worst errors.
use planner::schedule::Protocol;
use sim::fidelity::{compare_own_one_shot, OWN_ONE_SHOT_H200X2, OWN_ONE_SHOT_H200X2_RUN3};
use sim::{ExecParams, SimConfig};

fn worst(topo: &planner::topology::Topology, pts: &[(u64, Protocol, f64)], x: &ExecParams) -> f64 {
    let cfg = SimConfig {
        exec: Some(x.clone()),
        ..Default::default()
    };
    compare_own_one_shot(topo, pts, &cfg)
        .expect("simulates")
        .iter()
        .map(|r| r.error.abs())
        .fold(0.0, f64::max)
}

/// Best (a, b) on the grid for `set(x, a, b)`.
fn search(
    topo: &planner::topology::Topology,
    pts: &[(u64, Protocol, f64)],
    x: &mut ExecParams,
    a: (f64, f64, f64),
    b: (f64, f64, f64),
    set: fn(&mut ExecParams, f64, f64),
) -> f64 {
    let mut best = (f64::INFINITY, 0.0, 0.0);
    let mut va = a.0;
    while va <= a.1 + 1e-9 {
        let mut vb = b.0;
        while vb <= b.1 + 1e-9 {
            let mut y = x.clone();
            set(&mut y, va, vb);
            let w = worst(topo, pts, &y);
            if w < best.0 {
                best = (w, va, vb);
            }
            vb += b.2;
        }
        va += a.2;
    }
    set(x, best.1, best.2);
    best.0
}

fn main() {
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    let pick = |pts: &[(u64, Protocol, f64)], p: Protocol, max: u64| -> Vec<(u64, Protocol, f64)> {
        pts.iter()
            .copied()
            .filter(|x| x.1 == p && x.0 <= max)
            .collect()
    };
    let both = |p: Protocol| -> Vec<(u64, Protocol, f64)> {
        let mut v = pick(OWN_ONE_SHOT_H200X2, p, u64::MAX);
        v.extend(pick(OWN_ONE_SHOT_H200X2_RUN3, p, u64::MAX));
        v
    };
    let mut x = ExecParams::default();
    let (simple, ll) = (both(Protocol::Simple), both(Protocol::LL));
    let (mut w1, mut w3) = (0.0, 0.0);
    // Coordinate descent: (floor, GPU rate), then the per-CTA rate, twice.
    for _ in 0..2 {
        w1 = search(
            &topo,
            &simple,
            &mut x,
            (10.0, 16.0, 0.1),
            (320.0, 350.0, 1.0),
            |x, a, b| {
                x.launch_simple_us = a;
                x.gpu_gbps = b;
            },
        );
        w3 = search(
            &topo,
            &simple,
            &mut x,
            (4.0, 80.0, 1.0),
            (0.0, 0.0, 1.0),
            |x, a, _| {
                x.cta_gbps = a;
            },
        );
    }
    let w2 = search(
        &topo,
        &ll,
        &mut x,
        (5.0, 7.5, 0.1),
        (150.0, 300.0, 2.0),
        |x, a, b| {
            x.launch_ll_us = a;
            x.ll_gpu_gbps = b;
        },
    );
    let _ = w1;
    // The copy-engine path: its per-copy rate on run 3's two points.
    let mut best = (f64::INFINITY, 0.0);
    let mut g = 100.0;
    while g <= 300.0 {
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
        g += 1.0;
    }
    x.ce_gbps = best.1;
    println!(
        "ce_gbps {:.0}: worst |error| on run 3's copy-engine points {:.1}%",
        x.ce_gbps,
        best.0 * 100.0
    );
    println!(
        "launch_simple_us {:.1}, gpu_gbps {:.0}, cta_gbps {:.0}, launch_ll_us {:.1}, ll_gpu_gbps {:.0}",
        x.launch_simple_us, x.gpu_gbps, x.cta_gbps, x.launch_ll_us, x.ll_gpu_gbps
    );
    println!(
        "worst |error| of the fit: Simple {:.1}%, LL {:.1}%",
        w3 * 100.0,
        w2 * 100.0
    );
    println!(
        "with these: final run {:.1}%, run 3 {:.1}%",
        worst(&topo, OWN_ONE_SHOT_H200X2, &x) * 100.0,
        worst(&topo, OWN_ONE_SHOT_H200X2_RUN3, &x) * 100.0
    );
}
