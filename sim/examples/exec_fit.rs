//! Fits `sim::ExecParams` (the model of topoplan's CUDA executor) to measured all-reduce points by
//! grid search, minimising the worst relative error: `cargo run --release -p sim --example
//! exec_fit [-- --fenced | --previous]`.
//!
//! By default it fits the direct-push executor with relaxed credits
//! (`fidelity::OWN_DIRECT_H200X2`), starting from `ExecParams::default()` (so the grid rules,
//! `cta_bytes`, `max_ctas`, `ll_cta_bytes`, `ll_ctas`, are the runtime's and not fitted): the
//! Simple floor and GPU rate, then the per-CTA rate, on the Simple points (coordinate descent,
//! twice), then the LL floor and rate on the LL points; then the copy-engine terms
//! (`ce_launch_us`, `ce_gbps`) on the copy-engine pair all-reduce (`fidelity::OWN_CE_PAIR_H200X2`,
//! simulated with `fidelity::CE_CHUNK_BYTES` chunks); then the pull-mode floor and rate
//! (`pull_launch_us`, `pull_gbps`) on the pull-mode one-shot all-reduce
//! (`fidelity::OWN_PULL_H200X2`; the pull range, `pull_min_bytes..=pull_max_bytes`, is the
//! runtime's and not fitted); then the hybrid floor and rate (`hybrid_launch_us`,
//! `hybrid_gbps`) on the hybrid all-reduce (`fidelity::OWN_HYBRID_H200X2`, two points: the fit is
//! near-exact; `hybrid_min_bytes` is the runtime's and not fitted), in two passes (a coarse grid,
//! then a fine one around its best), printing the error on the hybrid's adoption run
//! (`fidelity::OWN_HYBRID_H200X2_ADOPTION`, not fitted on). The push terms are fitted with pull
//! mode and the hybrid off (`fidelity::compare_own_one_shot`), so the fits are independent.
//!
//! `--fenced` refits the same kernel with fenced credits (`fidelity::OWN_DIRECT_FENCED_H200X2`)
//! from `ExecParams::direct_fenced_h200x2()`; `--previous` the previous (pull-based) executor's
//! points (final run and run 3 together) from `ExecParams::pull_h200x2()`. Both keep the
//! copy-engine terms of then (`ce_launch_us` 12.0, `ce_gbps` 199, fitted on run 3 of the previous,
//! generic copy-engine lowering, `fidelity::OWN_CE_H200X2_RUN3`, 16 MiB chunks, when the
//! pipeline schedule ran every send before the receives) and report their error on those points,
//! with the rate a refit on today's interleaved schedule would give, for comparison; both have
//! pull mode and the hybrid off, so they fit no pull or hybrid terms.
//!
//! Prints the fitted values (the corresponding function in `sim/src/config/exec.rs` holds these), a
//! warning if one lies on the edge of its search range, the worst and mean |error| per protocol,
//! and the tables that `docs/fidelity.md` shows.
use planner::schedule::Protocol;
use planner::topology::Topology;
use sim::fidelity::{
    compare_own_as_run, compare_own_ce, compare_own_one_shot, markdown, Row, CE_CHUNK_BYTES,
    GENERIC_CE_CHUNK_BYTES, OWN_CE_H200X2_RUN3, OWN_CE_PAIR_H200X2, OWN_DIRECT_FENCED_H200X2,
    OWN_DIRECT_H200X2, OWN_HYBRID_H200X2, OWN_HYBRID_H200X2_ADOPTION, OWN_ONE_SHOT_H200X2,
    OWN_ONE_SHOT_H200X2_RUN3, OWN_PULL_H200X2,
};
use sim::{ExecParams, SimConfig};

type Points = Vec<(u64, Protocol, f64)>;
/// Labelled measured sets.
type Sets = Vec<(&'static str, &'static [(u64, Protocol, f64)])>;

fn cfg(x: &ExecParams) -> SimConfig {
    SimConfig {
        exec: Some(x.clone()),
        ..Default::default()
    }
}

fn rows(topo: &Topology, pts: &[(u64, Protocol, f64)], x: &ExecParams) -> Vec<Row> {
    compare_own_one_shot(topo, pts, &cfg(x)).expect("simulates")
}

fn ce_rows(topo: &Topology, pts: &[(u64, f64)], chunk: u64, x: &ExecParams) -> Vec<Row> {
    compare_own_ce(topo, pts, chunk, &cfg(x)).expect("simulates")
}

