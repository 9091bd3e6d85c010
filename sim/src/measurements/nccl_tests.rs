//! nccl-tests output (`all_reduce_perf` and friends; `docs/nccl-tests-format.md`): one row per
//! size with the out-of-place and in-place time, algbw, busbw and #wrong, the ranks it ran on
//! and the "Avg bus bandwidth" line.
//!
//! Strict: a data row that is cut or malformed, or whose time is not a positive finite number,
//! is an error naming its line. Lines that are neither comments nor rows (other tools' output in
//! the same log) are listed in [`Run::not_understood`], never read as data.

use super::MeasurementError;
use planner::schedule::CollectiveKind;
use serde::Serialize;

/// One half of a row: out of place or in place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Half {
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// `None` when nccl-tests did not check (`N/A`).
    pub wrong: Option<u64>,
}

/// One size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub line: usize,
    pub size: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    pub root: i64,
    pub oop: Half,
    pub ip: Half,
}

/// One nccl-tests run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    pub file: String,
    /// `all_reduce` from "Collective test starting: all_reduce_perf" (or the file name).
    pub collective: Option<String>,
    /// "# Rank N ... device ..." lines: the ranks the run was on (0 when the header is absent).
    pub nranks: u32,
    pub rows: Vec<Row>,
    /// The "Avg bus bandwidth" value and its line.
    pub avg_busbw: Option<(f64, usize)>,
    pub not_understood: Vec<usize>,
}

/// nccl-tests binaries' names and the collectives they time.
const COLLECTIVES: [(&str, CollectiveKind); 7] = [
    ("all_reduce", CollectiveKind::AllReduce),
    ("all_gather", CollectiveKind::AllGather),
    ("reduce_scatter", CollectiveKind::ReduceScatter),
    ("alltoall", CollectiveKind::AllToAll),
    ("broadcast", CollectiveKind::Broadcast),
    ("reduce", CollectiveKind::Reduce),
    ("sendrecv", CollectiveKind::SendRecv),
];

impl Run {
    /// The row of the largest size.
    pub fn largest(&self) -> Option<&Row> {
        self.rows.iter().max_by_key(|r| r.size)
    }

    /// The collective timed, from the header or the file name.
    pub fn kind(&self) -> Result<CollectiveKind, MeasurementError> {
        let c = self.collective.as_deref().unwrap_or_default();
        COLLECTIVES
            .iter()
            .find(|(name, _)| *name == c)
            .map(|x| x.1)
            .ok_or_else(|| MeasurementError::Read {
                file: self.file.clone(),
                msg: "no '# Collective test starting:' line and no collective in the file name"
                    .into(),
            })
    }

    /// (size, out-of-place time in µs) of every row of nonzero size.
    pub fn out_of_place(&self) -> Vec<(u64, f64)> {
        self.rows
            .iter()
            .filter(|r| r.size > 0)
            .map(|r| (r.size, r.oop.time_us))
            .collect()
    }

    /// (size, in-place time in µs) of every row of nonzero size.
    pub fn in_place(&self) -> Vec<(u64, f64)> {
        self.rows
            .iter()
            .filter(|r| r.size > 0)
            .map(|r| (r.size, r.ip.time_us))
            .collect()
    }
}

/// Reads nccl-tests output; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Run, MeasurementError> {
    let mut run = Run {
        file: file.to_string(),
        ..Default::default()
    };
    let cut_at = (!text.ends_with('\n')).then(|| text.lines().count());
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            header(&mut run, h.trim(), n)?;
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[0].parse::<u64>().is_err() {
            run.not_understood.push(n);
            continue;
        }
        run.rows.push(row(file, n, &f, cut_at == Some(n))?);
    }
    if run.rows.is_empty() {
        return Err(MeasurementError::Read {
            file: file.into(),
            msg:
                "no nccl-tests result rows (size count type redop root time algbw busbw #wrong ...)"
                    .into(),
        });
    }
    if run.collective.is_none() {
        // all_reduce_g2.txt, all_gather_perf.log: the collective from the name.
        let base = file.rsplit('/').next().unwrap_or(file).to_ascii_lowercase();
        run.collective = COLLECTIVES
            .iter()
            .find(|(c, _)| base.contains(c))
            .map(|(c, _)| c.to_string());
    }
    Ok(run)
}

fn header(run: &mut Run, h: &str, n: usize) -> Result<(), MeasurementError> {
    if let Some(c) = h.strip_prefix("Collective test starting:") {
        // all_reduce_perf, broadcast_perf_mpi.
        let c = c.trim().trim_end_matches("_mpi").trim_end_matches("_perf");
        run.collective = Some(c.to_string());
    } else if h.starts_with("Rank ") && h.contains(" device ") {
        run.nranks += 1;
    } else if let Some(v) = h.strip_prefix("Avg bus bandwidth") {
        let v = v.trim_start_matches([' ', ':']).trim();
        let x = v.parse::<f64>().map_err(|_| MeasurementError::Line {
            file: run.file.clone(),
            line: n,
            msg: "\"Avg bus bandwidth\" without a number".into(),
        })?;
        run.avg_busbw = Some((x, n));
    }
    Ok(())
}

