//! `topoplan plan`: channels and, per collective and size, the chosen algorithm, protocol,
//! channel count and predicted time, in an nccl-tests style table.

use super::common::collective;
use super::error::{CliError, CliResult};
use super::plan_bound::{pct, print_below_bound, print_bound_explained};
use super::sizes::{parse_size, SizeArgs};
use planner::bound::{Bound, Bounds};
use planner::plan::{describe, Planner};
use planner::schedule::{msccl, Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

mod text;
use text::print_text;

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan plan tests/data/topologies/h200x2-topo.xml
  topoplan plan topo.xml -c all-reduce -b 1K -e 1G -f 2
  topoplan plan topo.xml --explain 2M            # every candidate at 2 MiB, fastest first
  topoplan plan topo.xml --algo ring --proto ^LL  # like NCCL_ALGO=ring NCCL_PROTO=^LL
  topoplan plan cluster.json --json > plan.json  # everything, with the chosen schedules
  topoplan plan topo.xml --msccl-xml out/        # one MSCCL-IR file per collective
  topoplan plan cluster.json --timing            # how long planning took
  topoplan plan topo.xml --gpus 0,2,5            # a communicator over GPUs 0, 2 and 5 (ranks 0..2)

Sizes accept K, M, G suffixes (powers of 1024), like nccl-tests. algbw = size / time; busbw
follows nccl-tests: x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and
all-to-all, x 1 for broadcast, reduce and sendrecv.")]
pub struct Args {
    /// Topology file: NCCL's NCCL_TOPO_DUMP_FILE XML or topoplan JSON (clusters from `topo scale`).
    pub file: PathBuf,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Collectives to plan (comma list): all-reduce, all-gather, reduce-scatter, broadcast,
    /// reduce, all-to-all, sendrecv. Default: all.
    #[arg(short = 'c', long = "collective", value_delimiter = ',')]
    pub collective: Vec<String>,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: u32,
    /// Allowed algorithms, NCCL_ALGO syntax: "ring,tree", "^tree" (all but tree),
    /// "allreduce:tree;allgather:ring". Names: ring, tree, one-shot, two-shot, ce (copy-engine
    /// pipeline), direct, hierarchical, packed (spanning trees packed to the bound).
    #[arg(long)]
    pub algo: Option<String>,
    /// Allowed protocols, NCCL_PROTO syntax: "LL,LL128", "^LL", "allreduce:Simple".
    #[arg(long)]
    pub proto: Option<String>,
    /// Print every candidate's estimate at this size, fastest first, instead of the table.
    #[arg(long, value_parser = parse_size, conflicts_with_all = ["json", "msccl_xml"])]
    pub explain: Option<u64>,
    /// Print the whole plan as JSON (channels, tables, the chosen schedules).
    #[arg(long)]
    pub json: bool,
    /// Write the chosen schedule of each collective (at the largest size) as MSCCL-IR XML files
    /// into this directory.
    #[arg(long, value_name = "OUT_DIR")]
    pub msccl_xml: Option<PathBuf>,
    /// Print how long loading, channel search, tuning and schedule building took (stderr).
    #[arg(long)]
    pub timing: bool,
    /// GPU model for skeleton topology files (e.g. h100-sxm).
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Machine profile (JSON, docs/profile.md) the tuner prices with; default: the bundled one
    /// where the topology matches it, else defaults derived from the topology.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Plan a communicator over these GPUs only (comma list of the topology's ranks; rank i of
    /// the communicator is the i-th listed GPU), as PyTorch's new_group or a scheduler makes one.
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
}

/// Parses NCCL_ALGO / NCCL_PROTO style lists for one collective: `[^]a,b` or
/// `func:a,b;func2:c`. Returns the allowed names (`None`: no restriction for this collective).
fn list_for<T: Clone + PartialEq>(
    spec: &str,
    kind: CollectiveKind,
    all: &[T],
    parse: &dyn Fn(&str) -> Result<T, String>,
) -> Result<Option<Vec<T>>, String> {
    let mut chosen: Option<&str> = None;
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once(':') {
            Some((func, list)) => {
                let k = CollectiveKind::parse(func)
                    .ok_or_else(|| format!("\"{func}\" is not a collective"))?;
                if k == kind {
                    chosen = Some(list);
                }
            }
            None => {
                if chosen.is_none() {
                    chosen = Some(part);
                }
            }
        }
    }
    let Some(list) = chosen else { return Ok(None) };
    let (neg, list) = match list.strip_prefix('^') {
        Some(l) => (true, l),
        None => (false, list),
    };
    let names: Vec<T> = list
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(parse)
        .collect::<Result<_, _>>()?;
    Ok(Some(if neg {
        all.iter().filter(|a| !names.contains(a)).cloned().collect()
    } else {
        names
    }))
}

