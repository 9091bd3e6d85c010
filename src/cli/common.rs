//! Helpers the simulating and planning subcommands share: reading topologies, profiles and
//! simulator configurations, the `--gpus` communicator, parsing collective/algorithm/protocol
//! names and filters, and simulating one size as topoplan or as NCCL would run it.

use super::error::CliError;
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{load_file, LoadOptions, Topology};
use planner::tuner::Filter;
use sim::{Mode, SimConfig};
use std::collections::HashMap;
use std::path::Path;

/// `--gpus 0,2,5`: the listed GPUs of `t` as a communicator (exit 2 naming the flag on a bad
/// list). Shared by plan, sim, verify and whatif.
pub(crate) fn communicator(t: Topology, gpus: Option<&str>) -> Result<Topology, CliError> {
    let Some(spec) = gpus else { return Ok(t) };
    let list: Vec<u32> = spec
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<u32>().map_err(|_| {
                CliError::input(format!(
                    "--gpus: \"{x}\" is not a GPU index (e.g. --gpus 0,2,5)"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    t.subset(&list)
        .map_err(|e| CliError::input(format!("--gpus {spec}: {e}")))
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

/// Reads an input file: a regular file of at most `planner::input::MAX_INPUT_BYTES`, as UTF-8.
/// Every file a subcommand reads goes through here or `planner::input`.
pub(crate) fn read_text(path: &Path) -> Result<String, CliError> {
    planner::input::read_text(path).map_err(CliError::input)
}

/// Writes an output file the user named. A path that cannot be written is bad input (exit 2),
/// in every subcommand alike.
pub(crate) fn write_output(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), CliError> {
    std::fs::write(path, bytes)
        .map_err(|e| CliError::input(format!("cannot write {}: {e}", path.display())))
}

/// Creates an output directory the user named (exit 2 when it cannot be made).
pub(crate) fn create_output_dir(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::input(format!("cannot create {}: {e}", dir.display())))
}

/// Memory available to new allocations now (Linux `MemAvailable`), in bytes; `None` where the
/// system does not say.
pub(crate) fn available_memory() -> Option<u64> {
    let text = planner::input::read_text(Path::new("/proc/meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Most ranks `sim` and `whatif` simulate: their cost grows with the ranks (the engine's events,
/// NCCL's graphs per rank), and 16,384 ranks already take tens of seconds a size.
pub(crate) const MAX_SIM_RANKS: usize = 16_384;

/// Most ranks `verify` takes a topology of: the symbolic state of every planned schedule grows
/// at least as ranks², and past this count none fits the verifier's state limit.
pub(crate) const MAX_VERIFY_RANKS: usize = 4_096;

/// Refuses a communicator of more than `max` ranks for `what`, before any work is done.
pub(crate) fn check_ranks(n: usize, max: usize, what: &str) -> Result<(), CliError> {
    if n > max {
        return Err(CliError::input(format!(
            "{n} ranks: {what} takes at most {max} (a smaller communicator: --gpus, or fewer nodes)"
        )));
    }
    Ok(())
}

/// `--channels`: 1 to NCCL's most (`MAXCHANNELS`), beyond which nothing runs faster and work
/// grows with the count.
pub(crate) fn check_channels(c: u32) -> Result<(), CliError> {
    let max = planner::search::MAX_RUN_CHANNELS;
    if !(1..=max).contains(&c) {
        return Err(CliError::input(format!(
            "--channels {c}: expected 1 to {max} (NCCL's most channels)"
        )));
    }
    Ok(())
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
            let text = read_text(p)?;
            let bad = |e: serde_json::Error| CliError::input(format!("{}: {e}", p.display()));
            let given: serde_json::Value = serde_json::from_str(&text).map_err(bad)?;
            // The file's fields replace the profile's; the ones it leaves out keep theirs.
            let mut merged = serde_json::to_value(&base).map_err(bad)?;
            overlay(&mut merged, given, "")
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?;
            serde_json::from_value::<SimConfig>(merged).map_err(bad)?
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

/// Writes `over`'s fields into `base`, object by object (`null` too: it turns an optional part
/// off). A field `base` does not have is an error naming it (`path` so far).
fn overlay(
    base: &mut serde_json::Value,
    over: serde_json::Value,
    path: &str,
) -> Result<(), String> {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                let at = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get_mut(&k) {
                    Some(slot) if v.is_object() && slot.is_object() => overlay(slot, v, &at)?,
                    Some(slot) => *slot = v,
                    None => return Err(format!("unknown field `{at}` (docs/sim.md lists them)")),
                }
            }
            Ok(())
        }
        (b, o) => {
            *b = o;
            Ok(())
        }
    }
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
/// as `plan` makes it); with `--channels` forced, the tuner's choice on those channels runs.
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
        Some(n) => {
            let forced = Filter {
                channels: Some(n),
                ..filter.clone()
            };
            planner
                .choose_filtered(coll, bytes, &forced)
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
    Ok(Filter {
        algorithms: algo
            .as_deref()
            .map(|a| list(a, &Algorithm::ALL, parse_algo))
            .transpose()?,
        protocols: proto
            .as_deref()
            .map(|p| list(p, &Protocol::ALL, parse_proto))
            .transpose()?,
        channels: None,
    })
}
