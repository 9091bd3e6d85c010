//! `topoplan whatif`: capacity planning. Builds one topology per scenario (more nodes, other NIC
//! or NVLink speeds, an oversubscribed fabric, a failed link or GPU), re-plans each, simulates the
//! tuner's choice at every size, and compares the scenarios with the baseline.

use super::common::{
    collective, filter, load_config, load_profile, parse_as, parse_kind, profile_config,
    simulate_nccl, simulate_size, As, Cache,
};
use super::error::{CliError, CliResult};
use super::sizes::SweepArgs;
use planner::plan::Planner;
use planner::topology::{load_file, topology_of, LinkKind, LoadOptions, NodeKind, Topology};
use rayon::prelude::*;
use std::io::IsTerminal;
use std::path::PathBuf;

mod plot;
mod table;
use plot::plot;
use table::print_table;

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan whatif node.xml --nodes 8 --vary nodes=8,16,32,64
  topoplan whatif cluster.json --vary nic-gbps=200,400,800 --plot busbw.svg
  topoplan whatif cluster.json --vary oversubscription=1,2,4 -b 1M -e 4G
  topoplan whatif tests/data/topologies/h200x2-topo.xml --vary nvlink-gbps=10,20.6,40
  topoplan whatif node.xml --vary fail-link=0-1,2-3 --vary fail-gpu=3
  topoplan whatif node.xml --gpus 0,2,5 --vary fail-link=0-2   # a 3-GPU communicator

KEYS (each --vary adds one scenario per value; the baseline is the file as given, scaled by
--nodes/--fabric/--nic-gbps/--oversubscription when set):
  nodes=N,...             hosts in the cluster (1..65536; a single-node file is scaled, rail fabric)
  nic-gbps=G,...          NIC port speed in Gbit/s (every NIC)
  nvlink-gbps=G,...       bandwidth of one NVLink lane in GB/s (H100/H200: 20.6); links keep their lane count
  oversubscription=R,...  fat-tree leaf uplink oversubscription (1 = non-blocking; switches the fabric to fat-tree)
  fail-link=A-B,...       the first link on the route from rank A towards rank B fails (both directions)
  fail-gpu=R,...          GPU of rank R fails; ranks above it shift down by one
Every scenario is planned from scratch, so failures are routed around when the topology allows.

The table gives per scenario and size the simulated time, busbw (nccl-tests definition),
busbw relative to the baseline, and the scenario topology's throughput bound (max-flow/min-cut,
docs/planner.md) with busbw as a percentage of it. Runs in parallel (rayon); --serial gives identical results.")]
pub struct Args {
    /// Topology file: NCCL XML or topoplan JSON (single node or cluster).
    pub file: PathBuf,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// KEY=V1,V2,... (repeatable); see KEYS below.
    #[arg(long = "vary", required = true)]
    pub vary: Vec<String>,
    /// Baseline cluster: scale a single-node file to this many hosts.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Fabric of the baseline cluster: rail, fat-tree, switch (default rail).
    #[arg(long)]
    pub fabric: Option<String>,
    /// NIC speed of the baseline cluster in Gbit/s (default 400).
    #[arg(long)]
    pub nic_gbps: Option<f64>,
    /// Oversubscription of the baseline cluster (fat tree).
    #[arg(long)]
    pub oversubscription: Option<f64>,
    /// Write busbw vs size (log x), one line per scenario, as SVG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Run scenarios one after another (results are identical to the parallel run).
    #[arg(long)]
    pub serial: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// GPU model for skeleton topology files.
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Whose choices to simulate in every scenario: topoplan (default) or nccl (NCCL 2.28's
    /// own ring/tree choice, as `sim --as nccl`).
    #[arg(long = "as", default_value = "topoplan", value_name = "topoplan|nccl")]
    pub as_: String,
    /// Machine profile (JSON, docs/profile.md) for every scenario; default: the bundled one
    /// where a scenario's topology matches it, else defaults derived from the topology.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Every scenario as a communicator over these GPUs only (comma list of the scenario
    /// topology's ranks, applied after its change).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum Change {
    Baseline,
    Nodes(u32),
    NicGbps(f64),
    NvlinkGbps(f64),
    Oversubscription(f64),
    FailLink(u32, u32),
    FailGpu(u32),
}

impl Change {
    fn label(&self) -> String {
        match self {
            Change::Baseline => "baseline".into(),
            Change::Nodes(n) => format!("nodes={n}"),
            Change::NicGbps(g) => format!("nic-gbps={g}"),
            Change::NvlinkGbps(g) => format!("nvlink-gbps={g}"),
            Change::Oversubscription(r) => format!("oversubscription={r}"),
            Change::FailLink(a, b) => format!("fail-link={a}-{b}"),
            Change::FailGpu(r) => format!("fail-gpu={r}"),
        }
    }
}

fn parse_vary(spec: &str) -> Result<Vec<Change>, CliError> {
    let (key, vals) = spec.split_once('=').ok_or_else(|| {
        CliError::input(format!(
            "--vary \"{spec}\": expected KEY=V1,V2,... (see --help)"
        ))
    })?;
    let bad = |v: &str, what: &str| CliError::input(format!("--vary {key}: \"{v}\" is not {what}"));
    let pos = |v: &str| -> Result<f64, CliError> {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| bad(v, "a positive number"))
    };
    let rank = |v: &str| v.trim().parse::<u32>().map_err(|_| bad(v, "a rank"));
    vals.split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| {
            Ok(match key.trim().to_ascii_lowercase().as_str() {
                "nodes" => Change::Nodes(
                    v.trim()
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=65_536).contains(n))
                        .ok_or_else(|| bad(v, "a node count in 1..=65536"))?,
                ),
                "nic-gbps" | "nic" => Change::NicGbps(pos(v)?),
                "nvlink-gbps" | "nvlink" => Change::NvlinkGbps(pos(v)?),
                "oversubscription" | "oversub" => {
                    let r = pos(v)?;
                    if r < 1.0 {
                        return Err(bad(v, "an oversubscription >= 1"));
                    }
                    Change::Oversubscription(r)
                }
                "fail-link" => {
                    let (a, b) = v
                        .split_once('-')
                        .ok_or_else(|| bad(v, "a rank pair A-B"))?;
                    Change::FailLink(rank(a)?, rank(b)?)
                }
                "fail-gpu" => Change::FailGpu(rank(v)?),
                other => {
                    return Err(CliError::input(format!(
                        "--vary: unknown key \"{other}\" (nodes, nic-gbps, nvlink-gbps, oversubscription, fail-link, fail-gpu)"
                    )))
                }
            })
        })
        .collect()
}

