//! Predicted vs measured: reads nccl-tests output and simulates NCCL's own ring schedule
//! ([`crate::reference::nccl_ring`]) at every size, for `docs/fidelity.md`.

use crate::{simulate, SimConfig, SimError};
use planner::schedule::{build, Collective};
use planner::schedule::{CollectiveKind, Protocol};
use planner::topology::Topology;
use std::sync::LazyLock;

/// topoplan's runtime measured on 2×H200, as data (`tests/data/measurements/h200x2/
/// topoplan-runtime.json`): each table below names its source; the file holds the rows.
const RUNTIME_MEASUREMENTS: &str =
    include_str!("../../tests/data/measurements/h200x2/topoplan-runtime.json");

fn table(name: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(RUNTIME_MEASUREMENTS).unwrap_or_default();
    v["tables"][name].as_array().cloned().unwrap_or_default()
}

/// (size, protocol, µs) rows of a table (a row that does not parse is left out; the tables'
/// tests assert their row counts).
fn proto_rows(name: &str) -> Vec<(u64, Protocol, f64)> {
    table(name)
        .iter()
        .filter_map(|r| {
            Some((
                r[0].as_u64()?,
                Protocol::parse(r[1].as_str()?)?,
                r[2].as_f64()?,
            ))
        })
        .collect()
}

/// (size, µs) rows of a table.
fn rows_us(name: &str) -> Vec<(u64, f64)> {
    table(name)
        .iter()
        .filter_map(|r| Some((r[0].as_u64()?, r[1].as_f64()?)))
        .collect()
}

/// NCCL's times in a `topoplan bench --vs-nccl` log (its text output): `(collective, size,
/// µs)` from the out-of-place `nccl_us` column of every table, read by the one log reader
/// (`measurements::bench::Report::from_log`): a bad row is an error naming `file` and its line.
pub fn parse_bench_nccl_log(
    text: &str,
    file: &str,
) -> Result<Vec<(CollectiveKind, u64, f64)>, crate::measurements::MeasurementError> {
    let r = crate::measurements::bench::Report::from_log(text, file)?;
    let mut out = Vec::new();
    for t in &r.tables {
        let Some(kind) = CollectiveKind::parse(&t.collective) else {
            continue;
        };
        for row in &t.rows {
            if let Some(us) = row.out_of_place.nccl_time_us {
                out.push((kind, row.bytes, us));
            }
        }
    }
    Ok(out)
}

/// Every row of nccl-tests output: size in bytes and in-place time in µs, read by the one strict
/// reader (`measurements::nccl_tests`): a bad row is an error naming `file` and its line.
pub fn parse_nccl_tests_in_place(
    text: &str,
    file: &str,
) -> Result<Vec<(u64, f64)>, crate::measurements::MeasurementError> {
    let run = crate::measurements::nccl_tests::parse(text, file)?;
    Ok(run.rows.iter().map(|r| (r.size, r.ip.time_us)).collect())
}

/// Every row of nccl-tests output: size in bytes and out-of-place time in µs (strictly, as
/// [`parse_nccl_tests_in_place`]).
pub fn parse_nccl_tests(
    text: &str,
    file: &str,
) -> Result<Vec<(u64, f64)>, crate::measurements::MeasurementError> {
    let run = crate::measurements::nccl_tests::parse(text, file)?;
    Ok(run.rows.iter().map(|r| (r.size, r.oop.time_us)).collect())
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub bytes: u64,
    pub protocol: Protocol,
    pub channels: u32,
    pub measured_us: f64,
    pub predicted_us: f64,
    /// (predicted − measured) / measured
    pub error: f64,
}

/// The median of the rows' |error| (the mean of the middle two for an even count; 0 for none).
pub fn median_abs_error(rows: &[Row]) -> f64 {
    let mut e: Vec<f64> = rows.iter().map(|x| x.error.abs()).collect();
    e.sort_by(f64::total_cmp);
    let n = e.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => e[n / 2],
        _ => (e[n / 2 - 1] + e[n / 2]) / 2.0,
    }
}

