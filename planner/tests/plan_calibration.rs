//! The tuner against NCCL 2.28.3 measured on 2×H200 (tests/data/measurements/h200x2/): with the
//! candidates NCCL has (ring, tree), predicted time must stay within 20% of nccl-tests' time at
//! every size but one (the all-gather 8 KiB point is a 17 µs spike between 11.5 and 12.1 µs
//! neighbours), within 35% everywhere, and the mean absolute error within 10%. docs/tuner.md shows
//! the table.

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::{load_file, LoadOptions};
use planner::tuner::Filter;

fn measured(file: &str) -> Vec<(u64, f64)> {
    let text =
        std::fs::read_to_string(format!("../tests/data/measurements/h200x2/{file}")).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse().unwrap(), f[5].parse().unwrap())
        })
        // Size 0 is a no-op in NCCL (0.6 µs); the model starts at 8 bytes.
        .filter(|(b, _)| *b > 0)
        .collect()
}

/// The planner on NCCL's own topology dump of the measured 2×H200 machine.
fn h200x2_planner() -> Planner {
    let t = load_file(
        std::path::Path::new("../tests/data/measurements/h200x2/topo.xml"),
        &LoadOptions::default(),
    )
    .unwrap()
    .topology;
    Planner::new(&t).unwrap()
}

fn check(kind: CollectiveKind, file: &str) -> (f64, f64, usize) {
    let p = h200x2_planner();
    let f = Filter {
        algorithms: Some(vec![Algorithm::Ring, Algorithm::Tree]),
        protocols: None,
        channels: None,
    };
    let coll = Collective::new(kind);
    let mut worst: f64 = 0.0;
    let mut sum = 0.0;
    let mut over = 0;
    let m = measured(file);
    println!(
        "{:>12} {:>10} {:>10} {:>7}  choice",
        "bytes", "NCCL us", "model us", "error"
    );
    for &(b, t_meas) in &m {
        let c = p.choose_filtered(&coll, b, &f).unwrap();
        let err = (c.est_us - t_meas) / t_meas;
        println!(
            "{b:>12} {t_meas:>10.2} {:>10.2} {:>+6.1}%  {} {} x{}",
            c.est_us,
            err * 100.0,
            c.algorithm.name(),
            c.protocol.name(),
            c.channels
        );
        worst = worst.max(err.abs());
        over += (err.abs() > 0.20) as usize;
        sum += err.abs();
    }
    (worst, sum / m.len() as f64, over)
}

#[test]
fn all_reduce_model_tracks_nccl_on_h200x2() {
    let (worst, mean, over) = check(CollectiveKind::AllReduce, "all_reduce_g2.txt");
    println!(
        "all-reduce: worst {:.1}%, mean {:.1}%",
        worst * 100.0,
        mean * 100.0
    );
    assert!(worst < 0.35, "worst error {worst}");
    assert!(over <= 1, "{over} sizes off by more than 20%");
    assert!(mean < 0.10, "mean error {mean}");
}

#[test]
fn all_gather_model_tracks_nccl_on_h200x2() {
    let (worst, mean, over) = check(CollectiveKind::AllGather, "all_gather_g2.txt");
    println!(
        "all-gather: worst {:.1}%, mean {:.1}%",
        worst * 100.0,
        mean * 100.0
    );
    assert!(worst < 0.35, "worst error {worst}");
    assert!(over <= 1, "{over} sizes off by more than 20%");
    assert!(mean < 0.10, "mean error {mean}");
}