fn cluster_json(nodes: u32, fabric: &str, nic: f64, over: f64) -> serde_json::Value {
    serde_json::json!({"nodes": nodes, "fabric": fabric, "nic_gbps": nic, "oversubscription": over})
}

/// Builds the scenario's topology from the (baseline) document.
fn build(a: &Args, change: &Change) -> Result<Topology, String> {
    let name = a.file.display().to_string();
    let opts = LoadOptions {
        gpu_model: a.gpu_model.clone(),
        ..Default::default()
    };
    let loaded = load_file(&a.file, &opts).map_err(|e| e.to_string())?;
    let mut doc = loaded.doc;
    // Baseline cluster parameters (file's cluster section, then flags).
    let (mut nodes, mut fabric, mut nic, mut over) = match &doc.cluster {
        Some(c) => (c.nodes, c.fabric.clone(), c.nic_gbps, c.oversubscription),
        None => (1, "rail".to_string(), 400.0, 1.0),
    };
    nodes = a.nodes.unwrap_or(nodes);
    fabric = a.fabric.clone().unwrap_or(fabric);
    nic = a.nic_gbps.unwrap_or(nic);
    over = a.oversubscription.unwrap_or(over);
    match change {
        Change::Nodes(n) => nodes = *n,
        Change::NicGbps(g) => nic = *g,
        Change::Oversubscription(r) => {
            over = *r;
            fabric = "fat-tree".into();
        }
        _ => {}
    }
    let clustered = doc.cluster.is_some()
        || nodes > 1
        || matches!(change, Change::NicGbps(_) | Change::Oversubscription(_));
    if clustered {
        let mut c: planner::topology::doc::ClusterDoc =
            serde_json::from_value(cluster_json(nodes, &fabric, nic, over))
                .map_err(|e| e.to_string())?;
        if let Some(old) = &doc.cluster {
            c.hosts_per_leaf = old.hosts_per_leaf;
            c.switch_lat_us = old.switch_lat_us;
        }
        doc.cluster = Some(c);
    }
    let mut w = Vec::new();
    let mut t = topology_of(&mut doc, &name, &opts, &mut w).map_err(|e| e.to_string())?;
    match change {
        Change::NvlinkGbps(g) => {
            for l in t.graph.edge_weights_mut() {
                if l.kind == LinkKind::NvLink {
                    l.bw_gbps = l.count.max(1) as f64 * g;
                }
            }
        }
        Change::FailLink(x, y) => {
            let n = t.n_ranks() as u32;
            if *x >= n || *y >= n || x == y {
                return Err(format!(
                    "fail-link {x}-{y}: ranks must differ and be below {n}"
                ));
            }
            let p = t
                .gpu_path(*x, *y)
                .ok_or_else(|| format!("no route from rank {x} to rank {y}"))?;
            let first = *p.links.first().ok_or("empty route")?;
            let (u, v) = t.graph.edge_endpoints(first).ok_or("bad link")?;
            while let Some(e) = t.graph.find_edge(u, v) {
                t.graph.remove_edge(e);
            }
            while let Some(e) = t.graph.find_edge(v, u) {
                t.graph.remove_edge(e);
            }
        }
        Change::FailGpu(r) => {
            let g = t
                .gpu_of_rank(*r)
                .ok_or_else(|| format!("fail-gpu {r}: no such rank ({} GPUs)", t.n_ranks()))?;
            if t.n_ranks() < 3 {
                return Err("fail-gpu needs at least 3 GPUs (2 must remain)".into());
            }
            t.graph.remove_node(g);
            for node in t.graph.node_weights_mut() {
                if let NodeKind::Gpu(gpu) = &mut node.kind {
                    if gpu.rank > *r {
                        gpu.rank -= 1;
                    }
                }
            }
        }
        _ => {}
    }
    t.validate().map_err(|e| e.to_string())?;
    Ok(t)
}

