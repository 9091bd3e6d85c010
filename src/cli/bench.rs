//! `topoplan bench`: nccl-tests-style measurements of our CUDA backend on the local GPUs,
//! optionally beside NCCL on the same buffers (`--vs-nccl`), or with one process per GPU
//! (`--procs`: this binary starts itself once per rank, see `procs`). `--algo auto` prices its
//! candidates with a machine profile (`--profile`, else the bundled one: `profile`).

use super::error::{CliError, CliResult};
use super::sizes::parse_size;
use cuda::ipc::CudaProcComm;
use cuda::{device, schedules, CudaError};
use gpubench::harness::{self, BenchConfig, Row};
use gpubench::procs as mp;
use planner::schedule::CollectiveKind;
use runtime::bootstrap::Rendezvous;
use runtime::{DataType, ReduceOp};

mod procs;
mod profile;
pub mod report;
use procs::{run_child, run_parent, MP_RANK_VAR};
pub use profile::{measure_vs_nccl, Priced};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sizes accept K, M, G suffixes (powers of 1024). For all-gather and reduce-scatter the size is \
the whole gathered buffer, as in nccl-tests. busbw uses nccl-tests' factors (all-reduce 2(n-1)/n).\n\n\
Example (2 GPUs, all-reduce, against NCCL, checking every element):\n  \
topoplan bench -b 8 -e 1G -f 4 -g 2 --vs-nccl -c 1\n\n\
--algo auto prices the candidates with a machine profile (docs/profile.md): the bundled 2xH200 one, or \
--profile FILE (written by `topoplan calibrate`), read and checked before any GPU is touched; each table's \
header line names the profile. Example:\n  \
topoplan bench -g 2 --vs-nccl --profile my.json\n\n\
NCCL is loaded at run time as libnccl.so: on systems that only have libnccl.so.2, put a libnccl.so link to it on \
LD_LIBRARY_PATH. Environment: TOPOPLAN_ALGO overrides --algo; one-shot schedules run on the barrier-free direct \
path (TOPOPLAN_DIRECT=0: the generic lowering; TOPOPLAN_DIRECT_CTAS, TOPOPLAN_DIRECT_SLOT_KB, TOPOPLAN_PDL=0 tune \
it, see docs/cuda.md); TOPOPLAN_CTAS fixes the CTA count of the generic SM path; TOPOPLAN_SCRATCH_MB sets its \
per-GPU scratch ring (default 64). From 512 MiB per GPU a 2-GPU one-shot all-reduce runs its last half on the \
copy engines at the same time (algo column `one-shot+ce`; TOPOPLAN_HYBRID_CE_PCT sets the share, 0 turns it off). \
From 512 KiB to 16 MiB per GPU a one-shot all-reduce in one process reads the peers' inputs directly (pull mode, \
algo column `one-shot-pull`; TOPOPLAN_PULL=0 turns it off, =1 pulls every Simple one-shot call).\n\n\
Several processes (--procs): `-g N --procs` starts N processes of this binary, rank r on GPU r, which exchange \
CUDA IPC handles of their direct-path buffers through a TCP bootstrap on 127.0.0.1 and run the one-shot (direct) \
schedules only (--algo auto or a one-shot variant). Each rank checks its own output against the CPU reference; \
rank 0 prints the table (times: the slowest rank). With --vs-nccl each process also joins an NCCL communicator \
(ncclCommInitRank, rank 0's id sent through the bootstrap), checked and timed on the same buffers, as nccl-tests \
runs under MPI; --cuda-graph captures and replays the calls there too. Buffers are registered with every rank \
(CudaProcComm::register), so from 512 KiB to 16 MiB all-reduce reads the peers' inputs (pull mode) as in one \
process, and from 512 MiB a 2-GPU all-reduce runs on the copy engines as well. The memory lines are each rank's \
figures, the largest over ranks. TOPOPLAN_TIMEOUT bounds each bootstrap wait (default 600 s); rank 0 starts first, \
on a port the OS chooses, and the others join at the address it listens at. Example:\n  \
topoplan bench -g 2 --procs -b 8 -e 1G -f 4 -c 1 --vs-nccl\n\n\
Ranks sharing a GPU (--ranks-per-gpu K): `-g G --ranks-per-gpu K` runs G×K ranks in this process, rank r on GPU \
r / K, to check the n-rank paths on fewer GPUs. Each rank's grids take its share of the SMs so that every rank's \
kernels are resident at once; a path that cannot fit is refused. The hybrid and the copy-engine pair (--algo ce) \
run the direct path instead; the generic copy-engine lowering (TOPOPLAN_CE_PAIR=0) is refused. CUDA_DEVICE_MAX_CONNECTIONS is set to 32 when unset. \
Timings of ranks sharing a GPU are not performance, and every table says so. Example:\n  \
topoplan bench -g 1 --ranks-per-gpu 4 --coll all -d all -o all --counts 0,1,7,65537 -c 1"
)]
pub struct Args {
    /// Smallest size in bytes.
    #[arg(short = 'b', long = "minbytes", default_value = "8", value_parser = parse_size)]
    pub min_bytes: u64,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "128M", value_parser = parse_size)]
    pub max_bytes: u64,
    /// Multiplication factor between sizes.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub factor: u64,
    /// Number of GPUs (ranks), GPUs 0..g.
    #[arg(short = 'g', long = "ngpus", default_value_t = 2)]
    pub ngpus: usize,
    /// Ranks per GPU: `-g G --ranks-per-gpu K` runs G×K ranks in this process, rank r on GPU
    /// r / K, each rank's grids sized so that all ranks' kernels are resident at once (a rank
    /// count that cannot be is refused). For correctness of the n-rank paths on fewer GPUs:
    /// timings of ranks sharing a GPU are not performance. Not with --procs or --vs-nccl.
    #[arg(long = "ranks-per-gpu", default_value_t = 1)]
    pub ranks_per_gpu: usize,
    /// Warm-up calls per measurement.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5)]
    pub warmup: usize,
    /// Timed calls per measurement.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: usize,
    /// Check every element against the CPU reference (1) or not (0).
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u8,
    /// Collective: all-reduce, all-gather, reduce-scatter, broadcast, reduce, or `all`.
    #[arg(long = "coll", default_value = "all-reduce")]
    pub coll: String,
    /// Element type (float, half, bfloat16, double, int32, int64, uint8, int8, or f32, f16, ...),
    /// a comma-separated list, or `all`.
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: String,
    /// Reduction operator: sum, prod, min, max, avg, a comma-separated list, or `all`.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Root rank of broadcast and reduce.
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub root: u32,
    /// Algorithm: auto, one-shot (Simple), one-shot-ll, one-shot-ll128, two-shot, ring, tree, ce
    /// (copy-engine pipeline, 2-GPU all-reduce).
    #[arg(long = "algo", default_value = "auto")]
    pub algo: String,
    /// Machine profile `--algo auto` prices its candidates with (JSON, docs/profile.md; default:
    /// the bundled 2xH200 profile). A bad file is an error naming the file and the field.
    #[arg(long = "profile", value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// Also run NCCL on the same buffers, alternating with ours, and print ratio columns.
    #[arg(long = "vs-nccl")]
    pub vs_nccl: bool,
    /// Capture the timed calls of each measurement into a CUDA graph and time one replay
    /// (nccl-tests' -G); the checked call is a replayed one-call graph too. Not with --algo ce
    #[arg(long = "cuda-graph")]
    pub cuda_graph: bool,
    /// Timed repetitions per size (the median is printed).
    #[arg(long = "runs", default_value_t = 3)]
    pub runs: usize,
    /// Explicit element counts (nccl-tests' count column, comma-separated, 0 allowed) instead of
    /// -b/-e/-f; all-gather and reduce-scatter round them down to a multiple of the GPU count.
    #[arg(long = "counts", value_delimiter = ',')]
    pub counts: Vec<u64>,
    /// Seed of the random input data.
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// One process per GPU (`-g N --procs`: N processes, rank r on GPU r) sharing buffers through
    /// CUDA IPC; one-shot (direct) schedules only; takes --vs-nccl and --cuda-graph.
    #[arg(long = "procs")]
    pub procs: bool,
    /// Also write the measured tables to FILE as JSON (format `topoplan-bench/1`).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Also draw ours against NCCL (busbw and time per size, out of place and in place) into
    /// FILE.svg.
    #[arg(long = "plot", value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Measure nothing: read the tables from a JSON file written by --json (no GPU needed) and
    /// write them with --plot / --json.
    #[arg(long = "from-json", value_name = "FILE", conflicts_with = "from_log")]
    pub from_json: Option<std::path::PathBuf>,
    /// Measure nothing: read the tables from the text output of a `topoplan bench` run (a
    /// recorded log) and write them with --plot / --json.
    #[arg(long = "from-log", value_name = "FILE")]
    pub from_log: Option<std::path::PathBuf>,
}

