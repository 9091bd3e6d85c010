//! `topoplan run`: execute collectives with the runtime, check every element against the serial
//! reference, and print an nccl-tests style table.

use super::error::{CliError, CliResult};
use super::launch::start_ranks;
use super::sizes::parse_size;
use planner::schedule::{CollectiveKind, Protocol};
use runtime::check::{collective_for, Case};
use runtime::config::{Config, TransportChoice};
use runtime::perf::{measure, Sample};
use runtime::{CommError, Communicator, DataType, ReduceOp};
use std::process::{Command, Stdio};

mod table;
use table::{header, table};

#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Execute collectives with the runtime and check every element (nccl-tests style)",
    long_about = "Runs a collective over a range of sizes on N ranks, checks every element of every rank's output \
against topoplan's serial reference, and prints nccl-tests' columns: size, count, type, redop, root, then time, \
algbw, busbw and #wrong for out-of-place and in-place runs.\n\n\
Ranks are threads of this process (--mode threads, like ncclCommInitAll) or separate processes on this host \
(--mode procs: topoplan starts N copies of itself with torchrun-style RANK/WORLD_SIZE, rank 0 first on a port the \
OS chooses, the others with the id it listens at in TOPOPLAN_UNIQUE_ID, joined over shared memory or, with \
--transport tcp, over TCP). Under torchrun, pass --from-env and every process becomes the rank its environment names.\n\n\
Input data are random small integers (never zero), so every reduction order gives the exact reference result and \
#wrong must be 0. Exit status: 0 success, 1 a wrong element or a failed collective, 2 bad input or usage \
(including a forced --algo/--proto/--channels no schedule can honour).",
    after_help = "EXAMPLES:
  topoplan run --backend cpu --ranks 4 --collective all-reduce -b 8 -e 64M -f 4
  topoplan run --ranks 8 --collective all-gather -d bf16 -b 1K -e 16M -f 4 --mode procs
  topoplan run --ranks 4 --collective reduce-scatter -o max --algo ring --channels 2 --memcpy
  torchrun --nproc-per-node 4 $(which topoplan) run --from-env -b 1M -e 64M"
)]
pub struct Args {
    /// Backend: `cpu` (threads, shared memory, TCP). The CUDA backend runs under `topoplan bench`.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Number of ranks (ignored with --from-env).
    #[arg(long, short = 'g', default_value_t = 2)]
    ranks: u32,
    /// all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all or sendrecv.
    #[arg(long, short = 'c', default_value = "all-reduce")]
    collective: String,
    /// Smallest size in bytes (nccl-tests' meaning per collective; K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "8")]
    minbytes: String,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "32M")]
    maxbytes: String,
    /// Multiply the size by this factor between steps.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    stepfactor: u64,
    /// Element type: f32 f64 f16 bf16 i32 i64 u8 i8 (or nccl-tests' names: float, half, ...).
    #[arg(short = 'd', long = "datatype", default_value = "f32")]
    datatype: String,
    /// Reduction: sum, prod, min, max, avg.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    op: String,
    /// Root rank of broadcast and reduce.
    #[arg(short = 'r', long, default_value_t = 0)]
    root: u32,
    /// Timed iterations per size.
    #[arg(short = 'n', long, default_value_t = 20)]
    iters: u32,
    /// Warm-up iterations per size.
    #[arg(short = 'w', long, default_value_t = 5)]
    warmup: u32,
    /// Check results (0 to skip the checked run; #wrong then shows N/A).
    #[arg(long, default_value_t = 1)]
    check: u8,
    /// threads (one process) or procs (one process per rank).
    #[arg(long, default_value = "threads")]
    mode: String,
    /// Between processes: auto (shared memory on one host, TCP across), shm, tcp.
    #[arg(long)]
    transport: Option<String>,
    /// Force an algorithm (ring, tree, one-shot, two-shot, direct, ...); default: the planner's choice.
    #[arg(long)]
    algo: Option<String>,
    /// Force a protocol (Simple, LL128, LL).
    #[arg(long)]
    proto: Option<String>,
    /// Force the number of channels.
    #[arg(long)]
    channels: Option<u32>,
    /// Payload bytes per slot (the largest message between two ranks).
    #[arg(long)]
    slot_bytes: Option<usize>,
    /// Seconds a collective may wait without progress before failing.
    #[arg(long)]
    timeout: Option<String>,
    /// Also print the bandwidth of a plain memcpy of the same size (the CPU ceiling).
    #[arg(long)]
    memcpy: bool,
    /// Be one rank of a job described by RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun).
    #[arg(long)]
    from_env: bool,
    /// Seed of the random input.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

