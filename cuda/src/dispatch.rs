//! The path dispatch of a [`CudaGroup`] call: which path runs it (direct push or pull, the
//! hybrid, the copy-engine pair, the generic copy-engine lowering, or the executor), as the
//! schedule, the knobs and residency decide. It sits above the group and every path, so none of
//! them imports another's dispatch.

use crate::device::drv;
use crate::group::{plan::launch_exec, CudaGroup};
use crate::request::Request;
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
        let module = self.module(rank, req.dtype)?;
        let capturing = || {
            self.ranks[rank].ctx.bind_to_thread().map_err(drv)?;
            crate::ce_pair::capturing(stream)
        };
        if crate::direct::applies(req.schedule) {
            let ce = crate::hybrid::share(req.schedule, req.count, req.dtype.size() as u64);
            let asked = match req.schedule.protocol {
                _ if ce > 0 => Path::Hybrid,
                planner::schedule::Protocol::LL => Path::DirectLl,
                _ => Path::DirectSimple,
            };
            return match residency::route(asked, self.shares_devices(), capturing)? {
                Route::Run(Path::Hybrid) => {
                    crate::hybrid::enqueue(self, rank, req, key.in_place, &module, stream, ce)
                }
                Route::Run(path) => {
                    self.check_resident(path)?;
                    crate::direct::local::enqueue(
                        self,
                        rank,
                        req,
                        key.in_place,
                        false,
                        &module,
                        stream,
                    )
                }
                other => Err(CudaError::Input(format!("direct path routed to {other:?}"))),
            };
        }
        if crate::ce_pair::applies(req.schedule) {
            if residency::route(Path::CePair, self.shares_devices(), capturing)?
                == Route::Run(Path::CePair)
            {
                return crate::ce_pair::enqueue(self, rank, req, &module, false, stream);
            }
            // The one-shot schedule of the same all-reduce (`residency::route` says when).
            let one_shot = planner::schedule::build::one_shot(
                &req.schedule.collective,
                2,
                planner::schedule::Protocol::Simple,
            )
            .map_err(|e| CudaError::Lower(e.to_string()))?;
            let req = Request {
                schedule: &Arc::new(one_shot),
                ..*req
            };
            self.check_resident(Path::DirectSimple)?;
            return crate::direct::local::enqueue(
                self,
                rank,
                &req,
                key.in_place,
                false,
                &module,
                stream,
            );
        }
        let plan = self.plan(rank, req, key)?;
        if plan.lowered.uses_copy_engine {
            return match residency::route(Path::CopyEngine, self.shares_devices(), capturing)? {
                Route::Run(_) => {
                    crate::ce::enqueue(self, rank, req, &plan.lowered, &module, stream)
                }
                _ => Err(CudaError::Input(
                    "the generic copy-engine lowering (--algo ce with TOPOPLAN_CE_PAIR=0) does \
                     not run with ranks sharing a GPU: choose another algorithm"
                        .into(),
                )),
            };
        }
        let op_index = crate::device::op_index(req.op);
        let mut ctx = self.tp_ctx(rank, req);
        ctx.ll = u32::from(plan.lowered.uses_ll);
        launch_exec(
            &self.ranks[rank].ctx,
            &module.funcs[op_index],
            plan.grid,
            plan.phases.ptr,
            plan.nphases,
            plan.items.ptr,
            &ctx,
            stream,
        )
    }
}
