//! Fits a profile's NCCL-style protocol costs to nccl-tests curves (`topoplan calibrate`):
//! coordinate descent on the launch floor and each used protocol's per-step cost, hop latency
//! and per-channel rate, minimising the mean squared log error of `--as nccl` over every point
//! (robust to the odd spike of a measured curve, which a minimax fit would chase).
//!
//! Measured curves come from nccl-tests output (`measurements::nccl_tests`) or from the NCCL
//! columns of `topoplan bench --json FILE --vs-nccl` files ([`parse_bench_json`]); both give
//! the same [`Curve`].

use crate::fidelity::{compare_as_nccl, Row};
use crate::{SimConfig, SimError, SimParams};
use planner::plan::Planner;
use planner::schedule::{CollectiveKind, Protocol};
use planner::topology::Topology;
use planner::tuner::Filter;
use std::path::Path;

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

/// The per-hop latencies are moved only on more than two ranks: two ranks' rings have one or
/// two hops, whose latency the fit cannot tell from the launch floor (it would drive them to
/// nothing, and rings of eight ranks, fourteen hops, would then be priced without them).
fn knobs(used: &[Protocol], nranks: usize) -> Vec<Knob> {
    let hops = nranks > 2;
    let mut k: Vec<Knob> = vec![("launch_us", |p| &mut p.launch_us)];
    for &proto in used {
        match proto {
            Protocol::LL => {
                k.push(("ll.step_us", |p| &mut p.ll.step_us));
                if hops {
                    k.push(("ll.hop_us", |p| &mut p.ll.hop_us));
                }
                k.push(("ll.channel_gbps", |p| &mut p.ll.channel_gbps));
            }
            Protocol::LL128 => {
                k.push(("ll128.step_us", |p| &mut p.ll128.step_us));
                if hops {
                    k.push(("ll128.hop_us", |p| &mut p.ll128.hop_us));
                }
                k.push(("ll128.channel_gbps", |p| &mut p.ll128.channel_gbps));
            }
            Protocol::Simple => {
                k.push(("simple.step_us", |p| &mut p.simple.step_us));
                if hops {
                    k.push(("simple.hop_us", |p| &mut p.simple.hop_us));
                }
                k.push(("simple.channel_gbps", |p| &mut p.simple.channel_gbps));
                k.push(("nccl_ramp_s0_bytes", |p| &mut p.nccl_ramp_s0_bytes));
                k.push(("nccl_ramp_a", |p| &mut p.nccl_ramp_a));
            }
        }
    }
    k
}

/// The protocols NCCL ran at the rows' sizes, in first-seen order.
fn used_protocols(rows: &[(CollectiveKind, Row)]) -> Vec<Protocol> {
    let mut used = Vec::new();
    for (_, r) in rows {
        if !used.contains(&r.protocol) {
            used.push(r.protocol);
        }
    }
    used
}

