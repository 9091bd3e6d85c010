//! Predicted vs measured: reads nccl-tests output and simulates NCCL's own ring schedule
//! ([`crate::reference::nccl_ring`]) at every size, for `docs/fidelity.md`.

use crate::{simulate, SimConfig, SimError};
use planner::schedule::{build, Collective};
use planner::schedule::{CollectiveKind, Protocol};
use planner::topology::Topology;

/// One nccl-tests row: size in bytes and out-of-place time in µs.
pub fn parse_nccl_tests(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some((f[0].parse().ok()?, f[5].parse().ok()?))
        })
        .collect()
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
    let ring = planner::tuner::Filter {
        algorithms: Some(vec![planner::schedule::Algorithm::Ring]),
        protocols: None,
    };
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
pub const OWN_DIRECT_H200X2: &[(u64, Protocol, f64)] = &[
    (8, Protocol::LL, 4.50),
    (16, Protocol::LL, 4.97),
    (32, Protocol::LL, 4.61),
    (64, Protocol::LL, 4.63),
    (128, Protocol::LL, 4.81),
    (256, Protocol::LL, 4.82),
    (512, Protocol::LL, 4.60),
    (1 << 10, Protocol::LL, 4.46),
    (2 << 10, Protocol::LL, 5.19),
    (4 << 10, Protocol::LL, 4.77),
    (8 << 10, Protocol::LL, 4.99),
    (16 << 10, Protocol::LL, 4.96),
    (32 << 10, Protocol::LL, 5.10),
    (64 << 10, Protocol::LL, 5.35),
    (128 << 10, Protocol::LL, 5.42),
    (256 << 10, Protocol::LL, 6.20),
    (512 << 10, Protocol::LL, 8.75),
    (1 << 20, Protocol::Simple, 12.44),
    (2 << 20, Protocol::Simple, 15.11),
    (4 << 20, Protocol::Simple, 22.22),
    (8 << 20, Protocol::Simple, 35.42),
    (16 << 20, Protocol::Simple, 60.68),
    (32 << 20, Protocol::Simple, 106.93),
    (64 << 20, Protocol::Simple, 201.72),
    (128 << 20, Protocol::Simple, 393.16),
    (256 << 20, Protocol::Simple, 761.64),
    (512 << 20, Protocol::Simple, 1495.90),
    (1 << 30, Protocol::Simple, 2966.33),
];

/// The direct-push executor with **fenced credits** (credit words, and Simple's ready words,
/// written as release stores with a system fence), before they were made relaxed ([`OWN_DIRECT_H200X2`]). One-shot all-reduce (float, sum, out of place) on the lent 2×H200,
/// on the direct-push executor (`runtime/src/cuda/direct.rs`, `kernels/src/direct.cu`: senders
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
pub const OWN_DIRECT_FENCED_H200X2: &[(u64, Protocol, f64)] = &[
    (8, Protocol::LL, 5.83),
    (16, Protocol::LL, 5.91),
    (32, Protocol::LL, 5.77),
    (64, Protocol::LL, 6.14),
    (128, Protocol::LL, 5.77),
    (256, Protocol::LL, 5.85),
    (512, Protocol::LL, 5.94),
    (1 << 10, Protocol::LL, 5.76),
    (2 << 10, Protocol::LL, 6.04),
    (4 << 10, Protocol::LL, 6.08),
    (8 << 10, Protocol::LL, 6.46),
    (16 << 10, Protocol::LL, 6.50),
    (32 << 10, Protocol::LL, 6.41),
    (64 << 10, Protocol::LL, 6.39),
    (128 << 10, Protocol::LL, 6.60),
    (256 << 10, Protocol::LL, 7.26),
    (512 << 10, Protocol::LL, 9.92),
    (256 << 10, Protocol::Simple, 12.06),
    (512 << 10, Protocol::Simple, 12.14),
    (1 << 20, Protocol::Simple, 13.98),
    (2 << 20, Protocol::Simple, 17.34),
    (4 << 20, Protocol::Simple, 24.17),
    (8 << 20, Protocol::Simple, 37.86),
    (16 << 20, Protocol::Simple, 64.65),
    (32 << 20, Protocol::Simple, 109.80),
    (64 << 20, Protocol::Simple, 204.72),
    (128 << 20, Protocol::Simple, 395.50),
    (256 << 20, Protocol::Simple, 764.60),
    (512 << 20, Protocol::Simple, 1502.19),
    (1 << 30, Protocol::Simple, 2986.86),
];

