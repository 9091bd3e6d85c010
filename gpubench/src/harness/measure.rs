//! One run's measurements: the buffers sized for its largest size, and per size the first
//! calls (correctness and memory) and the timed runs of ours and NCCL's.

use super::data::{check, host_inputs, upload, Bufs};
use super::{
    algbw, coll_of, data_seed, free_mem, geometry, max_drop, median, sized_schedule, BenchConfig,
    Cell, Lib, RawStream, Row,
};
use crate::nccl::NcclGroup;
use cuda::group::CudaGroup;
use cuda::CudaError;
use planner::schedule::Collective;
use planner::tuner::Profile;
use runtime::reference::expected_bytes;

/// Every rank's buffers, sized for the run's largest size.
pub(super) fn largest_bufs(cfg: &BenchConfig, g: &CudaGroup, n: u32) -> Result<Bufs, CudaError> {
    let elem = cfg.dtype.size() as u64;
    let max_size = cfg.sizes.iter().copied().max().unwrap_or(0);
    let (_, max_in, max_out) = geometry(cfg.kind, n, max_size, elem);
    let mut bufs = Bufs {
        inp: Vec::new(),
        out: Vec::new(),
    };
    for r in 0..n as usize {
        bufs.inp.push(cuda::device::DevBuf::new(
            g.context(r),
            (max_in * elem) as usize,
        )?);
        bufs.out.push(cuda::device::DevBuf::new(
            g.context(r),
            (max_out * elem) as usize,
        )?);
    }
    Ok(bufs)
}

/// What every measured call of a run shares: our group, NCCL's when compared, the buffers and
/// one stream per rank.
pub(super) struct Bench<'a> {
    pub(super) cfg: &'a BenchConfig,
    pub(super) g: &'a CudaGroup,
    pub(super) nccl: Option<&'a NcclGroup>,
    pub(super) bufs: &'a Bufs,
    pub(super) streams: &'a [RawStream],
    pub(super) n: u32,
}

impl Bench<'_> {
    /// The row of size number `si`: out of place, then in place.
    pub(super) fn row(
        &self,
        profile: &Profile,
        coll: &Collective,
        si: usize,
        size: u64,
    ) -> Result<Row, CudaError> {
        let (cfg, elem) = (self.cfg, self.cfg.dtype.size() as u64);
        let (count, algo, sched) = sized_schedule(cfg, profile, coll, self.n, size)?;
        let ours = Lib::Ours(self.g, &sched);
        let mut row = Row {
            size,
            count: count * (size / elem / count.max(1)).max(1),
            algo,
            oop: Cell::default(),
            ip: Cell::default(),
            mem_first_call: (0, None),
        };
        row.count = size / elem;
        for in_place in [false, true] {
            let cell = self.cell(&ours, &mut row.mem_first_call, si, size, count, in_place)?;
            row.set(in_place, cell);
        }
        Ok(row)
    }

    /// One cell: the first calls (correctness, memory into `mem_first_call` out of place),
    /// then the timed runs.
    fn cell(
        &self,
        ours: &Lib,
        mem_first_call: &mut (i64, Option<i64>),
        si: usize,
        size: u64,
        count: u64,
        in_place: bool,
    ) -> Result<Cell, CudaError> {
        let cfg = self.cfg;
        let elem = cfg.dtype.size() as u64;
        let ptrs = self.bufs.ptrs(cfg.kind, count, elem, in_place);
        let mut cell = Cell {
            wrong: -1,
            ..Default::default()
        };
        // Correctness (also the first call of this size: memory measured around it).
        let seed = data_seed(cfg.seed, si, in_place);
        let inputs = host_inputs(cfg, self.n as usize, count, seed);
        let want = if cfg.check {
            let coll = coll_of(cfg.kind, cfg.root);
            expected_bytes(cfg.dtype, &coll, cfg.op, count as usize, &inputs)
        } else {
            Vec::new()
        };
        let (mem, wrong) = self.first_call(ours, count, in_place, &ptrs, &inputs, &want)?;
        if let Some(m) = mem {
            mem_first_call.0 = m;
        }
        if let Some(w) = wrong {
            cell.wrong = w;
        }
        if let Some(nc) = self.nccl {
            let (mem, wrong) =
                self.first_call(&Lib::Nccl(nc), count, in_place, &ptrs, &inputs, &want)?;
            if let Some(m) = mem {
                mem_first_call.1 = Some(m);
            }
            if let Some(w) = wrong {
                cell.nccl_wrong = Some(w);
            }
        }
        let (t_ours, t_nccl) = self.timed(ours, count, &ptrs)?;
        let factor = cfg.kind.busbw_factor(self.n);
        cell.time_us = t_ours;
        cell.algbw = algbw(size, cell.time_us);
        cell.busbw = cell.algbw * factor;
        if let Some(t) = t_nccl {
            cell.nccl_time_us = Some(t);
            cell.nccl_busbw = Some(algbw(size, t) * factor);
        }
        Ok(cell)
    }

    /// One untimed call of `lib` on fresh inputs: the device memory it takes (out of place
    /// only) and, when checking, its wrong elements.
    fn first_call(
        &self,
        lib: &Lib,
        count: u64,
        in_place: bool,
        (ip, op): &(Vec<u64>, Vec<u64>),
        inputs: &[Vec<u8>],
        want: &[Option<Vec<u8>>],
    ) -> Result<(Option<i64>, Option<i64>), CudaError> {
        let (cfg, g) = (self.cfg, self.g);
        upload(self.bufs, cfg, count, in_place, inputs)?;
        let m0 = free_mem(g)?;
        lib.once(g, cfg, count, ip, op, self.streams)?;
        let mem = if !in_place {
            Some(max_drop(&m0, &free_mem(g)?))
        } else {
            None
        };
        let wrong = if cfg.check {
            Some(check(self.bufs, cfg, count, in_place, want)?)
        } else {
            None
        };
        Ok((mem, wrong))
    }

    /// Median microseconds per call of ours and of NCCL's (when compared), the two alternating
    /// run by run.
    fn timed(
        &self,
        ours: &Lib,
        count: u64,
        (ip, op): &(Vec<u64>, Vec<u64>),
    ) -> Result<(f64, Option<f64>), CudaError> {
        let (cfg, g) = (self.cfg, self.g);
        let mut ts = Vec::new();
        let mut tn = Vec::new();
        for _ in 0..cfg.runs.max(1) {
            ts.push(ours.time(g, cfg, count, ip, op, self.streams)?);
            if let Some(nc) = self.nccl {
                tn.push(Lib::Nccl(nc).time(g, cfg, count, ip, op, self.streams)?);
            }
        }
        Ok((median(ts), self.nccl.map(|_| median(tn))))
    }
}