/// How the ranks run: all GPUs from this process, or this process is one rank of `--procs`.
enum Mode {
    Single,
    Procs {
        comm: Box<CudaProcComm>,
        rv: Rendezvous,
        /// What this rank's communicator took at its creation.
        init: mp::InitMemory,
    },
}

fn map_err(e: CudaError) -> CliError {
    match e {
        CudaError::Input(m) => CliError::input(m),
        other => CliError::failure(other),
    }
}

fn print_header(vs: bool) {
    let cell = if vs {
        "     time   algbw   busbw #wrong  nccl_us nccl_bus #nwrong  speedup"
    } else {
        "     time   algbw   busbw #wrong"
    };
    println!(
        "#{:>12} {:>12} {:>9} {:>6} {:>5} {:>9}  out-of-place: {cell}",
        "size", "count", "type", "redop", "root", "algo"
    );
    println!(
        "#{:>12} {:>12} {:>9} {:>6} {:>5} {:>9}  in-place:     (same columns)",
        "(B)", "(elements)", "", "", "", ""
    );
}

fn fmt_cell(c: &harness::Cell, vs: bool) -> String {
    let w = |x: i64| {
        if x < 0 {
            "N/A".to_string()
        } else {
            x.to_string()
        }
    };
    let mut s = format!(
        "{:>9.2} {:>7.2} {:>7.2} {:>6}",
        c.time_us,
        c.algbw,
        c.busbw,
        w(c.wrong)
    );
    if vs {
        let t = c.nccl_time_us.unwrap_or(f64::NAN);
        s += &format!(
            " {:>8.2} {:>8.2} {:>7} {:>7.2}x",
            t,
            c.nccl_busbw.unwrap_or(f64::NAN),
            w(c.nccl_wrong.unwrap_or(-1)),
            t / c.time_us
        );
    }
    s
}