/// The previous (pull-based) executor, before the direct-push kernel: the receiver's CTAs loaded
/// the peer's buffer over NVLink behind a barrier. One-shot all-reduce (float, sum, out of place)
/// on the lent 2×H200: (nccl-tests size, protocol the runtime used, measured median µs). From
/// the final run of that executor (`docs/benchmarks-gpu.md` then, `topoplan bench -b 8 -e 1G -f 8
/// -g 2 -w 5 -n 20 --runs 3 -c 0`). Checked against `ExecParams::pull_h200x2`, not the defaults.
pub const OWN_ONE_SHOT_H200X2: &[(u64, Protocol, f64)] = &[
    (8, Protocol::LL, 6.82),
    (64, Protocol::LL, 6.67),
    (512, Protocol::LL, 6.93),
    (4 << 10, Protocol::LL, 6.68),
    (32 << 10, Protocol::LL, 6.59),
    (256 << 10, Protocol::LL, 8.86),
    (2 << 20, Protocol::Simple, 19.96),
    (16 << 20, Protocol::Simple, 63.54),
    (128 << 20, Protocol::Simple, 413.19),
    (1 << 30, Protocol::Simple, 3191.88),
];

/// The previous (pull-based) executor, like [`OWN_ONE_SHOT_H200X2`]: sizes its final run skipped,
/// from the earlier sweeps of `docs/measurements/run3-perf.log` at commit d7d5d68
/// (same machine, `-f 2`): LL up to its 512 KiB limit, Simple 128 KiB–2 MiB (at most 32 CTAs up
/// to 1 MiB, 64 at 2 MiB: the grid the runtime uses now) and 4–32 MiB from the 64-CTA sweep
/// (the default since; the 132-CTA rows of that log are left out).
pub const OWN_ONE_SHOT_H200X2_RUN3: &[(u64, Protocol, f64)] = &[
    (64 << 10, Protocol::LL, 6.65),
    (128 << 10, Protocol::LL, 7.10),
    (256 << 10, Protocol::LL, 8.30),
    (512 << 10, Protocol::LL, 11.45),
    (128 << 10, Protocol::Simple, 12.53),
    (256 << 10, Protocol::Simple, 12.93),
    (512 << 10, Protocol::Simple, 14.50),
    (1 << 20, Protocol::Simple, 16.01),
    (2 << 20, Protocol::Simple, 19.77),
    (4 << 20, Protocol::Simple, 25.68),
    (8 << 20, Protocol::Simple, 38.10),
    (16 << 20, Protocol::Simple, 62.95),
    (32 << 20, Protocol::Simple, 113.74),
];

/// topoplan's CUDA runtime, one-shot all-reduce in **pull mode** (`runtime/src/cuda/direct/pull.rs`,
/// `kernels/src/direct_pull.cu`: each rank's CTAs read the peer's input over NVLink, one CTA per
/// 8 KiB of message up to two 256-thread CTAs per SM, with per-CTA arrive and done handshakes),
/// float, sum, out of place, on the lent 2×H200, with the defaults:
/// `docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`, command `topoplan bench -b 8 -e 1G -f 2
/// -w 5 -n 20 --runs 3 -c 0 --vs-nccl` (size = bytes per rank, median of 3 runs of 20 calls, µs,
/// the out-of-place `time` column), every row's `algo` column `one-shot-pull`. 512-thread
/// CTAs measured 3-6 % slower. Checked against
/// `ExecParams::default()` with [`compare_own_as_run`].
pub const OWN_PULL_H200X2: &[(u64, f64)] = &[
    (512 << 10, 7.24),
    (1 << 20, 9.25),
    (2 << 20, 12.32),
    (4 << 20, 18.76),
    (8 << 20, 31.28),
    (16 << 20, 56.62),
];