fn parse_proto(s: &str) -> Result<Protocol, String> {
    Protocol::parse(s.trim()).ok_or_else(|| format!("unknown protocol \"{s}\" (LL, LL128, Simple)"))
}

#[derive(Serialize)]
struct Row {
    bytes: u64,
    algorithm: String,
    protocol: &'static str,
    channels: u32,
    time_us: f64,
    algbw_gbps: f64,
    busbw_gbps: f64,
    /// busbw as a percentage of the topology's bound (absent where there is none).
    pct_of_bound: Option<f64>,
}

#[derive(Serialize)]
struct CollPlan {
    collective: Collective,
    busbw_factor: f64,
    /// The topology's throughput bound and its limiting cut (planner::bound).
    bound: Option<Bound>,
    rows: Vec<Row>,
    schedules: Vec<Schedule>,
}

#[derive(Serialize)]
struct PlanJson<'a> {
    file: String,
    topology: String,
    warnings: &'a [String],
    channels: &'a planner::search::Channels,
    collectives: Vec<CollPlan>,
}

pub fn run(a: Args) -> CliResult {
    let t0 = Instant::now();
    let sizes = a.sizes.list()?;
    let kinds = parse_kinds(&a.collective)?;
    let opts = LoadOptions {
        gpu_model: a.gpu_model.clone(),
        ..Default::default()
    };
    let loaded = load_file(&a.file, &opts).map_err(CliError::input)?;
    let t = &super::common::communicator(loaded.topology.clone(), a.gpus.as_deref())?;
    let t_load = t0.elapsed();
    let t1 = Instant::now();
    let given = super::common::load_profile(a.profile.as_deref())?;
    let planner = Planner::with_profile(t, given).map_err(CliError::input)?;
    let t_search = t1.elapsed();
    let n = planner.nranks();
    if a.root >= n {
        return Err(CliError::input(format!(
            "--root {} is not a rank (the topology has {n})",
            a.root
        )));
    }
    let tb = Instant::now();
    let bounds = Bounds::new(t);
    let t_bound = tb.elapsed();
    let topo_text = describe(t, planner.channels());
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(size) = a.explain {
        return explain(&a, t, &bounds, &planner, &kinds, &topo_text, size);
    }

    let t2 = Instant::now();
    let plans = tune(&a, t, &bounds, &planner, &kinds, &sizes)?;
    let t_tune = t2.elapsed();

    // Schedules are built for --json and --msccl-xml (and timed with --timing).
    let t3 = Instant::now();
    let mut coll_plans = Vec::new();
    let want_sched = a.json || a.msccl_xml.is_some() || a.timing;
    for (coll, bound, rows) in plans {
        let schedules = if want_sched {
            build_schedules(&a, &planner, &coll, &rows)?
        } else {
            Vec::new()
        };
        coll_plans.push(CollPlan {
            busbw_factor: coll.kind.busbw_factor(n),
            bound,
            collective: coll,
            rows,
            schedules,
        });
    }
    let t_sched = t3.elapsed();

    if let Some(dir) = &a.msccl_xml {
        write_msccl(dir, &coll_plans)?;
    }
    if a.json {
        let j = PlanJson {
            file: a.file.display().to_string(),
            topology: topo_text,
            warnings: &loaded.warnings,
            channels: planner.channels(),
            collectives: coll_plans,
        };
        let out = serde_json::to_string(&j).map_err(CliError::failure)?;
        println!("{out}");
    } else {
        print_text(&a, &planner, &topo_text, &coll_plans);
    }
    if a.timing {
        eprintln!(
            "timing: {} ranks; load {:.1} ms, channel search {:.1} ms, bound {:.1} ms, tuning {} sizes x {} collectives {:.1} ms, schedules {:.1} ms, total {:.1} ms",
            n,
            ms(t_load),
            ms(t_search),
            ms(t_bound),
            sizes.len(),
            kinds.len(),
            ms(t_tune),
            ms(t_sched),
            ms(t0.elapsed())
        );
    }
    Ok(())
}

