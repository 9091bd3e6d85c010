//! The measurement harness behind `topoplan bench`: nccl-tests semantics (sizes, counts, algbw,
//! busbw, out-of-place and in-place), our schedules and NCCL alternating on the same buffers,
//! every element checked against `runtime::reference` when asked, device memory recorded.
//!
//! Timing follows nccl-tests with one thread per GPU (`-t`): each rank's thread enqueues `warmup`
//! calls, meets the other threads, records an event, enqueues `iters` calls, records an event;
//! the call's time is the slowest rank's elapsed time over `iters`. No host synchronisation
//! happens between calls: cross-GPU ordering is on the devices.

// Unsafe: timing events, stream waits and launches through the driver's raw API; each block states why it is sound.
#![allow(unsafe_code)]

use crate::nccl::NcclGroup;
use cuda::device::{drv, Event};
use cuda::graph::{begin_capture, end_capture};
use cuda::group::{CudaGroup, Request};
use cuda::schedules;
use cuda::CudaError;
use cudarc::driver::sys;
use planner::schedule::{Collective, CollectiveKind, Schedule};
use planner::tuner::Profile;
use runtime::reference::buffer_lens;
use runtime::types::{DataType, ReduceOp};
use std::sync::{Arc, Barrier};

mod correctness;
mod data;
mod measure;
pub use correctness::{check_on, check_schedule_on};
pub use cuda::direct::rank_ptrs;
use measure::{largest_bufs, Bench};

#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub ordinals: Vec<usize>,
    pub kind: CollectiveKind,
    pub root: u32,
    pub dtype: DataType,
    pub op: ReduceOp,
    pub algo: String,
    /// nccl-tests sizes in bytes (all-gather / reduce-scatter: the whole gathered buffer).
    pub sizes: Vec<u64>,
    pub warmup: usize,
    pub iters: usize,
    pub check: bool,
    pub vs_nccl: bool,
    /// Capture the calls into a CUDA graph and time its replay (nccl-tests `-G`); the check
    /// call is also a replayed one-call graph.
    pub cuda_graph: bool,
    /// Timed repetitions per size; the median is reported.
    pub runs: usize,
    pub seed: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// -1 when not checked.
    pub wrong: i64,
    pub nccl_time_us: Option<f64>,
    pub nccl_busbw: Option<f64>,
    pub nccl_wrong: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct Row {
    pub size: u64,
    pub count: u64,
    pub algo: String,
    pub oop: Cell,
    pub ip: Cell,
    /// Device memory taken by the first call of this size (bytes, max over ranks): ours, NCCL's.
    pub mem_first_call: (i64, Option<i64>),
}

impl Row {
    /// Stores the measurement of the in-place or out-of-place call.
    pub fn set(&mut self, in_place: bool, cell: Cell) {
        if in_place {
            self.ip = cell;
        } else {
            self.oop = cell;
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct MemReport {
    /// Free device memory (rank 0) before either library initialised, bytes.
    pub free_before: u64,
    /// Bytes taken by our init and NCCL's init (max over ranks).
    pub ours_init: i64,
    pub nccl_init: Option<i64>,
    /// Bytes taken between the end of initialisation and the end of the run (max over GPUs):
    /// first-call allocations plus any leak; flat (0) for ours across thousands of calls.
    pub after_run: i64,
}

#[derive(Clone, Copy)]
struct RawStream(sys::CUstream);
// SAFETY: a CUstream handle may be used from any thread with its context bound.
unsafe impl Send for RawStream {}
unsafe impl Sync for RawStream {}

impl RawStream {
    fn get(self) -> sys::CUstream {
        self.0
    }
}

fn free_mem(g: &CudaGroup) -> Result<Vec<u64>, CudaError> {
    (0..g.nranks())
        .map(|r| {
            g.context(r)
                .mem_get_info()
                .map(|(f, _)| f as u64)
                .map_err(drv)
        })
        .collect()
}

fn max_drop(before: &[u64], after: &[u64]) -> i64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| *b as i64 - *a as i64)
        .max()
        .unwrap_or(0)
}

/// Per-rank element count and (input, output) element lengths for an nccl-tests size.
pub fn geometry(kind: CollectiveKind, nranks: u32, size: u64, elem: u64) -> (u64, u64, u64) {
    let total = size / elem;
    let count = match kind {
        // nccl-tests' size is the whole gathered, scattered or exchanged buffer.
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            total / nranks as u64
        }
        _ => total,
    };
    let (i, o) = buffer_lens(&coll_of(kind, 0), nranks, count as usize);
    (count, i as u64, o as u64)
}

