//! `topoplan bench --procs`: the benchmark with one process per GPU ([`CudaProcComm`], CUDA IPC).
//!
//! Every rank's process runs this with the same configuration. Per size and aliasing: fill this
//! rank's input with `random_input_bytes(seed, rank)` (poisoned output first), run one checked
//! call and compare this rank's output with the reference (every process can compute every
//! rank's input from the seed), then per timed run: `warmup` calls, a barrier, events around
//! `iters` calls on this rank's stream. The ranks then all-gather (#wrong, times) so every rank
//! holds the same row: the slowest rank's time per run, the median run, the wrong elements
//! summed over ranks. Only one-shot (direct) schedules run here. With `vs_nccl`, NCCL (one
//! communicator per process, `ncclCommInitRank`) runs on the same buffers: checked the same way,
//! and timed in runs that alternate with ours.

// Unsafe: timing events and device copies through the driver's raw API; each block states why it is sound.
#![allow(unsafe_code)]

use crate::harness::{algo_label, coll_of, geometry, median, BenchConfig, MemReport, Row};
use crate::nccl::NcclRank;
use cuda::device::{drv, DevBuf, Event};
use cuda::graph::{begin_capture, end_capture, Graph};
use cuda::ipc::{check_direct, CudaProcComm, ProcRequest, RegisteredBuffer};
use cuda::schedules;
use cuda::CudaError;
use cuda::RankCall;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::{Collective, Schedule};
use runtime::bootstrap::Rendezvous;
use runtime::reference::count_wrong;
use std::sync::Arc;

mod measure;
use measure::RankBench;

/// What the harness needs from the other processes (the bootstrap in `topoplan bench`).
pub trait Meet {
    fn barrier(&mut self) -> Result<(), CudaError>;
    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CudaError>;
}

impl Meet for Rendezvous {
    fn barrier(&mut self) -> Result<(), CudaError> {
        Ok(Rendezvous::barrier(self)?)
    }
    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CudaError> {
        Ok(Rendezvous::all_gather(self, mine)?)
    }
}

/// A stream of this rank's context, synchronised and destroyed on drop.
struct Stream {
    ctx: Arc<CudaContext>,
    s: sys::CUstream,
}

impl Stream {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let s = cuda::device::create_stream(ctx)?;
        Ok(Self {
            ctx: ctx.clone(),
            s,
        })
    }

    fn sync(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: a stream of this context.
        unsafe { sys::cuStreamSynchronize(self.s) }
            .result()
            .map_err(drv)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: created in `new`, destroyed once, after its work finished.
            unsafe {
                let _ = sys::cuStreamSynchronize(self.s);
                let _ = sys::cuStreamDestroy_v2(self.s);
            }
        }
    }
}

/// Encodes one rank's result of a cell: #wrong (-1: not checked), then µs per call per run.
pub fn encode_cell(wrong: i64, times_us: &[f64]) -> Vec<u8> {
    let mut b = wrong.to_le_bytes().to_vec();
    for t in times_us {
        b.extend_from_slice(&t.to_le_bytes());
    }
    b
}

/// Combines every rank's [`encode_cell`]: wrong elements summed (-1 if unchecked), per run the
/// slowest rank, then the median run.
pub fn combine_cells(table: &[Vec<u8>], runs: usize) -> Result<(i64, f64), CudaError> {
    let mut wrong = 0i64;
    let mut worst = vec![0f64; runs];
    for (r, b) in table.iter().enumerate() {
        if b.len() != 8 + 8 * runs {
            return Err(CudaError::Input(format!(
                "rank {r} sent a result of {} bytes, expected {} ({runs} runs)",
                b.len(),
                8 + 8 * runs
            )));
        }
        let w = i64::from_le_bytes(b[..8].try_into().expect("8"));
        wrong = if w < 0 || wrong < 0 { -1 } else { wrong + w };
        for (i, t) in worst.iter_mut().enumerate() {
            let at = 8 + 8 * i;
            *t = t.max(f64::from_le_bytes(b[at..at + 8].try_into().expect("8")));
        }
    }
    Ok((wrong, median(worst)))
}

/// Which library a call runs.
#[derive(Clone, Copy)]
enum Lib<'a> {
    Ours,
    Nccl(&'a NcclRank),
}

struct Ctx<'a> {
    comm: &'a CudaProcComm,
    lib: Lib<'a>,
    cfg: &'a BenchConfig,
    stream: &'a Stream,
    sched: &'a Schedule,
    count: u64,
    input: u64,
    output: u64,
    /// The registered bench buffer `input` lies in (pull mode may read it from the peers).
    registered: RegisteredBuffer,
}

