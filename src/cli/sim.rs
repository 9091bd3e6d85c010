//! `topoplan sim`: the simulator's prediction of a collective at every size, as an nccl-tests
//! style table, for the tuner's choice or a forced algorithm/protocol; `--trace` writes one run
//! as a Chrome/Perfetto trace.

use super::error::{CliError, CliResult};
use super::sizes::{parse_size, SweepArgs};
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use sim::{Mode, SimConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
the planner's own estimate for the same choice (with --as nccl: NCCL's own estimate). Every
table names the machine profile that priced it. The model and its parameters: docs/sim.md.")]
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
    #[arg(long, value_parser = parse_size)]
    pub trace_size: Option<u64>,
    /// Simulator parameters as JSON (see docs/sim.md; missing fields keep their defaults).
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
    #[arg(long)]
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

/// Whose choices a table simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum As {
    Topoplan,
    Nccl,
    Both,
}

pub(crate) fn parse_as(s: &str) -> Result<As, CliError> {
    match s.to_ascii_lowercase().as_str() {
        "topoplan" => Ok(As::Topoplan),
        "nccl" => Ok(As::Nccl),
        "both" => Ok(As::Both),
        _ => Err(CliError::input(format!(
            "--as \"{s}\" is not topoplan, nccl or both"
        ))),
    }
}

/// Reads `--profile` (errors name the file and field).
pub(crate) fn load_profile(
    path: Option<&Path>,
) -> Result<Option<(planner::tuner::Profile, String)>, CliError> {
    match path {
        None => Ok(None),
        Some(p) => planner::tuner::Profile::load(p)
            .map(|x| Some((x, p.display().to_string())))
            .map_err(CliError::input),
    }
}

/// The simulator's parameters of a profile.
pub(crate) fn profile_config(c: &planner::tuner::ProfileChoice) -> Result<SimConfig, CliError> {
    let file = match &c.source {
        planner::tuner::ProfileSource::File { path } => path.clone(),
        _ => c.profile.name.clone(),
    };
    SimConfig::from_profile(&c.profile, &file).map_err(CliError::input)
}

/// One NCCL row of `--as nccl`.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub(crate) struct NcclRow {
    pub bytes: u64,
    pub algorithm: &'static str,
    pub protocol: &'static str,
    pub channels: u32,
    pub threads: u32,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// NCCL's own estimate (its tuner, without launch).
    pub nccl_model_us: f64,
    pub notes: Vec<String>,
}

/// Simulates NCCL's choice at one size.
#[allow(clippy::too_many_arguments)]
pub(crate) fn simulate_nccl(
    topo: &Topology,
    planner: &Planner,
    model: &sim::nccl::Model,
    coll: &Collective,
    filter: &Filter,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<NcclRow, CliError> {
    let r = model
        .run(topo, planner, coll, bytes, filter, cfg)
        .map_err(|e| match e {
            sim::SimError::Unsupported(m) => CliError::input(m),
            sim::SimError::TooLarge(m) => CliError::failure(format!("{bytes} B: too large: {m}")),
            e => CliError::failure(e),
        })?;
    let algbw = bytes as f64 / 1e3 / r.time_us;
    Ok(NcclRow {
        bytes,
        algorithm: r.choice.algo.name(),
        protocol: r.choice.protocol.name(),
        channels: r.choice.channels,
        threads: r.choice.threads,
        time_us: r.time_us,
        algbw_gbps: algbw,
        busbw_gbps: algbw * coll.kind.busbw_factor(planner.nranks()),
        nccl_model_us: r.choice.model_us,
        notes: r.choice.notes,
    })
}

pub(crate) fn parse_kind(s: &str) -> Result<CollectiveKind, CliError> {
    CollectiveKind::parse(s).ok_or_else(|| {
        CliError::input(format!(
            "unknown collective \"{s}\" (all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all, sendrecv)"
        ))
    })
}

pub(crate) fn parse_algo(s: &str) -> Result<Algorithm, CliError> {
    Algorithm::parse(s).map_err(CliError::input)
}

pub(crate) fn parse_proto(s: &str) -> Result<Protocol, CliError> {
    Protocol::parse(s.trim())
        .ok_or_else(|| CliError::input(format!("unknown protocol \"{s}\" (LL, LL128, Simple)")))
}

/// The collective as nccl-tests runs it (sendrecv: every rank sends to the next).
pub(crate) fn collective(kind: CollectiveKind, n: u32, root: u32) -> Collective {
    Collective::as_nccl_tests(kind, n, root)
}

/// `--config` if given (a whole `SimConfig`, docs/sim.md), else `base` (the profile's).
pub(crate) fn load_config(
    path: Option<&Path>,
    mode: &str,
    base: SimConfig,
) -> Result<SimConfig, CliError> {
    let mut cfg = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?;
            serde_json::from_str::<SimConfig>(&text)
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?
        }
        None => base,
    };
    cfg.mode = match mode.to_ascii_lowercase().as_str() {
        "auto" => Mode::Auto,
        "detailed" => Mode::Detailed,
        "aggregated" => Mode::Aggregated,
        _ => {
            return Err(CliError::input(format!(
                "unknown mode \"{mode}\" (auto, detailed, aggregated)"
            )))
        }
    };
    Ok(cfg)
}

