//! `topoplan sim`: the simulator's prediction of a collective at every size, as an nccl-tests
//! style table, for the tuner's choice or a forced algorithm/protocol; `--trace` writes one run
//! as a Chrome/Perfetto trace.

use super::common::{
    collective, filter, load_config, load_profile, load_topology, parse_as, parse_kind,
    profile_config, simulate_nccl, simulate_size, As, Cache,
};
use super::error::{CliError, CliResult};
use super::sizes::{parse_size, SweepArgs};
use planner::plan::Planner;
use planner::schedule::{Collective, CollectiveKind};
use planner::topology::Topology;
use planner::tuner::Filter;
use sim::{Mode, SimConfig};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan sim tests/data/topologies/h200x2-topo.xml
  topoplan sim topo.xml -c all-gather -b 1K -e 1G -f 2
  topoplan sim topo.xml --algo ring --proto Simple --channels 8
  topoplan sim topo.xml -b 64M -e 64M --trace run.json   # open in ui.perfetto.dev
  topoplan sim cluster.json --mode aggregated --json
  topoplan sim topo.xml --as nccl                      # what NCCL 2.28 would run, and its time
  topoplan sim topo.xml --as both -b 1M -e 1G          # topoplan and NCCL side by side
  topoplan sim topo.xml --as nccl --algo ring --proto LL128   # NCCL_ALGO / NCCL_PROTO forced
  topoplan sim topo.xml --profile my.json              # a machine profile (docs/profile.md)
  topoplan sim topo.xml --gpus 0,2,5 --as both         # a communicator over three of the GPUs