fn list<T: Copy>(
    arg: &str,
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<Vec<T>, CliError> {
    if arg == "all" {
        return Ok(all.to_vec());
    }
    arg.split(',')
        .map(|x| parse(x.trim()).ok_or_else(|| CliError::input(format!("unknown {what} `{x}`"))))
        .collect()
}

pub fn run(a: Args) -> CliResult {
    if let Some(src) = a.from_json.as_deref().or(a.from_log.as_deref()) {
        return convert(&a, src);
    }
    // Before anything touches a GPU: a bad profile is bad input on any machine.
    let priced = Priced::load(a.profile.as_deref())?;
    check_ranks_per_gpu(&a)?;
    if !a.procs {
        return run_configs(&a, &mut Mode::Single, &priced).map(drop);
    }
    match std::env::var(MP_RANK_VAR) {
        Ok(r) => {
            let rank: u32 = r
                .parse()
                .map_err(|_| CliError::input(format!("{MP_RANK_VAR}={r:?} is not a rank")))?;
            run_child(&a, rank, &priced).map_err(|e| match e {
                CliError::Input(m) => CliError::Input(format!("rank {rank}: {m}")),
                CliError::Failure(m) if m.starts_with(&format!("rank {rank}:")) => {
                    CliError::Failure(m)
                }
                CliError::Failure(m) => CliError::Failure(format!("rank {rank}: {m}")),
            })
        }
        Err(_) => run_parent(&a),
    }
}

/// `--from-json` / `--from-log`: writes what `--json` / `--plot` ask for from a recorded run.
fn convert(a: &Args, src: &std::path::Path) -> CliResult {
    if a.json.is_none() && a.plot.is_none() {
        return Err(CliError::input(
            "--from-json and --from-log need --plot FILE.svg or --json FILE",
        ));
    }
    let r = if a.from_json.is_some() {
        report::load(src)?
    } else {
        report::from_log(src)?
    };
    write_report(a, &r)
}

fn write_report(a: &Args, r: &report::Report) -> CliResult {
    if let Some(p) = &a.json {
        report::save(r, p)?;
    }
    if let Some(p) = &a.plot {
        report::plot(r, p)?;
    }
    Ok(())
}

/// The ranks of a run: GPUs × ranks per GPU.
fn nranks(a: &Args) -> usize {
    a.ngpus * a.ranks_per_gpu.max(1)
}

/// What timings of ranks sharing a GPU are, in every output that shows them.
const SHARED_NOTE: &str = "ranks share GPUs: these timings are not performance";

/// Checks `--ranks-per-gpu` against the other flags, and gives the process every hardware
/// queue before its first CUDA call, which ranks sharing a GPU need.
fn check_ranks_per_gpu(a: &Args) -> CliResult {
    let k = a.ranks_per_gpu;
    if k == 0 {
        return Err(CliError::input("--ranks-per-gpu must be at least 1"));
    }
    if k == 1 {
        return Ok(());
    }
    if nranks(a) > 8 {
        return Err(CliError::input(format!(
            "-g {} --ranks-per-gpu {k} makes {} ranks: at most 8",
            a.ngpus,
            nranks(a)
        )));
    }
    if a.procs {
        return Err(CliError::input(
            "--ranks-per-gpu runs the ranks in one process: processes on one GPU have contexts \
             of their own, which take turns on it, so kernels waiting for each other would hang; \
             not with --procs",
        ));
    }
    if a.vs_nccl {
        return Err(CliError::input(
            "--ranks-per-gpu: NCCL refuses two ranks on one GPU; not with --vs-nccl",
        ));
    }
    if a.plot.is_some() {
        return Err(CliError::input(format!(
            "--ranks-per-gpu: {SHARED_NOTE}; not with --plot"
        )));
    }
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
        // Before any CUDA call and any thread: the driver reads it when it makes a context.
        std::env::set_var(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            cuda::residency::QUEUES.to_string(),
        );
    }
    Ok(())
}

