//! `sim --as nccl` against the shipped 2×H200 nccl-tests curves: prints the markdown tables of
//! docs/fidelity.md and writes the SVG plot of predicted and measured curves.
//!
//! `cargo run --release -p sim --example nccl_fidelity -- docs/fidelity-nccl.svg`

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use sim::fidelity::{
    compare_as_nccl, markdown, median_abs_error, parse_bench_nccl_log, parse_nccl_tests, Row,
};
use sim::nccl::Model;
use sim::SimConfig;
use std::fmt::Write;

fn coll(kind: CollectiveKind, n: u32) -> Collective {
    Collective::as_nccl_tests(kind, n, 0)
}

/// One plotted curve: its name, predicted (size, µs) points, measured ones (none: held out).
type Curve = (String, Vec<(f64, f64)>, Vec<(f64, f64)>);

/// A log-log plot: measured points as circles, predictions as lines, one colour per curve.
fn svg(curves: &[Curve]) -> String {
    let p = Plot {
        w: 960.0,
        h: 600.0,
        l: 80.0,
        r: 220.0,
        t: 40.0,
        b: 60.0,
        x: (8f64.log10(), ((4u64 << 30) as f64).log10()),
        y: (1f64, 2e4f64.log10()),
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="24" font-size="16">2xH200: sim --as nccl (lines) vs NCCL 2.28 measured (circles), time per call</text>"#,
        p.w, p.h, p.l
    );
    p.grid(&mut s);
    for (i, c) in curves.iter().enumerate() {
        p.curve(&mut s, i, c);
    }
    s.push_str("</svg>\n");
    s
}

/// The plot's frame: width, height and left, right, top and bottom margins in pixels, and the
/// log10 ranges of its axes (bytes, µs).
struct Plot {
    w: f64,
    h: f64,
    l: f64,
    r: f64,
    t: f64,
    b: f64,
    x: (f64, f64),
    y: (f64, f64),
}

impl Plot {
    fn px(&self, x: f64) -> f64 {
        self.l + (x.log10() - self.x.0) / (self.x.1 - self.x.0) * (self.w - self.l - self.r)
    }

    fn py(&self, y: f64) -> f64 {
        self.h
            - self.b
            - (y.log10() - self.y.0) / (self.y.1 - self.y.0) * (self.h - self.t - self.b)
    }

    /// Grid lines and labels: sizes in powers of 8 up to 4 GiB, times in decades.
    fn grid(&self, s: &mut String) {
        let (w, h, l, r, t, b) = (self.w, self.h, self.l, self.r, self.t, self.b);
        for e in 0..=9 {
            let x = 8f64 * 8f64.powi(e);
            if x > (4u64 << 30) as f64 {
                break;
            }
            let label = match x as u64 {
                v if v >= 1 << 30 => format!("{}G", v >> 30),
                v if v >= 1 << 20 => format!("{}M", v >> 20),
                v if v >= 1 << 10 => format!("{}K", v >> 10),
                v => v.to_string(),
            };
            let _ = write!(
                s,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#ddd"/><text x="{0}" y="{3}" text-anchor="middle">{label}</text>"##,
                self.px(x),
                t,
                h - b,
                h - b + 18.0
            );
        }
        for e in 1..=4 {
            let y = 10f64.powi(e);
            let _ = write!(
                s,
                r##"<line x1="{l}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{y} us</text>"##,
                self.py(y),
                w - r,
                l - 6.0,
                self.py(y) + 4.0
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">size (bytes)</text>"#,
            (l + w - r) / 2.0,
            h - 16.0
        );
    }

    /// Curve number `i`: the prediction as a line (dashed when nothing was measured), the
    /// measurements as circles, and its legend entry.
    fn curve(&self, s: &mut String, i: usize, (name, pred, meas): &Curve) {
        let colours = [
            "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
        ];
        let (w, r, t) = (self.w, self.r, self.t);
        let c = colours[i % colours.len()];
        let pts: Vec<String> = pred
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", self.px(x), self.py(y)))
            .collect();
        let dash = if meas.is_empty() {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
            pts.join(" ")
        );
        for &(x, y) in meas {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="none" stroke="{c}" stroke-width="2"/>"#,
                self.px(x),
                self.py(y)
            );
        }
        let ly = t + 20.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            r#"<line x1="{0}" y1="{ly}" x2="{1}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{2}" y="{3}">{name}</text>"#,
            w - r + 10.0,
            w - r + 34.0,
            w - r + 40.0,
            ly + 4.0
        );
    }
}

fn main() {
    let out = std::env::args().nth(1);
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/measurements/h200x2");
    let t = load_file(&dir.join("topo.xml"), &LoadOptions::default())
        .unwrap()
        .topology;
    let p = Planner::new(&t).unwrap();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    let nccl = Nccl {
        t: &t,
        p: &p,
        m: &m,
        cfg: &cfg,
    };
    let mut curves = fitted_tables(&nccl, &dir);
    // Held out: predicted only (their measured curves are not in the repository).
    let sizes: Vec<u64> = (0..=9)
        .map(|i| 8u64 << (3 * i))
        .filter(|&b| b <= 4 << 30)
        .collect();
    let pred = held_out_predictions(&nccl, &sizes);
    let measured = held_out_against_bench(&nccl);
    for (i, &k) in HELD_OUT.iter().enumerate() {
        curves.push((
            format!("{} (held out)", k.name()),
            pred[i].clone(),
            measured[i].clone(),
        ));
    }
    forced_all_reduce_table(&nccl, &sizes);
    if let Some(path) = out {
        std::fs::write(&path, svg(&curves)).unwrap();
        eprintln!("wrote {path}");
    }
}