/// Pull-mode and hybrid points, simulated as the runtime runs them.
fn as_run_rows(topo: &Topology, pts: &[(u64, f64)], x: &ExecParams) -> Vec<Row> {
    compare_own_as_run(topo, pts, &cfg(x)).expect("simulates")
}

fn worst_of(r: &[Row]) -> f64 {
    r.iter().map(|r| r.error.abs()).fold(0.0, f64::max)
}

/// A search range: (low, high, step).
type Range = (f64, f64, f64);

fn values(r: Range) -> Vec<f64> {
    let n = ((r.1 - r.0) / r.2 + 1e-9).floor() as usize;
    (0..=n).map(|i| r.0 + i as f64 * r.2).collect()
}

/// Best (a, b) on the grid for `set(x, a, b)`, by the worst error `eval` gives (the lowest
/// values win ties); warns when the best lies on an edge of a range that has more than one value
/// (a range starting at 0 starts at a hard bound: a note instead).
fn search(
    x: &mut ExecParams,
    names: (&str, &str),
    a: Range,
    b: Range,
    set: fn(&mut ExecParams, f64, f64),
    eval: &dyn Fn(&ExecParams) -> f64,
) -> f64 {
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for va in values(a) {
        for vb in values(b) {
            let mut y = x.clone();
            set(&mut y, va, vb);
            let w = eval(&y);
            if w < best.0 {
                best = (w, va, vb);
            }
        }
    }
    for (name, r, v) in [(names.0, a, best.1), (names.1, b, best.2)] {
        let edge = |e: f64| (v - e).abs() < r.2 / 2.0;
        if r.1 > r.0 && r.0 == 0.0 && edge(0.0) {
            // A range from 0 starts at a hard bound (a cost is not negative): nothing to widen.
            println!("note: {name} = {v} is at its lower bound 0 (it cannot be negative)");
        } else if r.1 > r.0 && (edge(r.0) || edge(r.1)) {
            println!(
                "warning: {name} = {v} is on the edge of its range {}..{}",
                r.0, r.1
            );
        }
    }
    set(x, best.1, best.2);
    best.0
}

