//! Correctness alone on a group the caller holds: every size of a configuration called once out
//! of place and once in place (replayed from a CUDA graph when the configuration asks), every
//! output element checked against `runtime::reference` on fresh random data, outputs poisoned
//! first. No timing: the GPU tests of ranks sharing a GPU run thousands of configurations on one
//! group, where [`super::run`] would open a group per configuration.

// Unsafe: device copies through the driver's raw API; each block states why it is sound.
#![allow(unsafe_code)]

use super::data::{check, host_inputs, upload, Bufs};
use super::{coll_of, data_seed, geometry, sized_schedule, BenchConfig, Cell, Lib, RawStream, Row};
use cuda::device::{create_stream, drv, DevBuf};
use cuda::group::CudaGroup;
use cuda::CudaError;
use cudarc::driver::sys;
use planner::schedule::Schedule;
use runtime::reference::expected_bytes;
use std::sync::Arc;

/// Runs and checks `cfg` on `g` (`cfg.ordinals` is ignored: the group's ranks run; NCCL is not
/// run; `auto` is priced with the bundled profile). Each row's `wrong` counts the wrong
/// elements of all ranks; timings stay 0.
pub fn check_on(g: &CudaGroup, cfg: &BenchConfig) -> Result<Vec<Row>, CudaError> {
    let n = g.nranks() as u32;
    let coll = coll_of(cfg.kind, cfg.root);
    check_with(g, cfg, &|size| {
        sized_schedule(cfg, planner::tuner::Profile::bundled(), &coll, n, size)
    })
}

/// [`check_on`] with `sched` at every size instead of the schedule `cfg.algo` names, which
/// then only labels the rows: for schedules the planner makes that `--algo` does not name
/// (packed trees). `sched` must be `cfg`'s collective on the group's ranks.
pub fn check_schedule_on(
    g: &CudaGroup,
    cfg: &BenchConfig,
    sched: &Arc<Schedule>,
) -> Result<Vec<Row>, CudaError> {
    let n = g.nranks() as u32;
    let coll = coll_of(cfg.kind, cfg.root);
    if sched.nranks != n || sched.collective != coll {
        return Err(CudaError::Input(format!(
            "the schedule is {} on {} ranks, the check {} on {n}",
            sched.collective.kind.name(),
            sched.nranks,
            cfg.kind.name()
        )));
    }
    let elem = cfg.dtype.size() as u64;
    check_with(g, cfg, &|size| {
        let (count, _, _) = geometry(cfg.kind, n, size, elem);
        Ok((count, cfg.algo.clone(), sched.clone()))
    })
}

/// What a check runs at one nccl-tests size: the per-rank count, the row's label, the schedule.
type SizedSchedule<'a> = dyn Fn(u64) -> Result<(u64, String, Arc<Schedule>), CudaError> + 'a;

/// The buffers and streams of a check, every size of `cfg` run on the schedule `sized` gives.
fn check_with(
    g: &CudaGroup,
    cfg: &BenchConfig,
    sized: &SizedSchedule,
) -> Result<Vec<Row>, CudaError> {
    let n = g.nranks() as u32;
    let elem = cfg.dtype.size() as u64;
    let max_size = cfg.sizes.iter().copied().max().unwrap_or(0);
    let (_, max_in, max_out) = geometry(cfg.kind, n, max_size, elem);
    let mut bufs = Bufs {
        inp: Vec::new(),
        out: Vec::new(),
    };
    let mut streams = Vec::new();
    for r in 0..n as usize {
        bufs.inp
            .push(DevBuf::new(g.context(r), (max_in * elem) as usize)?);
        bufs.out
            .push(DevBuf::new(g.context(r), (max_out * elem) as usize)?);
        streams.push(RawStream(create_stream(g.context(r))?));
    }
    let result = check_sizes(g, cfg, sized, &bufs, &streams);
    for (r, s) in streams.iter().enumerate() {
        g.context(r).bind_to_thread().map_err(drv)?;
        // SAFETY: created above, destroyed once, after all work on it finished.
        unsafe {
            let _ = sys::cuStreamSynchronize(s.0);
            let _ = sys::cuStreamDestroy_v2(s.0);
        }
    }
    result
}

fn check_sizes(
    g: &CudaGroup,
    cfg: &BenchConfig,
    sized: &SizedSchedule,
    bufs: &Bufs,
    streams: &[RawStream],
) -> Result<Vec<Row>, CudaError> {
    let n = g.nranks() as u32;
    let elem = cfg.dtype.size() as u64;
    let coll = coll_of(cfg.kind, cfg.root);
    let mut rows = Vec::new();
    for (si, &size) in cfg.sizes.iter().enumerate() {
        let (count, algo, sched) = sized(size)?;
        let ours = Lib::Ours(g, &sched);
        let mut row = Row {
            size,
            count: size / elem,
            algo,
            oop: Cell::default(),
            ip: Cell::default(),
            mem_first_call: (0, None),
        };
        for in_place in [false, true] {
            let (ip, op) = bufs.ptrs(cfg.kind, count, elem, in_place);
            let inputs = host_inputs(cfg, n as usize, count, data_seed(cfg.seed, si, in_place));
            let want = expected_bytes(cfg.dtype, &coll, cfg.op, count as usize, &inputs);
            upload(bufs, cfg, count, in_place, &inputs)?;
            ours.once(g, cfg, count, &ip, &op, streams)?;
            let cell = Cell {
                wrong: check(bufs, cfg, count, in_place, &want)?,
                ..Default::default()
            };
            row.set(in_place, cell);
        }
        rows.push(row);
    }
    Ok(rows)
}
