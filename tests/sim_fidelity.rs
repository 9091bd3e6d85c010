//! docs/fidelity.md as a test: NCCL's ring on the 2×H200 topology as `sim --as nccl --algo ring`
//! simulates it with the bundled profile (fitted on these two curves by `topoplan calibrate`)
//! stays within 7% of the measured nccl-tests all-reduce from 2 MiB (Simple) and 15% below it
//! (LL, whose measured times scatter by ±7% between neighbouring sizes), and within 5% of the
//! all-gather from 8 MiB (Simple) and 11% at 2 MiB (its largest LL call, where the model pays the
//! whole launch floor before the transfer; the LL misses are documented there).

use planner::schedule::CollectiveKind;
use sim::fidelity::{compare, parse_nccl_tests};

fn rows(kind: CollectiveKind, file: &str) -> Vec<sim::fidelity::Row> {
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/topologies/h200x2-topo.xml"),
        &Default::default(),
    )
    .unwrap()
    .topology;
    let text = std::fs::read_to_string(format!("tests/data/measurements/h200x2/{file}")).unwrap();
    let m = parse_nccl_tests(&text, file).unwrap();
    assert!(m.len() >= 14, "{file}: {} rows parsed", m.len());
    compare(&topo, kind, &m, &sim::SimConfig::default()).unwrap()
}

/// Every row at or above `from_bytes` is within `bound` (a fraction) of its measurement; the
/// failure message carries the whole table.
fn assert_within(r: &[sim::fidelity::Row], from_bytes: u64, bound: f64) {
    if let Err(e) = sim::fidelity::within(r, from_bytes, bound) {
        panic!("{e}");
    }
}

#[test]
fn all_reduce_within_seven_percent_from_2_mib_and_fifteen_below() {
    let r = rows(CollectiveKind::AllReduce, "all_reduce_g2.txt");
    assert_within(&r, 2 << 20, 0.07);
    assert_within(&r, 0, 0.15);
}

#[test]
fn all_gather_within_five_percent_from_8_mib_and_eleven_from_2_mib() {
    let r = rows(CollectiveKind::AllGather, "all_gather_g2.txt");
    assert_within(&r, 8 << 20, 0.05);
    assert_within(&r, 2 << 20, 0.11);
}

fn h200x2_measured_topo() -> planner::topology::Topology {
    planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .unwrap()
    .topology
}

fn own_rows(
    points: &[(u64, planner::schedule::Protocol, f64)],
    exec: sim::ExecParams,
) -> Vec<sim::fidelity::Row> {
    let cfg = sim::SimConfig {
        exec: Some(exec),
        ..Default::default()
    };
    sim::fidelity::compare_own_one_shot(&h200x2_measured_topo(), points, &cfg).unwrap()
}

fn of(r: &[sim::fidelity::Row], p: planner::schedule::Protocol) -> Vec<sim::fidelity::Row> {
    r.iter().filter(|x| x.protocol == p).cloned().collect()
}

/// The executor model with its defaults (`sim::ExecParams::default()`, fitted on these points by
/// `cargo run --release -p sim --example exec_fit`) predicts the direct-push one-shot
/// all-reduce with relaxed credits on 2×H200 (`OWN_DIRECT_H200X2`: LL 8 B–512 KiB, Simple
/// 1 MiB–1 GiB, `docs/measurements/2026-11-30-h200x2-push-relaxed-credits/perf.log`) within the fit's worst error rounded
/// up to the next percent: LL 6.6% → 7%, Simple 4.6% → 5% (docs/fidelity.md).
#[test]
fn own_direct_within_fitted_error() {
    use planner::schedule::Protocol;
    let r = own_rows(
        &sim::fidelity::OWN_DIRECT_H200X2[..],
        sim::ExecParams::default(),
    );
    let (ll, simple) = (of(&r, Protocol::LL), of(&r, Protocol::Simple));
    assert_eq!((ll.len(), simple.len()), (17, 11));
    assert_within(&ll, 0, 0.07);
    assert_within(&simple, 0, 0.05);
}