fn summary(label: &str, r: &[Row]) {
    for (p, n, worst, mean) in sim::fidelity::errors_by_protocol(r) {
        println!(
            "{label}, {} ({n} points): worst |error| {:.1}%, mean |error| {:.1}%",
            p.name(),
            worst * 100.0,
            mean * 100.0
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let previous = args.iter().any(|a| a == "--previous");
    let fenced = args.iter().any(|a| a == "--fenced");
    // The earlier executors are refitted as they were fitted then, without pull mode or hybrid.
    let past = previous || fenced;
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    let (sets, mut x) = measured_sets(previous, fenced);
    fit_push(&mut x, &topo, &sets, past);
    let ce = fit_copy_engine(&mut x, &topo, past);
    println!(
        "launch_simple_us {:.2}, gpu_gbps {:.0}, cta_gbps {:.0}, launch_ll_us {:.2}, ll_gpu_gbps {:.0}",
        x.launch_simple_us, x.gpu_gbps, x.cta_gbps, x.launch_ll_us, x.ll_gpu_gbps
    );
    // Pull mode and the hybrid: the current executor only; the others have them off.
    let pull = (!past).then(|| fit_pull(&mut x, &topo));
    let hybrid = (!past).then(|| fit_hybrid(&mut x, &topo));
    let (ce_label, ce_pts, ce_chunk) = ce;
    for (label, pts) in &sets {
        summary(label, &rows(&topo, pts, &x));
    }
    let ce = ce_rows(&topo, ce_pts, ce_chunk, &x);
    summary(ce_label, &ce);
    if let Some(p) = &pull {
        summary("pull mode", p);
    }
    if let Some((h, out)) = &hybrid {
        summary("hybrid", h);
        summary("hybrid, adoption run (not fitted on)", out);
    }
    for (label, pts) in &sets {
        println!("\n{label}:\n{}", markdown(&rows(&topo, pts, &x)));
    }
    println!("\n{ce_label}:\n{}", markdown(&ce));
    if let Some(p) = &pull {
        println!("\npull mode:\n{}", markdown(p));
    }
    if let Some((h, out)) = &hybrid {
        println!("\nhybrid:\n{}", markdown(h));
        println!("\nhybrid, adoption run (not fitted on):\n{}", markdown(out));
    }
}

/// The measured one-shot sets to fit and the parameters to start from, per executor.
fn measured_sets(previous: bool, fenced: bool) -> (Sets, ExecParams) {
    if previous {
        (
            vec![
                ("pull final run", &OWN_ONE_SHOT_H200X2[..]),
                ("pull run 3", &OWN_ONE_SHOT_H200X2_RUN3[..]),
            ],
            ExecParams::pull_h200x2(),
        )
    } else if fenced {
        (
            vec![("direct, fenced credits", &OWN_DIRECT_FENCED_H200X2[..])],
            ExecParams::direct_fenced_h200x2(),
        )
    } else {
        (
            vec![("direct, relaxed credits", &OWN_DIRECT_H200X2[..])],
            ExecParams::default(),
        )
    }
}

/// The push path's terms: the Simple and LL floors and rates and the per-CTA rate, by
/// coordinate descent on the one-shot points of `sets`.
fn fit_push(x: &mut ExecParams, topo: &Topology, sets: &Sets, past: bool) {
    let pick = |p: Protocol| -> Points {
        sets.iter()
            .flat_map(|s| s.1.iter().copied())
            .filter(|x| x.1 == p)
            .collect()
    };
    let (simple, ll) = (pick(Protocol::Simple), pick(Protocol::LL));
    let on = |pts: &Points| {
        let pts = pts.clone();
        let topo = topo.clone();
        move |x: &ExecParams| worst_of(&rows(&topo, &pts, x))
    };
    let (on_simple, on_ll) = (on(&simple), on(&ll));
    let simple_floor_rate = |x: &mut ExecParams| {
        search(
            x,
            ("launch_simple_us", "gpu_gbps"),
            (6.0, 16.0, 0.1),
            (280.0, 420.0, 1.0),
            |x, a, b| {
                x.launch_simple_us = a;
                x.gpu_gbps = b;
            },
            &on_simple,
        );
    };
    let ll_floor_rate = |x: &mut ExecParams| {
        search(
            x,
            ("launch_ll_us", "ll_gpu_gbps"),
            (2.0, 8.0, 0.05),
            (150.0, 500.0, 2.0),
            |x, a, b| {
                x.launch_ll_us = a;
                x.ll_gpu_gbps = b;
            },
            &on_ll,
        );
    };
    let cta_rate = |x: &mut ExecParams, eval: &dyn Fn(&ExecParams) -> f64| {
        search(
            x,
            ("cta_gbps", "-"),
            (4.0, 80.0, 1.0),
            (0.0, 0.0, 1.0),
            |x, a, _| {
                x.cta_gbps = a;
            },
            eval,
        );
    };
    if past {
        // As these were fitted: Simple (floor, GPU rate), then the per-CTA rate on the Simple
        // points, twice; then LL (floor, rate).
        for _ in 0..2 {
            simple_floor_rate(x);
            cta_rate(x, &on_simple);
        }
        ll_floor_rate(x);
    } else {
        // This set has no Simple point below 1 MiB (32 CTAs), so the Simple points alone leave
        // the per-CTA rate, which both grids share, nearly free: it is judged on all points (the
        // worse protocol's worst error). Simple (floor, GPU rate), LL (floor, rate), per-CTA
        // rate, three rounds (the values stop moving after two).
        let on_both = |x: &ExecParams| on_simple(x).max(on_ll(x));
        for _ in 0..3 {
            simple_floor_rate(x);
            ll_floor_rate(x);
            cta_rate(x, &on_both);
        }
    }
}

/// The copy-engine terms and the points they are judged on: (label, points, chunk bytes).
fn fit_copy_engine(
    x: &mut ExecParams,
    topo: &Topology,
    past: bool,
) -> (&'static str, &'static [(u64, f64)], u64) {
    let (ce_label, ce_pts, ce_chunk) = if past {
        (
            "previous copy-engine lowering, run 3",
            &OWN_CE_H200X2_RUN3[..],
            GENERIC_CE_CHUNK_BYTES,
        )
    } else {
        ("copy-engine pair", &OWN_CE_PAIR_H200X2[..], CE_CHUNK_BYTES)
    };
    let on_ce = |x: &ExecParams| worst_of(&ce_rows(topo, ce_pts, ce_chunk, x));
    let ce_worst = if past {
        // History: the terms stay as fitted then (`ce_gbps` 199 at `ce_launch_us` 12.0, on the
        // pipeline schedule of then, every send before the receives). The refit of its rate on
        // today's interleaved schedule is printed for comparison, not adopted.
        let mut y = x.clone();
        let refit = search(
            &mut y,
            ("ce_gbps", "-"),
            (100.0, 300.0, 1.0),
            (0.0, 0.0, 1.0),
            |x, a, _| x.ce_gbps = a,
            &on_ce,
        );
        println!(
            "(a refit of ce_gbps at ce_launch_us {:.1} would give {:.0}: worst |error| on the \
             {ce_label} points {:.1}%; kept as fitted then)",
            y.ce_launch_us,
            y.ce_gbps,
            refit * 100.0
        );
        on_ce(x)
    } else {
        search(
            x,
            ("ce_launch_us", "ce_gbps"),
            (0.0, 60.0, 0.5),
            (100.0, 600.0, 1.0),
            |x, a, b| {
                x.ce_launch_us = a;
                x.ce_gbps = b;
            },
            &on_ce,
        )
    };
    println!(
        "ce_launch_us {:.1}, ce_gbps {:.0}: worst |error| on the {ce_label} points {:.1}%",
        x.ce_launch_us,
        x.ce_gbps,
        ce_worst * 100.0
    );
    (ce_label, ce_pts, ce_chunk)
}

/// Pull mode's floor and rate on the pull-mode points; their rows as fitted.
fn fit_pull(x: &mut ExecParams, topo: &Topology) -> Vec<Row> {
    let on_pull = |x: &ExecParams| worst_of(&as_run_rows(topo, &OWN_PULL_H200X2[..], x));
    let worst = search(
        x,
        ("pull_launch_us", "pull_gbps"),
        (2.0, 10.0, 0.01),
        (200.0, 450.0, 1.0),
        |x, a, b| {
            x.pull_launch_us = a;
            x.pull_gbps = b;
        },
        &on_pull,
    );
    println!(
        "pull_launch_us {:.2}, pull_gbps {:.0} (pulls {}..={} B per rank): worst |error| on \
         the pull-mode points {:.1}%",
        x.pull_launch_us,
        x.pull_gbps,
        x.pull_min_bytes,
        x.pull_max_bytes,
        worst * 100.0
    );
    as_run_rows(topo, &OWN_PULL_H200X2[..], x)
}

/// The hybrid's floor and rate. Two points, two terms: a coarse grid, then a fine one around
/// its best (near-exact). The terms trade off (1 GB/s of rate moves the best floor by about
/// 5 µs at these sizes, so half the coarse rate step by about 2.5), so the fine grid spans 3 µs
/// of floor either side (not below 0). Returns the rows of the fitted points and of the
/// adoption run.
fn fit_hybrid(x: &mut ExecParams, topo: &Topology) -> (Vec<Row>, Vec<Row>) {
    let on_hybrid = |x: &ExecParams| worst_of(&as_run_rows(topo, &OWN_HYBRID_H200X2[..], x));
    let set = |x: &mut ExecParams, a: f64, b: f64| {
        x.hybrid_launch_us = a;
        x.hybrid_gbps = b;
    };
    search(
        x,
        ("hybrid_launch_us", "hybrid_gbps"),
        (0.0, 80.0, 0.1),
        (300.0, 450.0, 1.0),
        set,
        &on_hybrid,
    );
    let (a, b) = (x.hybrid_launch_us, x.hybrid_gbps);
    let worst = search(
        x,
        ("hybrid_launch_us (fine)", "hybrid_gbps (fine)"),
        ((a - 3.0).max(0.0), a + 3.0, 0.01),
        (b - 1.0, b + 1.0, 0.01),
        set,
        &on_hybrid,
    );
    let out = as_run_rows(topo, &OWN_HYBRID_H200X2_ADOPTION[..], x);
    println!(
        "hybrid_launch_us {:.2}, hybrid_gbps {:.2} (from {} B per rank): worst |error| on the \
         hybrid points {:.3}%; on the adoption run (not fitted on) {:.3}%",
        x.hybrid_launch_us,
        x.hybrid_gbps,
        x.hybrid_min_bytes,
        worst * 100.0,
        worst_of(&out) * 100.0
    );
    (as_run_rows(topo, &OWN_HYBRID_H200X2[..], x), out)
}