#[derive(Clone, Debug, serde::Serialize, PartialEq)]
struct Cell {
    bytes: u64,
    algorithm: String,
    protocol: &'static str,
    channels: u32,
    time_us: f64,
    busbw_gbps: f64,
}

#[derive(Debug, serde::Serialize, PartialEq)]
struct ScenarioOut {
    scenario: String,
    nranks: u32,
    /// Which machine profile priced the scenario.
    profile: String,
    /// Error building or planning the scenario (e.g. a failure that disconnects a GPU).
    error: Option<String>,
    /// The scenario topology's throughput bound (busbw, GB/s; planner::bound).
    bound_gbps: Option<f64>,
    cells: Vec<Result<Cell, String>>,
}

pub fn run(a: Args) -> CliResult {
    let kind = parse_kind(&a.sweep.collective)?;
    let sizes = a.sweep.sizes.list()?;
    let who = parse_as(&a.as_)?;
    if who == As::Both {
        return Err(CliError::input(
            "whatif compares scenarios: --as is topoplan or nccl (sim --as both compares the two)",
        ));
    }
    let given = load_profile(a.profile.as_deref())?;
    // The mode check; each scenario's parameters come from its own profile.
    load_config(None, &a.sweep.mode, sim::SimConfig::default())?;
    let f = filter(&a.sweep.algo, &a.sweep.proto)?;
    let mut changes = vec![Change::Baseline];
    for v in &a.vary {
        changes.extend(parse_vary(v)?);
    }
    check_baseline_and_fabric(&a, &changes)?;

    // Phase 1: topologies and planners, one per scenario.
    let plan_one = |c: &Change| plan_scenario(&a, &given, c);
    let bar = progress_bar(&a, changes.len() * (1 + sizes.len()));
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1)
        }
    };
    let planned: Vec<Result<(Topology, Planner), String>> = if a.serial {
        changes
            .iter()
            .map(|c| {
                let r = plan_one(c);
                tick();
                r
            })
            .collect()
    } else {
        changes
            .par_iter()
            .map(|c| {
                let r = plan_one(c);
                tick();
                r
            })
            .collect()
    };
    // Phase 2: every (scenario, size), each job on its own (results independent of order).
    let jobs: Vec<(usize, u64)> = (0..changes.len())
        .flat_map(|i| sizes.iter().map(move |&b| (i, b)))
        .collect();
    let run_job = |&(i, b): &(usize, u64)| -> Result<Cell, String> {
        let (t, p) = planned[i].as_ref().map_err(|e| e.clone())?;
        let coll = collective(kind, p.nranks(), 0);
        let cfg = load_config(
            None,
            &a.sweep.mode,
            profile_config(p.profile()).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let cell = simulate_cell(t, p, who, &coll, &f, b, &cfg);
        tick();
        cell.map_err(|e| e.to_string())
    };
    let cells: Vec<Result<Cell, String>> = if a.serial {
        jobs.iter().map(run_job).collect()
    } else {
        jobs.par_iter().map(run_job).collect()
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let out = outcomes(&changes, &planned, &cells, sizes.len(), kind);
    report(&a, kind, &out)
}

/// A scenario's topology (as a communicator, within the simulator's rank limit) and its planner.
fn plan_scenario(
    a: &Args,
    given: &Option<(planner::tuner::Profile, String)>,
    c: &Change,
) -> Result<(Topology, Planner), String> {
    let t = build(a, c)?;
    let t = super::common::communicator(t, a.gpus.as_deref()).map_err(|e| e.to_string())?;
    // A scenario past the limit is that scenario's error, in its row.
    super::common::check_ranks(t.n_ranks(), super::common::MAX_SIM_RANKS, "whatif")
        .map_err(|e| e.to_string())?;
    let p = Planner::with_profile(&t, given.clone()).map_err(|e| e.to_string())?;
    Ok((t, p))
}

/// One (scenario, size) cell: the choice of `who` at `b` bytes, simulated.
fn simulate_cell(
    t: &Topology,
    p: &Planner,
    who: As,
    coll: &planner::schedule::Collective,
    f: &planner::tuner::Filter,
    b: u64,
    cfg: &sim::SimConfig,
) -> Result<Cell, CliError> {
    if who == As::Nccl {
        let m = sim::nccl::Model::new(t, p);
        simulate_nccl(t, p, &m, coll, f, b, cfg).map(|r| Cell {
            bytes: b,
            algorithm: format!("nccl-{}", r.algorithm),
            protocol: r.protocol,
            channels: r.channels,
            time_us: r.time_us,
            busbw_gbps: r.busbw_gbps,
        })
    } else {
        let mut cache = Cache::new();
        simulate_size(t, p, coll, f, None, b, cfg, &mut cache).map(|(row, _)| Cell {
            bytes: b,
            algorithm: row.algorithm,
            protocol: row.protocol,
            channels: row.channels,
            time_us: row.time_us,
            busbw_gbps: row.busbw_gbps,
        })
    }
}

/// The baseline must build: a bad file or flag is bad input, not a scenario result. So must
/// `--fabric` name a fabric, and every `--vary` change name ranks the machine has.
fn check_baseline_and_fabric(a: &Args, changes: &[Change]) -> CliResult {
    let base = build(a, &Change::Baseline).map_err(CliError::input)?;
    let n = base.n_ranks() as u32;
    for c in changes {
        let why = match *c {
            Change::FailLink(x, y) if x == y => "a failed link joins two different ranks",
            Change::FailLink(x, y) if x >= n || y >= n => "no such rank",
            Change::FailGpu(r) if r >= n => "no such rank",
            _ => continue,
        };
        return Err(CliError::input(format!(
            "--vary {}: {why} (the machine has ranks 0..{})",
            c.label(),
            n.saturating_sub(1)
        )));
    }
    let base = super::common::communicator(base, a.gpus.as_deref())?;
    super::common::check_ranks(base.n_ranks(), super::common::MAX_SIM_RANKS, "whatif")?;
    drop(base);
    if let Some(fab) = &a.fabric {
        if planner::topology::FabricChoice::parse(fab).is_none() {
            return Err(CliError::input(format!(
                "--fabric \"{fab}\" is not rail, fat-tree or switch"
            )));
        }
    }
    Ok(())
}

/// A progress bar of `steps` on a terminal, none for `--json` or when stderr is not one.
fn progress_bar(a: &Args, steps: usize) -> Option<indicatif::ProgressBar> {
    (!a.json && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(steps as u64);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb.set_message("scenarios");
        pb
    })
}

