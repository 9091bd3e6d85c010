//! The executor model against whole `auto` runs it was not fitted on: the segment-fence run
//! (`fidelity::OWN_AS_RUN_H200X2_SEGMENT_FENCE`, docs/fidelity.md "Out of sample") and later
//! runs of the runtime read from their logs, where every regime the runtime runs appears (LL, pull mode,
//! the push path, the hybrid).

use sim::fidelity::{compare_own_as_run_protocols, OWN_AS_RUN_H200X2_SEGMENT_FENCE};
use sim::SimConfig;

mod common;
use common::{assert_within, topo};

/// `ExecParams::default()` predicts the segment-fence run within 6 % at every size (worst
/// +5.0 % at 4 KiB: LL calls spread 4.5–5.4 µs over 8 B–64 KiB), and within 3 % from 512 KiB up
/// (worst +2.9 % at 256 MiB), where pull mode, the push path (now fencing once per segment,
/// 2 % faster at 32 MiB than the run its terms were fitted on) and the hybrid run.
#[test]
fn own_as_run_segment_fence_out_of_sample() {
    let r = compare_own_as_run_protocols(
        &topo(),
        &OWN_AS_RUN_H200X2_SEGMENT_FENCE[..],
        &SimConfig::default(),
    )
    .unwrap();
    assert_eq!(r.len(), 28);
    print_rows(&r);
    assert_within(&r, 0.06);
    let large: Vec<_> = r.into_iter().filter(|x| x.bytes >= 512 << 10).collect();
    assert_eq!(large.len(), 12);
    assert_within(&large, 0.03);
}

/// The rows of the `topoplan bench` all-reduce tables in a log (size, protocol from the `algo`
/// column, out-of-place `time`): LL for `one-shot-ll`, Simple for pull mode, the push path and
/// the hybrid. Only the commands (`+` lines) that contain `marker`.
fn as_run_rows(log: &str, marker: &str) -> Vec<(u64, planner::schedule::Protocol, f64)> {
    as_run_rows_at(log, marker, 6)
}

/// [`as_run_rows`] with the time from whitespace-separated column `col` (6: out of place; 14: in
/// place in a `--vs-nccl` table).
fn as_run_rows_at(
    log: &str,
    marker: &str,
    col: usize,
) -> Vec<(u64, planner::schedule::Protocol, f64)> {
    use planner::schedule::Protocol;
    let path = format!("{}/../docs/measurements/{log}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut inside = false;
    text.lines()
        .filter(|l| {
            if l.starts_with('+') {
                inside = l.contains(marker);
            }
            inside
        })
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let bytes = f.first()?.parse::<u64>().ok()?;
            let proto = match *f.get(5)? {
                "one-shot-ll" => Protocol::LL,
                "one-shot" | "one-shot-pull" | "one-shot+ce" => Protocol::Simple,
                other => panic!("{path}: unexpected algo {other}"),
            };
            Some((bytes, proto, f.get(col)?.parse().ok()?))
        })
        .collect()
}

/// A run with more samples (`docs/measurements/2026-11-30-h200x2-allreduce-one-and-two-procs/perf.log`:
/// medians of 5 runs of 50 calls up to 64 MiB, of 20 from 128 MiB), which no fit saw.
/// `ExecParams::default()` runs high on the small LL calls of this run (4.34–4.60 µs up to 4 KiB
/// against the segment-fence run's 4.49–4.98; worst +10.0 % at 4 KiB) and on pull mode's first
/// sizes (+6.1 % at 512 KiB, 6.98 µs against 7.36), so: within 11 % at every size, 6.5 % from 512 KiB, 3.5 % from
/// 2 MiB (worst +3.1 % at 256 MiB). Not refitted: the two runs differ by as much as the error.
#[test]
fn own_as_run_one_process_out_of_sample() {
    let measured = as_run_rows(
        "2026-11-30-h200x2-allreduce-one-and-two-procs/perf.log",
        "topoplan bench",
    );
    whole_run_within(
        &measured,
        &[(0, 28, 0.11), (512 << 10, 12, 0.065), (2 << 20, 10, 0.035)],
    );
}

/// Compares a whole `auto` run's 28 points (8 B–1 GiB) with `ExecParams::default()`; each bound
/// `(from_bytes, points, error)` says: the `points` rows from `from_bytes` up are within `error`.
fn whole_run_within(
    measured: &[(u64, planner::schedule::Protocol, f64)],
    bounds: &[(u64, usize, f64)],
) {
    assert_eq!(measured.len(), 28);
    let r = compare_own_as_run_protocols(&topo(), measured, &SimConfig::default()).unwrap();
    print_rows(&r);
    for &(from, points, error) in bounds {
        let part: Vec<_> = r.iter().filter(|x| x.bytes >= from).cloned().collect();
        assert_eq!(part.len(), points, "rows from {from} B");
        assert_within(&part, error);
    }
}