The table lays beside an nccl-tests run: size and count as nccl-tests defines them (float
elements; all-gather/reduce-scatter/all-to-all sizes are the whole gathered buffer), time from
launch to the last rank's completion, algbw = size / time, busbw = algbw x 2(n-1)/n for
all-reduce, (n-1)/n for all-gather/reduce-scatter/all-to-all, 1 otherwise. The 'tuner' column is
the planner's own estimate for the same choice on the same channels (with --as nccl: NCCL's own
estimate). Every table names the machine profile that priced it. The model and its parameters: docs/sim.md.")]
pub struct Args {
    /// Topology file: NCCL XML or topoplan JSON (clusters from `topo scale`).
    pub file: PathBuf,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Channels for ring/tree (default: the tuner's count for each size).
    #[arg(long)]
    pub channels: Option<u32>,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: u32,
    /// Write a Chrome/Perfetto trace (JSON) of one run: the size given by --trace-size.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Size traced by --trace (default: the largest size of the sweep up to 64M).
    #[arg(long, value_parser = parse_size, requires = "trace")]
    pub trace_size: Option<u64>,
    /// Simulator parameters as JSON (see docs/sim.md): the fields given replace the profile's,
    /// the others keep theirs; an unknown field is an error.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed of the per-step jitter (with --jitter).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Relative per-step jitter, e.g. 0.05 (default 0: none).
    #[arg(long, default_value_t = 0.0)]
    pub jitter: f64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// GPU model for skeleton topology files (h100-sxm, a100-sxm, ...).
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Whose choices to simulate: topoplan (the planner's tuner and topoplan's runtime), nccl
    /// (NCCL 2.28's own ring/tree search, tuner, channels and chunking), or both side by side.
    #[arg(
        long = "as",
        default_value = "topoplan",
        value_name = "topoplan|nccl|both"
    )]
    pub as_: String,
    /// Machine profile (JSON, docs/profile.md); default: the bundled one where the topology
    /// matches it, else defaults derived from the topology.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// A communicator over these GPUs only (comma list of ranks; rank i is the i-th listed).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
}
pub fn run(a: Args) -> CliResult {
    let kind = parse_kind(&a.sweep.collective)?;
    let sizes = a.sweep.sizes.list()?;
    let who = parse_as(&a.as_)?;
    let given = load_profile(a.profile.as_deref())?;
    let f = filter(&a.sweep.algo, &a.sweep.proto)?;
    let topo = load_topology(&a.file, a.gpu_model.clone())?;
    let topo = super::common::communicator(topo, a.gpus.as_deref())?;
    super::common::check_ranks(topo.n_ranks(), super::common::MAX_SIM_RANKS, "sim")?;
    let planner = Planner::with_profile(&topo, given).map_err(CliError::input)?;
    let mut cfg = load_config(
        a.config.as_deref(),
        &a.sweep.mode,
        profile_config(planner.profile())?,
    )?;
    cfg.seed = a.seed;
    if !(a.jitter.is_finite() && (0.0..1.0).contains(&a.jitter)) {
        return Err(CliError::input("--jitter must be in [0, 1)"));
    }
    cfg.jitter = a.jitter;
    let n = planner.nranks();
    if a.root >= n {
        return Err(CliError::input(format!(
            "--root {} is not a rank (the topology has {n})",
            a.root
        )));
    }
    if let Some(c) = a.channels {
        super::common::check_channels(c)?;
    }
    let coll = collective(kind, n, a.root);
    if who != As::Topoplan && (a.channels.is_some() || a.trace.is_some()) {
        return Err(CliError::input(
            "--channels and --trace apply to topoplan's schedules: not with --as nccl or both",
        ));
    }
    if who != As::Topoplan {
        return run_nccl(&a, who, &topo, &planner, &coll, &f, &sizes, &cfg);
    }
    let mut cache = Cache::new();
    let mut rows = Vec::new();
    // Sizes the detailed engine would need minutes for (large asymmetric schedules) are listed
    // as skipped instead of aborting the table.
    let mut skipped: Vec<String> = Vec::new();
    for &b in &sizes {
        match simulate_size(&topo, &planner, &coll, &f, a.channels, b, &cfg, &mut cache) {
            Ok((row, _)) => rows.push(row),
            Err(CliError::Failure(m)) if m.contains("too large") => skipped.push(m),
            Err(e) => return Err(e),
        }
    }
    all_skipped(rows.is_empty(), &skipped)?;
    if let Some(path) = &a.trace {
        let size = a.trace_size.unwrap_or_else(|| {
            sizes
                .iter()
                .copied()
                .filter(|&s| s <= 64 << 20)
                .max()
                .unwrap_or(sizes[0])
        });
        let mut tcfg = cfg.clone();
        tcfg.trace = true;
        tcfg.mode = Mode::Detailed;
        let (row, r) = simulate_size(
            &topo, &planner, &coll, &f, a.channels, size, &tcfg, &mut cache,
        )?;
        let json = r.trace.map(|t| t.to_json()).unwrap_or_default();
        super::common::write_output(path, serde_json::to_vec(&json).map_err(CliError::failure)?)?;
        eprintln!(
            "trace of {} bytes ({} {} {}ch, {:.2} us) written to {}",
            size,
            row.algorithm,
            row.protocol,
            row.channels,
            row.time_us,
            path.display()
        );
    }
    if a.json {
        let out = serde_json::json!({
            "file": a.file.display().to_string(),
            "collective": coll,
            "nranks": n,
            "config": cfg,
            "profile": planner.profile().source,
            "rows": rows,
            "skipped": skipped,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(CliError::failure)?
        );
        return Ok(());
    }
    print_table(&a, &planner, &cfg, kind, &rows, &skipped);
    Ok(())
}

/// The nccl-tests style table of topoplan's rows.
fn print_table(
    a: &Args,
    planner: &Planner,
    cfg: &SimConfig,
    kind: CollectiveKind,
    rows: &[super::common::SimRow],
    skipped: &[String],
) {
    let n = planner.nranks();
    println!(
        "# topoplan sim {}: {} on {n} ranks, simulated ({} model; docs/sim.md)",
        a.file.display(),
        kind.name(),
        mode_name(cfg.mode)
    );
    println!("# {}", planner.profile().note());
    println!(
        "#{:>12} {:>12} {:>6} {:>6} {:>5}  {:>10} {:>6} {:>3}  {:>10} {:>8} {:>8}  {:>10}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "algo",
        "proto",
        "ch",
        "time",
        "algbw",
        "busbw",
        "tuner"
    );
    println!(
        "#{:>12} {:>12} {:>6} {:>6} {:>5}  {:>10} {:>6} {:>3}  {:>10} {:>8} {:>8}  {:>10}",
        "(B)", "(elements)", "", "", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)"
    );
    for m in skipped {
        println!("# skipped {m}");
    }
    let redop = if kind.reduces() { "sum" } else { "none" };
    let root: i64 = match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => a.root as i64,
        _ => -1,
    };
    for r in rows {
        println!(
            " {:>12} {:>12} {:>6} {:>6} {:>5}  {:>10} {:>6} {:>3}  {:>10.2} {:>8.2} {:>8.2}  {:>10.2}",
            r.bytes,
            r.count,
            "float",
            redop,
            root,
            r.algorithm,
            r.protocol,
            r.channels,
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps,
            r.tuner_us
        );
    }
}

/// A table whose every size was too large for the engine is no answer: exit 2 with the reason,
/// rather than an empty table that exits 0.
fn all_skipped(none_left: bool, skipped: &[String]) -> CliResult {
    match skipped.first() {
        Some(first) if none_left => Err(CliError::input(format!(
            "every size is too large to simulate ({first}); simulate fewer ranks (--gpus), or --mode aggregated for rings"
        ))),
        _ => Ok(()),
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Auto => "auto",
        Mode::Detailed => "detailed",
        Mode::Aggregated => "aggregated",
    }
}

