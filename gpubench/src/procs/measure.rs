//! One rank's measurements in the multi-process bench: per size, each library's checked first
//! call (correctness and memory) and the timed runs, combined over ranks.

use super::{combine_cells, encode_cell, free_bytes, Ctx, Lib, Meet, Stream};
use crate::harness::{algbw, data_seed, geometry, rank_ptrs, BenchConfig, Cell, Row};
use crate::nccl::NcclRank;
use cuda::device::{DevBuf, Event};
use cuda::ipc::{CudaProcComm, RegisteredBuffer};
use cuda::CudaError;
use planner::schedule::{Collective, Schedule};
use runtime::reference::{buffer_lens, expected_bytes, random_inputs_bytes};

/// What every call of this rank's run shares: the communicator, NCCL's rank when compared, the
/// stream and timing events, and the bench's registered buffers.
pub(super) struct RankBench<'a> {
    pub(super) comm: &'a CudaProcComm,
    pub(super) cfg: &'a BenchConfig,
    pub(super) coll: &'a Collective,
    pub(super) nccl: Option<&'a NcclRank>,
    pub(super) stream: &'a Stream,
    pub(super) events: (&'a Event, &'a Event),
    pub(super) inp: &'a DevBuf,
    /// The registrations of the input and the output buffer.
    pub(super) regs: (RegisteredBuffer, RegisteredBuffer),
    pub(super) out_ptr: u64,
}

impl RankBench<'_> {
    /// The row of size number `si` (the same on every rank): out of place, then in place.
    pub(super) fn row(
        &self,
        meet: &mut dyn Meet,
        si: usize,
        size: u64,
        algo: &str,
        sched: &Schedule,
    ) -> Result<Row, CudaError> {
        let (cfg, n) = (self.cfg, self.comm.nranks());
        let elem = cfg.dtype.size() as u64;
        let (count, _, _) = geometry(cfg.kind, n, size, elem);
        let mut row = Row {
            size,
            count: size / elem,
            algo: algo.to_string(),
            oop: Cell::default(),
            ip: Cell::default(),
            mem_first_call: (0, None),
        };
        for in_place in [false, true] {
            let at = CellAt {
                si,
                size,
                count,
                in_place,
            };
            let cell = self.cell(meet, sched, at, &mut row.mem_first_call)?;
            row.set(in_place, cell);
        }
        Ok(row)
    }

    /// One cell: each library's checked first call (its memory into `mem_first_call` out of
    /// place), then the timed runs, combined over ranks.
    fn cell(
        &self,
        meet: &mut dyn Meet,
        sched: &Schedule,
        at: CellAt,
        mem_first_call: &mut (i64, Option<i64>),
    ) -> Result<Cell, CudaError> {
        let (cfg, rank, n) = (self.cfg, self.comm.rank(), self.comm.nranks());
        let elem = cfg.dtype.size() as u64;
        let (inp, out_ptr) = (self.inp, self.out_ptr);
        let (ip, op) = rank_ptrs(
            cfg.kind,
            rank,
            at.count,
            elem,
            at.in_place,
            inp.ptr,
            out_ptr,
        );
        // In place the input lies in the output buffer.
        let registered = if (inp.ptr..inp.ptr + inp.bytes as u64).contains(&ip) {
            self.regs.0
        } else {
            self.regs.1
        };
        let call = |lib| Ctx {
            comm: self.comm,
            lib,
            cfg,
            stream: self.stream,
            sched,
            count: at.count,
            input: ip,
            output: op,
            registered,
        };
        let libs: Vec<Ctx> = std::iter::once(call(Lib::Ours))
            .chain(self.nccl.map(|nc| call(Lib::Nccl(nc))))
            .collect();
        let wrong = self.first_calls(&libs, at, mem_first_call)?;
        // Timing, the libraries alternating run by run.
        let mut ts = vec![Vec::new(); libs.len()];
        for _ in 0..cfg.runs.max(1) {
            for (c, t) in libs.iter().zip(&mut ts) {
                t.push(c.time(meet, self.events.0, self.events.1)?);
            }
        }
        let factor = cfg.kind.busbw_factor(n);
        let mut combined = Vec::new();
        for (w, t) in wrong.iter().zip(&ts) {
            let table = meet.all_gather(&encode_cell(*w, t))?;
            combined.push(combine_cells(&table, t.len())?);
        }
        let (wrong, t) = combined[0];
        let algbw = algbw(at.size, t);
        let mut cell = Cell {
            time_us: t,
            algbw,
            busbw: algbw * factor,
            wrong,
            ..Default::default()
        };
        if let Some(&(nw, nt)) = combined.get(1) {
            cell.nccl_time_us = Some(nt);
            cell.nccl_busbw = Some(crate::harness::algbw(at.size, nt) * factor);
            cell.nccl_wrong = (nw >= 0).then_some(nw);
        }
        Ok(cell)
    }

    /// Each library's first call of the size, checked: the same seed as the one-process
    /// harness, so the data match. Returns this rank's wrong elements per library (-1: not
    /// checked); out of place, the memory each call took goes into `mem_first_call`.
    fn first_calls(
        &self,
        libs: &[Ctx],
        at: CellAt,
        mem_first_call: &mut (i64, Option<i64>),
    ) -> Result<Vec<i64>, CudaError> {
        let (cfg, coll) = (self.cfg, self.coll);
        let (rank, n) = (self.comm.rank(), self.comm.nranks());
        let ctx = self.comm.context();
        let seed = data_seed(cfg.seed, at.si, at.in_place);
        let (il, _) = buffer_lens(coll, n, at.count as usize);
        let inputs =
            random_inputs_bytes(cfg.dtype, seed, n, il, cfg.op, |r| cfg.check || r == rank);
        let want = if cfg.check {
            expected_bytes(cfg.dtype, coll, cfg.op, at.count as usize, &inputs)
                .swap_remove(rank as usize)
        } else {
            None
        };
        let mut wrong = Vec::new();
        for (i, c) in libs.iter().enumerate() {
            let m0 = free_bytes(ctx)?;
            wrong.push(c.checked_call(&inputs[rank as usize], want.as_deref())?);
            if !at.in_place {
                let taken = m0 - free_bytes(ctx)?;
                if i == 0 {
                    mem_first_call.0 = taken;
                } else {
                    mem_first_call.1 = Some(taken);
                }
            }
        }
        // A checked rank with no output of its own (reduce, not the root) counts 0 wrong.
        Ok(wrong
            .into_iter()
            .map(|w| if cfg.check { w.max(0) } else { w })
            .collect())
    }
}

/// Which cell of the table a measurement fills: size number `si` of `size` bytes, `count`
/// elements per rank, in place or not.
#[derive(Clone, Copy)]
struct CellAt {
    si: usize,
    size: u64,
    count: u64,
    in_place: bool,
}