/// topoplan's CUDA runtime, **hybrid** all-reduce (`runtime/src/cuda/hybrid.rs`: a two-rank
/// one-shot Simple all-reduce of at least 512 MiB per rank runs its last 50 % on the copy-engine
/// pair path and the rest on the SM direct-push path, at the same time), float, sum, out of
/// place, on the lent 2×H200, with the defaults:
/// `docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`, command `topoplan bench -b 8 -e 1G -f 2 -w 5 -n
/// 20 --runs 3 -c 0 --vs-nccl` (size = bytes per rank, median of 3 runs of 20 calls, µs, the
/// out-of-place `time` column), both rows' `algo` column `one-shot+ce`. Checked against
/// `ExecParams::default()` (whose hybrid terms are fitted on these two points) with
/// [`compare_own_as_run`].
pub const OWN_HYBRID_H200X2: &[(u64, f64)] = &[(512 << 20, 1445.75), (1 << 30, 2856.17)];

/// The hybrid all-reduce as [`OWN_HYBRID_H200X2`], measured when it was adopted:
/// `docs/measurements/2026-11-30-h200x2-hybrid-adoption/hybrid-vs-nccl.log` (`TOPOPLAN_HYBRID_CE_PCT=50
/// TOPOPLAN_HYBRID_MIN_MB=512 topoplan bench --counts 67108864,134217728,268435456 -w 3 -n 20
/// --runs 3 -c 0 --vs-nccl`; the `algo` column said `one-shot` then). Not fitted on: the
/// out-of-sample check of the hybrid terms. (Its 256 MiB row ran the SM path alone.)
pub const OWN_HYBRID_H200X2_ADOPTION: &[(u64, f64)] = &[(512 << 20, 1446.60), (1 << 30, 2854.89)];

/// topoplan's CUDA runtime, one-shot all-reduce as `auto` runs it (LL 8 B–256 KiB, pull mode
/// 512 KiB–16 MiB, the push path 32–256 MiB, the hybrid from 512 MiB), float, sum, out of place,
/// on the lent 2×H200, after one thread per Simple sender CTA fences a segment (`docs/measurements/2026-11-30-h200x2-allreduce-segment-fence/perf.log`, command `topoplan bench -b 8 -e 1G -f 2
/// -w 5 -n 20 --runs 3 -c 0 --vs-nccl`; size = bytes per rank, median of 3 runs of 20 calls, µs,
/// the out-of-place `time` column; protocol from the `algo` column). No fit saw it: the
/// out-of-sample check of `ExecParams::default()`, with [`compare_own_as_run_protocols`].
pub const OWN_AS_RUN_H200X2_SEGMENT_FENCE: &[(u64, Protocol, f64)] = &[
    (8, Protocol::LL, 4.78),
    (16, Protocol::LL, 4.49),
    (32, Protocol::LL, 4.73),
    (64, Protocol::LL, 4.66),
    (128, Protocol::LL, 4.52),
    (256, Protocol::LL, 4.64),
    (512, Protocol::LL, 4.56),
    (1 << 10, Protocol::LL, 4.92),
    (2 << 10, Protocol::LL, 4.98),
    (4 << 10, Protocol::LL, 4.82),
    (8 << 10, Protocol::LL, 5.02),
    (16 << 10, Protocol::LL, 5.19),
    (32 << 10, Protocol::LL, 5.24),
    (64 << 10, Protocol::LL, 5.38),
    (128 << 10, Protocol::LL, 5.67),
    (256 << 10, Protocol::LL, 6.53),
    (512 << 10, Protocol::Simple, 7.36),
    (1 << 20, Protocol::Simple, 8.92),
    (2 << 20, Protocol::Simple, 12.37),
    (4 << 20, Protocol::Simple, 18.62),
    (8 << 20, Protocol::Simple, 31.21),
    (16 << 20, Protocol::Simple, 56.57),
    (32 << 20, Protocol::Simple, 105.03),
    (64 << 20, Protocol::Simple, 200.26),
    (128 << 20, Protocol::Simple, 391.43),
    (256 << 20, Protocol::Simple, 759.24),
    (512 << 20, Protocol::Simple, 1443.89),
    (1024 << 20, Protocol::Simple, 2853.79),
];

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