fn effective_algo(a: &Args) -> String {
    params::ALGO.raw().unwrap_or_else(|| a.algo.clone())
}

/// Runs every configuration of `a`, prints its tables, writes `--json` / `--plot`, and returns
/// what it measured.
fn run_configs(a: &Args, mode: &mut Mode, priced: &Priced) -> Result<report::Report, CliError> {
    let dtypes = list(&a.dtype, &DataType::ALL, DataType::parse, "--datatype")?;
    let ops = list(&a.op, &ReduceOp::ALL, ReduceOp::parse, "--op")?;
    let kinds: Vec<CollectiveKind> = if a.coll == "all" {
        vec![
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
            CollectiveKind::Broadcast,
            CollectiveKind::Reduce,
        ]
    } else {
        a.coll
            .split(',')
            .map(|c| {
                CollectiveKind::parse(c)
                    .ok_or_else(|| CliError::input(format!("unknown --coll `{c}`")))
            })
            .collect::<Result<_, _>>()?
    };
    let mut total_wrong = 0i64;
    let mut configs = 0;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut rep = report::Report::new(if a.ranks_per_gpu > 1 {
        format!("topoplan {} # {SHARED_NOTE}", args.join(" "))
    } else {
        format!("topoplan {}", args.join(" "))
    });
    for &kind in &kinds {
        for &dtype in &dtypes {
            for (i, &op) in ops.iter().enumerate() {
                if !kind.reduces() && i > 0 {
                    continue; // the operator does not matter: run once
                }
                total_wrong += run_one(a, kind, dtype, op, mode, priced, &mut rep)?;
                configs += 1;
            }
        }
    }
    println!(
        "# summary: {configs} configuration(s), {total_wrong} wrong element(s): {}{}",
        if total_wrong == 0 { "OK" } else { "FAILED" },
        if a.ranks_per_gpu > 1 {
            format!(" ({SHARED_NOTE})")
        } else {
            String::new()
        }
    );
    // Under --procs every rank runs this; rank 0 (whose output is printed) writes the files.
    let writes =
        !matches!(mode, Mode::Procs { .. }) || std::env::var(MP_RANK_VAR).is_ok_and(|r| r == "0");
    if writes {
        write_report(a, &rep)?;
    }
    if total_wrong > 0 {
        return Err(CliError::failure(format!("{total_wrong} wrong elements")));
    }
    Ok(rep)
}