struct Plan {
    kind: CollectiveKind,
    dtype: DataType,
    op: ReduceOp,
    sizes: Vec<u64>,
    cfg: Config,
}

fn plan(a: &Args) -> Result<Plan, CliError> {
    if a.backend != "cpu" {
        return Err(CliError::input(format!(
            "--backend {}: `topoplan run` drives the CPU backend; GPUs are benchmarked with `topoplan bench`",
            a.backend
        )));
    }
    let kind = CollectiveKind::parse(&a.collective).ok_or_else(|| {
        CliError::input(format!(
            "--collective {:?}: expected one of {}",
            a.collective,
            CollectiveKind::ALL.map(|k| k.name()).join(", ")
        ))
    })?;
    let dtype = DataType::parse(&a.datatype).ok_or_else(|| {
        CliError::input(format!(
            "--datatype {:?}: expected one of {}",
            a.datatype,
            DataType::ALL.map(|d| d.name()).join(", ")
        ))
    })?;
    let op = ReduceOp::parse(&a.op).ok_or_else(|| {
        CliError::input(format!("--op {:?}: expected sum prod min max avg", a.op))
    })?;
    let lo = parse_size(&a.minbytes).map_err(|e| CliError::input(format!("-b: {e}")))?;
    let hi = parse_size(&a.maxbytes).map_err(|e| CliError::input(format!("-e: {e}")))?;
    if lo > hi {
        return Err(CliError::input(format!("-b {lo} is larger than -e {hi}")));
    }
    if a.stepfactor < 2 && lo != hi {
        return Err(CliError::input("-f must be at least 2"));
    }
    if a.ranks == 0 || a.ranks > 1024 {
        return Err(CliError::input(format!(
            "--ranks {}: expected 1 to 1024",
            a.ranks
        )));
    }
    if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce)
        && a.root >= a.ranks
        && !a.from_env
    {
        return Err(CliError::input(format!(
            "--root {} is not below --ranks {}",
            a.root, a.ranks
        )));
    }
    let mut sizes = vec![lo];
    while *sizes.last().expect("nonempty") < hi {
        let next = sizes
            .last()
            .expect("nonempty")
            .saturating_mul(a.stepfactor.max(2))
            .min(hi);
        sizes.push(next);
    }
    check_memory(a, &sizes)?;
    check_forced_algo(a, kind)?;
    let cfg = config(a)?;
    Ok(Plan {
        kind,
        dtype,
        op,
        sizes,
        cfg,
    })
}

/// `--algo` names one collective's algorithm here, so an algorithm that cannot run it is an
/// error, as `plan` answers for the same request. (The runtime ignores a `TOPOPLAN_ALGO` that
/// cannot run a collective, `direct` for all-to-all and sendrecv and the others otherwise: that
/// variable applies to a whole job's collectives.)
fn check_forced_algo(a: &Args, kind: CollectiveKind) -> Result<(), CliError> {
    let Some(x) = &a.algo else {
        return Ok(());
    };
    let direct_only = matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv);
    let is_direct = runtime::plan::parse_algorithm(x) == Some(planner::schedule::Algorithm::Direct);
    if direct_only && !is_direct {
        return Err(CliError::input(format!(
            "--algo {x}: {} runs the direct algorithm only (--algo direct, or no --algo)",
            kind.name()
        )));
    }
    if is_direct && !direct_only {
        return Err(CliError::input(format!(
            "--algo direct runs all-to-all and sendrecv only, not {}",
            kind.name()
        )));
    }
    Ok(())
}

/// The runtime's configuration: the environment's, then the flags that override it.
fn config(a: &Args) -> Result<Config, CliError> {
    let mut cfg = Config::from_env().map_err(|e| CliError::input(e.to_string()))?;
    if let Some(t) = &a.timeout {
        cfg.timeout = runtime::config::parse_duration(t)
            .ok_or_else(|| CliError::input(format!("--timeout {t:?}: expected e.g. 30s")))?;
    }
    if let Some(x) = &a.algo {
        runtime::plan::parse_algorithm(x).ok_or_else(|| {
            CliError::input(format!(
                "--algo {x:?}: expected one of {}",
                runtime::plan::ALGORITHMS.join(", ")
            ))
        })?;
        cfg.algorithm = Some(x.clone());
    }
    if let Some(p) = &a.proto {
        cfg.protocol = Some(Protocol::parse(p).ok_or_else(|| {
            CliError::input(format!("--proto {p:?}: expected Simple, LL128 or LL"))
        })?);
    }
    if let Some(c) = a.channels {
        super::common::check_channels(c)?;
        cfg.channels = Some(c);
    }
    if let Some(b) = a.slot_bytes {
        if !(64..=1 << 30).contains(&b) {
            return Err(CliError::input("--slot-bytes must be between 64 and 1 GiB"));
        }
        cfg.slot_bytes = b;
    }
    if let Some(t) = &a.transport {
        cfg.transport = match t.as_str() {
            "auto" => TransportChoice::Auto,
            "shm" => TransportChoice::Shm,
            "tcp" => TransportChoice::Tcp,
            _ => {
                return Err(CliError::input(format!(
                    "--transport {t:?}: expected auto, shm or tcp"
                )))
            }
        };
    }
    Ok(cfg)
}