/// Compares every measured size (size 0 rows are skipped) with NCCL's ring as `--as nccl
/// --algo ring` simulates it (NCCL's protocol, channels and chunking, derived from `topo`).
pub fn compare(
    topo: &Topology,
    kind: CollectiveKind,
    measured: &[(u64, f64)],
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let planner =
        planner::plan::Planner::new(topo).map_err(|e| SimError::Unsupported(e.to_string()))?;
    let ring = planner::tuner::Filter::algorithm(planner::schedule::Algorithm::Ring);
    compare_as_nccl(topo, &planner, kind, measured, &ring, cfg)
}

/// Checks that every row at or above `from_bytes` is within `bound` (a fraction) of its
/// measurement; the error names the first row outside and carries the whole table (the fidelity
/// tests' assertion).
pub fn within(rows: &[Row], from_bytes: u64, bound: f64) -> Result<(), String> {
    match rows
        .iter()
        .find(|x| x.bytes >= from_bytes && x.error.abs() >= bound)
    {
        None => Ok(()),
        Some(x) => Err(format!(
            "{} B {} off by {:+.1}% (bound {:.1}%)\n{}",
            x.bytes,
            x.protocol.name(),
            x.error * 100.0,
            bound * 100.0,
            markdown(rows)
        )),
    }
}

/// Markdown table of `rows`.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| size (B) | proto | channels | measured µs | predicted µs | error |\n|---:|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:+.1}% |\n",
            r.bytes,
            r.protocol.name(),
            r.channels,
            r.measured_us,
            r.predicted_us,
            r.error * 100.0
        );
    }
    s
}

/// Per protocol with points in `rows`: (protocol, points, worst |error|, mean |error|).
pub fn errors_by_protocol(rows: &[Row]) -> Vec<(Protocol, usize, f64, f64)> {
    [Protocol::LL, Protocol::LL128, Protocol::Simple]
        .into_iter()
        .filter_map(|p| {
            let e: Vec<f64> = rows
                .iter()
                .filter(|r| r.protocol == p)
                .map(|r| r.error.abs())
                .collect();
            (!e.is_empty()).then(|| {
                let worst = e.iter().fold(0.0, |a: f64, &b| a.max(b));
                (p, e.len(), worst, e.iter().sum::<f64>() / e.len() as f64)
            })
        })
        .collect()
}

/// topoplan's CUDA runtime, one-shot all-reduce (float, sum, out of place) on the lent 2×H200,
/// on the direct-push executor with **relaxed credits**: the credit
/// words (and Simple's ready words) are relaxed stores, not release stores, so no system fence per
/// credit (LL ≈ 4.5 µs per call instead of ≈ 5.8; Simple 1–32 MiB 2–11% faster). (size, protocol,
/// measured median of 3 runs of 20 calls, µs, the out-of-place `time` column, the 7th field.)
/// From the closing measurement `docs/measurements/2026-11-30-h200x2-push-relaxed-credits/perf.log`, command `topoplan
/// bench -b 8 -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl`; the protocol is the `algo`
/// column's (`one-shot-ll`: LL, 8 B–512 KiB; `one-shot`: Simple, 1 MiB–1 GiB). No Simple point
/// below 1 MiB: the runtime picks LL there.
pub static OWN_DIRECT_H200X2: LazyLock<Vec<(u64, Protocol, f64)>> =
    LazyLock::new(|| proto_rows("OWN_DIRECT_H200X2"));

/// The direct-push executor with **fenced credits** (credit words, and Simple's ready words,
/// written as release stores with a system fence), before they were made relaxed ([`OWN_DIRECT_H200X2`]). One-shot all-reduce (float, sum, out of place) on the lent 2×H200,
/// on the direct-push executor (`cuda/src/direct.rs`, `cuda/kernels/direct.cu`: senders
/// push into credit-recycled slots of the receiver's scratch, no barriers): (size, protocol,
/// measured median of 3 runs of 20 calls, µs, the out-of-place `time` column).
/// - LL, 8 B–512 KiB: `docs/measurements/direct-run4.log` at commit d7d5d68, section `topoplan bench -b 8 -e 1G
///   -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl`, its `one-shot-ll` rows only (that section's
///   Simple rows from 4 MiB up ran on an older grid and are not used).
/// - Simple, 256 KiB–1 GiB: `docs/measurements/direct-run5.log` at commit d7d5d68, section `topoplan bench -b 256K
///   -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot` (64 sender + 64 receiver CTAs at
///   large sizes, one stream per 32 KiB).
///
/// The launch floor of that kernel (an empty kernel launched the same way, `docs/measurements/direct-run3.log` at commit d7d5d68)
/// is 3.3–4.3 µs per call; it is a diagnostic, not a collective, and is not in this set.
/// Checked against `ExecParams::direct_fenced_h200x2`, not the defaults.
pub static OWN_DIRECT_FENCED_H200X2: LazyLock<Vec<(u64, Protocol, f64)>> =
    LazyLock::new(|| proto_rows("OWN_DIRECT_FENCED_H200X2"));

