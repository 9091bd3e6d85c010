//! The bound, NCCL's choice and topoplan's pick for a 1 GiB all-reduce on every subset of MIN to
//! MAX GPUs of a machine, simulated (`docs/planner.md`, "Measured: bound, NCCL and topoplan"):
//! `cargo run --release -p sim --example subsets -- FILE [GPU_MODEL] [MIN MAX] [-v]`.
//! `-v` prints every candidate's tuner estimate and engine price.

use planner::plan::{Planner, Pricer};
use planner::schedule::{Collective, CollectiveKind};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use sim::price::{EnginePricer, Schedules};
use sim::SimConfig;

const BYTES: u64 = 1 << 30;

/// Every `k`-subset of `0..n`, in lexicographic order.
fn combinations(n: u32, k: u32) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut cur: Vec<u32> = (0..k).collect();
    loop {
        out.push(cur.clone());
        let Some(i) = (0..k as usize).rev().find(|&i| cur[i] < n - k + i as u32) else {
            return out;
        };
        cur[i] += 1;
        for j in i + 1..k as usize {
            cur[j] = cur[j - 1] + 1;
        }
    }
}

struct Row {
    gpus: String,
    bound: f64,
    nccl: (String, f64),
    ours: (String, f64),
    best: f64,
}

fn busbw(n: u32, us: f64) -> f64 {
    BYTES as f64 / 1e3 / us * CollectiveKind::AllReduce.busbw_factor(n)
}

fn survey(t: &Topology, gpus: &[u32], verbose: bool) -> Option<Row> {
    let t = t.subset(gpus).ok()?;
    let p = Planner::new(&t).ok()?;
    let n = p.nranks();
    let cfg = SimConfig::from_profile(&p.profile().profile, "profile").ok()?;
    let coll = Collective::as_nccl_tests(CollectiveKind::AllReduce, n, 0);
    let bound = planner::bound::bound(&t, coll.kind, 0).ok()??.busbw_gbps;
    let model = sim::nccl::Model::new(&t, &p);
    let f = Filter::default();
    let nr = model.run(&t, &p, &coll, BYTES, &f, &cfg).ok()?;
    let cache = Schedules::default();
    let pricer = EnginePricer::with_cache(&t, &p, &cfg, &cache);
    let pick = p.choose_priced(&coll, BYTES, &f, &pricer)?;
    let mut best = f64::INFINITY;
    // What `topoplan sim` reports for the pick: its schedule run whole.
    let picked = {
        let ch = &pick.choice;
        let c = planner::plan::Candidate {
            algorithm: ch.algorithm.clone(),
            protocol: ch.protocol,
            channels: ch.channels,
            time_us: ch.est_us,
            lat_us: 0.0,
            peak_algbw_gbps: 0.0,
        };
        let s = pricer.schedule(&coll, &c, None).ok()?;
        pricer.run(&s, BYTES).ok()?.time_us
    };
    for c in p.candidates_filtered(&coll, BYTES, &f) {
        let e = pricer.price(&coll, &c, BYTES);
        best = best.min(e.unwrap_or(f64::INFINITY));
        if verbose {
            println!(
                "    {:>8} {:>6} x{:<3} tuner {:>9.1} us engine {:>9.1} us",
                c.algorithm.name(),
                c.protocol.name(),
                c.channels,
                c.time_us,
                e.unwrap_or(f64::NAN)
            );
        }
    }
    let ch = &pick.choice;
    let label = |a: &str, t: f64| (a.to_string(), busbw(n, t));
    Some(Row {
        gpus: gpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        bound,
        nccl: label(nr.choice.algo.name(), nr.time_us),
        ours: label(&ch.algorithm.name(), picked),
        best: busbw(n, best),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v");
    let pos: Vec<&String> = args.iter().filter(|a| *a != "-v").collect();
    let file = pos.first().expect("FILE [GPU_MODEL] [MIN MAX] [-v]");
    let opts = LoadOptions {
        gpu_model: pos.get(1).map(|s| s.to_string()),
        ..Default::default()
    };
    let t = load_file(std::path::Path::new(file.as_str()), &opts)
        .expect("topology")
        .topology;
    let n = t.n_ranks() as u32;
    let num = |i: usize, d: u32| pos.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (lo, hi) = (num(2, 3), num(3, n));
    println!("| GPUs | bound | NCCL | topoplan | topoplan / NCCL | engine's best |");
    println!("|---|---|---|---|---|---|");
    let (mut total, mut under, mut slower, mut small, mut good, mut at95, mut regret) =
        (0, 0, 0, 0, 0, 0, 0);
    let mut ratios = Vec::new();
    for k in lo..=hi {
        for g in combinations(n, k) {
            let Some(r) = survey(&t, &g, verbose) else {
                continue;
            };
            let ratio = r.ours.1 / r.nccl.1;
            println!(
                "| {} | {:.1} | {} {:.1} ({:.0}%) | {} {:.1} ({:.0}%) | {ratio:.2} | {:.1} |",
                r.gpus,
                r.bound,
                r.nccl.0,
                r.nccl.1,
                100.0 * r.nccl.1 / r.bound,
                r.ours.0,
                r.ours.1,
                100.0 * r.ours.1 / r.bound,
                r.best
            );
            total += 1;
            at95 += usize::from(r.ours.1 >= 0.95 * r.bound);
            regret += usize::from(r.ours.1 < r.best / 1.10);
            ratios.push(ratio);
            if r.nccl.1 < 0.8 * r.bound {
                under += 1;
                match ratio {
                    x if x < 1.0 => slower += 1,
                    x if x < 1.2 => small += 1,
                    _ => good += 1,
                }
            }
        }
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
    println!(
        "{total} subsets; NCCL under 80% of the bound on {under}: topoplan >= 1.2x on {good}, \
         1.0-1.2x on {small}, slower on {slower}; median ratio {median:.2}; topoplan >= 95% of \
         the bound on {at95}; pick > 10% under the engine's best on {regret}"
    );
}
