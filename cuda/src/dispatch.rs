//! The path dispatch of a [`CudaGroup`] call: which path runs it (direct push or pull, the
//! hybrid, the copy-engine pair, the generic copy-engine lowering, or the executor), as the
//! schedule, the knobs and residency decide. It sits above the group and every path, so none of
//! them imports another's dispatch.

use crate::abort::TpAbort;
use crate::device::{drv, ExecModule};
use crate::group::{plan::launch_exec, CudaGroup};
use crate::request::{PlanKey, Request};
use crate::residency::{self, Path, Route};
use crate::CudaError;
use cudarc::driver::sys;
use std::sync::Arc;

impl CudaGroup {
    /// Enqueues rank `rank`'s part of the collective on `stream` (a stream of that rank's
    /// context). Every rank must enqueue the same sequence of collectives.
    pub fn enqueue(
        &self,
        rank: usize,
        req: &Request,
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        if rank >= self.ranks.len() {
            return Err(CudaError::Input(format!("rank {rank} out of range")));
        }
        let key = self.key(req)?;
        if req.count == 0 {
            return Ok(());
        }
        let ab = self.next_call(rank)?;
        let module = self.module(rank, req.dtype)?;
        let call = Call {
            rank,
            req,
            in_place: key.in_place,
            module: &module,
            stream,
            ab,
        };
        if crate::direct::applies(req.schedule) {
            return self.direct(&call);
        }
        if crate::ce_pair::applies(req.schedule) {
            return self.ce_pair(&call);
        }
        self.generic(&call, key)
    }

    fn capturing(&self, c: &Call) -> Result<bool, CudaError> {
        self.ranks[c.rank].ctx.bind_to_thread().map_err(drv)?;
        crate::ce_pair::capturing(c.stream)
    }

    /// A one-shot schedule: the direct path (push or pull), or the hybrid.
    fn direct(&self, c: &Call) -> Result<(), CudaError> {
        let req = c.req;
        let ce = crate::hybrid::share(req.schedule, req.count, req.dtype.size() as u64);
        let asked = match req.schedule.protocol {
            _ if ce > 0 => Path::Hybrid,
            planner::schedule::Protocol::LL => Path::DirectLl,
            _ => Path::DirectSimple,
        };
        match residency::route(asked, self.shares_devices(), || self.capturing(c))? {
            Route::Run(Path::Hybrid) => {
                crate::hybrid::enqueue(self, c.rank, req, c.in_place, c.module, c.stream, ce, c.ab)
            }
            Route::Run(path) => {
                self.check_resident(path)?;
                self.push(c, req)
            }
            other => Err(CudaError::Input(format!("direct path routed to {other:?}"))),
        }
    }

    fn push(&self, c: &Call, req: &Request) -> Result<(), CudaError> {
        crate::direct::local::enqueue(
            self, c.rank, req, c.in_place, false, c.module, c.stream, c.ab,
        )
    }

    /// The copy-engine pair all-reduce, or the one-shot schedule of the same all-reduce where
    /// it may not run (`residency::route` says when).
    fn ce_pair(&self, c: &Call) -> Result<(), CudaError> {
        let routed = residency::route(Path::CePair, self.shares_devices(), || self.capturing(c))?;
        if routed == Route::Run(Path::CePair) {
            return crate::ce_pair::enqueue(self, c.rank, c.req, c.module, false, c.stream, c.ab);
        }
        let one_shot = planner::schedule::build::one_shot(
            &c.req.schedule.collective,
            2,
            planner::schedule::Protocol::Simple,
        )
        .map_err(|e| CudaError::Lower(e.to_string()))?;
        let req = Request {
            schedule: &Arc::new(one_shot),
            ..*c.req
        };
        self.check_resident(Path::DirectSimple)?;
        self.push(c, &req)
    }

    /// Any other schedule: lowered, then the generic copy-engine path or the executor.
    fn generic(&self, c: &Call, key: PlanKey) -> Result<(), CudaError> {
        let plan = self.plan(c.rank, c.req, key)?;
        if plan.lowered.uses_copy_engine {
            return match residency::route(Path::CopyEngine, self.shares_devices(), || {
                self.capturing(c)
            })? {
                Route::Run(_) => {
                    crate::ce::enqueue(self, c.rank, c.req, &plan.lowered, c.module, c.stream, c.ab)
                }
                _ => Err(CudaError::Input(
                    "the generic copy-engine lowering (--algo ce with TOPOPLAN_CE_PAIR=0) does \
                     not run with ranks sharing a GPU: choose another algorithm"
                        .into(),
                )),
            };
        }
        let op_index = crate::device::op_index(c.req.op);
        let mut ctx = self.tp_ctx(c.rank, c.req, c.ab);
        ctx.ll = u32::from(plan.lowered.uses_ll);
        launch_exec(
            &self.ranks[c.rank].ctx,
            &c.module.funcs[op_index],
            plan.grid,
            plan.phases.ptr,
            plan.nphases,
            plan.items.ptr,
            &ctx,
            c.stream,
        )
    }
}

/// One rank's call as the paths take it.
struct Call<'a> {
    rank: usize,
    req: &'a Request<'a>,
    in_place: bool,
    module: &'a ExecModule,
    stream: sys::CUstream,
    ab: TpAbort,
}
