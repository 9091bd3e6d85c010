//! `bench --json FILE` and `bench --plot FILE.svg`: the measured tables as data, and ours against
//! NCCL drawn from them (busbw and time per size, out of place and in place).
//!
//! A report is written after a run, or read back without a GPU (`--from-json FILE`), or made
//! from the text a `topoplan bench` run printed (`--from-log FILE`: the recorded logs under
//! `docs/measurements/` predate `--json`). Plotting only ever reads a [`Report`], so the plots in
//! the docs and a fresh run's plot come from the same code.

use super::super::error::CliError;
use gpubench::harness::{Cell, Row};
pub use sim::measurements::bench::{Point, Report, ReportRow, Table};
use std::path::Path;

/// One measured call as the report holds it.
pub fn point(c: &Cell) -> Point {
    Point {
        time_us: c.time_us,
        algbw: c.algbw,
        busbw: c.busbw,
        wrong: c.wrong,
        nccl_time_us: c.nccl_time_us,
        nccl_busbw: c.nccl_busbw,
        nccl_wrong: c.nccl_wrong,
    }
}

/// One measured size as the report holds it.
pub fn report_row(r: &Row) -> ReportRow {
    ReportRow {
        bytes: r.size,
        count: r.count,
        algo: r.algo.clone(),
        out_of_place: point(&r.oop),
        in_place: point(&r.ip),
    }
}

/// Reads a report written by `--json` (the one strict reader, `sim::measurements::bench`).
pub fn load(path: &Path) -> Result<Report, CliError> {
    let text = crate::cli::common::read_text(path)?;
    Report::parse(&text, &path.display().to_string()).map_err(CliError::input)
}

/// Writes a report as `--json` does.
pub fn save(r: &Report, path: &Path) -> Result<(), CliError> {
    crate::cli::common::write_output(path, r.to_json())
}

/// Reads the text a `topoplan bench` run printed (`--from-log`).
pub fn from_log(path: &Path) -> Result<Report, CliError> {
    let text = crate::cli::common::read_text(path)?;
    Report::from_log(&text, &path.display().to_string()).map_err(CliError::input)
}

