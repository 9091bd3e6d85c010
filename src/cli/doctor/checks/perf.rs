//! Measurements: wrong results, busbw as a share of the predicted and of the physical ceiling
//! (the "45% of peak" number), NCCL's own warnings, slow initialisation.

use super::{gbps, Inputs};
use crate::cli::doctor::finding::{Finding, Severity};
use crate::cli::doctor::nccl_tests::{Row, Run};
use planner::schedule::CollectiveKind;
use planner::tuner::Filter;

/// Below this share of the prediction a measurement is a finding.
const LOW: f64 = 0.7;
/// Sizes below this are latency-bound: no bandwidth verdict.
const MIN_SIZE: u64 = 64 << 20;

fn kind_of(name: &str) -> Option<CollectiveKind> {
    Some(match name {
        "all_reduce" => CollectiveKind::AllReduce,
        "all_gather" => CollectiveKind::AllGather,
        "reduce_scatter" => CollectiveKind::ReduceScatter,
        "broadcast" => CollectiveKind::Broadcast,
        "reduce" => CollectiveKind::Reduce,
        "alltoall" => CollectiveKind::AllToAll,
        "sendrecv" => CollectiveKind::SendRecv,
        _ => return None,
    })
}

pub fn wrong_results(i: &Inputs) -> Vec<Finding> {
    i.tests
        .iter()
        .filter_map(|r| {
            let bad: Vec<_> = r.rows.iter().filter(|x| x.oop.wrong.unwrap_or(0) > 0 || x.ip.wrong.unwrap_or(0) > 0).collect();
            let first = bad.first()?;
            Some(
                Finding::new("wrong-results", Severity::Error, format!("nccl-tests found wrong results at {} size(s)", bad.len()))
                    .evidence(format!("{}:{}: size {} #wrong {} / {}", r.file, first.line, first.size, first.oop.wrong.unwrap_or(0), first.ip.wrong.unwrap_or(0)))
                    .fix("a data-corruption bug: rerun with NCCL_PROTO=Simple to see if LL/LL128 is at fault, check the driver and NCCL versions, and ECC errors (`nvidia-smi -q -d ECC`)"),
            )
        })
        .collect()
}

/// One measurement judged: the largest size's busbw against the prediction and the ceiling.
pub struct Verdict<'a> {
    pub run: &'a Run,
    pub row: &'a Row,
    pub measured: f64,
    /// (GB/s, where it comes from).
    pub predicted: Option<(f64, String)>,
    pub ceiling: Option<(f64, String)>,
}

impl Verdict<'_> {
    /// "all_reduce at 2147483648 B: 340 GB/s busbw, 100% of the 341 predicted (...), 92% of the 371 GB/s ceiling (...)".
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} at {} B: {} GB/s busbw",
            self.run.collective.as_deref().unwrap_or("collective"),
            self.row.size,
            gbps(self.measured)
        );
        if let Some((p, src)) = &self.predicted {
            s.push_str(&format!(
                ", {:.0}% of the {} predicted ({src})",
                100.0 * self.measured / p,
                gbps(*p)
            ));
        }
        if let Some((c, src)) = &self.ceiling {
            s.push_str(&format!(
                ", {:.0}% of the {} GB/s ceiling ({src})",
                100.0 * self.measured / c,
                gbps(*c)
            ));
        }
        s
    }
}

/// Every run's verdict (runs with no size of at least 64 MiB are latency-bound: none).
pub fn verdicts(i: &Inputs) -> Vec<Verdict<'_>> {
    let mut out = Vec::new();
    for r in &i.tests {
        let Some(row) = r.largest() else { continue };
        if row.size < MIN_SIZE {
            continue;
        }
        let kind = r.collective.as_deref().and_then(kind_of);
        // Prediction: the planner on the topology (same rank count), else NCCL's own table.
        let mut predicted = None;
        let mut ceiling = None;
        if let (Some(m), Some(k)) = (&i.machine, kind) {
            if m.nranks() == r.nranks || r.nranks == 0 {
                if let Some(p) = m.nccl_busbw(k, row.size, &Filter::default()) {
                    predicted = Some((p, format!("planner on {}", m.source)));
                }
                // The topology's bound (max-flow/min-cut; nccl-tests roots at rank 0), else
                // the NVLink per GPU.
                if let Ok(Some(b)) = planner::bound::bound(&m.topo, k, 0) {
                    ceiling = Some((
                        b.busbw_gbps,
                        format!("the topology's bound, {}; {}", m.source, b.explain(2)),
                    ));
                } else if m.has_nvlink() {
                    ceiling = Some((m.nvlink_gbps(), format!("NVLink per GPU, {}", m.source)));
                }
            }
        }
        if predicted.is_none() && kind == Some(CollectiveKind::AllReduce) {
            if let Some(log) = &i.log {
                if let Some(c) = log
                    .tuner
                    .iter()
                    .filter(|c| c.func == "AllReduce")
                    .max_by(|a, b| a.bw_gbps.total_cmp(&b.bw_gbps))
                {
                    predicted = Some((
                        c.bw_gbps,
                        format!(
                            "NCCL's tuning table, {}: {} {}",
                            log.cite(c.line),
                            c.algo,
                            c.proto
                        ),
                    ));
                }
            }
        }
        if ceiling.is_none() {
            if let Some(log) = &i.log {
                if let Some((_, total, line)) = log.system_bw {
                    ceiling = Some((total, format!("NCCL's totalBw, {}", log.cite(line))));
                }
            }
        }
        out.push(Verdict {
            run: r,
            row,
            measured: row.oop.busbw.max(row.ip.busbw),
            predicted,
            ceiling,
        });
    }
    out
}