pub(crate) fn coll_of(kind: CollectiveKind, root: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, root),
        k => Collective::new(k),
    }
}

enum Lib<'a> {
    Ours(&'a CudaGroup, &'a Arc<Schedule>),
    Nccl(&'a NcclGroup),
}

impl Lib<'_> {
    #[allow(clippy::too_many_arguments)]
    fn enqueue(
        &self,
        rank: usize,
        cfg: &BenchConfig,
        count: u64,
        i: &[u64],
        o: &[u64],
        s: sys::CUstream,
    ) -> Result<(), CudaError> {
        match self {
            Lib::Ours(g, sched) => g.enqueue(
                rank,
                &Request {
                    schedule: sched,
                    count,
                    dtype: cfg.dtype,
                    op: cfg.op,
                    inputs: i,
                    outputs: o,
                },
                s,
            ),
            Lib::Nccl(n) => n.rank(rank).enqueue(
                cfg.kind, cfg.root, i[rank], o[rank], count, cfg.dtype, cfg.op, s,
            ),
        }
    }

    /// One call on every rank from this thread, then wait for it.
    fn once(
        &self,
        g: &CudaGroup,
        cfg: &BenchConfig,
        count: u64,
        i: &[u64],
        o: &[u64],
        streams: &[RawStream],
    ) -> Result<(), CudaError> {
        let nccl = matches!(self, Lib::Nccl(_));
        if cfg.cuda_graph {
            for (r, s) in streams.iter().enumerate() {
                g.context(r).bind_to_thread().map_err(drv)?;
                begin_capture(s.0)?;
            }
        }
        if nccl {
            cudarc::nccl::result::group_start()
                .map_err(|e| CudaError::Nccl(format!("{:?}", e.0)))?;
        }
        for (r, s) in streams.iter().enumerate() {
            self.enqueue(r, cfg, count, i, o, s.0)?;
        }
        if nccl {
            cudarc::nccl::result::group_end().map_err(|e| CudaError::Nccl(format!("{:?}", e.0)))?;
        }
        if cfg.cuda_graph {
            let mut graphs = Vec::new();
            for (r, s) in streams.iter().enumerate() {
                g.context(r).bind_to_thread().map_err(drv)?;
                graphs.push(end_capture(s.0)?);
            }
            for (r, (gr, s)) in graphs.iter().zip(streams).enumerate() {
                g.context(r).bind_to_thread().map_err(drv)?;
                gr.launch(s.0)?;
            }
            for (r, s) in streams.iter().enumerate() {
                g.context(r).bind_to_thread().map_err(drv)?;
                // SAFETY: stream of that context.
                unsafe { sys::cuStreamSynchronize(s.0) }
                    .result()
                    .map_err(drv)?;
            }
            return Ok(());
        }
        for (r, s) in streams.iter().enumerate() {
            g.context(r).bind_to_thread().map_err(drv)?;
            // SAFETY: stream of that context.
            unsafe { sys::cuStreamSynchronize(s.0) }
                .result()
                .map_err(drv)?;
        }
        Ok(())
    }

    /// Timed: one thread per rank; returns the slowest rank's microseconds per call.
    fn time(
        &self,
        g: &CudaGroup,
        cfg: &BenchConfig,
        count: u64,
        i: &[u64],
        o: &[u64],
        streams: &[RawStream],
    ) -> Result<f64, CudaError> {
        let n = streams.len();
        let bar = Barrier::new(n);
        let results: Vec<Result<f64, CudaError>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..n)
                .map(|r| {
                    let bar = &bar;
                    let s = streams[r];
                    sc.spawn(move || -> Result<f64, CudaError> {
                        let s = s.get();
                        let ctx = g.context(r);
                        ctx.bind_to_thread().map_err(drv)?;
                        for _ in 0..cfg.warmup {
                            self.enqueue(r, cfg, count, i, o, s)?;
                        }
                        let (e0, e1) = (Event::new(ctx)?, Event::new(ctx)?);
                        // SAFETY: a stream of this context (bound by Event::new).
                        unsafe { sys::cuStreamSynchronize(s) }
                            .result()
                            .map_err(drv)?;
                        // Graph mode: the timed calls are one captured graph, replayed once
                        // untimed first (instantiation and upload are not the calls' cost).
                        let graph = if cfg.cuda_graph {
                            begin_capture(s)?;
                            let enq = (0..cfg.iters)
                                .try_for_each(|_| self.enqueue(r, cfg, count, i, o, s));
                            let gr = end_capture(s)?;
                            enq?;
                            gr.launch(s)?;
                            // SAFETY: stream of this context.
                            unsafe { sys::cuStreamSynchronize(s) }
                                .result()
                                .map_err(drv)?;
                            Some(gr)
                        } else {
                            None
                        };
                        bar.wait();
                        e0.record(s)?;
                        cuda::direct::take_launch_ns();
                        let host = std::time::Instant::now();
                        if let Some(gr) = &graph {
                            gr.launch(s)?;
                        } else {
                            for _ in 0..cfg.iters {
                                self.enqueue(r, cfg, count, i, o, s)?;
                            }
                        }
                        e1.record(s)?;
                        if cuda::device::host_diagnostic() {
                            // Host time to enqueue the timed calls: above the GPU time per
                            // call, the host is what the table measures.
                            let lib = match self {
                                Lib::Ours(..) => "ours",
                                Lib::Nccl(_) => "nccl",
                            };
                            let per_call = |s: f64| s * 1e6 / cfg.iters.max(1) as f64;
                            let launch = cuda::direct::take_launch_ns() as f64 * 1e-9;
                            eprintln!(
                                "# host enqueue: {lib} rank {r}, {count} elements, {:.2} us/call \
                                 ({:.2} in the direct path's launch)",
                                per_call(host.elapsed().as_secs_f64()),
                                per_call(launch),
                            );
                        }
                        let ms = e1.ms_since(&e0)?;
                        Ok(ms as f64 * 1000.0 / cfg.iters.max(1) as f64)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(CudaError::Input("bench thread panicked".into())))
                })
                .collect()
        });
        let mut worst = 0f64;
        for r in results {
            worst = worst.max(r?);
        }
        Ok(worst)
    }
}

