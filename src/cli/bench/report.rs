//! `bench --json FILE` and `bench --plot FILE.svg`: the measured tables as data, and ours against
//! NCCL drawn from them (busbw and time per size, out of place and in place).
//!
//! A report is written after a run, or read back without a GPU (`--from-json FILE`), or made
//! from the text a `topoplan bench` run printed (`--from-log FILE`: the recorded logs under
//! `docs/measurements/` predate `--json`). Plotting only ever reads a [`Report`], so the plots in
//! the docs and a fresh run's plot come from the same code.

use super::super::error::CliError;
use gpubench::harness::{Cell, Row};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Tag of the JSON format (`docs/bench-json-format.md`); bumped when a field changes meaning.
pub const FORMAT: &str = sim::measurements::BENCH_FORMAT;

/// Everything one `topoplan bench` invocation measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub format: String,
    /// The command line (or, for a converted log, the log's `+` command lines).
    pub command: String,
    /// One table per (collective, type, operator) configuration, in run order.
    pub tables: Vec<Table>,
}

/// One configuration's rows, as one table of the text output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Table {
    pub collective: String,
    pub ngpus: usize,
    /// One process per GPU (`--procs`).
    pub procs: bool,
    pub dtype: String,
    pub op: String,
    /// The algorithm asked for (`auto` lets the runtime pick per size: see each row's `algo`).
    pub algo: String,
    pub cuda_graph: bool,
    pub rows: Vec<ReportRow>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ReportRow {
    /// nccl-tests' size: bytes per rank (all-gather, reduce-scatter: the whole gathered buffer).
    pub bytes: u64,
    pub count: u64,
    /// What ran at this size (`one-shot-ll`, `one-shot-pull`, `one-shot`, `one-shot+ce`, ...).
    pub algo: String,
    pub out_of_place: Point,
    pub in_place: Point,
}

/// One call's measurement: ours, and NCCL's on the same buffers when `--vs-nccl` ran.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Point {
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// Wrong elements; -1 when not checked.
    pub wrong: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_time_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_busbw: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_wrong: Option<i64>,
}

impl From<&Cell> for Point {
    fn from(c: &Cell) -> Self {
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
}

impl From<&Row> for ReportRow {
    fn from(r: &Row) -> Self {
        ReportRow {
            bytes: r.size,
            count: r.count,
            algo: r.algo.clone(),
            out_of_place: (&r.oop).into(),
            in_place: (&r.ip).into(),
        }
    }
}

impl Report {
    pub fn new(command: String) -> Self {
        Report {
            format: FORMAT.into(),
            command,
            tables: Vec::new(),
        }
    }

    /// Reads a report written by `--json`, naming the file, line and column of a bad field.
    pub fn load(path: &Path) -> Result<Report, CliError> {
        let text = crate::cli::common::read_text(path)?;
        let r: Report = serde_json::from_str(&text)
            .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
        if r.format != FORMAT {
            return Err(CliError::input(format!(
                "{}: field `format` is {:?}, expected {FORMAT:?}",
                path.display(),
                r.format
            )));
        }
        Ok(r)
    }

    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let text = serde_json::to_string_pretty(self).map_err(CliError::failure)?;
        crate::cli::common::write_output(path, text + "\n")
    }

    /// Joins the tables of one configuration (a log that times small and large sizes with
    /// different counts holds two), rows by size; drops empty tables. Checked tables (`-c 1`)
    /// and timing tables (`-c 0`) of a configuration stay apart: a log often checks odd counts
    /// before it times the usual sizes.
    pub fn merge_same_configs(&mut self) {
        let mut out: Vec<Table> = Vec::new();
        for t in self.tables.drain(..) {
            let same = |o: &&mut Table| {
                let key = |x: &Table| {
                    (
                        x.collective.clone(),
                        x.ngpus,
                        x.procs,
                        x.dtype.clone(),
                        x.op.clone(),
                    )
                };
                let checked = |x: &Table| x.rows.iter().any(|r| r.out_of_place.wrong >= 0);
                key(o) == key(&t)
                    && o.algo == t.algo
                    && o.cuda_graph == t.cuda_graph
                    && checked(o) == checked(&t)
            };
            match out.iter_mut().find(|o| same(o)) {
                Some(o) => o.rows.extend(t.rows),
                None => out.push(t),
            }
        }
        out.retain(|t| !t.rows.is_empty());
        for t in &mut out {
            t.rows.sort_by_key(|r| r.bytes);
        }
        self.tables = out;
    }

