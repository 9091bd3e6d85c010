//! `--as nccl`: NCCL 2.28's own choices and their simulated time, against what NCCL printed and
//! measured on 2×H200 (tests/data/measurements/h200x2/) and published 8×H100 figures.

mod common;

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, OpKind, Protocol};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use sim::fidelity::{compare_as_nccl, parse_nccl_tests, Row};
use sim::nccl::{Algo, Model};
use sim::SimConfig;

fn data(p: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(p)
}

fn load(p: &str) -> Topology {
    load_file(&data(p), &LoadOptions::default())
        .unwrap()
        .topology
}

fn h200() -> (Topology, Planner) {
    let t = common::topo();
    let p = Planner::new(&t).unwrap();
    (t, p)
}

fn rows(kind: CollectiveKind, file: &str) -> Vec<Row> {
    let (t, p) = h200();
    let text = std::fs::read_to_string(data(&format!("measurements/h200x2/{file}"))).unwrap();
    let m = parse_nccl_tests(&text, file).unwrap();
    compare_as_nccl(&t, &p, kind, &m, &Filter::default(), &SimConfig::default()).unwrap()
}

/// NCCL's tuning table as the model derives it equals what NCCL printed on the machine
/// (tests/data/measurements/h200x2/README.md; `docs/nccl-model.md`), every entry.
#[test]
fn tuning_table_matches_what_nccl_printed_on_h200x2() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    assert_eq!(
        (
            m.ring.search_channels,
            m.comm_channels,
            m.tree.search_channels
        ),
        (12, 24, 12)
    );
    let ar = m.table(CollectiveKind::AllReduce);
    let want_ring = [(7.8, 141.0), (17.8, 331.2), (15.2, 360.0)];
    let want_tree = [(8.0, 61.1), (16.5, 180.6), (16.4, 232.2)];
    for i in 0..3 {
        let (l, b) = ar[1][i].unwrap();
        assert!(
            (l - want_ring[i].0).abs() < 0.05 && (b - want_ring[i].1).abs() < 0.05,
            "ring {i}: {l} {b}"
        );
        let (l, b) = ar[0][i].unwrap();
        assert!(
            (l - want_tree[i].0).abs() < 0.05 && (b - want_tree[i].1).abs() < 0.05,
            "tree {i}: {l} {b}"
        );
    }
    let ag = m.table(CollectiveKind::AllGather);
    for (i, w) in [(7.2, 282.0), (15.9, 662.4), (11.8, 720.0)]
        .into_iter()
        .enumerate()
    {
        let (l, b) = ag[1][i].unwrap();
        assert!(
            (l - w.0).abs() < 0.05 && (b - w.1).abs() < 0.05,
            "ag {i}: {l} {b}"
        );
        assert!(ag[0][i].is_none(), "no tree all-gather");
    }
    let bc = m.table(CollectiveKind::Broadcast);
    for (i, w) in [(7.2, 141.0), (15.9, 331.2), (11.8, 360.0)]
        .into_iter()
        .enumerate()
    {
        let (l, b) = bc[1][i].unwrap();
        assert!(
            (l - w.0).abs() < 0.05 && (b - w.1).abs() < 0.05,
            "bcast {i}: {l} {b}"
        );
    }
}

/// NCCL's log on the machine: 8 B ring LL on 1 channel, 32 KiB on 4, 128 KiB on 16, 512 KiB
/// on 24, ring Simple on 24 from 2 MiB (`src/enqueue.cc`, `topoGetAlgoInfo`).
#[test]
fn choices_match_nccls_log_on_h200x2() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    for (bytes, proto, ch) in [
        (8u64, Protocol::LL, 1),
        (32 << 10, Protocol::LL, 4),
        (128 << 10, Protocol::LL, 16),
        (512 << 10, Protocol::LL, 24),
        (2 << 20, Protocol::Simple, 24),
        (1 << 30, Protocol::Simple, 24),
    ] {
        let c = m
            .choose(CollectiveKind::AllReduce, bytes, &Filter::default())
            .unwrap();
        assert_eq!(
            (c.algo, c.protocol, c.channels),
            (Algo::Ring, proto, ch),
            "{bytes} B"
        );
    }
}