fn run_one(
    a: &Args,
    kind: CollectiveKind,
    dtype: DataType,
    op: ReduceOp,
    mode: &mut Mode,
    priced: &Priced,
    rep: &mut report::Report,
) -> Result<i64, CliError> {
    let algo = effective_algo(a);
    check_run_args(a, &algo)?;
    let mut total_wrong = 0i64;
    {
        let cfg = bench_config(a, kind, dtype, op, &algo);
        print_title(a, kind, dtype, op, &algo, priced, mode);
        print_header(a.vs_nccl);
        let root = if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
            a.root as i64
        } else {
            -1
        };
        let print_row = |r: &Row| {
            println!(
                " {:>12} {:>12} {:>9} {:>6} {:>5} {:>9}  {}  {}",
                r.size,
                r.count,
                dtype.nccl_name(),
                op.name(),
                root,
                r.algo,
                fmt_cell(&r.oop, a.vs_nccl),
                fmt_cell(&r.ip, a.vs_nccl)
            );
        };
        let rows = match mode {
            Mode::Single => {
                let (rows, mem) =
                    harness::run_with_profile(&cfg, &priced.profile, print_row).map_err(map_err)?;
                print_memory(&rows, &mem);
                rows
            }
            Mode::Procs { comm, rv, init } => {
                let (rows, mem) =
                    mp::run(comm, rv, &cfg, &priced.profile, *init, print_row).map_err(map_err)?;
                print_memory(&rows, &mem);
                rows
            }
        };
        for r in &rows {
            total_wrong += r.oop.wrong.max(0) + r.ip.wrong.max(0);
        }
        rep.tables.push(report::Table {
            collective: kind.name().into(),
            ngpus: a.ngpus,
            procs: matches!(mode, Mode::Procs { .. }),
            dtype: dtype.nccl_name().into(),
            op: op.name().into(),
            algo: algo.clone(),
            cuda_graph: a.cuda_graph,
            rows: rows.iter().map(report::report_row).collect(),
        });
        let wrong: i64 = rows
            .iter()
            .map(|r| r.oop.wrong.max(0) + r.ip.wrong.max(0))
            .sum();
        println!(
            "# {}: out of bounds values : {} {}",
            kind.name(),
            wrong,
            if wrong == 0 { "OK" } else { "FAILED" }
        );
    }
    Ok(total_wrong)
}

/// Refuses an unknown algorithm, impossible sizes or GPU count, and a machine without a CUDA
/// driver.
fn check_run_args(a: &Args, algo: &str) -> Result<(), CliError> {
    if !schedules::ALGOS.contains(&algo) {
        return Err(CliError::input(format!(
            "unknown algorithm `{algo}` (one of {})",
            schedules::ALGOS.join(", ")
        )));
    }
    if a.factor < 2 || a.min_bytes == 0 || a.min_bytes > a.max_bytes || a.ngpus == 0 {
        return Err(CliError::input("need -f >= 2, 0 < -b <= -e and -g >= 1"));
    }
    if !device::driver_present() {
        return Err(CliError::failure(
            "no CUDA driver on this machine (libcuda.so not found): `topoplan bench` needs GPUs",
        ));
    }
    Ok(())
}