/// The table's algo column for `algo` running `sched` on `count` elements per rank: `+ce` where
/// the hybrid puts part of the message on the copy engines (not under graph capture), `-pull`
/// where pull mode reads the peers' inputs. One process and `--procs` alike (there the bench's
/// buffers are registered and the copy engines enabled where a size needs them).
/// What the bench runs at `size` bytes: the per-rank count, the row's algorithm label and the
/// schedule. The copy-engine pipeline is refused under graph capture: its host-side counters
/// would be baked into the graph, and a replay would wait forever.
/// `auto` is priced with `profile`.
pub(crate) fn sized_schedule(
    cfg: &BenchConfig,
    profile: &Profile,
    coll: &Collective,
    n: u32,
    size: u64,
) -> Result<(u64, String, Arc<Schedule>), CudaError> {
    let elem = cfg.dtype.size() as u64;
    let (count, _, _) = geometry(cfg.kind, n, size, elem);
    let (algo, sched) = schedules::pick(coll, n, count * elem, &cfg.algo, profile)
        .map_err(|e| CudaError::Input(e.to_string()))?;
    if cfg.cuda_graph && algo == "ce" {
        return Err(CudaError::Input(
            "the copy-engine pipeline (ce) cannot run under CUDA graph capture".into(),
        ));
    }
    let algo = algo_label(algo, &sched, cfg, count);
    Ok((count, algo, Arc::new(sched)))
}

pub(crate) fn algo_label(algo: String, sched: &Schedule, cfg: &BenchConfig, count: u64) -> String {
    let elem = cfg.dtype.size() as u64;
    // Ranks sharing a GPU run neither the hybrid nor the copy-engine pair (`CudaGroup`).
    let shared = shares_a_gpu(&cfg.ordinals);
    if shared && cuda::ce_pair::applies(sched) {
        format!("{algo}>one-shot")
    } else if !shared && !cfg.cuda_graph && cuda::hybrid::share(sched, count, elem) > 0 {
        format!("{algo}+ce")
    } else if sched.algorithm == planner::schedule::Algorithm::OneShot
        && cuda::direct::enabled()
        && cuda::direct::pull::wanted(cfg.kind, sched.protocol, count * elem)
    {
        format!("{algo}-pull")
    } else {
        algo
    }
}

