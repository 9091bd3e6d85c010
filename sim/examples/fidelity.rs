//! Prints the fidelity tables of docs/fidelity.md:
//! `cargo run --release -p sim --example fidelity [DATA_DIR]` (default
//! tests/data/measurements/h200x2).
use planner::schedule::CollectiveKind;
use planner::topology::Topology;
use sim::fidelity::*;
use sim::ExecParams;

/// Worst and mean |error| per protocol of `rows`, as a markdown table.
fn errors(rows: &[Row]) -> String {
    let mut s = String::from(
        "| protocol | points | worst \\|error\\| | mean \\|error\\| |\n|---|---:|---:|---:|\n",
    );
    for (p, n, worst, mean) in errors_by_protocol(rows) {
        s += &format!(
            "| {} | {n} | {:.1}% | {:.1}% |\n",
            p.name(),
            worst * 100.0,
            mean * 100.0
        );
    }
    s
}

/// `bytes` in MiB or KiB where it is a whole number of them.
fn size(bytes: u64) -> String {
    match bytes {
        b if b > 0 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b > 0 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The executor parameters as a markdown table.
fn params(x: &ExecParams) -> String {
    let pull = if x.pull_max_bytes > 0 && x.pull_gbps > 0.0 {
        format!(
            "| pull_min_bytes, pull_max_bytes | {}, {} |\n| pull_launch_us | {:.2} |\n\
             | pull_gbps | {:.0} |\n",
            size(x.pull_min_bytes),
            size(x.pull_max_bytes),
            x.pull_launch_us,
            x.pull_gbps
        )
    } else {
        "| pull mode | off |\n".to_string()
    };
    let hybrid = if x.hybrid_min_bytes > 0 && x.hybrid_gbps > 0.0 {
        format!(
            "| hybrid_min_bytes | {} |\n| hybrid_launch_us | {:.2} |\n| hybrid_gbps | {:.2} |\n",
            size(x.hybrid_min_bytes),
            x.hybrid_launch_us,
            x.hybrid_gbps
        )
    } else {
        "| hybrid | off |\n".to_string()
    };
    let push = format!(
        "| parameter | value |\n|---|---:|\n\
         | launch_simple_us | {:.2} |\n| launch_ll_us | {:.2} |\n| gpu_gbps | {:.0} |\n\
         | cta_gbps | {:.0} |\n| ll_gpu_gbps | {:.0} |\n\
         | cta_bytes, max_ctas | {} KiB, {} |\n| ll_cta_bytes, ll_ctas, ll_wire_factor | {} KiB, {}, {} |\n\
         | ce_launch_us | {:.1} |\n| ce_gbps | {:.0} |\n",
        x.launch_simple_us,
        x.launch_ll_us,
        x.gpu_gbps,
        x.cta_gbps,
        x.ll_gpu_gbps,
        x.cta_bytes >> 10,
        x.max_ctas,
        x.ll_cta_bytes >> 10,
        x.ll_ctas,
        x.ll_wire_factor,
        x.ce_launch_us,
        x.ce_gbps
    );
    push + &pull + &hybrid
}

fn worst(rows: &[Row]) -> f64 {
    rows.iter().map(|r| r.error.abs()).fold(0.0, f64::max)
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/data/measurements/h200x2".into());
    let cfg = sim::SimConfig::default();
    nccl_tables(&dir, &cfg);
    let own = planner::topology::load_file(
        std::path::Path::new("tests/data/measurements/h200x2/topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    one_shot_executor_tables(&own, &cfg);
    pull_table(&own, &cfg);
    hybrid_table(&own, &cfg);
    as_run_table(&own, &cfg);
    copy_engine_tables(&own, &cfg);
    copy_engine_chunk_table(&own, &cfg);
}

/// The default configuration with executor parameters `x`.
fn with(x: ExecParams) -> sim::SimConfig {
    sim::SimConfig {
        exec: Some(x),
        ..Default::default()
    }
}

/// NCCL's all-reduce and all-gather against nccl-tests' measurements in `dir`.
fn nccl_tables(dir: &str, cfg: &sim::SimConfig) {
    let topo = planner::topology::load_file(
        std::path::Path::new("tests/data/topologies/h200x2-topo.xml"),
        &Default::default(),
    )
    .expect("h200x2 topology")
    .topology;
    for (kind, file) in [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).expect("measurement file");
        let rows = compare(
            &topo,
            kind,
            &parse_nccl_tests(&text, file).expect("nccl-tests output"),
            cfg,
        )
        .expect("simulates");
        println!(
            "### {} ({file}); worst |error| {:.1}%\n",
            kind.name(),
            worst(&rows) * 100.0
        );
        println!("{}", markdown(&rows));
    }
}

/// Our one-shot all-reduce under each executor the runtime has had, with its parameters.
fn one_shot_executor_tables(own: &Topology, cfg: &sim::SimConfig) {
    let (fenced, pull) = (
        with(ExecParams::direct_fenced_h200x2()),
        with(ExecParams::pull_h200x2()),
    );
    for (name, points, cfg) in [
        (
            "direct-push executor, relaxed credits (OWN_DIRECT_H200X2, docs/measurements/2026-11-30-h200x2-push-relaxed-credits/perf.log), ExecParams::default",
            &OWN_DIRECT_H200X2[..],
            cfg,
        ),
        (
            "direct-push executor, fenced credits (OWN_DIRECT_FENCED_H200X2, docs/measurements/direct-run4.log at commit d7d5d68 for LL, direct-run5.log for Simple), ExecParams::direct_fenced_h200x2",
            &OWN_DIRECT_FENCED_H200X2[..],
            &fenced,
        ),
        (
            "previous pull-based executor, final run, ExecParams::pull_h200x2",
            &OWN_ONE_SHOT_H200X2[..],
            &pull,
        ),
        (
            "previous pull-based executor, run 3 (docs/measurements/run3-perf.log at commit d7d5d68), ExecParams::pull_h200x2",
            &OWN_ONE_SHOT_H200X2_RUN3[..],
            &pull,
        ),
    ] {
        let rows = compare_own_one_shot(own, points, cfg).expect("simulates");
        println!(
            "### topoplan one-shot all-reduce, CUDA runtime, {name}; worst |error| {:.1}%\n",
            worst(&rows) * 100.0
        );
        if let Some(x) = &cfg.exec {
            println!("{}", params(x));
        }
        println!("{}", errors(&rows));
        println!("{}", markdown(&rows));
    }
}

/// Pull mode as the runtime runs it, beside the push path's predictions for the same sizes.
fn pull_table(own: &Topology, cfg: &sim::SimConfig) {
    let rows = compare_own_as_run(own, &OWN_PULL_H200X2[..], cfg).expect("simulates");
    println!(
        "### topoplan one-shot all-reduce, CUDA runtime, pull mode (OWN_PULL_H200X2, docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log), ExecParams::default; worst |error| {:.1}%\n",
        worst(&rows) * 100.0
    );
    println!("{}", errors(&rows));
    // The same sizes on the push path (pull mode off), for comparison.
    let push = with(ExecParams::default().without_pull());
    let push_rows = compare_own_as_run(own, &OWN_PULL_H200X2[..], &push).expect("simulates");
    println!(
        "| size (B) | measured µs | predicted µs | error | predicted µs, pull mode off |\n|---:|---:|---:|---:|---:|"
    );
    for (r, p) in rows.iter().zip(&push_rows) {
        println!(
            "| {} | {:.2} | {:.2} | {:+.1}% | {:.2} |",
            r.bytes,
            r.measured_us,
            r.predicted_us,
            r.error * 100.0,
            p.predicted_us
        );
    }
    println!();
}

/// The hybrid (2 ranks, from 512 MiB per rank): fitted points, the adoption run's (not fitted
/// on), and the same sizes with the hybrid off (the SM push path alone).
fn hybrid_table(own: &Topology, cfg: &sim::SimConfig) {
    let rows = compare_own_as_run(own, &OWN_HYBRID_H200X2[..], cfg).expect("simulates");
    let out = compare_own_as_run(own, &OWN_HYBRID_H200X2_ADOPTION[..], cfg).expect("simulates");
    let sm = with(ExecParams::default().without_hybrid());
    let sm_rows = compare_own_as_run(own, &OWN_HYBRID_H200X2[..], &sm).expect("simulates");
    println!(
        "### topoplan one-shot all-reduce, CUDA runtime, hybrid (OWN_HYBRID_H200X2, docs/measurements/2026-11-30-h200x2-pull-and-hybrid/perf.log; OWN_HYBRID_H200X2_ADOPTION, docs/measurements/2026-11-30-h200x2-hybrid-adoption/hybrid-vs-nccl.log, not fitted on), ExecParams::default; worst |error| {:.2}%, adoption run {:.2}%\n",
        worst(&rows) * 100.0,
        worst(&out) * 100.0
    );
    println!(
        "| size (B) | measured µs | predicted µs | error | adoption run measured µs | error | predicted µs, hybrid off | error |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for ((r, o), s) in rows.iter().zip(&out).zip(&sm_rows) {
        assert_eq!((r.bytes, o.bytes), (s.bytes, s.bytes));
        println!(
            "| {} | {:.2} | {:.2} | {:+.2}% | {:.2} | {:+.2}% | {:.2} | {:+.1}% |",
            r.bytes,
            r.measured_us,
            r.predicted_us,
            r.error * 100.0,
            o.measured_us,
            o.error * 100.0,
            s.predicted_us,
            s.error * 100.0
        );
    }
    println!();
}

/// A whole `auto` run no fit saw (the segment-fence run): every regime at once.
fn as_run_table(own: &Topology, cfg: &sim::SimConfig) {
    let rows = compare_own_as_run_protocols(own, &OWN_AS_RUN_H200X2_SEGMENT_FENCE[..], cfg)
        .expect("simulates");
    println!(
        "### topoplan one-shot all-reduce as `auto` runs it, CUDA runtime (OWN_AS_RUN_H200X2_SEGMENT_FENCE, docs/measurements/2026-11-30-h200x2-allreduce-segment-fence/perf.log, not fitted on), ExecParams::default; worst |error| {:.1}%\n",
        worst(&rows) * 100.0
    );
    println!("{}", errors(&rows));
    println!("{}", markdown(&rows));
}

/// Our copy-engine all-reduce: the pair path and the previous generic lowering.
fn copy_engine_tables(own: &Topology, cfg: &sim::SimConfig) {
    let fenced = with(ExecParams::direct_fenced_h200x2());
    for (name, points, chunk, cfg) in [
        (
            "copy-engine pair (ce_pair, OWN_CE_PAIR_H200X2, docs/measurements/2026-11-30-h200x2-ce-pair/fit.log), ExecParams::default, 32 MiB chunks",
            &OWN_CE_PAIR_H200X2[..],
            CE_CHUNK_BYTES,
            cfg,
        ),
        (
            "previous generic copy-engine lowering, run 3 (docs/measurements/run3-perf.log at commit d7d5d68), ExecParams::direct_fenced_h200x2, 16 MiB chunks",
            &OWN_CE_H200X2_RUN3[..],
            GENERIC_CE_CHUNK_BYTES,
            &fenced,
        ),
        (
            "previous generic copy-engine lowering, run 2 (docs/measurements/run2-perf.log at commit d7d5d68), ExecParams::direct_fenced_h200x2, 16 MiB chunks",
            &OWN_CE_H200X2_RUN2[..],
            GENERIC_CE_CHUNK_BYTES,
            &fenced,
        ),
    ] {
        let rows = compare_own_ce(own, points, chunk, cfg).expect("simulates");
        println!(
            "### topoplan copy-engine all-reduce, CUDA runtime, {name}; worst |error| {:.1}%\n",
            worst(&rows) * 100.0
        );
        println!("{}", markdown(&rows));
    }
}

/// How the equal-chunk rule moves the copy-engine pair predictions (the runtime's chunks halve
/// towards the end of the message; the model's are equal).
fn copy_engine_chunk_table(own: &Topology, cfg: &sim::SimConfig) {
    let by_chunk: Vec<(u64, Vec<Row>)> = [16u64 << 20, CE_CHUNK_BYTES, 64 << 20]
        .into_iter()
        .map(|c| {
            let rows = compare_own_ce(own, &OWN_CE_PAIR_H200X2[..], c, cfg).expect("simulates");
            (c, rows)
        })
        .collect();
    println!(
        "### copy-engine pair (OWN_CE_PAIR_H200X2), ExecParams::default, predicted µs (error) by equal chunk size\n"
    );
    let mut head = String::from("| size (B) | measured µs |");
    let mut rule = String::from("|---:|---:|");
    for (c, _) in &by_chunk {
        head += &format!(" {} MiB chunks |", c >> 20);
        rule += "---:|";
    }
    println!("{head}\n{rule}");
    for (i, &(bytes, us)) in OWN_CE_PAIR_H200X2.iter().enumerate() {
        let mut line = format!("| {bytes} | {us:.2} |");
        for (_, rows) in &by_chunk {
            let r = &rows[i];
            line += &format!(" {:.2} ({:+.1}%) |", r.predicted_us, r.error * 100.0);
        }
        println!("{line}");
    }
    println!();
}