impl Ctx<'_> {
    fn enqueue(&self) -> Result<(), CudaError> {
        match self.lib {
            Lib::Ours => self.comm.enqueue(
                &ProcRequest {
                    call: RankCall {
                        schedule: self.sched,
                        count: self.count,
                        dtype: self.cfg.dtype,
                        op: self.cfg.op,
                        input: self.input,
                        output: self.output,
                    },
                    registered_input: Some(self.registered),
                },
                self.stream.s,
            ),
            Lib::Nccl(nc) => nc.enqueue(
                self.cfg.kind,
                self.cfg.root,
                self.input,
                self.output,
                self.count,
                self.cfg.dtype,
                self.cfg.op,
                self.stream.s,
            ),
        }
    }

    /// Fills this rank's input from `inputs`, poisons the output, runs one call and counts this
    /// rank's wrong elements against the reference (-1 when `want` is `None`: not checked).
    fn checked_call(&self, mine: &[u8], want: Option<&[u8]>) -> Result<i64, CudaError> {
        let ctx = self.comm.context();
        // NaN in every float type: an unwritten element cannot pass. The output may lie
        // anywhere in the output buffer, so poison from its start (in place it is the input).
        ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: both ranges lie in this rank's buffers (sized for the largest size); the
        // output is poisoned before the input is copied, since in place they overlap.
        unsafe {
            if let Some(w) = want {
                sys::cuMemsetD8_v2(self.output, 0xFF, w.len())
                    .result()
                    .map_err(drv)?;
            }
            sys::cuMemcpyHtoD_v2(self.input, mine.as_ptr() as *const _, mine.len())
                .result()
                .map_err(drv)?;
        }
        // The fill and copy ran on the null stream; the calls run on a non-blocking one.
        ctx.synchronize().map_err(drv)?;
        self.once()?;
        self.stream.sync()?;
        let Some(w) = want else { return Ok(-1) };
        let mut got = vec![0u8; w.len()];
        // SAFETY: the source lies in this rank's buffers.
        unsafe { sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, self.output, got.len()) }
            .result()
            .map_err(drv)?;
        Ok(count_wrong(self.cfg.dtype, &got, w, 0.0) as i64)
    }

    /// `calls` calls captured into a CUDA graph on this rank's stream (`--cuda-graph`).
    fn capture(&self, calls: usize) -> Result<Graph, CudaError> {
        self.comm.context().bind_to_thread().map_err(drv)?;
        begin_capture(self.stream.s)?;
        let enq = (0..calls).try_for_each(|_| self.enqueue());
        let g = end_capture(self.stream.s)?;
        enq?;
        Ok(g)
    }

    /// One call, or under `--cuda-graph` one call captured and replayed.
    fn once(&self) -> Result<(), CudaError> {
        if self.cfg.cuda_graph {
            self.capture(1)?.launch(self.stream.s)
        } else {
            self.enqueue()
        }
    }

    /// One timed run: warm-up, barrier, `iters` calls between events; µs per call. Under
    /// `--cuda-graph` the timed calls are one captured graph, replayed once untimed first
    /// (instantiation and upload are not the calls' cost), as in the one-process bench.
    fn time(&self, meet: &mut dyn Meet, e0: &Event, e1: &Event) -> Result<f64, CudaError> {
        for _ in 0..self.cfg.warmup {
            self.enqueue()?;
        }
        let graph = if self.cfg.cuda_graph {
            let g = self.capture(self.cfg.iters)?;
            g.launch(self.stream.s)?;
            Some(g)
        } else {
            None
        };
        self.stream.sync()?;
        meet.barrier()?;
        let s = self.stream.s;
        e0.record(s)?; // the context is bound by `sync`
        match &graph {
            Some(g) => g.launch(s)?,
            None => {
                for _ in 0..self.cfg.iters {
                    self.enqueue()?;
                }
            }
        }
        e1.record(s)?;
        let ms = e1.ms_since(e0)?;
        Ok(ms as f64 * 1000.0 / self.cfg.iters.max(1) as f64)
    }
}

/// The elementwise maximum over ranks of `mine` (every rank sends the same number of values).
fn max_over_ranks(meet: &mut dyn Meet, mine: &[i64]) -> Result<Vec<i64>, CudaError> {
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    let table = meet.all_gather(&bytes)?;
    let mut out = mine.to_vec();
    for (r, b) in table.iter().enumerate() {
        if b.len() != bytes.len() {
            return Err(CudaError::Input(format!(
                "rank {r} sent {} bytes of memory figures, expected {}",
                b.len(),
                bytes.len()
            )));
        }
        for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
            *o = (*o).max(i64::from_le_bytes(c.try_into().expect("8")));
        }
    }
    Ok(out)
}