/// Seed of the input data of size number `size_index`, in place or not: the one-process and
/// the multi-process harness must draw the same data.
pub(crate) fn data_seed(seed: u64, size_index: usize, in_place: bool) -> u64 {
    seed ^ ((size_index as u64) << 8) ^ in_place as u64
}

/// nccl-tests' algbw (GB/s) of `size` bytes in `time_us`.
pub(crate) fn algbw(size: u64, time_us: f64) -> f64 {
    size as f64 / time_us / 1e3
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Whether some ordinal repeats: ranks share that GPU (timings are then not performance).
pub fn shares_a_gpu(ordinals: &[usize]) -> bool {
    ordinals
        .iter()
        .enumerate()
        .any(|(i, o)| ordinals[..i].contains(o))
}

/// Runs the benchmark with `auto` priced by the bundled profile ([`run_with_profile`]).
pub fn run(
    cfg: &BenchConfig,
    on_row: impl FnMut(&Row),
) -> Result<(Vec<Row>, MemReport), CudaError> {
    run_with_profile(cfg, Profile::bundled(), on_row)
}

/// Runs the benchmark; `auto` prices its candidates with `profile` (`topoplan bench
/// --profile`); `on_row` sees each size's row as soon as it is measured.
pub fn run_with_profile(
    cfg: &BenchConfig,
    profile: &Profile,
    mut on_row: impl FnMut(&Row),
) -> Result<(Vec<Row>, MemReport), CudaError> {
    let n = cfg.ordinals.len() as u32;
    if cfg.vs_nccl && shares_a_gpu(&cfg.ordinals) {
        return Err(CudaError::Input(
            "NCCL refuses two ranks on one GPU: --vs-nccl needs one rank per GPU".into(),
        ));
    }
    // Contexts first (so that "before" excludes the CUDA context itself), then our init.
    let ctxs = cuda::device::open_devices(&cfg.ordinals)?;
    let before: Vec<u64> = ctxs
        .iter()
        .map(|c| c.mem_get_info().map(|(f, _)| f as u64).map_err(drv))
        .collect::<Result<_, _>>()?;
    let g = CudaGroup::new(&cfg.ordinals)?;
    g.prepare(cfg.dtype)?;
    let after_ours = free_mem(&g)?;
    let mut mem = MemReport {
        free_before: before[0],
        ours_init: max_drop(&before, &after_ours),
        nccl_init: None,
        after_run: 0,
    };
    let nccl = if cfg.vs_nccl {
        let x = NcclGroup::new(&cfg.ordinals)?;
        let after = free_mem(&g)?;
        mem.nccl_init = Some(max_drop(&after_ours, &after));
        Some(x)
    } else {
        None
    };
    let bufs = largest_bufs(cfg, &g, n)?;
    let mut streams = Vec::new();
    for r in 0..n as usize {
        streams.push(RawStream(cuda::device::create_stream(g.context(r))?));
    }
    // Measured once the benchmark's own buffers exist: what follows is the libraries' doing.
    let after_init = free_mem(&g)?;
    let bench = Bench {
        cfg,
        g: &g,
        nccl: nccl.as_ref(),
        bufs: &bufs,
        streams: &streams,
        n,
    };
    let mut rows = Vec::new();
    let coll = coll_of(cfg.kind, cfg.root);
    for (si, &size) in cfg.sizes.iter().enumerate() {
        let row = bench.row(profile, &coll, si, size)?;
        on_row(&row);
        rows.push(row);
    }
    for (r, s) in streams.iter().enumerate() {
        g.context(r).bind_to_thread().map_err(drv)?;
        // SAFETY: created above, destroyed once, after all work on it finished.
        unsafe {
            let _ = sys::cuStreamSynchronize(s.0);
            let _ = sys::cuStreamDestroy_v2(s.0);
        }
    }
    mem.after_run = max_drop(&after_init, &free_mem(&g)?);
    drop(nccl);
    Ok((rows, mem))
}