/// The previous (pull-based) executor, before the direct-push kernel: the receiver's CTAs loaded
/// the peer's buffer over NVLink behind a barrier. One-shot all-reduce (float, sum, out of place)
/// on the lent 2×H200: (nccl-tests size, protocol the runtime used, measured median µs). From
/// the final run of that executor (`docs/benchmarks-gpu.md` then, `topoplan bench -b 8 -e 1G -f 8
/// -g 2 -w 5 -n 20 --runs 3 -c 0`). Checked against `ExecParams::pull_h200x2`, not the defaults.
pub static OWN_ONE_SHOT_H200X2: LazyLock<Vec<(u64, Protocol, f64)>> =
    LazyLock::new(|| proto_rows("OWN_ONE_SHOT_H200X2"));

/// The previous (pull-based) executor, like [`OWN_ONE_SHOT_H200X2`]: sizes its final run skipped,
/// from the earlier sweeps of `docs/measurements/run3-perf.log` at commit d7d5d68
/// (same machine, `-f 2`): LL up to its 512 KiB limit, Simple 128 KiB–2 MiB (at most 32 CTAs up
/// to 1 MiB, 64 at 2 MiB: the grid the runtime uses now) and 4–32 MiB from the 64-CTA sweep
/// (the default since; the 132-CTA rows of that log are left out).
pub static OWN_ONE_SHOT_H200X2_RUN3: LazyLock<Vec<(u64, Protocol, f64)>> =
    LazyLock::new(|| proto_rows("OWN_ONE_SHOT_H200X2_RUN3"));

/// topoplan's CUDA runtime, one-shot all-reduce in **pull mode** (`cuda/src/direct/pull.rs`,
/// `cuda/kernels/direct_pull.cu`: each rank's CTAs read the peer's input over NVLink, one CTA per
/// 8 KiB of message up to two 256-thread CTAs per SM, with per-CTA arrive and done handshakes),
/// float, sum, out of place, on the lent 2×H200, with the defaults:
/// `docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`, command `topoplan bench -b 8 -e 1G -f 2
/// -w 5 -n 20 --runs 3 -c 0 --vs-nccl` (size = bytes per rank, median of 3 runs of 20 calls, µs,
/// the out-of-place `time` column), every row's `algo` column `one-shot-pull`. 512-thread
/// CTAs measured 3-6 % slower. Checked against
/// `ExecParams::default()` with [`compare_own_as_run`].
pub static OWN_PULL_H200X2: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_PULL_H200X2"));

/// topoplan's CUDA runtime, **hybrid** all-reduce (`cuda/src/hybrid.rs`: a two-rank
/// one-shot Simple all-reduce of at least 512 MiB per rank runs its last 50 % on the copy-engine
/// pair path and the rest on the SM direct-push path, at the same time), float, sum, out of
/// place, on the lent 2×H200, with the defaults:
/// `docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`, command `topoplan bench -b 8 -e 1G -f 2 -w 5 -n
/// 20 --runs 3 -c 0 --vs-nccl` (size = bytes per rank, median of 3 runs of 20 calls, µs, the
/// out-of-place `time` column), both rows' `algo` column `one-shot+ce`. Checked against
/// `ExecParams::default()` (whose hybrid terms are fitted on these two points) with
/// [`compare_own_as_run`].
pub static OWN_HYBRID_H200X2: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_HYBRID_H200X2"));