/// (size, algo column, out-of-place µs) rows of a `topoplan bench` log section: the lines
/// after the first line starting with `+` that contains `marker`, up to the next `+` line.
fn bench_rows(file: &str, marker: &str) -> Vec<(u64, String, f64)> {
    let path = format!("../docs/measurements/{file}");
    let text = std::fs::read_to_string(path).unwrap();
    let mut inside = false;
    let mut rows = Vec::new();
    for l in text.lines() {
        if l.starts_with('+') {
            if inside {
                break;
            }
            inside = l.contains(marker);
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if inside && f.len() > 7 && f[0].parse::<u64>().is_ok() {
            rows.push((
                f[0].parse().unwrap(),
                f[5].to_string(),
                f[6].parse().unwrap(),
            ));
        }
    }
    assert!(!rows.is_empty(), "no rows for {marker} in {file}");
    rows
}

/// Worst relative error of the tuner's `algo`/`proto` estimate over measured (size, µs) points.
/// The (size, µs) points of `bench_rows` whose `algo` column is `algo`.
fn algo_rows(rows: &[(u64, String, f64)], algo: &str) -> Vec<(u64, f64)> {
    rows.iter()
        .filter(|r| r.1 == algo)
        .map(|r| (r.0, r.2))
        .collect()
}

/// The (size, µs) points of a whole `auto` run of 8 B–1 GiB by regime: LL, pull mode, the push
/// path, the hybrid (16, 6, 4 and 2 sizes, asserted).
#[allow(clippy::type_complexity)]
fn auto_regimes(
    rows: &[(u64, String, f64)],
) -> (
    Vec<(u64, f64)>,
    Vec<(u64, f64)>,
    Vec<(u64, f64)>,
    Vec<(u64, f64)>,
) {
    let r = (
        algo_rows(rows, "one-shot-ll"),
        algo_rows(rows, "one-shot-pull"),
        algo_rows(rows, "one-shot"),
        algo_rows(rows, "one-shot+ce"),
    );
    assert_eq!((r.0.len(), r.1.len(), r.2.len(), r.3.len()), (16, 6, 4, 2));
    r
}

fn worst_error(algo: Algorithm, proto: Protocol, pts: &[(u64, f64)]) -> f64 {
    let p = h200x2_planner();
    let f = Filter::only(algo.clone(), proto);
    let coll = Collective::new(CollectiveKind::AllReduce);
    let mut worst: f64 = 0.0;
    for &(b, us) in pts {
        let c = p.choose_filtered(&coll, b, &f).unwrap();
        let err = (c.est_us - us) / us;
        println!(
            "{} {} {b:>11} measured {us:>8.2} model {:>8.2} {:+.1}%",
            algo.name(),
            proto.name(),
            c.est_us,
            err * 100.0
        );
        worst = worst.max(err.abs());
    }
    worst
}

/// The direct patterns are priced from topoplan's own executor: its one-shot all-reduce measured
/// on 2×H200 with relaxed credits (`docs/measurements/2026-11-30-h200x2-push-relaxed-credits/perf.log`),
/// on which the engine's executor terms (the profile's `sim.exec`, which the tuner reads) were
/// fitted: Simple within 3 %, LL within 8 % at every size.
#[test]
fn one_shot_model_tracks_topoplans_executor_on_h200x2() {
    let rows = bench_rows(
        "2026-11-30-h200x2-push-relaxed-credits/perf.log",
        "-b 8 -e 1G -f 2",
    );
    let (ll, simple) = (
        algo_rows(&rows, "one-shot-ll"),
        algo_rows(&rows, "one-shot"),
    );
    assert_eq!((ll.len(), simple.len()), (17, 11));
    assert!(worst_error(Algorithm::OneShot, Protocol::LL, &ll) < 0.08);
    // From 512 MiB the runtime runs the one-shot as its hybrid, and from 512 KiB to 16 MiB in
    // pull mode (below): the push path of this run is what the model prices between them.
    let push_only: Vec<(u64, f64)> = simple
        .into_iter()
        .filter(|p| p.0 > 16 << 20 && p.0 < 512 << 20)
        .collect();
    assert_eq!(push_only.len(), 4);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &push_only) < 0.03);
}

/// From 512 KiB to 16 MiB a one-shot all-reduce runs in pull mode
/// (`docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log`, the defaults): the model's Simple one-shot
/// estimate there is the pull fit (the profile's `tuner.pull_*`), within 3 % at every size.
#[test]
fn pull_model_tracks_topoplans_executor_on_h200x2() {
    let pts: Vec<(u64, f64)> = bench_rows(
        "2026-11-30-h200x2-pull-and-hybrid/perf.log",
        "-b 8 -e 1G -f 2",
    )
    .into_iter()
    .filter(|r| r.1 == "one-shot-pull")
    .map(|r| (r.0, r.2))
    .collect();
    assert_eq!(
        pts.iter().map(|p| p.0 >> 10).collect::<Vec<_>>(),
        [512, 1024, 2048, 4096, 8192, 16384]
    );
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &pts) < 0.03);
}