fn row(file: &str, n: usize, f: &[&str], cut: bool) -> Result<Row, MeasurementError> {
    let bad = |what: &str| MeasurementError::Line {
        file: file.into(),
        line: n,
        msg: format!(
            "nccl-tests row {what}{}",
            if cut {
                " (the file ends inside this row: truncated?)"
            } else {
                ""
            }
        ),
    };
    // 13 fields with the root column (nccl-tests >= 2.10), 12 without.
    let off = match f.len() {
        13 => 5,
        12 => 4,
        k => return Err(bad(&format!("has {k} fields, expected 12 or 13"))),
    };
    let num = |i: usize, what: &str, positive: bool| -> Result<f64, MeasurementError> {
        let x = f[i].parse::<f64>().ok().filter(|x| x.is_finite());
        match x {
            Some(x) if x > 0.0 || (!positive && x == 0.0) => Ok(x),
            Some(_) => Err(bad(&format!(
                "field {} ({what}) is {}: {} number",
                i + 1,
                f[i],
                if positive {
                    "a time is a positive"
                } else {
                    "expected a non-negative"
                }
            ))),
            None => Err(bad(&format!(
                "field {} ({what}) is \"{}\", not a number",
                i + 1,
                f[i]
            ))),
        }
    };
    let wrong = |i: usize| -> Result<Option<u64>, MeasurementError> {
        if f[i] == "N/A" {
            return Ok(None);
        }
        f[i].parse::<u64>()
            .map(Some)
            .map_err(|_| bad(&format!("field {} (#wrong) is \"{}\"", i + 1, f[i])))
    };
    let half = |k: usize| -> Result<Half, MeasurementError> {
        Ok(Half {
            time_us: num(k, "time", true)?,
            algbw: num(k + 1, "algbw", false)?,
            busbw: num(k + 2, "busbw", false)?,
            wrong: wrong(k + 3)?,
        })
    };
    Ok(Row {
        line: n,
        size: f[0].parse().map_err(|_| bad("size"))?,
        count: f[1].parse().map_err(|_| bad("count is not an integer"))?,
        dtype: f[2].to_string(),
        redop: f[3].to_string(),
        root: if off == 5 {
            f[4].parse().map_err(|_| bad("root is not an integer"))?
        } else {
            -1
        },
        oop: half(off)?,
        ip: half(off + 4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn healthy_h200x2_all_reduce() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/doctor/h200x2-all-reduce-healthy.txt"
        );
        let r = parse(&std::fs::read_to_string(p).unwrap(), "h.txt").unwrap();
        assert_eq!(r.collective.as_deref(), Some("all_reduce"));
        assert_eq!(r.kind(), Ok(CollectiveKind::AllReduce));
        assert_eq!(r.nranks, 2);
        assert_eq!(r.rows.len(), 15);
        let big = r.largest().unwrap();
        assert_eq!(big.size, 2147483648);
        assert_eq!(big.count, 536870912);
        assert_eq!(big.dtype, "float");
        assert_eq!(big.root, -1);
        assert_eq!(big.oop.busbw, 340.18);
        assert_eq!(big.ip.time_us, 6352.56);
        assert_eq!(big.oop.wrong, Some(0));
        assert_eq!(r.avg_busbw.map(|a| a.0), Some(98.2116));
        assert!(r.not_understood.is_empty());
        assert_eq!(
            r.out_of_place().len(),
            r.rows.iter().filter(|x| x.size > 0).count()
        );
    }

    #[test]
    fn a_cut_row_is_an_error_naming_its_line() {
        let t =
            "# Collective test starting: all_reduce_perf\n 8 2 float sum -1 13.3 0.00 0.00 0 11.7";
        let e = parse(t, "ar.txt").unwrap_err().to_string();
        assert!(
            e.starts_with("ar.txt:2: nccl-tests row has 10 fields") && e.contains("truncated"),
            "{e}"
        );
        let t = " 8 2 float sum -1 13.3 0.00 x 0 11.7 0.00 0.00 0\n";
        let e = parse(t, "ar.txt").unwrap_err().to_string();
        assert!(e.contains("field 8 (busbw) is \"x\""), "{e}");
    }

    #[test]
    fn non_finite_zero_and_negative_times_are_refused() {
        for (t, what) in [
            ("NaN", "not a number"),
            ("inf", "not a number"),
            ("0", "positive"),
            ("-3.5", "positive"),
        ] {
            let text = format!(" 1024 256 float sum -1 {t} 0.1 0.1 0 11.7 0.1 0.1 0\n");
            let e = parse(&text, "ar.txt").unwrap_err().to_string();
            assert!(
                e.starts_with("ar.txt:1: nccl-tests row field 6 (time)") && e.contains(what),
                "{t}: {e}"
            );
        }
    }

    #[test]
    fn rows_without_root_and_unchecked_wrong() {
        let t = "  1048576  262144 float none 10.0 104.9 52.4 N/A 10.0 104.9 52.4 N/A\n";
        let r = parse(t, "dir/all_gather_perf.log").unwrap();
        assert_eq!(r.kind(), Ok(CollectiveKind::AllGather));
        assert_eq!(r.rows[0].oop.wrong, None);
        assert_eq!(r.rows[0].oop.busbw, 52.4);
        assert_eq!(r.in_place(), vec![(1048576, 10.0)]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
        #[test]
        fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&String::from_utf8_lossy(&bytes), "r");
        }
    }
}