/// The refit matters: with the fenced-credit fit (`direct_fenced_h200x2`) the relaxed-credit
/// measurements fail both bounds above (worst LL +33.3% at 1 KiB, Simple +15.6% at 1 MiB).
#[test]
fn own_direct_needs_the_refit() {
    use planner::schedule::Protocol;
    let r = own_rows(
        &sim::fidelity::OWN_DIRECT_H200X2[..],
        sim::ExecParams::direct_fenced_h200x2(),
    );
    let worst = |p| of(&r, p).iter().map(|x| x.error.abs()).fold(0.0, f64::max);
    assert!(worst(Protocol::LL) > 0.07, "LL {:.3}", worst(Protocol::LL));
    assert!(
        worst(Protocol::Simple) > 0.05,
        "Simple {:.3}",
        worst(Protocol::Simple)
    );
}

/// The direct-push executor with fenced credits, before they were relaxed
/// (`OWN_DIRECT_FENCED_H200X2`: LL 8 B–512 KiB, Simple 256 KiB–1 GiB) against the parameters fitted
/// on it then (`sim::ExecParams::direct_fenced_h200x2`, `exec_fit -- --fenced`), within its bounds
/// of then: LL 5.1% → 6%, Simple 6.2% → 7%.
#[test]
fn own_direct_fenced_history_within_fitted_error() {
    use planner::schedule::Protocol;
    let r = own_rows(
        &sim::fidelity::OWN_DIRECT_FENCED_H200X2[..],
        sim::ExecParams::direct_fenced_h200x2(),
    );
    let (ll, simple) = (of(&r, Protocol::LL), of(&r, Protocol::Simple));
    assert_eq!((ll.len(), simple.len()), (17, 13));
    assert_within(&ll, 0, 0.06);
    assert_within(&simple, 0, 0.07);
}

/// History: the previous (pull-based) executor's measurements (final run and run 3) against the
/// parameters fitted on them then (`sim::ExecParams::pull_h200x2`), within 7% as before.
#[test]
fn own_pull_one_shot_history_within_seven_percent() {
    let r = own_rows(
        &sim::fidelity::OWN_ONE_SHOT_H200X2[..],
        sim::ExecParams::pull_h200x2(),
    );
    assert_eq!(r.len(), 10);
    assert_within(&r, 0, 0.07);
    let r = own_rows(
        &sim::fidelity::OWN_ONE_SHOT_H200X2_RUN3[..],
        sim::ExecParams::pull_h200x2(),
    );
    assert_within(&r, 0, 0.07);
}

/// Without the executor model the detailed engine is far off (what docs/fidelity.md reported
/// before it): the model, not luck, makes the tests above pass.
#[test]
fn own_one_shot_needs_the_executor_model() {
    let cfg = sim::SimConfig {
        exec: None,
        ..Default::default()
    };
    let r = sim::fidelity::compare_own_one_shot(
        &h200x2_measured_topo(),
        &sim::fidelity::OWN_DIRECT_H200X2[..],
        &cfg,
    )
    .unwrap();
    let big = r.iter().find(|x| x.bytes == 1 << 30).unwrap();
    assert!(big.error > 1.0, "{:+.1}%", big.error * 100.0);
}

fn ce_rows(points: &[(u64, f64)], chunk: u64, exec: sim::ExecParams) -> Vec<sim::fidelity::Row> {
    let cfg = sim::SimConfig {
        exec: Some(exec),
        ..Default::default()
    };
    sim::fidelity::compare_own_ce(&h200x2_measured_topo(), points, chunk, &cfg).unwrap()
}

/// The copy-engine pair all-reduce (`ce_pair`, `OWN_CE_PAIR_H200X2`, 16 MiB–1 GiB) against the
/// defaults (`ce_launch_us` 49.0, `ce_gbps` 348, fitted on these points by `exec_fit`, with
/// `ce_link_efficiency` 1.0 and the pipeline's channel 0 interleaving send j and receive j)
/// within the fit's worst error rounded up: 1.6% → 2% (docs/fidelity.md).
#[test]
fn own_ce_pair_within_fitted_error() {
    let r = ce_rows(
        &sim::fidelity::OWN_CE_PAIR_H200X2[..],
        sim::fidelity::CE_CHUNK_BYTES,
        sim::ExecParams::default(),
    );
    assert_eq!(r.len(), 5);
    assert_within(&r, 0, 0.02);
}