/// topoplan's CUDA runtime, copy-engine pair all-reduce (`--algo ce`, `runtime::cuda::ce_pair`,
/// float, sum, out of place) on the lent 2×H200: each rank's copy engines push its input into the
/// peer's scratch ring in chunks of 32 MiB, halving towards the end down to 2 MiB, on 2
/// alternating copy streams; SM kernels only reduce (`out = in + scratch`); cross-GPU waits are
/// stream memory operations. (size, measured median of 3 runs of 20 calls, µs, the out-of-place
/// `time` column, the 7th field.) From `docs/measurements/2026-11-30-h200x2-ce-pair/fit.log`, first section
/// only (command `topoplan bench --counts 4194304,16777216,67108864,134217728,268435456 --algo ce
/// -w 3 -n 20 --runs 3 -c 0 --vs-nccl`; the counts are float elements, so 16 MiB–1 GiB; the
/// later sections are knob variants). That run's configuration; the runtime's default became
/// 1 copy stream and 64 MiB chunks after the sweeps (`docs/benchmarks-gpu.md`).
pub const OWN_CE_PAIR_H200X2: &[(u64, f64)] = &[
    (16 << 20, 115.18),
    (64 << 20, 285.21),
    (256 << 20, 870.26),
    (512 << 20, 1645.11),
    (1 << 30, 3194.68),
];

/// History: the previous, generic copy-engine lowering of `--algo ce` (before `ce_pair`; the
/// runtime no longer runs it for two-rank all-reduce), copy-engine pipeline all-reduce (float,
/// out of place): (size, measured µs) from `docs/measurements/run3-perf.log` at commit d7d5d68 (`bench -b 256M -e 1G
/// -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --algo ce`, the run `docs/benchmarks-gpu.md` cited then).
/// Checked against `ExecParams::direct_fenced_h200x2` (`ce_launch_us` 12.0, `ce_gbps` 199, fitted
/// on these two points), not the defaults.
pub const OWN_CE_H200X2_RUN3: &[(u64, f64)] = &[(256 << 20, 1521.73), (1 << 30, 7330.08)];

/// History, like [`OWN_CE_H200X2_RUN3`]: the same command in run 2
/// (`docs/measurements/run2-perf.log` at commit d7d5d68): the run-to-run spread of the previous lowering.
pub const OWN_CE_H200X2_RUN2: &[(u64, f64)] = &[(256 << 20, 1309.93), (1 << 30, 5362.90)];

/// Chunk size of the copy-engine pair all-reduce (`runtime::cuda::ce_pair`, its default
/// `TOPOPLAN_CE_CHUNK_MB` = 32): the largest chunk it copies. The runtime's chunks halve towards
/// the end of the message down to 2 MiB; the planner's pipeline has equal chunks, so the
/// simulation cuts the message into `⌈size / 32 MiB⌉` equal ones (16 MiB: one chunk, where the
/// runtime copies four). How much the chunk size moves the predictions of
/// [`OWN_CE_PAIR_H200X2`]: the `fidelity` example's chunk table, in `docs/fidelity.md`.
pub const CE_CHUNK_BYTES: u64 = 32 << 20;

/// Chunk size of the previous, generic copy-engine lowering (`runtime::cuda::schedules` builds
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
    let coll = match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, 0),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| Some((i + 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    };
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