/// `p` with the parameter `get` reaches scaled by `factor` (kept above 0.001, as the fit keeps
/// every parameter positive).
fn nudged(p: &SimParams, get: fn(&mut SimParams) -> &mut f64, factor: f64) -> SimParams {
    let mut q = p.clone();
    let v = get(&mut q);
    *v = (*v * factor).max(1e-3);
    q
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
    let ks = knobs(&used_protocols(&cur), topo.n_ranks());
    for step in [0.3, 0.15, 0.08, 0.04, 0.02, 0.01] {
        for _round in 0..12 {
            let mut moved = false;
            for (_, get) in &ks {
                for dir in [1.0 + step, 1.0 / (1.0 + step)] {
                    let q = nudged(&p, *get, dir);
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

/// The points of `c` where NCCL runs LL. `topoplan calibrate` fits nccl-tests' in-place times
/// there besides the out-of-place ones: the two columns differ only by run-to-run noise (a few
/// µs of launch and flag polling), so fitting both halves it; above, in-place all-gather skips
/// a local copy that the out-of-place time includes.
pub fn where_nccl_runs_ll(c: Curve, model: &crate::nccl::Model) -> Curve {
    let points = c
        .points
        .into_iter()
        .filter(|&(bytes, _)| {
            model
                .choose(c.kind, bytes, &Filter::default())
                .is_some_and(|x| x.protocol == Protocol::LL)
        })
        .collect();
    Curve {
        kind: c.kind,
        points,
    }
}

/// The parameters `fit` moves whose change by the factor `1 ± step` would lower the loss at
/// `p`: none where `p` is a fixed point of the fit at that step (a profile stored with its
/// measurements then reproduces from them).
pub fn improvable(
    topo: &Topology,
    planner: &Planner,
    curves: &[Curve],
    p: &SimParams,
    step: f64,
) -> Result<Vec<&'static str>, SimError> {
    let at_p = rows(topo, planner, curves, p)?;
    let base = loss(&at_p);
    let mut out = Vec::new();
    for (name, get) in knobs(&used_protocols(&at_p), topo.n_ranks()) {
        for dir in [1.0 + step, 1.0 / (1.0 + step)] {
            let q = nudged(p, get, dir);
            if loss(&rows(topo, planner, curves, &q)?) < base - 1e-12 {
                out.push(name);
                break;
            }
        }
    }
    Ok(out)
}

/// The format tag of the `topoplan bench --json` files [`parse_bench_json`] reads.
pub use crate::measurements::BENCH_FORMAT;

/// NCCL's measured curve of one table of a `topoplan bench --json --vs-nccl` file.
#[derive(Clone, Debug)]
pub struct BenchCurve {
    /// The table's index in the file's `tables`.
    pub table: usize,
    /// The GPUs (ranks) the table ran on.
    pub ngpus: u32,
    /// The collective and its (nccl-tests size, NCCL's out-of-place µs) points.
    pub curve: Curve,
}

pub use crate::measurements::MeasurementError;

/// Reads a `topoplan bench --json` file ([`parse_bench_json`]).
pub fn load_bench_json(path: &Path) -> Result<Vec<BenchCurve>, MeasurementError> {
    let file = path.display().to_string();
    let text = planner::input::read_text(path).map_err(|e| MeasurementError::Read {
        file: file.clone(),
        msg: e.reason(),
    })?;
    parse_bench_json(&text, &file)
}

/// The NCCL columns of a `topoplan bench --json FILE --vs-nccl` file (format
/// [`BENCH_FORMAT`]) as measured curves: per table, its collective and GPU count, and each row's
/// (`bytes`, `out_of_place.nccl_time_us`): nccl-tests' size and out-of-place time, as
/// `measurements::nccl_tests` reads them. Rows of size 0 and rows without NCCL's time are
/// left out, and so are tables timed under a CUDA graph (`cuda_graph`: nccl-tests launches
/// each call) and tables without NCCL times. Errors name `file` and the field
/// (`tables[1].rows[3].out_of_place.nccl_time_us`).
pub fn parse_bench_json(text: &str, file: &str) -> Result<Vec<BenchCurve>, MeasurementError> {
    let r = crate::measurements::bench::parse(text, file)?;
    let mut out = Vec::new();
    for (i, t) in r.tables.iter().enumerate() {
        // The reader checked the collective's name and the GPU count.
        let Some(kind) = CollectiveKind::parse(&t.collective) else {
            continue;
        };
        let points: Vec<(u64, f64)> = t
            .rows
            .iter()
            .filter(|row| row.bytes > 0)
            .filter_map(|row| Some((row.bytes, row.out_of_place.nccl_time_us?)))
            .collect();
        if !t.cuda_graph && !points.is_empty() {
            out.push(BenchCurve {
                table: i,
                ngpus: t.ngpus as u32,
                curve: Curve { kind, points },
            });
        }
    }
    if out.is_empty() {
        return Err(MeasurementError::NoNccl { file: file.into() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tables as `topoplan bench --json --vs-nccl` writes them (NCCL's times from
    /// `tests/data/measurements/h200x2/`), a table timed under a CUDA graph and one without
    /// NCCL.
    const BENCH: &str = r#"{
      "format": "topoplan-bench/1",
      "command": "topoplan bench -b 8 -e 8M -f 4 --coll all-reduce,all-gather --vs-nccl",
      "tables": [
        {"collective": "all-reduce", "ngpus": 2, "procs": false, "dtype": "float", "op": "sum",
         "algo": "auto", "cuda_graph": false, "rows": [
          {"bytes": 0, "count": 0, "algo": "one-shot-ll",
           "out_of_place": {"time_us": 1.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1, "nccl_time_us": 0.5},
           "in_place": {"time_us": 1.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1}},
          {"bytes": 8, "count": 2, "algo": "one-shot-ll",
           "out_of_place": {"time_us": 4.69, "algbw": 0.0, "busbw": 0.0, "wrong": -1,
                            "nccl_time_us": 13.34, "nccl_busbw": 0.0, "nccl_wrong": 0},
           "in_place": {"time_us": 4.27, "algbw": 0.0, "busbw": 0.0, "wrong": -1,
                        "nccl_time_us": 11.74, "nccl_busbw": 0.0, "nccl_wrong": 0}},
          {"bytes": 8388608, "count": 2097152, "algo": "one-shot",
           "out_of_place": {"time_us": 35.42, "algbw": 236.83, "busbw": 236.83, "wrong": -1,
                            "nccl_time_us": 49.68, "nccl_busbw": 168.85, "nccl_wrong": 0},
           "in_place": {"time_us": 35.0, "algbw": 239.67, "busbw": 239.67, "wrong": -1,
                        "nccl_time_us": 48.71, "nccl_busbw": 172.23, "nccl_wrong": 0}}]},
        {"collective": "all-gather", "ngpus": 2, "procs": false, "dtype": "float", "op": "sum",
         "algo": "auto", "cuda_graph": false, "rows": [
          {"bytes": 524288, "count": 131072, "algo": "one-shot-ll",
           "out_of_place": {"time_us": 6.28, "algbw": 83.46, "busbw": 41.73, "wrong": -1,
                            "nccl_time_us": 15.03, "nccl_busbw": 17.44, "nccl_wrong": 0},
           "in_place": {"time_us": 6.46, "algbw": 81.11, "busbw": 40.55, "wrong": -1,
                        "nccl_time_us": 14.54, "nccl_busbw": 18.02, "nccl_wrong": 0}}]},
        {"collective": "all-gather", "ngpus": 2, "procs": false, "dtype": "float", "op": "sum",
         "algo": "auto", "cuda_graph": true, "rows": [
          {"bytes": 524288, "count": 131072, "algo": "one-shot-ll",
           "out_of_place": {"time_us": 5.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1, "nccl_time_us": 9.0},
           "in_place": {"time_us": 5.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1, "nccl_time_us": 9.0}}]},
        {"collective": "broadcast", "ngpus": 2, "procs": false, "dtype": "float", "op": "sum",
         "algo": "auto", "cuda_graph": false, "rows": [
          {"bytes": 8, "count": 2, "algo": "one-shot-ll",
           "out_of_place": {"time_us": 4.0, "algbw": 0.0, "busbw": 0.0, "wrong": 0},
           "in_place": {"time_us": 4.0, "algbw": 0.0, "busbw": 0.0, "wrong": 0}}]}
      ]
    }"#;

    #[test]
    fn bench_json_gives_nccls_out_of_place_curves() {
        let c = parse_bench_json(BENCH, "perf.json").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].table, c[0].ngpus), (0, 2));
        assert_eq!(c[0].curve.kind, CollectiveKind::AllReduce);
        // Size 0 is left out, as nccl-tests' size-0 rows are.
        assert_eq!(c[0].curve.points, vec![(8, 13.34), (8388608, 49.68)]);
        assert_eq!(
            (c[1].table, c[1].curve.kind),
            (1, CollectiveKind::AllGather)
        );
        assert_eq!(c[1].curve.points, vec![(524288, 15.03)]);
    }

    fn err(text: &str) -> MeasurementError {
        parse_bench_json(text, "m.json").unwrap_err()
    }

    fn field(text: &str) -> (String, String) {
        match err(text) {
            MeasurementError::Field { file, field, msg } => {
                assert_eq!(file, "m.json");
                (field, msg)
            }
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_bench_json_names_the_file_and_field() {
        assert!(matches!(err("{"), MeasurementError::Json { ref file, .. } if file == "m.json"));
        assert_eq!(field(r#"{"tables": []}"#).0, "format");
        let (f, m) = field(r#"{"format": "topoplan-bench/2", "tables": []}"#);
        assert_eq!(f, "format");
        assert!(m.contains("topoplan-bench/1"), "{m}");
        assert_eq!(field(r#"{"format": "topoplan-bench/1"}"#).0, "tables");
        assert_eq!(
            field(r#"{"format": "topoplan-bench/1", "tables": {}}"#),
            ("tables".into(), "not an array".into())
        );
        let swap = |from: &str, to: &str| {
            assert!(BENCH.contains(from), "{from}");
            BENCH.replacen(from, to, 1)
        };
        let (f, m) = field(&swap(
            r#""collective": "all-gather""#,
            r#""collective": "all-scatter""#,
        ));
        assert_eq!(f, "tables[1].collective");
        assert!(m.contains("all-scatter"), "{m}");
        assert_eq!(
            field(&swap(r#""ngpus": 2"#, r#""ngpus": 0"#)).0,
            "tables[0].ngpus"
        );
        assert_eq!(
            field(&swap(r#""ngpus": 2"#, r#""ngpus": "two""#)).0,
            "tables[0].ngpus"
        );
        assert_eq!(
            field(&swap(r#""cuda_graph": false"#, r#""cuda_graph": 1"#)).0,
            "tables[0].cuda_graph"
        );
        assert_eq!(
            field(&swap(r#""bytes": 8,"#, r#""bytes": -8,"#)).0,
            "tables[0].rows[1].bytes"
        );
        let (f, m) = field(&swap(
            r#""nccl_time_us": 13.34"#,
            r#""nccl_time_us": "slow""#,
        ));
        assert_eq!(f, "tables[0].rows[1].out_of_place.nccl_time_us");
        assert!(m.contains("slow"), "{m}");
        assert_eq!(
            field(&swap(r#""nccl_time_us": 49.68"#, r#""nccl_time_us": 0"#)).0,
            "tables[0].rows[2].out_of_place.nccl_time_us"
        );
        assert_eq!(
            field(&swap(
                r#""bytes": 524288, "count": 131072, "algo": "one-shot-ll",
           "out_of_place": {"#,
                r#""bytes": 524288, "out_of_place": 3, "x": {"#
            ))
            .0,
            "tables[1].rows[0].out_of_place"
        );
        assert_eq!(
            field(
                r#"{"format": "topoplan-bench/1", "tables": [{"collective": "all-reduce", "ngpus": 2}]}"#
            ),
            ("tables[0].rows".into(), "missing".into())
        );
        // Well formed, but nothing NCCL measured outside a CUDA graph.
        let none = r#"{"format": "topoplan-bench/1", "command": "", "tables": [
            {"collective": "all-reduce", "ngpus": 2, "procs": false, "dtype": "float", "op": "sum",
             "algo": "auto", "cuda_graph": false, "rows": [
              {"bytes": 8, "count": 2, "algo": "one-shot-ll",
               "out_of_place": {"time_us": 4.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1},
               "in_place": {"time_us": 4.0, "algbw": 0.0, "busbw": 0.0, "wrong": -1}}]}]}"#;
        // A document missing what `bench --json` always writes is refused, naming the field.
        assert_eq!(
            field(&none.replace("\"in_place\"", "\"elsewhere\"")),
            ("tables[0].rows[0].in_place".into(), "missing".into())
        );
        assert_eq!(
            err(none),
            MeasurementError::NoNccl {
                file: "m.json".into()
            }
        );
        assert!(err(none).to_string().contains("--vs-nccl"));
    }

    #[test]
    fn a_missing_bench_file_names_it() {
        let e = load_bench_json(Path::new("/nonexistent/perf.json")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/perf.json: "), "{e}");
    }
}