/// The run after the in-place hybrid's halves share SMs
/// (`docs/measurements/2026-11-30-h200x2-allreduce-shared-sm-hybrid/perf.log`: medians of 5 runs
/// of 50 calls up to 64 MiB, of 20 from 128 MiB), on kernels no fit saw either (the out-of-place
/// rows compared here run the same kernels as the run above). Small LL calls again
/// ran below the model (4.43–4.54 µs up to 1 KiB): within 8 % at every size (worst +7.3 % at
/// 1 KiB), 6.5 % from 512 KiB (+6.3 % at 1 MiB), 3.5 % from 2 MiB (+3.1 % at 2 MiB, +2.9 % at
/// 256 MiB). Not refitted.
#[test]
fn own_as_run_shared_sm_hybrid_out_of_sample() {
    let measured = as_run_rows(
        "2026-11-30-h200x2-allreduce-shared-sm-hybrid/perf.log",
        "topoplan bench",
    );
    whole_run_within(
        &measured,
        &[(0, 28, 0.08), (512 << 10, 12, 0.065), (2 << 20, 10, 0.035)],
    );
}

/// In place, same run: the model has no notion of aliasing, so this is how far in-place calls
/// sit from the one prediction: within 9 % at every size (worst +8.3 % at 4 KiB), 3 % from
/// 512 KiB (+2.7 % at 1 MiB and 256 MiB; the in-place hybrid −0.5 % at 512 MiB).
#[test]
fn own_as_run_shared_sm_hybrid_in_place() {
    let measured = as_run_rows_at(
        "2026-11-30-h200x2-allreduce-shared-sm-hybrid/perf.log",
        "topoplan bench",
        14,
    );
    whole_run_within(&measured, &[(0, 28, 0.09), (512 << 10, 12, 0.03)]);
}

/// One process per GPU (`topoplan bench --procs`): with registered buffers and the
/// copy engines enabled, `--procs` runs what one process runs (pull mode 512 KiB–16 MiB, the
/// hybrid from 512 MiB), so the one-process model holds: `ExecParams::default()` against
/// `docs/measurements/2026-11-30-h200x2-allreduce-one-and-two-procs/procs-pull.log` (8 B–256 MiB)
/// and `procs-hybrid.log` there (the hybrid across processes, 512 MiB and 1 GiB). LL runs a little slower across processes
/// (4.8–5.6 µs up to 64 KiB), which the model, fitted in one process, does not know: within 9 %
/// at every size (worst −8.7 % at 512 B), 3 % from 512 KiB (worst +2.9 % at 256 MiB).
#[test]
fn own_as_run_across_processes() {
    let mut measured: Vec<_> = as_run_rows(
        "2026-11-30-h200x2-allreduce-one-and-two-procs/procs-pull.log",
        "-b 8 -e 1G",
    )
    .into_iter()
    .filter(|r| r.0 <= 256 << 20)
    .collect();
    measured.extend(
        as_run_rows(
            "2026-11-30-h200x2-allreduce-one-and-two-procs/procs-hybrid.log",
            "-b 256M -e 1G",
        )
        .into_iter()
        .filter(|r| r.0 >= 512 << 20),
    );
    assert_eq!(measured.len(), 28);
    let r = compare_own_as_run_protocols(&topo(), &measured, &SimConfig::default()).unwrap();
    print_rows(&r);
    assert_within(&r, 0.09);
    let large: Vec<_> = r.into_iter().filter(|x| x.bytes >= 512 << 10).collect();
    assert_eq!(large.len(), 12);
    assert_within(&large, 0.03);
}

/// Prints the table (seen with `--nocapture`; a failing bound prints it as well).
fn print_rows(r: &[sim::fidelity::Row]) {
    for row in r {
        println!(
            "{:>11} {:?} measured {:>8.2} predicted {:>8.2} {:+.1}%",
            row.bytes,
            row.protocol,
            row.measured_us,
            row.predicted_us,
            row.error * 100.0
        );
    }
}

/// The current runtime (`docs/measurements/2026-11-30-h200x2-allreduce-vs-nccl/perf.log`, the
/// same commands as the run above): the copy-engine pair's smallest chunk is 8 MiB, which only the hybrid
/// (512 MiB and 1 GiB) runs. Not refitted. Within 8 % at every size (worst +7.8 % at 512 B and
/// 1 KiB: small LL calls again ran below the model), 5 % from 512 KiB (+4.6 % at 512 KiB and
/// 1 MiB), 3 % from 2 MiB (+2.8 % at 256 MiB; the hybrid +0.2 / +0.1 %).
#[test]
fn own_as_run_8mib_tail_out_of_sample() {
    let measured = as_run_rows(
        "2026-11-30-h200x2-allreduce-vs-nccl/perf.log",
        "topoplan bench",
    );
    whole_run_within(
        &measured,
        &[(0, 28, 0.08), (512 << 10, 12, 0.05), (2 << 20, 10, 0.03)],
    );
}

/// In place, same run (the model has no notion of aliasing): within 10.5 % at every size (worst
/// +10.2 % at 4 KiB), 3 % from 512 KiB (+2.5 % at 256 MiB; the in-place hybrid −0.1 / −0.2 %,
/// where it was −0.5 % at 512 MiB with a 2 MiB tail chunk).
#[test]
fn own_as_run_8mib_tail_in_place() {
    let measured = as_run_rows_at(
        "2026-11-30-h200x2-allreduce-vs-nccl/perf.log",
        "topoplan bench",
        14,
    );
    whole_run_within(&measured, &[(0, 28, 0.105), (512 << 10, 12, 0.03)]);
}