/// Threads per channel as NCCL 2.28 sets them (`topoGetAlgoInfo`): a ring halves its threads
/// with the size down to two warps, raised to three; Simple rings add a sync warp (512 + 32);
/// a tree runs all 640 whatever the size, its reduce and broadcast halves splitting them.
#[test]
fn threads_follow_nccls_rule_on_h200x2() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    for (algo, proto, bytes, threads) in [
        (Algo::Ring, Protocol::LL, 8u64, 96),
        (Algo::Ring, Protocol::LL, 1 << 20, 512),
        (Algo::Ring, Protocol::LL128, 1 << 30, 640),
        (Algo::Ring, Protocol::Simple, 1 << 30, 544),
        (Algo::Tree, Protocol::LL, 8, 640),
        (Algo::Tree, Protocol::LL128, 1 << 30, 640),
        (Algo::Tree, Protocol::Simple, 1 << 20, 640),
    ] {
        assert_eq!(
            m.channels_for(algo, proto, bytes).1,
            threads,
            "{algo:?} {proto:?} {bytes}"
        );
    }
}

/// NCCL's tree root receives, reduces and sends the sum down in one pass of all its threads
/// (`runTreeSplit`, `directRecvReduceCopyDirectSend`): the schedule `--as nccl` runs has no
/// separate receive-and-reduce pass at the root, and runs faster than the IR's two-step root.
#[test]
fn tree_root_receives_reduces_and_sends_in_one_pass() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let coll = Collective::as_nccl_tests(CollectiveKind::AllReduce, 2, 0);
    let f = Filter::only(Algorithm::Tree, Protocol::Simple);
    let bytes = 16u64 << 20;
    let c = m.choose(CollectiveKind::AllReduce, bytes, &f).unwrap();
    let fused = m.schedule(&p, &coll, &c, 4).unwrap();
    let mut split = p
        .schedule(&coll, &Algorithm::Tree, Protocol::Simple, Some(c.channels))
        .unwrap();
    sim::nccl::chunk(&mut split, 4);
    let ops = |s: &planner::schedule::Schedule| {
        s.ranks
            .iter()
            .flat_map(|r| {
                r.channels
                    .iter()
                    .flat_map(|ch| ch.ops.iter().map(|o| o.kind))
            })
            .filter(|k| *k == OpKind::RecvReduceCopy)
            .count()
    };
    assert_eq!(ops(&fused), 0);
    assert!(ops(&split) > 0);
    let cfg = SimConfig::default();
    let time = |s: &planner::schedule::Schedule| sim::simulate(&t, s, bytes, &cfg).unwrap().time_us;
    let (a, b) = (time(&fused), time(&split));
    assert!(a < b - 1.0, "fused {a:.2} µs, split {b:.2} µs");
}

fn worst(r: &[Row], from: u64) -> f64 {
    r.iter()
        .filter(|x| x.bytes >= from)
        .map(|x| x.error.abs())
        .fold(0.0, f64::max)
}

fn median(r: &[Row]) -> f64 {
    sim::fidelity::median_abs_error(r)
}

