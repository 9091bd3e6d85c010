//! `topoplan bench` measurements (format `topoplan-bench/1`, `docs/bench-json-format.md`): the
//! document `bench --json` writes ([`Report::to_json`], the one writer), its one strict reader
//! ([`parse`]: errors name the file and the field, or the line and column), and the reader of
//! the text a `bench` run prints ([`Report::from_log`], errors naming file and line).

use super::{MeasurementError, BENCH_FORMAT as FORMAT};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

impl Report {
    pub fn new(command: String) -> Self {
        Report {
            format: FORMAT.into(),
            command,
            tables: Vec::new(),
        }
    }

    /// Reads a report (strictly: [`parse`]).
    pub fn parse(text: &str, file: &str) -> Result<Report, MeasurementError> {
        parse(text, file)
    }

    /// The report as the JSON `--json` writes: the format's one writer.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
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
    pub fn from_log(text: &str, file: &str) -> Result<Report, MeasurementError> {
        let at = |line: usize, msg: String| MeasurementError::Line {
            file: file.into(),
            line,
            msg,
        };
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
            return Err(MeasurementError::Read {
                file: file.into(),
                msg: "no `topoplan bench` table found".into(),
            });
        }
        r.command = commands.join(" ; ");
        Ok(r)
    }
}

/// `all-reduce on 2 GPU(s), float sum, algo auto, warmup 5 iters 50 runs 5 (median)`, or the
/// `--procs` form `all-reduce on 2 GPU(s) in 2 processes (...), float sum, algo auto, ...`.
pub fn parse_header(h: &str) -> Result<Table, String> {
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
pub fn parse_row(l: &str) -> Result<ReportRow, String> {
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

/// Reads a `topoplan bench --json` document strictly: the fields every reader relies on are
/// checked first, each error naming `file` and the field (`tables[1].rows[3].bytes`); then the
/// whole document, an error naming its line and column.
pub fn parse(text: &str, file: &str) -> Result<Report, MeasurementError> {
    let json = |e: serde_json::Error| MeasurementError::Json {
        file: file.into(),
        msg: e.to_string(),
    };
    let v: Value = serde_json::from_str(text).map_err(json)?;
    check(&v, file)?;
    serde_json::from_str::<Report>(text).map_err(json)
}

/// The checks of [`parse`] on the document's fields.
fn check(v: &Value, file: &str) -> Result<(), MeasurementError> {
    let bad = |field: String, msg: String| MeasurementError::Field {
        file: file.into(),
        field,
        msg,
    };
    match v.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(x) => return Err(bad("format".into(), format!("{x} is not {FORMAT:?}"))),
        None => return Err(bad("format".into(), "missing".into())),
    }
    let tables = v
        .get("tables")
        .ok_or_else(|| bad("tables".into(), "missing".into()))?
        .as_array()
        .ok_or_else(|| bad("tables".into(), "not an array".into()))?;
    for (i, t) in tables.iter().enumerate() {
        let at = |f: &str| format!("tables[{i}].{f}");
        let get = |f: &str| t.get(f).ok_or_else(|| bad(at(f), "missing".into()));
        let name = get("collective")?
            .as_str()
            .ok_or_else(|| bad(at("collective"), "not a string".into()))?;
        if planner::schedule::CollectiveKind::parse(name).is_none() {
            return Err(bad(
                at("collective"),
                format!("unknown collective {name:?}"),
            ));
        }
        get("ngpus")?
            .as_u64()
            .filter(|&n| (1..=u32::MAX as u64).contains(&n))
            .ok_or_else(|| bad(at("ngpus"), "not a whole number >= 1".into()))?;
        match t.get("cuda_graph") {
            None | Some(Value::Null) | Some(Value::Bool(_)) => {}
            Some(_) => return Err(bad(at("cuda_graph"), "not true or false".into())),
        }
        let rows = get("rows")?
            .as_array()
            .ok_or_else(|| bad(at("rows"), "not an array".into()))?;
        for (j, r) in rows.iter().enumerate() {
            check_row(r, &|f: &str| format!("tables[{i}].rows[{j}].{f}"), &bad)?;
        }
    }
    Ok(())
}

fn check_row(
    r: &Value,
    at: &dyn Fn(&str) -> String,
    bad: &dyn Fn(String, String) -> MeasurementError,
) -> Result<(), MeasurementError> {
    let bytes = r
        .get("bytes")
        .ok_or_else(|| bad(at("bytes"), "missing".into()))?
        .as_u64()
        .ok_or_else(|| bad(at("bytes"), "not a whole number >= 0".into()))?;
    for half in ["out_of_place", "in_place"] {
        let h = r.get(half).ok_or_else(|| bad(at(half), "missing".into()))?;
        if !h.is_object() {
            return Err(bad(at(half), "not an object".into()));
        }
        let us = match h.get("nccl_time_us") {
            None | Some(Value::Null) => continue,
            Some(x) => x.as_f64().ok_or_else(|| {
                bad(
                    at(&format!("{half}.nccl_time_us")),
                    format!("{x} is not a number"),
                )
            })?,
        };
        // Size-0 rows carry no time worth fitting; every other time is positive and finite.
        if bytes > 0 && !(us.is_finite() && us > 0.0) {
            return Err(bad(
                at(&format!("{half}.nccl_time_us")),
                format!("{us} is not a time above 0"),
            ));
        }
    }
    Ok(())
}