/// From 512 MiB a 2-GPU one-shot all-reduce runs as the hybrid (half on the copy engines): the
/// model's one-shot estimate there is the hybrid's, fitted exactly on its two measured sizes, and
/// the same run's 256 MiB (SM path alone) the push path's, as the engine's executor prices it
/// (+2.6 %: the executor runs the GPU at its fitted 348 GB/s from 1 MiB up).
#[test]
fn hybrid_model_tracks_topoplans_executor_on_h200x2() {
    let pts: Vec<(u64, f64)> = bench_rows(
        "2026-11-30-h200x2-hybrid-adoption/hybrid-vs-nccl.log",
        "TOPOPLAN_HYBRID_CE_PCT=50",
    )
    .into_iter()
    .map(|r| (r.0, r.2))
    .collect();
    assert_eq!(pts.len(), 3);
    let (sm, hybrid): (Vec<_>, Vec<_>) = pts.into_iter().partition(|p| p.0 < 512 << 20);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &hybrid) < 0.01);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &sm) < 0.03);
}

/// The copy-engine pipeline is priced from topoplan's copy-engine pair all-reduce with its
/// default 64 MiB chunks (`docs/measurements/2026-11-30-h200x2-ce-pair/chunks.log`): within 3 % at 2 MiB–512 MiB.
#[test]
fn copy_engine_model_tracks_topoplans_executor_on_h200x2() {
    let pts: Vec<(u64, f64)> = bench_rows(
        "2026-11-30-h200x2-ce-pair/chunks.log",
        "TOPOPLAN_CE_CHUNK_MB=64",
    )
    .into_iter()
    .map(|r| (r.0, r.2))
    .collect();
    assert_eq!(pts.len(), 5);
    assert!(worst_error(Algorithm::CopyEnginePipeline, Protocol::Simple, &pts) < 0.03);
}

/// Out of sample: a whole `auto` run after one thread per Simple sender CTA fences a segment
/// (`docs/measurements/2026-11-30-h200x2-allreduce-segment-fence/perf.log`), which none of the fits saw:
/// the model still prices every regime the runtime ran, LL within 8 %, pull mode and the push
/// path within 3 %, the hybrid within 2 %.
#[test]
fn models_track_segment_fence_run() {
    let rows = bench_rows(
        "2026-11-30-h200x2-allreduce-segment-fence/perf.log",
        "-b 8 -e 1G -f 2",
    );
    let (ll, pull, push, hybrid) = auto_regimes(&rows);
    assert!(worst_error(Algorithm::OneShot, Protocol::LL, &ll) < 0.08);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &pull) < 0.03);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &push) < 0.03);
    assert!(worst_error(Algorithm::OneShot, Protocol::Simple, &hybrid) < 0.02);
}

/// Out of sample: a whole `auto` run with more samples
/// (`docs/measurements/2026-11-30-h200x2-allreduce-one-and-two-procs/perf.log`, medians of 5 runs
/// of 50 calls to 64 MiB, of 20 from 128 MiB), which none of the fits saw. This run's small calls
/// are faster than the segment-fence run's (LL 4.34–4.60 µs up to 4 KiB; pull mode
/// 6.98 µs at 512 KiB against 7.36), so the tuner runs high there: LL within 10.5 % (10.0 %),
/// pull mode within 6.5 % (6.1 %); the push path within 3.5 % (3.1 %) and the hybrid within
/// 0.5 %. (The one-shot is priced as the engine's executor runs it; the tuner's own fit of the
/// push path, which the engine does not share, was within 2 %.)
#[test]
fn models_track_one_process_run() {
    let errs = whole_run_errors("2026-11-30-h200x2-allreduce-one-and-two-procs/perf.log");
    assert!(errs[0] < 0.105, "{errs:?}");
    assert!(errs[1] < 0.065, "{errs:?}");
    assert!(errs[2] < 0.035, "{errs:?}");
    assert!(errs[3] < 0.005, "{errs:?}");
}