/// Bytes a run of `sizes` holds at its peak, roughly and from above: every rank's input, output
/// and in-place buffers at the largest size, and the reference outputs of every size (threads
/// keep all ranks' references; each process of `--mode procs` computes all ranks' at one size).
fn memory_needed(a: &Args, sizes: &[u64]) -> u128 {
    let n = a.ranks as u128;
    let hi = sizes.iter().copied().max().unwrap_or(0) as u128;
    let buffers = n * 4 * hi;
    let references = if a.check == 0 {
        0
    } else if a.mode == "procs" || a.from_env {
        n * n * hi
    } else {
        n * 2 * sizes.iter().map(|&s| s as u128).sum::<u128>()
    };
    buffers + references
}

/// Refuses a sweep whose buffers would not fit in the memory available now, instead of
/// aborting on a failed allocation halfway.
fn check_memory(a: &Args, sizes: &[u64]) -> Result<(), CliError> {
    let Some(avail) = super::common::available_memory() else {
        return Ok(());
    };
    let need = memory_needed(a, sizes);
    if need > avail as u128 {
        return Err(CliError::input(format!(
            "-e {} on {} ranks needs about {:.1} GiB of buffers and references; {:.1} GiB of memory is available (lower -e, --ranks, or pass --check 0)",
            sizes.iter().max().unwrap_or(&0),
            a.ranks,
            need as f64 / (1u64 << 30) as f64,
            avail as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(())
}

/// Per-rank element count for a size in bytes (nccl-tests: all-gather's size is the whole
/// output, reduce-scatter's the whole input, all-to-all's the whole buffer).
fn count_for(kind: CollectiveKind, bytes: u64, dtype: DataType, n: u32) -> usize {
    let blocks = match kind {
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            n as u64
        }
        _ => 1,
    };
    (bytes / dtype.size() as u64 / blocks) as usize
}

fn cases(p: &Plan, n: u32, root: u32, seed: u64) -> Vec<(u64, [Case; 2])> {
    p.sizes
        .iter()
        .map(|&b| {
            let count = count_for(p.kind, b, p.dtype, n);
            let mk = |in_place| Case {
                coll: collective_for(p.kind, n, root),
                dtype: p.dtype,
                op: p.op,
                count,
                in_place,
                seed: seed ^ b,
            };
            (b, [mk(false), mk(true)])
        })
        .collect()
}

/// Runs every size on one rank; returns per size (out-of-place, in-place) samples.
fn rank_loop(
    comm: &mut Communicator,
    p: &Plan,
    a: &Args,
    expected: &dyn Fn(usize, usize) -> Option<Vec<u8>>,
) -> Result<Vec<[Sample; 2]>, CommError> {
    let n = comm.nranks();
    let mut out = Vec::new();
    for (i, (_, pair)) in cases(p, n, a.root, a.seed).iter().enumerate() {
        let mut s = [Sample::default(); 2];
        for (j, c) in pair.iter().enumerate() {
            let want = if a.check != 0 { expected(i, j) } else { None };
            s[j] = measure(
                comm,
                c,
                want.as_deref(),
                a.check != 0,
                a.warmup,
                a.iters.max(1),
            )?;
        }
        out.push(s);
    }
    Ok(out)
}

fn describe(comm: &mut Communicator, p: &Plan, root: u32) -> String {
    let coll = collective_for(p.kind, comm.nranks(), root);
    let b = *p.sizes.last().unwrap_or(&0);
    match comm.schedule_for(&coll, b) {
        Ok(s) => format!(
            "{} / {} / {} channel(s) at {b} B",
            s.algorithm.name(),
            s.protocol.name(),
            s.channels
        ),
        Err(e) => format!("no schedule: {e}"),
    }
}

/// A run's error as an exit code: bad input (2) for usage errors, and for a schedule that cannot
/// be made when the user forced the algorithm, protocol, channels or a plan file (as `plan`
/// answers for the same request); a failure (1) otherwise.
fn comm_err(p: &Plan) -> impl Fn(CommError) -> CliError + '_ {
    move |e| {
        let forced = p.cfg.algorithm.is_some()
            || p.cfg.protocol.is_some()
            || p.cfg.channels.is_some()
            || p.cfg.plan_file.is_some();
        if e.is_usage() || (forced && matches!(e, CommError::Plan(_))) {
            CliError::input(e)
        } else {
            CliError::failure(e)
        }
    }
}

pub fn run(a: Args) -> CliResult {
    let p = plan(&a)?;
    if a.from_env {
        return run_from_env(&a, &p);
    }
    match a.mode.as_str() {
        "threads" => run_threads(&a, &p),
        "procs" => run_procs(&a, &p),
        m => Err(CliError::input(format!(
            "--mode {m:?}: expected threads or procs"
        ))),
    }
}

fn run_threads(a: &Args, p: &Plan) -> CliResult {
    let n = a.ranks;
    let mut comms = Communicator::init_all(n, p.cfg.clone()).map_err(comm_err(p))?;
    let sched = describe(&mut comms[0], p, a.root);
    header(p, n, a, "threads", &sched);
    // The reference outputs are computed once, on demand, and shared by the rank threads.
    let all = cases(p, n, a.root, a.seed);
    let expected: Vec<[Vec<Option<Vec<u8>>>; 2]> = if a.check != 0 {
        all.iter()
            .map(|(_, [o, i])| [o.expected(n), i.expected(n)])
            .collect()
    } else {
        Vec::new()
    };
    let results: Vec<Result<Vec<[Sample; 2]>, CommError>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter_mut()
            .map(|c| {
                let exp = &expected;
                s.spawn(move || {
                    let r = c.rank() as usize;
                    rank_loop(c, p, a, &|i, j| exp.get(i).and_then(|e| e[j][r].clone()))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CommError::Transport("a rank thread panicked".into())))
            })
            .collect()
    });
    let mut rows = None;
    for r in results {
        let r = r.map_err(comm_err(p))?;
        rows.get_or_insert(r);
    }
    finish(table(p, n, a, &rows.unwrap_or_default()))
}