    /// Converts the text output of `topoplan bench` (with or without `--vs-nccl`) into a report.
    /// A table starts at its `# topoplan bench: ...` line; its rows are the lines that start
    /// with a size. Lines of other tools in the same log are skipped.
    pub fn from_log(path: &Path) -> Result<Report, CliError> {
        let text = crate::cli::common::read_text(path)?;
        let at =
            |line: usize, m: String| CliError::input(format!("{}:{line}: {m}", path.display()));
        let mut commands = Vec::new();
        let mut r = Report::new(String::new());
        let mut open = false;
        for (i, l) in text.lines().enumerate() {
            let line = i + 1;
            if let Some(c) = l.strip_prefix('+') {
                commands.push(c.trim().to_string());
                open = false;
            } else if let Some(h) = l.strip_prefix("# topoplan bench: ") {
                r.tables.push(parse_header(h).map_err(|m| at(line, m))?);
                open = true;
            } else if l.starts_with('#') || l.trim().is_empty() {
                continue;
            } else if open && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                let row = parse_row(l).map_err(|m| at(line, m))?;
                r.tables.last_mut().expect("open table").rows.push(row);
            } else {
                open = false;
            }
        }
        r.merge_same_configs();
        if r.tables.is_empty() {
            return Err(CliError::input(format!(
                "{}: no `topoplan bench` table found",
                path.display()
            )));
        }
        r.command = commands.join(" ; ");
        Ok(r)
    }
}

/// `all-reduce on 2 GPU(s), float sum, algo auto, warmup 5 iters 50 runs 5 (median)`, or the
/// `--procs` form `all-reduce on 2 GPU(s) in 2 processes (...), float sum, algo auto, ...`.
fn parse_header(h: &str) -> Result<Table, String> {
    let bad = || format!("unreadable table header `{h}`");
    let (collective, rest) = h.split_once(" on ").ok_or_else(bad)?;
    let (n, rest) = rest.split_once(" GPU(s)").ok_or_else(bad)?;
    let ngpus = n.trim().parse().map_err(|_| bad())?;
    let (before, after) = rest.split_once(", algo ").ok_or_else(bad)?;
    let (dtype, op) = before
        .rsplit(", ")
        .next()
        .and_then(|s| s.split_once(' '))
        .ok_or_else(bad)?;
    let algo = after.split([',', ' ']).next().ok_or_else(bad)?;
    Ok(Table {
        collective: collective.trim().into(),
        ngpus,
        procs: rest.contains(" processes"),
        dtype: dtype.into(),
        op: op.into(),
        algo: algo.into(),
        cuda_graph: h.contains("CUDA graph"),
        rows: Vec::new(),
    })
}

/// `size count type redop root algo` then 4 cells per call (time algbw busbw #wrong), 8 with
/// NCCL's (nccl_us nccl_bus #nwrong speedup), out of place then in place.
fn parse_row(l: &str) -> Result<ReportRow, String> {
    let f: Vec<&str> = l.split_whitespace().collect();
    let cell = match f.len() {
        14 => 4,
        22 => 8,
        n => {
            return Err(format!(
                "a row has 14 or 22 columns, this one {n}: `{}`",
                l.trim()
            ))
        }
    };
    let num = |i: usize| -> Result<f64, String> {
        f[i].trim_end_matches('x')
            .parse::<f64>()
            .map_err(|_| format!("column {} is not a number: `{}`", i + 1, f[i]))
    };
    let int = |i: usize| -> Result<i64, String> {
        if f[i] == "N/A" {
            Ok(-1)
        } else {
            f[i].parse()
                .map_err(|_| format!("column {} is not a count: `{}`", i + 1, f[i]))
        }
    };
    let point = |o: usize| -> Result<Point, String> {
        let nccl = cell == 8;
        Ok(Point {
            time_us: num(o)?,
            algbw: num(o + 1)?,
            busbw: num(o + 2)?,
            wrong: int(o + 3)?,
            nccl_time_us: if nccl { Some(num(o + 4)?) } else { None },
            nccl_busbw: if nccl { Some(num(o + 5)?) } else { None },
            nccl_wrong: if nccl { Some(int(o + 6)?) } else { None },
        })
    };
    Ok(ReportRow {
        bytes: int(0)?.max(0) as u64,
        count: int(1)?.max(0) as u64,
        algo: f[5].into(),
        out_of_place: point(6)?,
        in_place: point(6 + cell)?,
    })
}

impl Table {
    pub fn title(&self) -> String {
        format!(
            "{} {} {}, {} GPUs{}{}",
            self.collective,
            self.dtype,
            self.op,
            self.ngpus,
            if self.procs {
                ", one process per GPU"
            } else {
                ""
            },
            if self.cuda_graph { ", CUDA graph" } else { "" }
        )
    }
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
                        .x_label_formatter(&|x| human(*x))
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

fn human(x: f64) -> String {
    let x = x.round() as u64;
    match x {
        _ if x >= 1 << 30 && (x >> 30) << 30 == x => format!("{}G", x >> 30),
        _ if x >= 1 << 20 && (x >> 20) << 20 == x => format!("{}M", x >> 20),
        _ if x >= 1 << 10 && (x >> 10) << 10 == x => format!("{}K", x >> 10),
        _ => x.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