/// The hybrid all-reduce as [`OWN_HYBRID_H200X2`], measured when it was adopted:
/// `docs/measurements/2026-11-30-h200x2-hybrid-adoption/hybrid-vs-nccl.log` (`TOPOPLAN_HYBRID_CE_PCT=50
/// TOPOPLAN_HYBRID_MIN_MB=512 topoplan bench --counts 67108864,134217728,268435456 -w 3 -n 20
/// --runs 3 -c 0 --vs-nccl`; the `algo` column said `one-shot` then). Not fitted on: the
/// out-of-sample check of the hybrid terms. (Its 256 MiB row ran the SM path alone.)
pub static OWN_HYBRID_H200X2_ADOPTION: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_HYBRID_H200X2_ADOPTION"));

/// topoplan's CUDA runtime, one-shot all-reduce as `auto` runs it (LL 8 B–256 KiB, pull mode
/// 512 KiB–16 MiB, the push path 32–256 MiB, the hybrid from 512 MiB), float, sum, out of place,
/// on the lent 2×H200, after one thread per Simple sender CTA fences a segment (`docs/measurements/2026-11-30-h200x2-allreduce-segment-fence/perf.log`, command `topoplan bench -b 8 -e 1G -f 2
/// -w 5 -n 20 --runs 3 -c 0 --vs-nccl`; size = bytes per rank, median of 3 runs of 20 calls, µs,
/// the out-of-place `time` column; protocol from the `algo` column). No fit saw it: the
/// out-of-sample check of `ExecParams::default()`, with [`compare_own_as_run_protocols`].
pub static OWN_AS_RUN_H200X2_SEGMENT_FENCE: LazyLock<Vec<(u64, Protocol, f64)>> =
    LazyLock::new(|| proto_rows("OWN_AS_RUN_H200X2_SEGMENT_FENCE"));

/// Simulates the planner's one-shot all-reduce at each measured point with the point's protocol
/// and `cfg` as it is: with `ExecParams::default()` the executor runs what the runtime runs (pull
/// mode, the hybrid and the push path each where the runtime uses them), for tables of a whole
/// `auto` run such as [`OWN_AS_RUN_H200X2_SEGMENT_FENCE`].
pub fn compare_own_as_run_protocols(
    topo: &Topology,
    measured: &[(u64, Protocol, f64)],
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    one_shot_rows(topo, measured.iter().copied(), cfg)
}

/// Simulates the planner's one-shot all-reduce (`build::one_shot`, the schedule the CUDA runtime
/// lowers) at each measured point with the point's protocol, on the **push path**: the executor's
/// pull mode and hybrid are off (`ExecParams::without_pull`, `ExecParams::without_hybrid`), since
/// every table this compares was measured before they existed (or on an earlier executor), as the
/// runtime runs with `TOPOPLAN_PULL=0 TOPOPLAN_HYBRID_CE_PCT=0`. Pull-mode points:
/// [`compare_own_as_run`]; hybrid points: [`compare_own_as_run`].
pub fn compare_own_one_shot(
    topo: &Topology,
    measured: &[(u64, Protocol, f64)],
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let push = SimConfig {
        exec: cfg.exec.clone().map(|x| x.without_pull().without_hybrid()),
        ..cfg.clone()
    };
    one_shot_rows(topo, measured.iter().copied(), &push)
}

/// Simulates the planner's one-shot Simple all-reduce over `topo`'s ranks at each measured
/// point with `cfg` as it is: with `ExecParams::default()` the executor runs what the runtime
/// runs, pull mode at 512 KiB–16 MiB per rank, the hybrid from 512 MiB on 2 ranks, the push path
/// elsewhere (the pull-mode and hybrid tables).
pub fn compare_own_as_run(
    topo: &Topology,
    measured: &[(u64, f64)],
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    one_shot_rows(
        topo,
        measured.iter().map(|&(b, us)| (b, Protocol::Simple, us)),
        cfg,
    )
}

fn one_shot_rows(
    topo: &Topology,
    measured: impl Iterator<Item = (u64, Protocol, f64)>,
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let n = topo.n_ranks() as u32;
    let coll = Collective::new(CollectiveKind::AllReduce);
    let mut rows = Vec::new();
    for (bytes, proto, us) in measured {
        let s = build::one_shot(&coll, n, proto)?;
        let r = simulate(topo, &s, bytes, cfg)?;
        rows.push(Row {
            bytes,
            protocol: proto,
            channels: s.channels,
            measured_us: us,
            predicted_us: r.time_us,
            error: (r.time_us - us) / us,
        });
    }
    Ok(rows)
}