/// `-c`: the collectives named, or all of them.
fn parse_kinds(names: &[String]) -> Result<Vec<CollectiveKind>, CliError> {
    if names.is_empty() {
        return Ok(CollectiveKind::ALL.to_vec());
    }
    names.iter().map(|s| super::common::parse_kind(s)).collect()
}

/// `--algo` / `--proto` for one collective.
fn filter_for(a: &Args, k: CollectiveKind) -> Result<Filter, CliError> {
    let algorithms = match &a.algo {
        Some(s) => list_for(s, k, &Algorithm::ALL, &Algorithm::parse).map_err(CliError::input)?,
        None => None,
    };
    let protocols = match &a.proto {
        Some(s) => list_for(s, k, &Protocol::ALL, &parse_proto).map_err(CliError::input)?,
        None => None,
    };
    Ok(Filter {
        algorithms,
        protocols,
        channels: None,
    })
}

/// `--explain SIZE`: every candidate of each collective, fastest first, against the bound.
fn explain(
    a: &Args,
    t: &Topology,
    bounds: &Bounds,
    planner: &Planner,
    kinds: &[CollectiveKind],
    topo_text: &str,
    size: u64,
) -> CliResult {
    let n = planner.nranks();
    println!("# {}\n# Topology: {topo_text}", a.file.display());
    for &k in kinds {
        let coll = collective(k, n, a.root);
        let f = filter_for(a, k)?;
        let c = planner.candidates_filtered(&coll, size, &f);
        let b = bounds.of(t, k, a.root).map_err(CliError::input)?;
        println!(
            "#\n# {} at {} bytes: {} candidate(s), fastest first (time = latency + size / (bandwidth x ramp))",
            k.name(),
            size,
            c.len()
        );
        let every = Bounds::every_link(t)
            .of(t, k, a.root)
            .map_err(CliError::input)?;
        print_bound_explained(b.as_ref(), every.as_ref());
        println!(
            "# {:>20} {:>6} {:>8} {:>11} {:>11} {:>15} {:>11} {:>7}",
            "algorithm",
            "proto",
            "channels",
            "time(us)",
            "lat(us)",
            "peak algbw",
            "busbw",
            "%bound"
        );
        for e in &c {
            let algbw = size as f64 / 1000.0 / e.time_us;
            let busbw = algbw * k.busbw_factor(n);
            println!(
                "  {:>20} {:>6} {:>8} {:>11.2} {:>11.2} {:>15.1} {:>11.2} {:>7}",
                e.algorithm.name(),
                e.protocol.name(),
                e.channels,
                e.time_us,
                e.lat_us,
                e.peak_algbw_gbps,
                busbw,
                pct(busbw, b.as_ref())
            );
        }
        if c.is_empty() {
            println!("  (no candidate: --algo/--proto exclude them all)");
        }
        // The choice as plan makes it: the engine's price where it has one.
        let cfg = super::common::profile_config(planner.profile())?;
        let cache = sim::price::Schedules::default();
        let pricer = sim::price::EnginePricer::with_cache(t, planner, &cfg, &cache);
        if let (Some(b), Some(pc)) = (b.as_ref(), planner.choose_priced(&coll, size, &f, &pricer)) {
            let ch = &pc.choice;
            if let Some(best) = c
                .iter()
                .find(|e| e.algorithm == ch.algorithm && e.protocol == ch.protocol)
            {
                // What `topoplan sim` reports: the pick's schedule run whole, where that is
                // cheap (one host); elsewhere the price it was chosen by.
                let whole = pc
                    .by_pricer
                    .then(|| {
                        let picked = planner::plan::Candidate {
                            channels: ch.channels,
                            ..best.clone()
                        };
                        super::plan_bound::run_whole(&pricer, planner, &coll, &picked, size)
                    })
                    .flatten();
                let priced = (whole.unwrap_or(ch.est_us), pc.by_pricer);
                let simulate = |e: &planner::plan::Candidate| {
                    super::plan_bound::run_whole(&pricer, planner, &coll, e, size)
                };
                print_below_bound(planner, k, size, (best, &c), priced, b, &simulate);
            }
        }
    }
    Ok(())
}

/// A collective, its bound and the tuner's choice per size.
type Tuned = (Collective, Option<Bound>, Vec<Row>);