/// The harness's configuration: the sizes from -b to -e by -f (or the given counts), rounded
/// down to whole elements for every rank, and the run's settings.
fn bench_config(
    a: &Args,
    kind: CollectiveKind,
    dtype: DataType,
    op: ReduceOp,
    algo: &str,
) -> BenchConfig {
    let mut sizes = Vec::new();
    let mut s = a.min_bytes;
    while s <= a.max_bytes {
        sizes.push(s);
        s = s.saturating_mul(a.factor);
    }
    let elem = dtype.size() as u64;
    let grain = elem
        * if matches!(
            kind,
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        ) {
            nranks(a) as u64
        } else {
            1
        };
    let ksizes: Vec<u64> = if a.counts.is_empty() {
        sizes
            .iter()
            .map(|s| (s / grain) * grain)
            .filter(|&s| s > 0)
            .collect()
    } else {
        a.counts
            .iter()
            .map(|c| (c * elem / grain) * grain)
            .collect()
    };
    BenchConfig {
        // Rank r on GPU r / K.
        ordinals: (0..nranks(a)).map(|r| r / a.ranks_per_gpu.max(1)).collect(),
        kind,
        root: a.root,
        dtype,
        op,
        algo: algo.to_string(),
        sizes: ksizes,
        warmup: a.warmup,
        iters: a.iters,
        check: a.check != 0,
        vs_nccl: a.vs_nccl,
        cuda_graph: a.cuda_graph,
        runs: a.runs,
        seed: a.seed,
    }
}

/// The "# topoplan bench:" title line (after a note when ranks share GPUs).
fn print_title(
    a: &Args,
    kind: CollectiveKind,
    dtype: DataType,
    op: ReduceOp,
    algo: &str,
    priced: &Priced,
    mode: &Mode,
) {
    match mode {
        Mode::Single if a.ranks_per_gpu > 1 => {
            println!("# NOTE: {} ranks on {} GPU(s), {} per GPU: {SHARED_NOTE}", nranks(a), a.ngpus, a.ranks_per_gpu);
            println!("# topoplan bench: {} on {} GPU(s) x {} ranks each ({SHARED_NOTE}), {} {}, algo {}, {}, warmup {} iters {} runs {} (median){}", kind.name(), a.ngpus, a.ranks_per_gpu, dtype.nccl_name(), op.name(), algo, priced.label, a.warmup, a.iters, a.runs, if a.cuda_graph { ", calls replayed from a CUDA graph" } else { "" })
        }
        Mode::Single => println!("# topoplan bench: {} on {} GPU(s), {} {}, algo {}, {}, warmup {} iters {} runs {} (median){}", kind.name(), a.ngpus, dtype.nccl_name(), op.name(), algo, priced.label, a.warmup, a.iters, a.runs, if a.cuda_graph { ", calls replayed from a CUDA graph" } else { "" }),
        Mode::Procs { .. } => println!("# topoplan bench: {} on {} GPU(s) in {} processes (CUDA IPC, one-shot schedules{}), {} {}, algo {}, {}, warmup {} iters {} runs {} (median of the slowest rank){}", kind.name(), a.ngpus, a.ngpus, if a.vs_nccl { "; NCCL: one communicator per process" } else { "" }, dtype.nccl_name(), op.name(), algo, priced.label, a.warmup, a.iters, a.runs, if a.cuda_graph { ", calls replayed from a CUDA graph" } else { "" }),
    }
}

fn print_memory(rows: &[Row], mem: &harness::MemReport) {
    let mib = |b: i64| b as f64 / (1 << 20) as f64;
    println!(
        "# memory (MiB, max over GPUs): free before init {:.0}; init: ours {:.1}{}; taken during the run (both libraries, first calls and leaks, bench buffers excluded): {:.1}",
        mem.free_before as f64 / (1 << 20) as f64,
        mib(mem.ours_init),
        mem.nccl_init
            .map(|x| format!(", NCCL {:.1}", mib(x)))
            .unwrap_or_default(),
        mib(mem.after_run)
    );
    let first: Vec<String> = rows
        .iter()
        .filter(|r| r.mem_first_call.0 != 0 || r.mem_first_call.1.unwrap_or(0) != 0)
        .map(|r| {
            format!(
                "{}B: ours {:.1} NCCL {}",
                r.size,
                mib(r.mem_first_call.0),
                r.mem_first_call
                    .1
                    .map(|x| format!("{:.1}", mib(x)))
                    .unwrap_or("-".into())
            )
        })
        .collect();
    println!(
        "# memory taken by the first call of a size (MiB): {}",
        if first.is_empty() {
            "none".to_string()
        } else {
            first.join("; ")
        }
    );
}

#[cfg(test)]
mod tests;
