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

The table lays beside an nccl-tests run: size and count as nccl-tests defines them (float
elements; all-gather/reduce-scatter/all-to-all sizes are the whole gathered buffer), time from
launch to the last rank's completion, algbw = size / time, busbw = algbw x 2(n-1)/n for
all-reduce, (n-1)/n for all-gather/reduce-scatter/all-to-all, 1 otherwise. The 'tuner' column is
the planner's own estimate for the same choice. The model and its parameters: docs/sim.md.")]
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
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, root),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| Some((i + 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    }
}

pub(crate) fn load_config(path: Option<&Path>, mode: &str) -> Result<SimConfig, CliError> {
    let mut cfg = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?;
            serde_json::from_str::<SimConfig>(&text)
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?
        }
        None => SimConfig::default(),
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
    let ch = planner
        .choose_filtered(coll, bytes, filter)
        .ok_or_else(|| {
            CliError::input(format!(
                "--algo/--proto leave no algorithm for {} on this topology",
                coll.kind.name()
            ))
        })?;
    let nch = channels.unwrap_or(ch.channels);
    let key = (ch.algorithm.name(), ch.protocol, nch);
    if !cache.contains_key(&key) {
        let want = match ch.algorithm {
            Algorithm::Ring | Algorithm::Tree | Algorithm::OneShot | Algorithm::TwoShot => {
                Some(nch)
            }
            _ => channels,
        };
        let s = planner
            .schedule(coll, &ch.algorithm, ch.protocol, want)
            .map_err(CliError::input)?;
        cache.insert(key.clone(), s);
    }
    let s = &cache[&key];
    let r = sim::simulate(topo, s, bytes, cfg).map_err(|e| match e {
        sim::SimError::TooLarge(m) => CliError::failure(format!("{bytes} B: too large: {m}")),
        e => CliError::failure(e),
    })?;
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
        channels: s.channels,
        time_us: r.time_us,
        algbw_gbps: algbw,
        busbw_gbps: algbw * coll.kind.busbw_factor(n),
        tuner_us: ch.est_us,
        mode: r.mode,
        events: r.events,
    };
    Ok((row, r))
}

pub(crate) fn filter(algo: &Option<String>, proto: &Option<String>) -> Result<Filter, CliError> {
    Ok(Filter {
        algorithms: algo
            .as_deref()
            .map(|a| parse_algo(a).map(|x| vec![x]))
            .transpose()?,
        protocols: proto
            .as_deref()
            .map(|p| parse_proto(p).map(|x| vec![x]))
            .transpose()?,
    })
}

pub fn run(a: Args) -> CliResult {
    let kind = parse_kind(&a.sweep.collective)?;
    let sizes = a.sweep.sizes.list()?;
    let mut cfg = load_config(a.config.as_deref(), &a.sweep.mode)?;
    cfg.seed = a.seed;
    if !(a.jitter.is_finite() && (0.0..1.0).contains(&a.jitter)) {
        return Err(CliError::input("--jitter must be in [0, 1)"));
    }
    cfg.jitter = a.jitter;
    let f = filter(&a.sweep.algo, &a.sweep.proto)?;
    let topo = load_topology(&a.file, a.gpu_model.clone())?;
    let planner = Planner::new(&topo).map_err(CliError::input)?;
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
        match cfg.mode {
            Mode::Auto => "auto",
            Mode::Detailed => "detailed",
            Mode::Aggregated => "aggregated",
        }
    );
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