pub(crate) fn load_topology(file: &Path, gpu_model: Option<String>) -> Result<Topology, CliError> {
    let opts = LoadOptions {
        gpu_model,
        ..Default::default()
    };
    let loaded = load_file(file, &opts).map_err(CliError::input)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok(loaded.topology)
}

/// One simulated row.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub(crate) struct SimRow {
    pub bytes: u64,
    pub count: u64,
    pub algorithm: String,
    pub protocol: &'static str,
    pub channels: u32,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub tuner_us: f64,
    pub mode: Mode,
    pub events: u64,
}

/// Schedules built so far, by (algorithm, protocol, channels).
pub(crate) type Cache = HashMap<(String, Protocol, u32), Schedule>;

/// The engine prices every candidate and the fastest runs (the planner's engine-priced choice,
/// as `plan` makes it); with `--channels` forced, the tuner's choice runs.
#[allow(clippy::too_many_arguments)]
fn pick_and_run(
    topo: &Topology,
    planner: &Planner,
    coll: &Collective,
    filter: &Filter,
    channels: Option<u32>,
    bytes: u64,
    cfg: &SimConfig,
    cache: &sim::price::Schedules,
) -> Result<(planner::plan::PricedChoice, Schedule, sim::SimResult), CliError> {
    let pricer = sim::price::EnginePricer::with_cache(topo, planner, cfg, cache);
    let picked = match channels {
        None => planner.choose_priced(coll, bytes, filter, &pricer),
        Some(_) => {
            planner
                .choose_filtered(coll, bytes, filter)
                .map(|c| planner::plan::PricedChoice {
                    tuner_us: c.est_us,
                    by_pricer: false,
                    choice: c,
                })
        }
    }
    .ok_or_else(|| {
        CliError::input(format!(
            "--algo/--proto leave no algorithm for {} on this topology",
            coll.kind.name()
        ))
    })?;
    let ch = &picked.choice;
    let cand = planner::plan::Candidate {
        algorithm: ch.algorithm.clone(),
        protocol: ch.protocol,
        channels: ch.channels,
        time_us: ch.est_us,
        lat_us: 0.0,
        peak_algbw_gbps: 0.0,
    };
    let s = pricer
        .schedule(coll, &cand, channels)
        .map_err(|e| CliError::input(e.to_string()))?;
    let r = pricer.run(&s, bytes).map_err(|e| match e {
        sim::SimError::TooLarge(m) => CliError::failure(format!("{bytes} B: too large: {m}")),
        e => CliError::failure(e),
    })?;
    Ok((picked, s, r))
}