/// Free device memory of this rank's GPU, bytes.
pub fn free_bytes(ctx: &Arc<CudaContext>) -> Result<i64, CudaError> {
    Ok(ctx.mem_get_info().map_err(drv)?.0 as i64)
}

/// What this rank's communicator took when it was created (measured by its creator): the
/// `# memory` line's "free before init" and "init: ours".
#[derive(Clone, Copy, Debug, Default)]
pub struct InitMemory {
    pub free_before: u64,
    pub ours_init: i64,
}

/// Runs the benchmark of `cfg` as this process's rank; `on_row` sees each size's row (the same
/// on every rank) as soon as it is measured. Memory is measured as in the one-process bench
/// (`harness::run`), per rank, and reported as the maximum over ranks: NCCL's init (this
/// configuration's communicator), each library's first call of each size (out of place), and
/// what the run took after the bench's buffers existed (registrations, the copy-engine ring,
/// first calls, leaks).
pub fn run(
    comm: &CudaProcComm,
    meet: &mut dyn Meet,
    cfg: &BenchConfig,
    profile: &planner::tuner::Profile,
    init: InitMemory,
    mut on_row: impl FnMut(&Row),
) -> Result<(Vec<Row>, MemReport), CudaError> {
    let (rank, n) = (comm.rank(), comm.nranks());
    let elem = cfg.dtype.size() as u64;
    let ctx = comm.context().clone();
    let coll = coll_of(cfg.kind, cfg.root);
    let scheds = pick_schedules(cfg, profile, &coll, n)?;
    comm.prepare(cfg.dtype)?;
    let before_nccl = free_bytes(&ctx)?;
    let nccl = if cfg.vs_nccl {
        ctx.bind_to_thread().map_err(drv)?;
        Some(NcclRank::new(rank, n, |mine| meet.all_gather(mine))?)
    } else {
        None
    };
    let nccl_init = before_nccl - free_bytes(&ctx)?;
    let max_size = cfg.sizes.iter().copied().max().unwrap_or(0);
    let (_, max_in, max_out) = geometry(cfg.kind, n, max_size, elem);
    let inp = DevBuf::new(&ctx, (max_in * elem) as usize)?;
    let out = DevBuf::new(&ctx, (max_out * elem) as usize)?;
    // Measured once the benchmark's own buffers exist: what follows is the libraries' doing.
    let after_init = free_bytes(&ctx)?;
    // Registered with every rank (same sizes, same order), so calls can pull.
    let mut exchange = |mine: &[u8]| meet.all_gather(mine);
    let reg_in = comm.register(inp.ptr, inp.bytes as u64, &mut exchange)?;
    let reg_out = comm.register(out.ptr, out.bytes as u64, &mut exchange)?;
    // The same answer on every rank (same sizes, same knobs): all enable, or none.
    if !cfg.cuda_graph && scheds.iter().any(|x| x.2) {
        comm.enable_copy_engines(&mut exchange)?;
    }
    let stream = Stream::new(&ctx)?;
    let (e0, e1) = (Event::new(&ctx)?, Event::new(&ctx)?);
    let bench = RankBench {
        comm,
        cfg,
        coll: &coll,
        nccl: nccl.as_ref(),
        stream: &stream,
        events: (&e0, &e1),
        inp: &inp,
        regs: (reg_in, reg_out),
        out_ptr: out.ptr,
    };
    let mut rows = Vec::new();
    for (si, (&size, (algo, sched, _))) in cfg.sizes.iter().zip(&scheds).enumerate() {
        let row = bench.row(meet, si, size, algo, sched)?;
        on_row(&row);
        rows.push(row);
    }
    stream.sync()?;
    let after_run = after_init - free_bytes(&ctx)?;
    // No peer may still be pushing into this rank's slots when the caller moves on (or exits).
    meet.barrier()?;
    // The buffers are freed next, and the next configuration's may take the same addresses: the
    // peers must close their mappings of these first.
    let mut exchange = |mine: &[u8]| meet.all_gather(mine);
    comm.deregister(reg_in, &mut exchange)?;
    comm.deregister(reg_out, &mut exchange)?;
    drop(nccl);
    let mem = memory_over_ranks(meet, cfg, init, nccl_init, after_run, &mut rows)?;
    Ok((rows, mem))
}