/// The tuner's choice of each collective at each size, with the collective's bound.
fn tune(
    a: &Args,
    t: &Topology,
    bounds: &Bounds,
    planner: &Planner,
    kinds: &[CollectiveKind],
    sizes: &[u64],
) -> Result<Vec<Tuned>, CliError> {
    let mut plans = Vec::new();
    // Choices are the engine's where it prices them (`planner::plan::Pricer`), as `sim` runs them.
    let cfg = super::common::profile_config(planner.profile())?;
    for &k in kinds {
        let coll = collective(k, planner.nranks(), a.root);
        let f = filter_for(a, k)?;
        let bound = bounds.of(t, k, a.root).map_err(CliError::input)?;
        let mut rows = Vec::new();
        let cache = sim::price::Schedules::default();
        let pricer = sim::price::EnginePricer::with_cache(t, planner, &cfg, &cache);
        for &b in sizes {
            let priced = planner.choose_priced(&coll, b, &f, &pricer);
            let ch = priced.map(|p| p.choice).ok_or_else(|| {
                CliError::input(format!(
                    "--algo/--proto leave no algorithm for {} on this topology",
                    k.name()
                ))
            })?;
            rows.push(Row {
                bytes: b,
                algorithm: ch.algorithm.name(),
                protocol: ch.protocol.name(),
                channels: ch.channels,
                time_us: ch.est_us,
                algbw_gbps: ch.algbw_gbps,
                busbw_gbps: ch.busbw_gbps,
                pct_of_bound: bound.as_ref().map(|x| 100.0 * ch.busbw_gbps / x.busbw_gbps),
            });
        }
        plans.push((coll, bound, rows));
    }
    Ok(plans)
}

/// One schedule per distinct (algorithm, protocol) chosen, at the most channels chosen; the
/// largest size's choice first (it is what --msccl-xml writes).
fn build_schedules(
    a: &Args,
    planner: &Planner,
    coll: &Collective,
    rows: &[Row],
) -> Result<Vec<Schedule>, CliError> {
    let mut seen: Vec<(String, &str, u32)> = Vec::new();
    for r in rows {
        match seen
            .iter_mut()
            .find(|x| x.0 == r.algorithm && x.1 == r.protocol)
        {
            Some(x) => x.2 = x.2.max(r.channels),
            None => seen.push((r.algorithm.clone(), r.protocol, r.channels)),
        }
    }
    if let Some(last) = rows.last() {
        if let Some(i) = seen
            .iter()
            .position(|x| x.0 == last.algorithm && x.1 == last.protocol)
        {
            let x = seen.remove(i);
            seen.insert(0, x);
        }
    }
    let mut schedules: Vec<Schedule> = Vec::new();
    for (algo, proto, ch) in seen {
        let algo = Algorithm::parse(&algo).map_err(CliError::failure)?;
        let proto = parse_proto(proto).map_err(CliError::failure)?;
        let nch = match algo {
            Algorithm::Ring | Algorithm::Tree | Algorithm::Hierarchical => Some(ch),
            _ => None,
        };
        let ts = Instant::now();
        // Protocols of one (algorithm, channels) share the schedule's structure.
        let built = schedules.iter().find(|s: &&Schedule| {
            s.algorithm == algo && nch.is_none_or(|c| c == s.channels / per_channel(&algo))
        });
        let s = match built {
            Some(b) if !matches!(algo, Algorithm::Direct | Algorithm::CopyEnginePipeline) => {
                planner::schedule::build::with_protocol(b, proto)
            }
            _ => planner
                .schedule(coll, &algo, proto, nch)
                .map_err(CliError::failure)?,
        };
        if a.timing {
            eprintln!(
                "timing: {} {} {} x{}: schedule ready in {:.1} ms",
                coll.kind.name(),
                algo.name(),
                proto.name(),
                s.channels,
                ms(ts.elapsed())
            );
        }
        schedules.push(s);
    }
    Ok(schedules)
}

/// `--msccl-xml DIR`: the first schedule of each collective as MSCCL-IR XML.
fn write_msccl(dir: &std::path::Path, plans: &[CollPlan]) -> CliResult {
    super::common::create_output_dir(dir)?;
    for cp in plans {
        if let Some(s) = cp.schedules.first() {
            let name = format!("{}-{}", cp.collective.kind.name(), s.algorithm.name());
            let xml = msccl::export(s, &name).map_err(CliError::failure)?;
            let path = dir.join(format!("{}.xml", cp.collective.kind.name()));
            super::common::write_output(&path, xml)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// IR channels per planner channel (a tree all-reduce uses two: up and down).
fn per_channel(a: &Algorithm) -> u32 {
    if *a == Algorithm::Tree {
        2
    } else {
        1
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