/// The fitted curves (out-of-place times; the fit also saw the in-place times where NCCL runs
/// LL): all-reduce within 15 % at every size (+12.5 % at 128 B, a dip of the measured curve to
/// 11.6 µs between 12.9 and 12.5; +13.5 % at 512 KiB, where LL's two-byte lines and NCCL's LL
/// ceiling make the model's largest LL call slower than measured; every other size within
/// 10 %), median within 5 %; all-gather within 11 % from 2 MiB (+10.7 % at 2 MiB, the same LL miss), its LL range within 30 %
/// (two spikes of the measured curve, 8 KiB at 17.3 µs between 11.5 and 12.1, 512 B at 14.1)
/// and median within 5 %. `docs/fidelity.md` has the tables.
#[test]
fn fitted_curves_within_stated_error() {
    let ar = rows(CollectiveKind::AllReduce, "all_reduce_g2.txt");
    let ag = rows(CollectiveKind::AllGather, "all_gather_g2.txt");
    assert_eq!((ar.len(), ag.len()), (15, 14));
    assert!(worst(&ar, 0) < 0.15, "{}", sim::fidelity::markdown(&ar));
    let others = ar
        .iter()
        .filter(|x| x.bytes != 128 && x.bytes != 512 << 10)
        .map(|x| x.error.abs());
    assert!(
        others.fold(0.0, f64::max) < 0.10,
        "{}",
        sim::fidelity::markdown(&ar)
    );
    assert!(median(&ar) < 0.05, "{}", sim::fidelity::markdown(&ar));
    assert!(
        worst(&ag, 2 << 20) < 0.11,
        "{}",
        sim::fidelity::markdown(&ag)
    );
    assert!(worst(&ag, 0) < 0.30, "{}", sim::fidelity::markdown(&ag));
    assert!(median(&ag) < 0.05, "{}", sim::fidelity::markdown(&ag));
}

/// Published 8×H100 figures, ring forced: NCCL's ring all-reduce reaches 365–370 GB/s busbw
/// at 1 GiB and above (NVIDIA/nccl#1455; NVIDIA/nccl-tests#212, where NCCL's maintainer gives
/// ~370 GB/s as the effective NVLink rate seen with NCCL_ALGO=RING). The topologies are real
/// 8-GPU NVSwitch dumps; their profile is derived (uncalibrated there).
#[test]
fn ring_all_reduce_on_8xh100_within_ten_percent_of_published_busbw() {
    for f in [
        "topologies/aws-p5-48xl-topo-2023.xml",
        "topologies/azure-ndv5-topo.xml",
    ] {
        let t = load(f);
        let p = Planner::new(&t).unwrap();
        let m = Model::new(&t, &p);
        assert!(matches!(
            p.profile().source,
            planner::tuner::ProfileSource::Derived { .. }
        ));
        let cfg = SimConfig::from_profile(&p.profile().profile, f).unwrap();
        let ring = Filter::algorithm(Algorithm::Ring);
        let coll = Collective::new(CollectiveKind::AllReduce);
        for bytes in [1u64 << 30, 4 << 30] {
            let r = m.run(&t, &p, &coll, bytes, &ring, &cfg).unwrap();
            let busbw = bytes as f64 / 1e3 / r.time_us * 2.0 * 7.0 / 8.0;
            let err = busbw / 367.5 - 1.0;
            println!(
                "{f} {bytes} B: busbw {busbw:.1} GB/s ({:+.1}%)",
                err * 100.0
            );
            assert!(err.abs() < 0.10, "{f} {bytes} B: busbw {busbw:.1}");
            assert!(
                r.choice.notes.iter().any(|n| n.contains("NVLS")),
                "NVLS is named as out of scope"
            );
        }
    }
}

/// Every collective has an NCCL choice and a time on one host and across hosts, growing with
/// size; forced algorithm × protocol pairs run for all-reduce.
#[test]
fn every_collective_and_forced_pair_runs() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    for kind in [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
        CollectiveKind::AllToAll,
        CollectiveKind::SendRecv,
    ] {
        let coll = Collective::as_nccl_tests(kind, 2, 0);
        let mut last = 0.0;
        for bytes in [64u64, 1 << 20, 64 << 20] {
            let r = m
                .run(&t, &p, &coll, bytes, &Filter::default(), &cfg)
                .unwrap();
            assert!(
                r.time_us > last,
                "{kind:?} {bytes}: {} after {last}",
                r.time_us
            );
            last = r.time_us;
        }
    }
    let coll = Collective::new(CollectiveKind::AllReduce);
    for a in [Algorithm::Ring, Algorithm::Tree] {
        for pr in Protocol::ALL {
            let f = Filter::only(a.clone(), pr);
            let r = m.run(&t, &p, &coll, 1 << 20, &f, &cfg).unwrap();
            assert_eq!(r.choice.protocol, pr);
            assert_eq!(r.choice.algo == Algo::Tree, a == Algorithm::Tree);
        }
    }
    // Tree is all-reduce only, as in NCCL.
    let f = Filter::algorithm(Algorithm::Tree);
    assert!(m.choose(CollectiveKind::AllGather, 1 << 20, &f).is_none());
}

