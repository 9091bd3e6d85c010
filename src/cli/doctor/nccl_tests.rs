//! The nccl-tests output parser (`all_reduce_perf` and friends): one row per size with the
//! out-of-place and in-place time, algbw, busbw and #wrong, the ranks it ran on and the
//! "Avg bus bandwidth" line. A data row that is cut or malformed is bad input naming its line.

use super::input::Text;
use crate::cli::error::CliError;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Half {
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// `None` when nccl-tests did not check (`N/A`).
    pub wrong: Option<u64>,
}

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

#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    pub file: String,
    /// `all_reduce` from "Collective test starting: all_reduce_perf" (or the file name).
    pub collective: Option<String>,
    pub nranks: u32,
    pub rows: Vec<Row>,
    pub avg_busbw: Option<(f64, usize)>,
    pub not_understood: Vec<usize>,
}

impl Run {
    /// The row of the largest size.
    pub fn largest(&self) -> Option<&Row> {
        self.rows.iter().max_by_key(|r| r.size)
    }
}

pub fn parse(t: &Text) -> Result<Run, CliError> {
    let mut run = Run {
        file: t.name.clone(),
        ..Default::default()
    };
    let lines: Vec<&str> = t.body.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim();
            if let Some(c) = h.strip_prefix("Collective test starting:") {
                // all_reduce_perf, broadcast_perf_mpi.
                let c = c.trim().trim_end_matches("_mpi").trim_end_matches("_perf");
                run.collective = Some(c.to_string());
            } else if h.starts_with("Rank ") && h.contains(" device ") {
                run.nranks += 1;
            } else if let Some(v) = h.strip_prefix("Avg bus bandwidth") {
                let v = v.trim_start_matches([' ', ':']).trim();
                let x = v.parse::<f64>().map_err(|_| {
                    CliError::input(format!(
                        "{}:{n}: \"Avg bus bandwidth\" without a number",
                        t.name
                    ))
                })?;
                run.avg_busbw = Some((x, n));
            }
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[0].parse::<u64>().is_err() {
            run.not_understood.push(n);
            continue;
        }
        let cut = t.cut && n == lines.len();
        run.rows.push(row(&t.name, n, &f, cut)?);
    }
    if run.rows.is_empty() {
        return Err(CliError::input(format!(
            "{}: no nccl-tests result rows (size count type redop root time algbw busbw #wrong ...)",
            t.name
        )));
    }
    if run.collective.is_none() {
        // all_reduce_g2.txt, all_gather_perf.log: take the collective from the name.
        let base = t
            .name
            .rsplit('/')
            .next()
            .unwrap_or(&t.name)
            .to_ascii_lowercase();
        for c in [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "alltoall",
            "broadcast",
            "reduce",
            "sendrecv",
        ] {
            if base.contains(c) {
                run.collective = Some(c.to_string());
                break;
            }
        }
    }
    Ok(run)
}

fn row(file: &str, n: usize, f: &[&str], cut: bool) -> Result<Row, CliError> {
    let bad = |what: &str| {
        CliError::input(format!(
            "{file}:{n}: nccl-tests row {what}{}",
            if cut {
                " (the file ends inside this row: truncated?)"
            } else {
                ""
            }
        ))
    };
    // 13 fields with the root column (nccl-tests >= 2.10), 12 without.
    let off = match f.len() {
        13 => 5,
        12 => 4,
        k => return Err(bad(&format!("has {k} fields, expected 12 or 13"))),
    };
    let num = |i: usize, what: &str| -> Result<f64, CliError> {
        f[i].parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                bad(&format!(
                    "field {} ({what}) is \"{}\", not a number",
                    i + 1,
                    f[i]
                ))
            })
    };
    let wrong = |i: usize| -> Result<Option<u64>, CliError> {
        if f[i] == "N/A" {
            return Ok(None);
        }
        f[i].parse::<u64>()
            .map(Some)
            .map_err(|_| bad(&format!("field {} (#wrong) is \"{}\"", i + 1, f[i])))
    };
    let half = |k: usize| -> Result<Half, CliError> {
        Ok(Half {
            time_us: num(k, "time")?,
            algbw: num(k + 1, "algbw")?,
            busbw: num(k + 2, "busbw")?,
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
    use crate::cli::doctor::input::{from_bytes, read};
    use proptest::prelude::*;

    #[test]
    fn healthy_h200x2_all_reduce() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/doctor/h200x2-all-reduce-healthy.txt"
        );
        let r = parse(&read(std::path::Path::new(p)).unwrap()).unwrap();
        assert_eq!(r.collective.as_deref(), Some("all_reduce"));
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
    }

    #[test]
    fn a_cut_row_is_bad_input_naming_its_line() {
        let t = from_bytes("ar.txt", b"# Collective test starting: all_reduce_perf\n 8 2 float sum -1 13.3 0.00 0.00 0 11.7\n".to_vec()).unwrap();
        let e = parse(&t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("ar.txt:2: nccl-tests row has 10 fields"),
            "{e}"
        );
        let t = from_bytes(
            "ar.txt",
            b" 8 2 float sum -1 13.3 0.00 x 0 11.7 0.00 0.00 0\n".to_vec(),
        )
        .unwrap();
        assert!(parse(&t)
            .unwrap_err()
            .to_string()
            .contains("field 8 (busbw) is \"x\""));
    }

    #[test]
    fn rows_without_root_and_unchecked_wrong() {
        let t = from_bytes(
            "all_gather_perf.log",
            b"  1048576  262144 float none 10.0 104.9 52.4 N/A 10.0 104.9 52.4 N/A\n".to_vec(),
        )
        .unwrap();
        let r = parse(&t).unwrap();
        assert_eq!(r.collective.as_deref(), Some("all_gather"));
        assert_eq!(r.rows[0].oop.wrong, None);
        assert_eq!(r.rows[0].oop.busbw, 52.4);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
        #[test]
        fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(t) = from_bytes("r", bytes) {
                let _ = parse(&t);
            }
        }
    }
}