/// Every size's row label, schedule and whether the hybrid runs it. Picked and checked before
/// any rank launches anything: the check is the same on every rank, so they all stop together.
fn pick_schedules(
    cfg: &BenchConfig,
    profile: &planner::tuner::Profile,
    coll: &Collective,
    n: u32,
) -> Result<Vec<(String, Schedule, bool)>, CudaError> {
    let elem = cfg.dtype.size() as u64;
    let mut scheds = Vec::new();
    for &size in &cfg.sizes {
        let (count, _, _) = geometry(cfg.kind, n, size, elem);
        // `auto` here chooses among what this mode runs (the one-process `auto` may pick
        // two-shot or the ring above 2 ranks).
        let algo = match cfg.algo.as_str() {
            "auto" => schedules::auto_direct_algo(profile, cfg.kind, count * elem, true),
            a => a,
        };
        let (algo, s) = schedules::pick(coll, n, count * elem, algo, profile)
            .map_err(|e| CudaError::Input(e.to_string()))?;
        check_direct(&s)?;
        // Sizes the hybrid runs: the copy engines are enabled below for them.
        let hybrid = cuda::hybrid::share(&s, count, elem) > 0;
        scheds.push((algo_label(algo, &s, cfg, count), s, hybrid));
    }
    Ok(scheds)
}

/// Every memory figure as the maximum over ranks ("max over GPUs", as in one process), the
/// rows' first-call figures included.
fn memory_over_ranks(
    meet: &mut dyn Meet,
    cfg: &BenchConfig,
    init: InitMemory,
    nccl_init: i64,
    after_run: i64,
    rows: &mut [Row],
) -> Result<MemReport, CudaError> {
    let mut mine = vec![init.ours_init, nccl_init, after_run];
    for r in rows.iter() {
        mine.extend([r.mem_first_call.0, r.mem_first_call.1.unwrap_or(0)]);
    }
    let all = max_over_ranks(meet, &mine)?;
    let free_before = max_over_ranks(meet, &[-(init.free_before as i64)])?[0];
    for (r, pair) in rows.iter_mut().zip(all[3..].chunks_exact(2)) {
        r.mem_first_call = (pair[0], cfg.vs_nccl.then_some(pair[1]));
    }
    Ok(MemReport {
        // The smallest free memory of any GPU (a negated maximum).
        free_before: (-free_before) as u64,
        ours_init: all[0],
        nccl_init: cfg.vs_nccl.then_some(all[1]),
        after_run: all[2],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::rank_ptrs;

    #[test]
    fn cells_combine_to_the_slowest_rank_and_the_median_run() {
        let t = vec![
            encode_cell(0, &[10.0, 30.0, 20.0]),
            encode_cell(2, &[12.0, 5.0, 25.0]),
        ];
        // Per run the slowest: 12, 30, 25; median 25.
        assert_eq!(combine_cells(&t, 3).unwrap(), (2, 25.0));
        let unchecked = vec![encode_cell(-1, &[1.0]), encode_cell(-1, &[2.0])];
        assert_eq!(combine_cells(&unchecked, 1).unwrap(), (-1, 2.0));
        let e = combine_cells(&t, 2).unwrap_err().to_string();
        assert!(
            e.contains("rank 0 sent a result of 32 bytes, expected 24"),
            "{e}"
        );
    }

    /// A fake bootstrap whose all-gather returns fixed tables.
    struct Table(Vec<Vec<u8>>);
    impl Meet for Table {
        fn barrier(&mut self) -> Result<(), CudaError> {
            Ok(())
        }
        fn all_gather(&mut self, _mine: &[u8]) -> Result<Vec<Vec<u8>>, CudaError> {
            Ok(self.0.clone())
        }
    }

    #[test]
    fn memory_figures_are_the_maximum_over_ranks() {
        let enc = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut t = Table(vec![enc(&[5, -3, 7]), enc(&[9, -1, 2])]);
        assert_eq!(max_over_ranks(&mut t, &[5, -3, 7]).unwrap(), vec![9, -1, 7]);
        let mut short = Table(vec![enc(&[5, -3, 7]), enc(&[9])]);
        let e = max_over_ranks(&mut short, &[5, -3, 7])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rank 1 sent 8 bytes of memory figures, expected 24"),
            "{e}"
        );
    }

    #[test]
    fn pointers_follow_nccl_aliasing() {
        use planner::schedule::CollectiveKind::*;
        let (i, o) = (1000, 5000);
        assert_eq!(rank_ptrs(AllReduce, 1, 10, 4, false, i, o), (i, o));
        assert_eq!(rank_ptrs(AllReduce, 1, 10, 4, true, i, o), (o, o));
        assert_eq!(rank_ptrs(AllGather, 1, 10, 4, true, i, o), (o + 40, o));
        assert_eq!(rank_ptrs(ReduceScatter, 1, 10, 4, true, i, o), (i, i + 40));
        assert_eq!(rank_ptrs(Broadcast, 0, 10, 4, true, i, o), (o, o));
    }
}