/// The measured busbw below [`LOW`] of the prediction: the "45% of peak" finding.
pub fn busbw_fraction(i: &Inputs) -> Vec<Finding> {
    let mut out = Vec::new();
    for v in verdicts(i) {
        let Some((p, src)) = &v.predicted else {
            continue;
        };
        let (p, measured) = (*p, v.measured);
        let frac = measured / p;
        if frac >= LOW {
            continue;
        }
        let peak = v
            .ceiling
            .as_ref()
            .map(|(c, s)| {
                format!(
                    ", {:.0}% of the {} GB/s ceiling ({s})",
                    100.0 * measured / c,
                    gbps(*c)
                )
            })
            .unwrap_or_default();
        // The likely cause: another finding's, else the usual suspects.
        let set = |k: &str| i.nccl_var(k).is_some_and(|(v, _)| super::truthy(&v));
        let causes: Vec<&str> = [
            ("p2p-disabled", set("NCCL_P2P_DISABLE")),
            (
                "transport-downgrade",
                i.log
                    .as_ref()
                    .is_some_and(|l| l.transports.iter().any(|t| t.transport != "P2P")),
            ),
            (
                "forced-algo-proto",
                i.nccl_var("NCCL_ALGO").is_some() || i.nccl_var("NCCL_PROTO").is_some(),
            ),
            (
                "channel-limit",
                i.nccl_var("NCCL_MAX_NCHANNELS").is_some()
                    || i.nccl_var("NCCL_MAX_NRINGS").is_some(),
            ),
        ]
        .into_iter()
        .filter(|c| c.1)
        .map(|c| c.0)
        .collect();
        let likely = if causes.is_empty() {
            "no configuration finding explains it: other work on the GPUs, clocks held low, a degraded link (see link-width), or a different NCCL than the one logged".to_string()
        } else {
            format!("likely cause: the {} finding(s)", causes.join(", "))
        };
        let (r, row) = (v.run, v.row);
        out.push(
            Finding::new(
                "busbw-fraction",
                if frac < 0.4 {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                format!(
                    "{} reaches {:.0}% of the predicted busbw ({} of {} GB/s){peak}",
                    r.collective.as_deref().unwrap_or("the collective"),
                    100.0 * frac,
                    gbps(measured),
                    gbps(p)
                ),
            )
            .evidence(format!(
                "{}:{}: size {} busbw {} / {} GB/s (out-of-place / in-place)",
                r.file, row.line, row.size, row.oop.busbw, row.ip.busbw
            ))
            .evidence(format!("predicted {} GB/s: {src}", gbps(p)))
            .cost(Some(format!(
                "{:.1}x slower than predicted at {} bytes",
                p / measured,
                row.size
            )))
            .fix(likely),
        );
    }
    out
}

/// NCCL's own WARN lines (other than the duplicate-GPU one, reported apart).
pub fn nccl_warnings(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let w: Vec<_> = log
        .warnings
        .iter()
        .filter(|w| !w.text.contains("Duplicate GPU detected"))
        .collect();
    let Some(first) = w.first() else {
        return vec![];
    };
    let mut f = Finding::new(
        "nccl-warn",
        Severity::Warning,
        format!("NCCL printed {} warning(s)", w.len()),
    );
    for x in w.iter().take(3) {
        f = f.evidence(format!("{}: {}", log.cite(x.line), x.text));
    }
    let _ = first;
    f.fix("read the first warning: it names the failing call (a socket connect timing out points at socket-ifname or a firewall; an IB error at the fabric)")
        .into_vec()
}

/// Communicator init taking long (bootstrap waits on a slow or unreachable peer).
pub fn slow_init(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let Some(&(rank, t, line)) = log.init_timings.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
        return vec![];
    };
    if t < 30.0 {
        return vec![];
    }
    Finding::new("slow-init", Severity::Warning, format!("NCCL init took {t:.1} s on rank {rank}"))
        .evidence(format!("{}: Init timings total {t}", log.cite(line)))
        .fix("ranks reached init at different times or bootstrap connections retried: check that all ranks start together and that the bootstrap interface is reachable (see socket-ifname)")
        .into_vec()
}