/// Across hosts: a rail cluster of 4 × 8 GPUs runs NCCL's ring with the doubled channels and
/// names CollNet as out of scope.
#[test]
fn runs_across_hosts() {
    let t = sim::reference::rail_cluster(4, 8, 370.8, 50.0);
    let p = Planner::new(&t).unwrap();
    let m = Model::new(&t, &p);
    assert_eq!(m.nnodes, 4);
    let coll = Collective::new(CollectiveKind::AllReduce);
    let r = m
        .run(
            &t,
            &p,
            &coll,
            256 << 20,
            &Filter::default(),
            &SimConfig::default(),
        )
        .unwrap();
    assert!(r.time_us > 0.0 && r.choice.notes.iter().any(|n| n.contains("CollNet")));
    // Each rank's NIC bounds a ring all-reduce: 2(n−1)/n × S at 50 GB/s at best.
    let bound = 2.0 * 31.0 / 32.0 * (256u64 << 20) as f64 / 50.0 / 1e3;
    assert!(r.time_us > bound, "{} < {bound}", r.time_us);
}

/// Consistency: where the planner's tuner and the engine price the same schedule (the ring
/// NCCL would run: its protocol, the same channel count, on 2×H200), they agree within 10 %.
#[test]
fn engine_and_tuner_agree_on_the_same_schedule() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    let ring = Filter::algorithm(Algorithm::Ring);
    let mut compared = 0;
    for kind in [CollectiveKind::AllReduce, CollectiveKind::AllGather] {
        let coll = Collective::new(kind);
        let mut bytes = 8u64;
        while bytes <= 2 << 30 {
            let proto = m.choose(kind, bytes, &ring).unwrap().protocol;
            let f = Filter::only(Algorithm::Ring, proto);
            let tuner = p.choose_filtered(&coll, bytes, &f).unwrap();
            let r = m.run(&t, &p, &coll, bytes, &f, &cfg).unwrap();
            bytes *= 4;
            if r.choice.channels != tuner.channels {
                continue;
            }
            let d = r.time_us / tuner.est_us - 1.0;
            println!(
                "{} {} {} x{}: engine {:.2} tuner {:.2} ({:+.1}%)",
                kind.name(),
                bytes / 4,
                proto.name(),
                tuner.channels,
                r.time_us,
                tuner.est_us,
                d * 100.0
            );
            assert!(d.abs() < 0.10, "{} {}: {d:+.3}", kind.name(), bytes / 4);
            compared += 1;
        }
    }
    assert!(
        compared >= 12,
        "only {compared} points priced the same schedule"
    );
}

/// 8×H800 (NVSwitch, 8 NVLinks per GPU: 164.8 GB/s as loaded): the ring all-reduce at 1 GiB runs
/// at what H800 NVLink achieves one way, 160 GB/s as DeepSeek measured it
/// (deepseek-ai/DeepSeek-V3#28: "160GB/s is our one-way measurement"), within 10 %: a ring's
/// busbw is its per-direction link rate. Profile derived (uncalibrated there).
#[test]
fn ring_all_reduce_on_8xh800_within_ten_percent_of_measured_nvlink() {
    let f = "topologies/github-yccl-8xh800-nvswitch-topo.xml";
    let t = load(f);
    let p = Planner::new(&t).unwrap();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::from_profile(&p.profile().profile, f).unwrap();
    let ring = Filter::algorithm(Algorithm::Ring);
    let bytes = 1u64 << 30;
    let r = m
        .run(
            &t,
            &p,
            &Collective::new(CollectiveKind::AllReduce),
            bytes,
            &ring,
            &cfg,
        )
        .unwrap();
    let busbw = bytes as f64 / 1e3 / r.time_us * 2.0 * 7.0 / 8.0;
    println!("{f}: busbw {busbw:.1} GB/s");
    assert!((busbw / 160.0 - 1.0).abs() < 0.10, "busbw {busbw:.1}");
}