/// The tuner's worst error per regime (LL, pull, push, hybrid) on a whole `auto` run's log (its
/// `-b 8 -e 64M -f 2` and `-b 128M -e 1G -f 2` tables).
fn whole_run_errors(log: &str) -> [f64; 4] {
    let mut rows = bench_rows(log, "-b 8 -e 64M -f 2");
    rows.extend(bench_rows(log, "-b 128M -e 1G -f 2"));
    let (ll, pull, push, hybrid) = auto_regimes(&rows);
    let errs = [
        worst_error(Algorithm::OneShot, Protocol::LL, &ll),
        worst_error(Algorithm::OneShot, Protocol::Simple, &pull),
        worst_error(Algorithm::OneShot, Protocol::Simple, &push),
        worst_error(Algorithm::OneShot, Protocol::Simple, &hybrid),
    ];
    println!("{log}: worst errors: LL, pull, push, hybrid {errs:?}");
    errs
}

/// Out of sample: the run after the in-place hybrid's halves share SMs
/// (`docs/measurements/2026-11-30-h200x2-allreduce-shared-sm-hybrid/perf.log`, the same counts): LL within 8 % (7.3 %: its small calls again ran faster than
/// the fitted runs), pull mode within 6.5 % (6.3 %), the push path 3 % (2.9 %), the hybrid
/// 0.5 % (0.3 %).
#[test]
fn models_track_shared_sm_hybrid_run() {
    let errs = whole_run_errors("2026-11-30-h200x2-allreduce-shared-sm-hybrid/perf.log");
    assert!(errs[0] < 0.08, "{errs:?}");
    assert!(errs[1] < 0.065, "{errs:?}");
    assert!(errs[2] < 0.03, "{errs:?}");
    assert!(errs[3] < 0.005, "{errs:?}");
}

/// Out of sample: the current runtime, whose hybrid's copy-engine tail chunk is 8 MiB
/// (`docs/measurements/2026-11-30-h200x2-allreduce-vs-nccl/perf.log`, the same counts): LL within
/// 8.5 % (7.8 %: small calls at 4.3–4.5 µs, faster than the fitted runs, as in the two above), pull mode within
/// 5 % (4.6 %), the push path 3 % (2.8 %), the hybrid 0.5 % (0.3 %).
#[test]
fn models_track_8mib_tail_run() {
    let errs = whole_run_errors("2026-11-30-h200x2-allreduce-vs-nccl/perf.log");
    assert!(errs[0] < 0.085, "{errs:?}");
    assert!(errs[1] < 0.05, "{errs:?}");
    assert!(errs[2] < 0.03, "{errs:?}");
    assert!(errs[3] < 0.005, "{errs:?}");
}

/// The tuner prices with the machine profile it is given: the bundled one on this machine, and
/// a `--profile` whose launch costs are 1 µs higher (the tuner's, and the executor's that its
/// one-shot reads from the engine's terms) moves every estimate by exactly 1 µs.
#[test]
fn tuner_reads_the_machine_profile() {
    let p = h200x2_planner();
    assert!(matches!(
        p.profile().source,
        planner::tuner::ProfileSource::Bundled { .. }
    ));
    let t = load_file(
        std::path::Path::new("../tests/data/measurements/h200x2/topo.xml"),
        &LoadOptions::default(),
    )
    .unwrap()
    .topology;
    let mut prof = planner::tuner::Profile::bundled().clone();
    prof.tuner.launch_us += 1.0;
    for k in ["launch_simple_us", "launch_ll_us", "pull_launch_us"] {
        let x = &mut prof.sim["exec"][k];
        *x = serde_json::json!(x.as_f64().unwrap() + 1.0);
    }
    prof.tuner.engine = planner::tuner::EngineTerms::of(&prof.sim);
    let q = Planner::with_profile(&t, Some((prof, "slow.json".into()))).unwrap();
    assert!(q.profile().note().contains("slow.json"));
    let coll = Collective::new(CollectiveKind::AllReduce);
    for bytes in [8u64, 1 << 20, 1 << 30] {
        let (a, b) = (p.choose(&coll, bytes), q.choose(&coll, bytes));
        assert_eq!(
            (a.algorithm.clone(), a.protocol),
            (b.algorithm.clone(), b.protocol)
        );
        assert!(
            (b.est_us - a.est_us - 1.0).abs() < 1e-9,
            "{bytes}: {} {}",
            a.est_us,
            b.est_us
        );
    }
}