/// The copy-engine refit matters: with the previous lowering's terms (`ce_launch_us` 12.0,
/// `ce_gbps` 199, in `direct_fenced_h200x2`) the pair measurements are off by more than 50% at
/// 1 GiB (+72.7%).
#[test]
fn own_ce_pair_needs_the_refit() {
    let r = ce_rows(
        &sim::fidelity::OWN_CE_PAIR_H200X2[..],
        sim::fidelity::CE_CHUNK_BYTES,
        sim::ExecParams::direct_fenced_h200x2(),
    );
    let big = r.iter().find(|x| x.bytes == 1 << 30).unwrap();
    assert!(big.error > 0.5, "{:+.1}%", big.error * 100.0);
}

/// The link cap matters: with the copy-engine link efficiency of before (0.82 of the loaded
/// 370.8 GB/s = 304 GB/s, below the fitted 348) the defaults are +15.5% at 1 GiB.
#[test]
fn own_ce_pair_needs_the_full_link() {
    let cfg = sim::SimConfig {
        ce_link_efficiency: 0.82,
        ..Default::default()
    };
    let r = sim::fidelity::compare_own_ce(
        &h200x2_measured_topo(),
        &sim::fidelity::OWN_CE_PAIR_H200X2[..],
        sim::fidelity::CE_CHUNK_BYTES,
        &cfg,
    )
    .unwrap();
    let big = r.iter().find(|x| x.bytes == 1 << 30).unwrap();
    assert!(big.error > 0.05, "{:+.1}%", big.error * 100.0);
}

/// The overlap matters: the same pipeline with channel 0 listing every send before the receives
/// (the builder's order before; every reduce then waits for every copy) is +34.4% at 1 GiB with
/// the defaults.
#[test]
fn own_ce_pair_needs_the_interleaved_pipeline() {
    use planner::schedule::{build, Collective, CollectiveKind, OpKind, OpRef};
    let bytes = 1u64 << 30;
    let k = bytes.div_ceil(sim::fidelity::CE_CHUNK_BYTES) as u32;
    let mut s =
        build::copy_engine_pipeline(&Collective::new(CollectiveKind::AllReduce), k).unwrap();
    for rp in &mut s.ranks {
        let ops = &mut rp.channels[0].ops;
        let (mut sends, recvs): (Vec<_>, Vec<_>) =
            ops.drain(..).partition(|o| o.kind == OpKind::Send);
        sends.extend(recvs);
        *ops = sends;
        for (j, op) in rp.channels[1].ops.iter_mut().skip(1).enumerate() {
            op.deps = vec![OpRef {
                channel: 0,
                index: k + j as u32,
            }];
        }
    }
    s.validate().unwrap();
    let measured = &sim::fidelity::OWN_CE_PAIR_H200X2[..]
        .iter()
        .find(|x| x.0 == bytes)
        .unwrap()
        .1;
    let r = sim::simulate(
        &h200x2_measured_topo(),
        &s,
        bytes,
        &sim::SimConfig::default(),
    )
    .unwrap();
    let error = (r.time_us - measured) / measured;
    assert!(error > 0.1, "{:+.1}%", error * 100.0);
}

/// History: the previous, generic copy-engine lowering (`OWN_CE_H200X2_RUN3`, 16 MiB chunks)
/// against the terms fitted on it then (`ce_gbps` 199 at `ce_launch_us` 12.0, kept in
/// `direct_fenced_h200x2`). They were fitted (within 9.5%) when the pipeline schedule ran every
/// send before the receives; with send j and receive j interleaved the same terms predict run 3
/// −6.9% at 256 MiB and −23.9% at 1 GiB (run 3 slows per byte at 1 GiB, which no linear model
/// follows; run 2 of the same command is within 8.1%): the bound is that worst rounded up, 24%.
#[test]
fn own_generic_copy_engine_history_within_24_percent_of_run3() {
    let r = ce_rows(
        &sim::fidelity::OWN_CE_H200X2_RUN3[..],
        sim::fidelity::GENERIC_CE_CHUNK_BYTES,
        sim::ExecParams::direct_fenced_h200x2(),
    );
    assert_eq!(r.len(), 2);
    assert_within(&r, 0, 0.24);
}