/// NCCL's p2p channel rule (`addP2pToPlan`) on 2×H200 (32 p2p channels, 32 per peer, as its log
/// prints). The protocol comes first: LL while the transfer is at most 16 KiB per channel a peer
/// may use (32 × 16 KiB = 512 KiB), however few channels it then runs on. A transfer starts from
/// 16 channels (two ranks' transfers fit 32) and takes one per eighth of its protocol's step:
/// 8 KiB in LL (a 64 KiB slot, flags included), 64 KiB in Simple (512 KiB chunks); it doubles to
/// 32 once a part would pass 32 steps (16 MiB). All-to-all's transfers are 1/n of the size.
#[test]
fn p2p_channels_follow_nccls_rule_on_h200x2() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    assert_eq!((m.p2p_channels, m.p2p_channels_per_peer), (32, 32));
    for (bytes, ch) in [
        (0u64, 1),
        (8, 1),
        (8 << 10, 1),
        ((8 << 10) + 4, 2),
        (32 << 10, 4),
        (128 << 10, 16),
        (512 << 10, 16),
        ((512 << 10) + 4096, 9),
        (1 << 20, 16),
        (256 << 20, 16),
        ((256 << 20) + 4096, 32),
        (4 << 30, 32),
    ] {
        assert_eq!(m.p2p_op_channels(bytes), ch, "{bytes} B");
    }
    let f = Filter::default();
    for (kind, bytes, proto, ch) in [
        (CollectiveKind::SendRecv, 16 << 10, Protocol::LL, 2),
        (CollectiveKind::SendRecv, 32 << 10, Protocol::LL, 4),
        (CollectiveKind::SendRecv, 512 << 10, Protocol::LL, 16),
        (CollectiveKind::SendRecv, 1 << 20, Protocol::Simple, 16),
        (CollectiveKind::SendRecv, 1 << 30, Protocol::Simple, 32),
        (CollectiveKind::AllToAll, 32 << 10, Protocol::LL, 2),
        (CollectiveKind::AllToAll, 1 << 20, Protocol::LL, 16),
        (CollectiveKind::AllToAll, 2 << 20, Protocol::Simple, 16),
    ] {
        let c = m.choose(kind, bytes, &f).unwrap();
        assert_eq!(
            (c.algo, c.protocol, c.channels),
            (Algo::P2p, proto, ch),
            "{kind:?} {bytes}"
        );
    }
}

/// Striped over its LL channels, 128 KiB costs NCCL's p2p little more than 8 B does: each of
/// 16 channels carries one 8 KiB part in one LL step.
#[test]
fn p2p_ll_moves_128k_in_about_the_time_of_8_bytes() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    for kind in [CollectiveKind::SendRecv, CollectiveKind::AllToAll] {
        let c = Collective::as_nccl_tests(kind, 2, 0);
        let f = Filter::default();
        let us = |b: u64| m.run(&t, &p, &c, b, &f, &cfg).unwrap().time_us;
        let (small, mid) = (us(8), us(128 << 10));
        assert!(
            mid < small * 1.1,
            "{kind:?}: 8 B {small:.2} µs, 128 KiB {mid:.2} µs"
        );
    }
}