/// Chooses (or forces), builds and simulates one size.
#[allow(clippy::too_many_arguments)]
pub(crate) fn simulate_size(
    topo: &Topology,
    planner: &Planner,
    coll: &Collective,
    filter: &Filter,
    channels: Option<u32>,
    bytes: u64,
    cfg: &SimConfig,
    cache: &mut Cache,
) -> Result<(SimRow, sim::SimResult), CliError> {
    let n = planner.nranks();
    let cell = std::cell::RefCell::new(std::mem::take(cache));
    let picked = pick_and_run(topo, planner, coll, filter, channels, bytes, cfg, &cell);
    *cache = cell.into_inner();
    let (picked, s, r) = picked?;
    let ch = &picked.choice;
    let s = &s;
    let algbw = bytes as f64 / 1e3 / r.time_us;
    let row = SimRow {
        bytes,
        count: sim::count_for_bytes(s, bytes, cfg.elem_bytes)
            * (if coll.kind == CollectiveKind::AllGather
                || coll.kind == CollectiveKind::ReduceScatter
                || coll.kind == CollectiveKind::AllToAll
            {
                n as u64
            } else {
                1
            }),
        algorithm: ch.algorithm.name(),
        protocol: ch.protocol.name(),
        // NCCL's sense: a tree channel is one tree (the IR splits it into up and down halves).
        channels: channels.unwrap_or(ch.channels),
        time_us: r.time_us,
        algbw_gbps: algbw,
        busbw_gbps: algbw * coll.kind.busbw_factor(n),
        tuner_us: picked.tuner_us,
        mode: r.mode,
        events: r.events,
    };
    Ok((row, r))
}

/// `--algo` / `--proto` in NCCL_ALGO / NCCL_PROTO syntax: one name or a comma list, `^` first
/// to exclude the listed ones instead.
pub(crate) fn filter(algo: &Option<String>, proto: &Option<String>) -> Result<Filter, CliError> {
    fn list<T: PartialEq + Clone>(
        s: &str,
        all: &[T],
        parse: impl Fn(&str) -> Result<T, CliError>,
    ) -> Result<Vec<T>, CliError> {
        let (neg, body) = match s.trim().strip_prefix('^') {
            Some(b) => (true, b),
            None => (false, s),
        };
        let named: Vec<T> = body
            .split(',')
            .filter(|x| !x.trim().is_empty())
            .map(|x| parse(x.trim()))
            .collect::<Result<_, _>>()?;
        if named.is_empty() {
            return Err(CliError::input(format!("\"{s}\" names nothing")));
        }
        Ok(if neg {
            all.iter().filter(|x| !named.contains(x)).cloned().collect()
        } else {
            named
        })
    }
    let all_algos = [
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::CopyEnginePipeline,
        Algorithm::Direct,
        Algorithm::Hierarchical,
    ];
    Ok(Filter {
        algorithms: algo
            .as_deref()
            .map(|a| list(a, &all_algos, parse_algo))
            .transpose()?,
        protocols: proto
            .as_deref()
            .map(|p| list(p, &Protocol::ALL, parse_proto))
            .transpose()?,
    })
}

pub fn run(a: Args) -> CliResult {
    let kind = parse_kind(&a.sweep.collective)?;
    let sizes = a.sweep.sizes.list()?;
    let who = parse_as(&a.as_)?;
    let given = load_profile(a.profile.as_deref())?;
    let f = filter(&a.sweep.algo, &a.sweep.proto)?;
    let topo = load_topology(&a.file, a.gpu_model.clone())?;
    let topo = super::plan::communicator(topo, a.gpus.as_deref())?;
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
    if a.channels == Some(0) {
        return Err(CliError::input("--channels must be >= 1"));
    }
    let coll = collective(kind, n, a.root);
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
        std::fs::write(path, serde_json::to_vec(&json).map_err(CliError::failure)?)
            .map_err(|e| CliError::failure(format!("{}: {e}", path.display())))?;
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
    for m in &skipped {
        println!("# skipped {m}");
    }
    let redop = if kind.reduces() { "sum" } else { "none" };
    let root: i64 = match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => a.root as i64,
        _ => -1,
    };
    for r in &rows {
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
    Ok(())
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
        println!(
            "#{:>12}  {:>6} {:>6} {:>3} {:>4}  {:>10} {:>8} {:>8}  {:>10}",
            "size", "algo", "proto", "ch", "thr", "time", "algbw", "busbw", "nccl-model"
        );
        println!(
            "#{:>12}  {:>6} {:>6} {:>3} {:>4}  {:>10} {:>8} {:>8}  {:>10}",
            "(B)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)"
        );
        for r in &nccl_rows {
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
        return Ok(());
    }
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
    for (o, r) in ours.iter().zip(&nccl_rows) {
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
    Ok(())
}