/// Writes the plot if asked, then prints the scenarios as JSON or as a table.
fn report(a: &Args, kind: planner::schedule::CollectiveKind, out: &[ScenarioOut]) -> CliResult {
    if let Some(path) = &a.plot {
        plot(path, kind, out).map_err(|e| CliError::failure(format!("{}: {e}", path.display())))?;
    }
    if a.json {
        let v = serde_json::json!({"collective": kind.name(), "scenarios": out});
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(CliError::failure)?
        );
        return Ok(());
    }
    print_table(kind, out);
    Ok(())
}

/// Each scenario's row: its ranks, profile, bound and cells (or why it has none).
fn outcomes(
    changes: &[Change],
    planned: &[Result<(Topology, Planner), String>],
    cells: &[Result<Cell, String>],
    nsizes: usize,
    kind: planner::schedule::CollectiveKind,
) -> Vec<ScenarioOut> {
    let mut out: Vec<ScenarioOut> = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        let (nranks, error, profile) = match &planned[i] {
            Ok((_, p)) => (p.nranks(), None, p.profile().note()),
            Err(e) => (0, Some(e.clone()), String::new()),
        };
        let bound_gbps = planned[i].as_ref().ok().and_then(|(t, _)| {
            planner::bound::bound(t, kind, 0)
                .ok()
                .flatten()
                .map(|b| b.busbw_gbps)
        });
        out.push(ScenarioOut {
            scenario: c.label(),
            nranks,
            profile,
            error,
            bound_gbps,
            cells: cells[i * nsizes..(i + 1) * nsizes].to_vec(),
        });
    }
    out
}