/// Eight ranks on one NVSwitch host start from 4 channels a transfer (8 × 4 = 32 p2p channels)
/// and double while parts pass 16 MiB.
#[test]
fn p2p_channels_shrink_with_the_rank_count() {
    let t = load("topologies/aws-p5-48xl-topo-2023.xml");
    let p = Planner::new(&t).unwrap();
    let m = Model::new(&t, &p);
    assert_eq!(m.nranks, 8);
    let min = m.p2p_op_channels(m.p2p_channels_per_peer as u64 * (1 << 20));
    assert!(min * m.nranks <= m.p2p_channels, "{min}");
    assert!(m.p2p_op_channels(4 << 30) > min);
}

/// NCCL's times of the other collectives on 2×H200, as `topoplan bench --vs-nccl` measured
/// them (out of place; two runs of the same binary, within 1 % of each other), every size from
/// 32 MiB.
fn bench_nccl_times(file: &str) -> Vec<(CollectiveKind, u64, f64)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/measurements")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    sim::fidelity::parse_bench_nccl_log(&text, file)
        .unwrap()
        .into_iter()
        .filter(|p| p.1 >= 32 << 20)
        .collect()
}

/// Held out from the fit: reduce-scatter, broadcast and reduce from 32 MiB, against NCCL as
/// the bench timed it (all-gather, fitted, shown beside them). Broadcast and reduce run one way
/// on two GPUs (the profile's `one_way_gain`) in 512 KiB chunks (`ramp_size`); these
/// measurements informed those two rules, no parameter was fitted on them. Worst miss: reduce
/// at 32 MiB, +16 %; at 256 MiB every collective within 7 %. `docs/fidelity.md` has the table.
#[test]
fn other_collectives_match_nccl_as_the_bench_timed_it() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let cfg = SimConfig::default();
    for file in [
        "2026-11-30-h200x2-allreduce-shared-sm-hybrid/others.log",
        "2026-11-30-h200x2-push-relaxed-credits/others.log",
    ] {
        let points = bench_nccl_times(file);
        assert_eq!(points.len(), 8, "{file}: 4 collectives x 2 sizes");
        for (kind, bytes, us) in points {
            let coll = Collective::as_nccl_tests(kind, 2, 0);
            let r = m
                .run(&t, &p, &coll, bytes, &Filter::default(), &cfg)
                .unwrap();
            let err = r.time_us / us - 1.0;
            println!(
                "{file} {} {bytes}: measured {us:.1} predicted {:.1} ({:+.1}%)",
                kind.name(),
                r.time_us,
                err * 100.0
            );
            let bound = if bytes >= 256 << 20 { 0.07 } else { 0.20 };
            assert!(err.abs() < bound, "{} {bytes}: {err:+.3}", kind.name());
        }
    }
}

/// The bundled profile reproduces from the measurements stored with it: built as `topoplan
/// calibrate --nccl-tests all_reduce_g2.txt all_gather_g2.txt` builds its curves (out of place,
/// and in place where NCCL runs LL), no parameter the fit moves lowers the loss by a 1 % step,
/// the fit's last (docs/fidelity.md, "Calibration").
#[test]
fn the_bundled_profile_is_a_fixed_point_of_its_calibration() {
    let (t, p) = h200();
    let m = Model::new(&t, &p);
    let mut curves = Vec::new();
    let mut in_place = Vec::new();
    for (kind, file) in [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ] {
        let text = std::fs::read_to_string(data(&format!("measurements/h200x2/{file}"))).unwrap();
        let keep = |v: Vec<(u64, f64)>| v.into_iter().filter(|x| x.0 > 0).collect();
        curves.push(sim::calibrate::Curve {
            kind,
            points: keep(parse_nccl_tests(&text, file).unwrap()),
        });
        in_place.push(sim::calibrate::where_nccl_runs_ll(
            sim::calibrate::Curve {
                kind,
                points: keep(sim::fidelity::parse_nccl_tests_in_place(&text, file).unwrap()),
            },
            &m,
        ));
    }
    curves.extend(in_place);
    let params = sim::SimParams::bundled();
    let moved = sim::calibrate::improvable(&t, &p, &curves, params, 0.01).unwrap();
    assert!(moved.is_empty(), "the fit would still move {moved:?}");
}