fn finish(wrong: u64) -> CliResult {
    if wrong > 0 {
        return Err(CliError::failure(format!("{wrong} wrong element(s)")));
    }
    Ok(())
}

fn run_from_env(a: &Args, p: &Plan) -> CliResult {
    let env = runtime::EnvRank::from_lookup(|k| std::env::var(k).ok())
        .map_err(|e| CliError::input(e.to_string()))?;
    let mut comm = Communicator::from_env_rank(&env, p.cfg.clone()).map_err(comm_err(p))?;
    let n = comm.nranks();
    if matches!(p.kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) && a.root >= n {
        return Err(CliError::input(format!(
            "--root {} is not below the world size {n}",
            a.root
        )));
    }
    let sched = describe(&mut comm, p, a.root);
    let me = comm.rank();
    if me == 0 {
        header(
            p,
            n,
            a,
            &format!("processes over {}", comm.transport_name()),
            &sched,
        );
    }
    let all = cases(p, n, a.root, a.seed);
    let rows = rank_loop(&mut comm, p, a, &|i, j| {
        all[i].1[j].expected(n).swap_remove(me as usize)
    })
    .map_err(comm_err(p))?;
    // Every rank knows the totals (measure sums #wrong over ranks); rank 0 prints.
    let wrong: u64 = rows.iter().flat_map(|r| r.iter().map(|s| s.wrong)).sum();
    if me == 0 {
        table(p, n, a, &rows);
    }
    finish(wrong)
}

fn run_procs(a: &Args, p: &Plan) -> CliResult {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find my own binary: {e}")))?;
    // Re-run this command line as every rank, with --from-env added. Rank 0 binds a port the
    // OS chooses and hands its id to the others (`launch::start_ranks`).
    let args: Vec<String> = std::env::args()
        .skip(1)
        .chain(["--from-env".to_string()])
        .collect();
    let mut kids = start_ranks(a.ranks, "TOPOPLAN_UNIQUE_ID", p.cfg.timeout, |r| {
        let mut c = Command::new(&exe);
        c.args(&args)
            .env("RANK", r.to_string())
            .env("LOCAL_RANK", r.to_string())
            .env("WORLD_SIZE", a.ranks.to_string())
            .stdout(if r == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit());
        c
    })?;
    let mut worst = 0;
    for (r, k) in kids.iter_mut().enumerate() {
        let st = k
            .wait()
            .map_err(|e| CliError::failure(format!("rank {r}: {e}")))?;
        if !st.success() {
            worst = worst.max(st.code().unwrap_or(1));
        }
    }
    match worst {
        0 => Ok(()),
        2 => Err(CliError::input("a rank rejected its input (see above)")),
        _ => Err(CliError::failure("a rank failed (see above)")),
    }
}