/// topoplan's CUDA runtime, copy-engine pair all-reduce (`--algo ce`, `cuda::ce_pair`,
/// float, sum, out of place) on the lent 2×H200: each rank's copy engines push its input into the
/// peer's scratch ring in chunks of 32 MiB, halving towards the end down to 2 MiB, on 2
/// alternating copy streams; SM kernels only reduce (`out = in + scratch`); cross-GPU waits are
/// stream memory operations. (size, measured median of 3 runs of 20 calls, µs, the out-of-place
/// `time` column, the 7th field.) From `docs/measurements/2026-11-30-h200x2-ce-pair/fit.log`, first section
/// only (command `topoplan bench --counts 4194304,16777216,67108864,134217728,268435456 --algo ce
/// -w 3 -n 20 --runs 3 -c 0 --vs-nccl`; the counts are float elements, so 16 MiB–1 GiB; the
/// later sections are knob variants). That run's configuration; the runtime's default became
/// 1 copy stream and 64 MiB chunks after the sweeps (`docs/benchmarks-gpu.md`).
pub static OWN_CE_PAIR_H200X2: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_CE_PAIR_H200X2"));

/// History: the previous, generic copy-engine lowering of `--algo ce` (before `ce_pair`; the
/// runtime no longer runs it for two-rank all-reduce), copy-engine pipeline all-reduce (float,
/// out of place): (size, measured µs) from `docs/measurements/run3-perf.log` at commit d7d5d68 (`bench -b 256M -e 1G
/// -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --algo ce`, the run `docs/benchmarks-gpu.md` cited then).
/// Checked against `ExecParams::direct_fenced_h200x2` (`ce_launch_us` 12.0, `ce_gbps` 199, fitted
/// on these two points), not the defaults.
pub static OWN_CE_H200X2_RUN3: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_CE_H200X2_RUN3"));

/// History, like [`OWN_CE_H200X2_RUN3`]: the same command in run 2
/// (`docs/measurements/run2-perf.log` at commit d7d5d68): the run-to-run spread of the previous lowering.
pub static OWN_CE_H200X2_RUN2: LazyLock<Vec<(u64, f64)>> =
    LazyLock::new(|| rows_us("OWN_CE_H200X2_RUN2"));

/// Chunk size of the copy-engine pair all-reduce (`cuda::ce_pair`, its default
/// `TOPOPLAN_CE_CHUNK_MB` = 32): the largest chunk it copies. The runtime's chunks halve towards
/// the end of the message down to 2 MiB; the planner's pipeline has equal chunks, so the
/// simulation cuts the message into `⌈size / 32 MiB⌉` equal ones (16 MiB: one chunk, where the
/// runtime copies four). How much the chunk size moves the predictions of
/// [`OWN_CE_PAIR_H200X2`]: the `fidelity` example's chunk table, in `docs/fidelity.md`.
pub const CE_CHUNK_BYTES: u64 = 32 << 20;

/// Chunk size of the previous, generic copy-engine lowering (`cuda::schedules` builds
/// the pipeline with one chunk per 16 MiB), for [`OWN_CE_H200X2_RUN3`] and [`OWN_CE_H200X2_RUN2`].
pub const GENERIC_CE_CHUNK_BYTES: u64 = 16 << 20;

/// Simulates the copy-engine pipeline all-reduce (`build::copy_engine_pipeline`, the schedule
/// `topoplan sim --algo ce` runs) cut into `⌈size / chunk_bytes⌉` equal chunks
/// ([`CE_CHUNK_BYTES`] for `ce_pair`, [`GENERIC_CE_CHUNK_BYTES`] for the previous lowering).
/// The schedule's channel 0 interleaves send j and receive j, so reduce j (channel 1) overlaps
/// the copies of later chunks, as in `ce_pair`: `docs/fidelity.md` has what this still misses.
pub fn compare_own_ce(
    topo: &Topology,
    measured: &[(u64, f64)],
    chunk_bytes: u64,
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let coll = Collective::new(CollectiveKind::AllReduce);
    let mut rows = Vec::new();
    for &(bytes, us) in measured {
        let chunks = bytes.div_ceil(chunk_bytes.max(1)).clamp(1, 1024) as u32;
        let s = build::copy_engine_pipeline(&coll, chunks)?;
        let r = simulate(topo, &s, bytes, cfg)?;
        rows.push(Row {
            bytes,
            protocol: s.protocol,
            channels: s.channels,
            measured_us: us,
            predicted_us: r.time_us,
            error: (r.time_us - us) / us,
        });
    }
    Ok(rows)
}