/// The collectives no fit saw.
const HELD_OUT: [CollectiveKind; 5] = [
    CollectiveKind::ReduceScatter,
    CollectiveKind::Broadcast,
    CollectiveKind::Reduce,
    CollectiveKind::AllToAll,
    CollectiveKind::SendRecv,
];

/// NCCL's model on the measured machine.
struct Nccl<'a> {
    t: &'a Topology,
    p: &'a Planner,
    m: &'a Model,
    cfg: &'a SimConfig,
}

impl Nccl<'_> {
    /// What `sim --as nccl` predicts for `kind` on 2 ranks at `bytes`, narrowed by `f`.
    fn run(&self, kind: CollectiveKind, bytes: u64, f: &Filter) -> sim::nccl::Run {
        self.m
            .run(self.t, self.p, &coll(kind, 2), bytes, f, self.cfg)
            .unwrap()
    }
}

/// The fitted collectives (all-reduce, all-gather) against nccl-tests' files in `dir`: their
/// tables, and their curves.
fn fitted_tables(nccl: &Nccl, dir: &std::path::Path) -> Vec<Curve> {
    let mut curves = Vec::new();
    for (k, f) in [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ] {
        let meas = parse_nccl_tests(&std::fs::read_to_string(dir.join(f)).unwrap(), f).unwrap();
        let r: Vec<Row> =
            compare_as_nccl(nccl.t, nccl.p, k, &meas, &Filter::default(), nccl.cfg).unwrap();
        let worst = r.iter().map(|x| x.error.abs()).fold(0.0, f64::max);
        println!(
            "## {} ({f}): worst |error| {:.1}%, median {:.1}%\n\n{}",
            k.name(),
            worst * 100.0,
            median_abs_error(&r) * 100.0,
            markdown(&r)
        );
        curves.push((
            format!("{} (fitted)", k.name()),
            r.iter().map(|x| (x.bytes as f64, x.predicted_us)).collect(),
            r.iter().map(|x| (x.bytes as f64, x.measured_us)).collect(),
        ));
    }
    curves
}

/// The held-out collectives' predicted choice and time at `sizes`: the table, and per
/// collective its (size, µs) points.
fn held_out_predictions(nccl: &Nccl, sizes: &[u64]) -> Vec<Vec<(f64, f64)>> {
    println!("## held out (predicted; not measured here)\n");
    println!("| size (B) | reduce-scatter | broadcast | reduce | all-to-all | send/recv |\n|---:|---|---|---|---|---|");
    let mut pred: Vec<Vec<(f64, f64)>> = vec![Vec::new(); HELD_OUT.len()];
    for &b in sizes {
        let mut row = format!("| {b} |");
        for (i, &k) in HELD_OUT.iter().enumerate() {
            let r = nccl.run(k, b, &Filter::default());
            let _ = write!(
                row,
                " {} {} x{}: {:.2} µs |",
                r.choice.algo.name(),
                r.choice.protocol.name(),
                r.choice.channels,
                r.time_us
            );
            pred[i].push((b as f64, r.time_us));
        }
        println!("{row}");
    }
    pred
}

/// NCCL's held-out collectives as `topoplan bench --vs-nccl` timed them (nccl_us column),
/// against the predictions: the table, and per collective its measured (size, µs) points.
fn held_out_against_bench(nccl: &Nccl) -> Vec<Vec<(f64, f64)>> {
    let bench =
        parse_bench_nccl_log(
            &std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
                "../docs/measurements/2026-11-30-h200x2-allreduce-shared-sm-hybrid/others.log",
            ))
            .unwrap(),
            "others.log",
        )
        .unwrap();
    println!("\n## held out, against NCCL as `topoplan bench` timed it (others.log)\n");
    println!("| size (B) | collective | proto | channels | NCCL µs (bench) | predicted µs | error |\n|---:|---|---|---:|---:|---:|---:|");
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); HELD_OUT.len()];
    for &(k, b, us) in &bench {
        if k == CollectiveKind::AllGather {
            continue;
        }
        let r = nccl.run(k, b, &Filter::default());
        println!(
            "| {b} | {} | {} | {} | {us:.2} | {:.2} | {:+.1}% |",
            k.name(),
            r.choice.protocol.name(),
            r.choice.channels,
            r.time_us,
            (r.time_us / us - 1.0) * 100.0
        );
        if let Some(i) = HELD_OUT.iter().position(|&h| h == k) {
            measured[i].push((b as f64, us));
        }
    }
    measured
}

/// Forced algorithm × protocol (NCCL_ALGO / NCCL_PROTO) all-reduce, predicted.
fn forced_all_reduce_table(nccl: &Nccl, sizes: &[u64]) {
    println!("\n## all-reduce, algorithm and protocol forced (predicted µs)\n");
    println!("| size (B) | ring LL | ring LL128 | ring Simple | tree LL | tree LL128 | tree Simple |\n|---:|---:|---:|---:|---:|---:|---:|");
    for &b in sizes {
        let mut row = format!("| {b} |");
        for a in [Algorithm::Ring, Algorithm::Tree] {
            for pr in Protocol::ALL {
                let f = Filter::only(a.clone(), pr);
                let r = nccl.run(CollectiveKind::AllReduce, b, &f);
                let _ = write!(row, " {:.2} |", r.time_us);
            }
        }
        println!("{row}");
    }
}
