//! Fits a profile's NCCL-style protocol costs to nccl-tests curves (`topoplan calibrate`):
//! coordinate descent on the launch floor and each used protocol's per-step cost, hop latency
//! and per-channel rate, minimising the mean squared log error of `--as nccl` over every point
//! (robust to the odd spike of a measured curve, which a minimax fit would chase).

use crate::fidelity::{compare_as_nccl, Row};
use crate::{SimConfig, SimError, SimParams};
use planner::plan::Planner;
use planner::schedule::{CollectiveKind, Protocol};
use planner::topology::Topology;
use planner::tuner::Filter;

/// One measured curve: a collective and its (nccl-tests size, µs) points.
#[derive(Clone, Debug)]
pub struct Curve {
    pub kind: CollectiveKind,
    pub points: Vec<(u64, f64)>,
}

/// The fit: the parameters and every point's row (prediction and error) under them.
#[derive(Clone, Debug)]
pub struct Fit {
    pub params: SimParams,
    pub rows: Vec<(CollectiveKind, Row)>,
    /// Root mean squared relative error before and after.
    pub rms_before: f64,
    pub rms_after: f64,
}

fn rows(
    topo: &Topology,
    planner: &Planner,
    curves: &[Curve],
    p: &SimParams,
) -> Result<Vec<(CollectiveKind, Row)>, SimError> {
    let cfg = SimConfig::from_params(p);
    let mut out = Vec::new();
    for c in curves {
        for r in compare_as_nccl(topo, planner, c.kind, &c.points, &Filter::default(), &cfg)? {
            out.push((c.kind, r));
        }
    }
    Ok(out)
}

fn loss(r: &[(CollectiveKind, Row)]) -> f64 {
    let n = r.len().max(1) as f64;
    r.iter()
        .map(|(_, x)| (x.predicted_us / x.measured_us).ln().powi(2))
        .sum::<f64>()
        / n
}

fn rms(r: &[(CollectiveKind, Row)]) -> f64 {
    let n = r.len().max(1) as f64;
    (r.iter().map(|(_, x)| x.error * x.error).sum::<f64>() / n).sqrt()
}

/// The parameters the fit moves, as (name, getter/setter).
type Knob = (&'static str, fn(&mut SimParams) -> &mut f64);

fn knobs(used: &[Protocol]) -> Vec<Knob> {
    let mut k: Vec<Knob> = vec![("launch_us", |p| &mut p.launch_us)];
    for &proto in used {
        match proto {
            Protocol::LL => {
                k.push(("ll.step_us", |p| &mut p.ll.step_us));
                k.push(("ll.hop_us", |p| &mut p.ll.hop_us));
                k.push(("ll.channel_gbps", |p| &mut p.ll.channel_gbps));
            }
            Protocol::LL128 => {
                k.push(("ll128.step_us", |p| &mut p.ll128.step_us));
                k.push(("ll128.hop_us", |p| &mut p.ll128.hop_us));
                k.push(("ll128.channel_gbps", |p| &mut p.ll128.channel_gbps));
            }
            Protocol::Simple => {
                k.push(("simple.step_us", |p| &mut p.simple.step_us));
                k.push(("simple.hop_us", |p| &mut p.simple.hop_us));
                k.push(("simple.channel_gbps", |p| &mut p.simple.channel_gbps));
                k.push(("nccl_ramp_s0_bytes", |p| &mut p.nccl_ramp_s0_bytes));
                k.push(("nccl_ramp_a", |p| &mut p.nccl_ramp_a));
            }
        }
    }
    k
}

/// Fits `start`'s protocol costs to `curves` on `topo`. Deterministic: the same inputs give
/// the same fit.
pub fn fit(
    topo: &Topology,
    planner: &Planner,
    curves: &[Curve],
    start: &SimParams,
) -> Result<Fit, SimError> {
    let mut p = start.clone();
    let mut cur = rows(topo, planner, curves, &p)?;
    let rms_before = rms(&cur);
    let mut best = loss(&cur);
    let mut used: Vec<Protocol> = Vec::new();
    for (_, r) in &cur {
        if !used.contains(&r.protocol) {
            used.push(r.protocol);
        }
    }
    let ks = knobs(&used);
    for step in [0.3, 0.15, 0.08, 0.04, 0.02, 0.01] {
        for _round in 0..3 {
            let mut moved = false;
            for (_, get) in &ks {
                for dir in [1.0 + step, 1.0 / (1.0 + step)] {
                    let mut q = p.clone();
                    let v = get(&mut q);
                    *v = (*v * dir).max(1e-3);
                    let r = rows(topo, planner, curves, &q)?;
                    let l = loss(&r);
                    if l < best - 1e-12 {
                        best = l;
                        p = q;
                        cur = r;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    Ok(Fit {
        params: p,
        rms_before,
        rms_after: rms(&cur),
        rows: cur,
    })
}

/// The names of the parameters `fit` moves for these protocols (for the report).
pub fn fitted_names(used: &[Protocol]) -> Vec<&'static str> {
    knobs(used).into_iter().map(|k| k.0).collect()
}