/// `--as nccl` and `--as both`.
#[allow(clippy::too_many_arguments)]
fn run_nccl(
    a: &Args,
    who: As,
    topo: &Topology,
    planner: &Planner,
    coll: &Collective,
    f: &Filter,
    sizes: &[u64],
    cfg: &SimConfig,
) -> CliResult {
    let model = sim::nccl::Model::new(topo, planner);
    // NCCL_ALGO / NCCL_PROTO apply to NCCL's choice; topoplan's side of `both` is unfiltered.
    let mut nccl_rows = Vec::new();
    let mut ours = Vec::new();
    let mut skipped = Vec::new();
    let mut cache = Cache::new();
    for &b in sizes {
        match simulate_nccl(topo, planner, &model, coll, f, b, cfg) {
            Ok(r) => nccl_rows.push(r),
            Err(CliError::Failure(m)) if m.contains("too large") => {
                skipped.push(m);
                continue;
            }
            Err(e) => return Err(e),
        }
        if who == As::Both {
            let (row, _) = simulate_size(
                topo,
                planner,
                coll,
                &Filter::default(),
                None,
                b,
                cfg,
                &mut cache,
            )?;
            ours.push(row);
        }
    }
    all_skipped(nccl_rows.is_empty(), &skipped)?;
    let notes: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for r in &nccl_rows {
            for x in &r.notes {
                if !v.contains(x) {
                    v.push(x.clone());
                }
            }
        }
        v
    };
    if a.json {
        let out = serde_json::json!({
            "file": a.file.display().to_string(),
            "collective": coll,
            "nranks": planner.nranks(),
            "as": a.as_.to_ascii_lowercase(),
            "profile": planner.profile().source,
            "nccl_model": model,
            "nccl": nccl_rows,
            "topoplan": ours,
            "notes": notes,
            "skipped": skipped,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(CliError::failure)?
        );
        return Ok(());
    }
    let n = planner.nranks();
    println!(
        "# topoplan sim {}: {} on {n} ranks as NCCL 2.28 runs it (ring/tree search with channel doubling, NCCL's tuner, chunking; {} model; docs/sim.md)",
        a.file.display(),
        coll.kind.name(),
        mode_name(cfg.mode)
    );
    println!("# {}", planner.profile().note());
    println!(
        "# NCCL: {} ring channels searched x {:.1} GB/s, {} run; tree {} x {:.1} GB/s",
        model.ring.search_channels,
        model.ring.bw_intra_gbps,
        model.comm_channels,
        model.tree.search_channels,
        model.tree.bw_intra_gbps
    );
    for x in &notes {
        println!("# note: {x}");
    }
    for m in &skipped {
        println!("# skipped {m}");
    }
    if who == As::Nccl {
        print_nccl_rows(&nccl_rows);
    } else {
        print_both_rows(&ours, &nccl_rows);
    }
    Ok(())
}

/// `--as nccl`: NCCL's choice and time per size.
fn print_nccl_rows(nccl_rows: &[super::common::NcclRow]) {
    println!(
        "#{:>12}  {:>6} {:>6} {:>3} {:>4}  {:>10} {:>8} {:>8}  {:>10}",
        "size", "algo", "proto", "ch", "thr", "time", "algbw", "busbw", "nccl-model"
    );
    println!(
        "#{:>12}  {:>6} {:>6} {:>3} {:>4}  {:>10} {:>8} {:>8}  {:>10}",
        "(B)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)"
    );
    for r in nccl_rows {
        // NCCL's tuner does not price point-to-point: no estimate to show.
        let model = if r.algorithm == "p2p" {
            "-".to_string()
        } else {
            format!("{:.2}", r.nccl_model_us)
        };
        println!(
            " {:>12}  {:>6} {:>6} {:>3} {:>4}  {:>10.2} {:>8.2} {:>8.2}  {:>10}",
            r.bytes,
            r.algorithm,
            r.protocol,
            r.channels,
            r.threads,
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps,
            model
        );
    }
}

/// `--as both`: topoplan's and NCCL's side by side.
fn print_both_rows(ours: &[super::common::SimRow], nccl_rows: &[super::common::NcclRow]) {
    println!(
        "#{:>12}  {:>10} {:>6} {:>3} {:>10} {:>8}  | {:>6} {:>6} {:>3} {:>10} {:>8}  | {:>7}",
        "size",
        "topoplan",
        "proto",
        "ch",
        "time",
        "busbw",
        "nccl",
        "proto",
        "ch",
        "time",
        "busbw",
        "ratio"
    );
    println!(
        "#{:>12}  {:>10} {:>6} {:>3} {:>10} {:>8}  | {:>6} {:>6} {:>3} {:>10} {:>8}  | {:>7}",
        "(B)", "", "", "", "(us)", "(GB/s)", "", "", "", "(us)", "(GB/s)", "nccl/tp"
    );
    for (o, r) in ours.iter().zip(nccl_rows) {
        println!(
            " {:>12}  {:>10} {:>6} {:>3} {:>10.2} {:>8.2}  | {:>6} {:>6} {:>3} {:>10.2} {:>8.2}  | {:>7.3}",
            r.bytes,
            o.algorithm,
            o.protocol,
            o.channels,
            o.time_us,
            o.busbw_gbps,
            r.algorithm,
            r.protocol,
            r.channels,
            r.time_us,
            r.busbw_gbps,
            r.time_us / o.time_us
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_only_skipped_sizes_is_bad_input() {
        let skipped = vec!["1048576 B: too large: about 38399744 events".to_string()];
        let e = all_skipped(true, &skipped).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("every size is too large to simulate (1048576 B"),
            "{e}"
        );
        assert!(
            all_skipped(false, &skipped).is_ok(),
            "answered sizes keep the table"
        );
        assert!(all_skipped(true, &[]).is_ok());
    }
}