/// One drawn line: its label and (bytes, value) points.
type Series = (&'static str, Vec<(f64, f64)>);

/// Ours and NCCL's, out of place and in place, of one quantity; NCCL's only where measured.
/// `positive`: only points above 0 (a log axis), else at least 0.
fn series(
    t: &Table,
    ours: fn(&Point) -> f64,
    nccl: fn(&Point) -> Option<f64>,
    positive: bool,
) -> Vec<Series> {
    let keep = |v: &f64| v.is_finite() && (*v > 0.0 || (!positive && *v == 0.0));
    let pts = |f: &dyn Fn(&ReportRow) -> Option<f64>| -> Vec<(f64, f64)> {
        t.rows
            .iter()
            .filter_map(|r| f(r).filter(keep).map(|v| (r.bytes as f64, v)))
            .collect()
    };
    let all = [
        ("ours, out of place", pts(&|r| Some(ours(&r.out_of_place)))),
        ("ours, in place", pts(&|r| Some(ours(&r.in_place)))),
        ("NCCL, out of place", pts(&|r| nccl(&r.out_of_place))),
        ("NCCL, in place", pts(&|r| nccl(&r.in_place))),
    ];
    all.into_iter().filter(|s| !s.1.is_empty()).collect()
}

/// Draws every table of `r` as one row of two charts (busbw, time; log-scaled sizes) into an
/// SVG file at `path`.
pub fn plot(r: &Report, path: &Path) -> Result<(), CliError> {
    if r.tables.iter().all(|t| t.rows.is_empty()) {
        return Err(CliError::input("the report has no rows to plot"));
    }
    draw(r, path).map_err(|e| CliError::failure(format!("drawing {}: {e}", path.display())))
}

fn draw(r: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let tables: Vec<&Table> = r.tables.iter().filter(|t| !t.rows.is_empty()).collect();
    let root = SVGBackend::new(path, (1280, 480 * tables.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let colors = [
        RGBColor(31, 80, 180),
        RGBColor(110, 170, 240),
        RGBColor(200, 40, 30),
        RGBColor(245, 150, 60),
    ];
    for (t, area) in tables.iter().zip(root.split_evenly((tables.len(), 1))) {
        let (left, right) = area.split_horizontally(640);
        let charts = [
            (
                &left,
                "busbw (GB/s)",
                series(t, |p| p.busbw, |p| p.nccl_busbw, false),
                false,
            ),
            (
                &right,
                "time (µs)",
                series(t, |p| p.time_us, |p| p.nccl_time_us, true),
                true,
            ),
        ];
        for (area, what, lines, log_y) in charts {
            let xs = lines.iter().flat_map(|s| s.1.iter().map(|p| p.0));
            let (xmin, xmax) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
            let ys = lines.iter().flat_map(|s| s.1.iter().map(|p| p.1));
            let (ymin, ymax) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
            if !xmin.is_finite() {
                continue; // nothing positive to draw (an unchecked, untimed table)
            }
            let xr = (xmin..xmax.max(xmin * 2.0)).log_scale().base(2.0);
            let caption = format!("{}: {}", t.title(), what);
            let mut b = ChartBuilder::on(area);
            b.caption(caption, ("sans-serif", 18))
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(60);
            macro_rules! finish {
                ($chart:expr) => {{
                    let mut chart = $chart;
                    chart
                        .configure_mesh()
                        .x_desc("size per rank (bytes)")
                        .x_labels(12)
                        .y_desc(what)
                        .x_label_formatter(&|x| crate::cli::sizes::size_label(*x))
                        .draw()?;
                    for (i, (name, p)) in lines.iter().enumerate() {
                        let c = colors[i % colors.len()];
                        let w = if name.ends_with("out of place") { 3 } else { 1 };
                        chart
                            .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(w)))?
                            .label(*name)
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(w))
                            });
                    }
                    chart
                        .configure_series_labels()
                        .border_style(BLACK)
                        .background_style(WHITE.mix(0.8))
                        .position(SeriesLabelPosition::UpperLeft)
                        .draw()?;
                }};
            }
            if log_y {
                finish!(b.build_cartesian_2d(xr, (ymin * 0.8..ymax * 1.25).log_scale())?);
            } else {
                finish!(b.build_cartesian_2d(xr, 0.0..ymax * 1.1)?);
            }
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::measurements::bench::{parse_header, parse_row};

    #[test]
    fn headers_of_both_modes_parse() {
        let t = parse_header(
            "all-reduce on 2 GPU(s), float sum, algo auto, warmup 5 iters 50 runs 5 (median)",
        )
        .unwrap();
        assert_eq!(
            (
                t.collective.as_str(),
                t.ngpus,
                t.procs,
                t.dtype.as_str(),
                t.op.as_str()
            ),
            ("all-reduce", 2, false, "float", "sum")
        );
        assert_eq!(t.algo, "auto");
        let p = parse_header("reduce on 4 GPU(s) in 4 processes (CUDA IPC, one-shot schedules; NCCL: one communicator per process), bfloat16 max, algo one-shot, warmup 1 iters 2 runs 1 (median of the slowest rank), calls replayed from a CUDA graph").unwrap();
        assert_eq!((p.ngpus, p.procs, p.cuda_graph), (4, true, true));
        assert_eq!(
            (p.dtype.as_str(), p.op.as_str(), p.algo.as_str()),
            ("bfloat16", "max", "one-shot")
        );
        assert!(parse_header("all-reduce, float").is_err());
        // Headers that name the profile `auto` was priced with.
        let q = parse_header("all-gather on 2 GPU(s), float sum, algo auto, profile `fit` from my profiles/fit.json, warmup 5 iters 20 runs 3 (median)").unwrap();
        assert_eq!(
            (
                q.collective.as_str(),
                q.ngpus,
                q.algo.as_str(),
                q.op.as_str()
            ),
            ("all-gather", 2, "auto", "sum")
        );
        let q = parse_header("all-reduce on 2 GPU(s), half max, algo one-shot, profile bundled `h200x2`, warmup 5 iters 20 runs 3 (median)").unwrap();
        assert_eq!((q.dtype.as_str(), q.algo.as_str()), ("half", "one-shot"));
    }

    fn table(op: &str, rows: &[(u64, i64)]) -> Table {
        let p = |w| Point {
            time_us: 1.0,
            algbw: 1.0,
            busbw: 1.0,
            wrong: w,
            nccl_time_us: None,
            nccl_busbw: None,
            nccl_wrong: None,
        };
        Table {
            collective: "all-reduce".into(),
            ngpus: 2,
            procs: false,
            dtype: "float".into(),
            op: op.into(),
            algo: "auto".into(),
            cuda_graph: false,
            rows: rows
                .iter()
                .map(|&(bytes, w)| ReportRow {
                    bytes,
                    count: bytes / 4,
                    algo: "one-shot".into(),
                    out_of_place: p(w),
                    in_place: p(w),
                })
                .collect(),
        }
    }

    #[test]
    fn timing_tables_of_one_configuration_merge_by_size_and_checks_stay_apart() {
        let mut r = Report::new("x".into());
        r.tables = vec![
            table("sum", &[(7, 0), (4099, 0)]),
            table("sum", &[(1 << 30, -1)]),
            table("max", &[(8, -1)]),
            table("sum", &[(8, -1), (64, -1)]),
            table("sum", &[]),
        ];
        r.merge_same_configs();
        let sizes: Vec<(String, Vec<u64>)> = r
            .tables
            .iter()
            .map(|t| (t.op.clone(), t.rows.iter().map(|x| x.bytes).collect()))
            .collect();
        assert_eq!(
            sizes,
            vec![
                ("sum".into(), vec![7, 4099]),
                ("sum".into(), vec![8, 64, 1 << 30]),
                ("max".into(), vec![8]),
            ]
        );
    }

    #[test]
    fn rows_with_and_without_nccl_parse() {
        let r = parse_row("            8            2     float    sum    -1 one-shot-ll       4.69    0.00    0.00      0    11.25     0.00       0    2.40x       4.27    0.00    0.00      0    10.47     0.00       0    2.45x").unwrap();
        assert_eq!((r.bytes, r.count, r.algo.as_str()), (8, 2, "one-shot-ll"));
        assert_eq!(r.out_of_place.nccl_time_us, Some(11.25));
        assert_eq!(r.in_place.time_us, 4.27);
        let s =
            parse_row("  4  1  float  sum  -1  ce  26.49  0.00  0.00  N/A  24.89  0.00  0.00  0")
                .unwrap();
        assert_eq!((s.out_of_place.wrong, s.in_place.wrong), (-1, 0));
        assert_eq!(s.out_of_place.nccl_time_us, None);
        let e = parse_row("  4  1  float  sum  -1  ce  26.49").unwrap_err();
        assert!(e.contains("14 or 22 columns"), "{e}");
        let e = parse_row("  4  1  float  sum  -1  ce  fast  0.00  0.00  0  24.89  0.00  0.00  0")
            .unwrap_err();
        assert!(e.contains("column 7") && e.contains("fast"), "{e}");
    }

    /// What `--json` writes is what `calibrate --bench` (and `--measure`) reads: NCCL's
    /// out-of-place times per table (the format tag is one constant, `sim::measurements`).
    #[test]
    fn calibrate_reads_what_json_writes() {
        let mut r = Report::new("x".into());
        let mut t = table("sum", &[(0, -1), (8, -1), (1 << 20, -1)]);
        for (i, row) in t.rows.iter_mut().enumerate() {
            row.out_of_place.nccl_time_us = Some(10.0 + i as f64);
        }
        r.tables.push(t);
        r.tables.push(table("sum", &[(8, -1)])); // no NCCL: left out
        let text = serde_json::to_string_pretty(&r).unwrap();
        let c = sim::calibrate::parse_bench_json(&text, "r.json").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].ngpus, 2);
        assert_eq!(
            c[0].curve.kind,
            planner::schedule::CollectiveKind::AllReduce
        );
        assert_eq!(c[0].curve.points, vec![(8, 11.0), (1 << 20, 12.0)]);
    }
}