/// Simulates NCCL's own choice ([`crate::nccl::Model`]) at every measured size of `kind`
/// (size 0 rows skipped), with the algorithms and protocols `f` allows.
pub fn compare_as_nccl(
    topo: &Topology,
    planner: &planner::plan::Planner,
    kind: CollectiveKind,
    measured: &[(u64, f64)],
    f: &planner::tuner::Filter,
    cfg: &SimConfig,
) -> Result<Vec<Row>, SimError> {
    let m = crate::nccl::Model::new(topo, planner);
    let n = planner.nranks();
    let coll = Collective::as_nccl_tests(kind, n, 0);
    let mut rows = Vec::new();
    for &(bytes, us) in measured {
        if bytes == 0 {
            continue;
        }
        let r = m.run(topo, planner, &coll, bytes, f, cfg)?;
        rows.push(Row {
            bytes,
            protocol: r.choice.protocol,
            channels: r.choice.channels,
            measured_us: us,
            predicted_us: r.time_us,
            error: (r.time_us - us) / us,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bench log's NCCL column, per table, read strictly: rows before any header are other
    /// tools' output, and a short row inside a table is an error naming its line.
    #[test]
    fn bench_logs_give_nccls_column_per_table() {
        let log = "\
   1024  256 float sum -1 one-shot-ll 5.25 0.20 0.10 N/A 8.84
# topoplan bench: broadcast on 2 GPU(s), float sum, algo auto, warmup 5 iters 20 runs 3 (median)
#   (B)  header line
   1024  256 float sum 0 one-shot-ll 5.10 0.20 0.20 0 10.90 0.09 0 2.14x 5.10 0.20 0.20 0 10.80 0.09 0 2.12x
";
        assert_eq!(
            parse_bench_nccl_log(log, "b.log"),
            Ok(vec![(CollectiveKind::Broadcast, 1024, 10.90)])
        );
        let short = format!("{log}   4096  1024 float sum 0 one-shot-ll 5.10 0.20\n");
        let e = parse_bench_nccl_log(&short, "b.log")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("b.log:5: a row has 14 or 22 columns"), "{e}");
    }

    /// nccl-tests' in-place column; a cut row is an error naming its line, never skipped.
    #[test]
    fn in_place_times_are_the_tenth_field() {
        let t = "# c\n 8 2 float sum -1 13.34 0.00 0.00 0 11.74 0.00 0.00 0\n";
        assert_eq!(parse_nccl_tests_in_place(t, "t"), Ok(vec![(8, 11.74)]));
        assert_eq!(parse_nccl_tests(t, "t"), Ok(vec![(8, 13.34)]));
        let cut = format!("{t} 0 0 float sum -1 0.6\n");
        let e = parse_nccl_tests_in_place(&cut, "t")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t:3: nccl-tests row has 6 fields"), "{e}");
    }

    /// Every measured table reads from the data file whole: its rows all parse, none is empty.
    #[test]
    fn runtime_measurements_parse() {
        let v: serde_json::Value = serde_json::from_str(RUNTIME_MEASUREMENTS).unwrap();
        let tables = v["tables"].as_object().unwrap();
        for (name, rows) in tables {
            let n = rows.as_array().unwrap().len();
            let parsed = if rows[0].as_array().unwrap().len() == 3 {
                proto_rows(name).len()
            } else {
                rows_us(name).len()
            };
            assert!(n > 0 && parsed == n, "{name}: {parsed} of {n} rows");
        }
        assert_eq!(tables.len(), 11);
        assert_eq!(OWN_DIRECT_H200X2.len(), 28);
        assert_eq!(OWN_AS_RUN_H200X2_SEGMENT_FENCE.len(), 28);
    }
}
