//! A rank's lowered plan as the executor kernel reads it (phase and item tables in device
//! memory, uploaded once per schedule, count and aliasing), its grid, and the launch.

use super::{CudaGroup, PlanKey, Request, TpCtx};
use crate::device::{drv, DevBuf};
use crate::lower::{Barrier, ItemKind, Lowered, Operand};
use crate::residency::{Demand, Path};
use crate::CudaError;
use cudarc::driver::{result, sys, CudaContext};
use std::ffi::c_void;
use std::sync::Arc;

const MAX_CTAS: u32 = 256;
/// Default cap on the SM path's grid (`TOPOPLAN_CTAS` overrides).
const DEFAULT_MAX_CTAS: u32 = 64;
/// CTAs of every kernel that uses LL buffers. Fixed, because each CTA keeps its own epoch and
/// a sender's CTA b must agree with the receiver's CTA b.
const LL_CTAS: u32 = 32;
const BLOCK: u32 = 512;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TpItem {
    kind: u32,
    nsrc: u32,
    ndst: u32,
    pad: u32,
    n: u64,
    src: [u64; 8],
    dst: [u64; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TpPhase {
    first: u32,
    count: u32,
    barrier: u32,
    pad: u32,
}

fn enc(o: &Operand) -> u64 {
    ((o.rank as u64) << 60) | ((o.buf as u64) << 56) | o.off
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is a repr(C) POD struct without padding surprises (all fields explicit).
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// A lowered plan uploaded for one rank.
#[derive(Debug)]
pub(crate) struct DevPlan {
    pub(super) phases: DevBuf,
    pub(super) nphases: u32,
    pub(super) items: DevBuf,
    pub(super) grid: u32,
    pub(crate) lowered: Arc<Lowered>,
}

impl CudaGroup {
    fn cached_plan(&self, rank: usize, key: &PlanKey) -> Option<Arc<DevPlan>> {
        let plans = self.ranks[rank]
            .plans
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        plans.get(key).cloned()
    }

    /// `rank`'s uploaded plan for `key`, made on first use. On a shared GPU the first rank to
    /// need it makes every rank's: a peer's allocation and upload would otherwise happen while
    /// this rank's kernel of the same call already waits on that GPU for the peer, and a
    /// driver call that waits for the GPU would then wait forever.
    pub(super) fn plan(
        &self,
        rank: usize,
        req: &Request,
        key: PlanKey,
    ) -> Result<Arc<DevPlan>, CudaError> {
        if let Some(p) = self.cached_plan(rank, &key) {
            return Ok(p);
        }
        if self.shared {
            for r in (0..self.ranks.len()).filter(|&r| r != rank) {
                self.build_plan(r, req, key)?;
            }
        }
        self.build_plan(rank, req, key)
    }

    /// Makes and caches `rank`'s plan unless it exists. The rank's plan table stays locked
    /// meanwhile: two threads making the same plan would drop one, and freeing device memory
    /// waits for the whole GPU, where a peer's kernel may already wait for this caller's launch.
    fn build_plan(
        &self,
        rank: usize,
        req: &Request,
        key: PlanKey,
    ) -> Result<Arc<DevPlan>, CudaError> {
        let st = &self.ranks[rank];
        let mut plans = st.plans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = plans.get(&key) {
            return Ok(p.clone());
        }
        let l = self.lowered_for(req, key)?;
        let mut phases = Vec::new();
        let mut items = Vec::new();
        for ph in 1..l.nphases() {
            let first = items.len() as u32;
            for it in l
                .items
                .iter()
                .filter(|i| i.phase == ph && i.exec as usize == rank)
            {
                let mut src = [0u64; 8];
                let mut dst = [0u64; 2];
                if it.srcs.len() > 8 || it.dsts.len() > 2 {
                    return Err(CudaError::Lower("item with too many operands".into()));
                }
                for (k, s) in it.srcs.iter().enumerate() {
                    src[k] = enc(s);
                }
                for (k, d) in it.dsts.iter().enumerate() {
                    dst[k] = enc(d);
                }
                items.push(TpItem {
                    kind: if it.kind == ItemKind::Scale { 1 } else { 0 },
                    nsrc: it.srcs.len() as u32,
                    ndst: it.dsts.len() as u32,
                    pad: 0,
                    n: it.n,
                    src,
                    dst,
                });
            }
            phases.push(TpPhase {
                first,
                count: items.len() as u32 - first,
                barrier: l.barriers[ph as usize] as u32,
                pad: 0,
            });
        }
        if l.end_barrier != Barrier::None {
            phases.push(TpPhase {
                first: items.len() as u32,
                count: 0,
                barrier: l.end_barrier as u32,
                pad: 0,
            });
        }
        let bytes = l.max_item() * key.elem as u64;
        let wanted = if l.uses_ll {
            LL_CTAS
        } else {
            match params::CTAS.u32_or_warn() {
                Some(g) => g,
                // 64 CTAs beat 132 at 4-32 MiB on 2×H200 (266 against 245 GB/s busbw at
                // 16 MiB): fewer CTAs polling NVLink, same bandwidth.
                None => (bytes.div_ceil(32 << 10) as u32).min(DEFAULT_MAX_CTAS),
            }
        };
        // All CTAs of every rank must be resident: at most one per SM of the rank's share.
        let grid = self.rank_grid(Demand {
            path: Path::Exec,
            wanted_ctas: wanted.min(MAX_CTAS),
            min_ctas: 1,
            ctas_per_sm: 1,
        })?;
        let pbuf = DevBuf::new(&st.ctx, std::mem::size_of_val(phases.as_slice()))?;
        pbuf.upload(as_bytes(&phases))?;
        let ibuf = DevBuf::new(&st.ctx, std::mem::size_of_val(items.as_slice()))?;
        ibuf.upload(as_bytes(&items))?;
        let p = Arc::new(DevPlan {
            phases: pbuf,
            nphases: phases.len() as u32,
            items: ibuf,
            grid,
            lowered: l,
        });
        plans.insert(key, p.clone());
        Ok(p)
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_exec(
    ctx: &Arc<CudaContext>,
    f: &cudarc::driver::CudaFunction,
    grid: u32,
    phases: u64,
    nphases: u32,
    items: u64,
    tctx: &TpCtx,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let mut phases = phases;
    let mut nphases = nphases;
    let mut items = items;
    let mut c = *tctx;
    let mut params: [*mut c_void; 4] = [
        &mut phases as *mut u64 as *mut c_void,
        &mut nphases as *mut u32 as *mut c_void,
        &mut items as *mut u64 as *mut c_void,
        &mut c as *mut TpCtx as *mut c_void,
    ];
    // SAFETY: argument types and order match the kernel's signature; pointers outlive the call
    // (cuLaunchKernel copies the parameter values).
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            (grid, 1, 1),
            (BLOCK, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
    .map_err(drv)
}

/// Builds a one-phase, barrier-free plan for local items (used by the copy-engine path).
pub(crate) fn upload_local_plan(
    ctx: &Arc<CudaContext>,
    items: &[(ItemKind, Vec<Operand>, Vec<Operand>, u64)],
) -> Result<(DevBuf, DevBuf), CudaError> {
    let mut v = Vec::new();
    for (kind, srcs, dsts, n) in items {
        let mut src = [0u64; 8];
        let mut dst = [0u64; 2];
        for (k, s) in srcs.iter().enumerate() {
            src[k] = enc(s);
        }
        for (k, d) in dsts.iter().enumerate() {
            dst[k] = enc(d);
        }
        v.push(TpItem {
            kind: if *kind == ItemKind::Scale { 1 } else { 0 },
            nsrc: srcs.len() as u32,
            ndst: dsts.len() as u32,
            pad: 0,
            n: *n,
            src,
            dst,
        });
    }
    let ph = [TpPhase {
        first: 0,
        count: v.len() as u32,
        barrier: 0,
        pad: 0,
    }];
    let pbuf = DevBuf::new(ctx, std::mem::size_of_val(&ph))?;
    pbuf.upload(as_bytes(&ph))?;
    let ibuf = DevBuf::new(ctx, std::mem::size_of_val(v.as_slice()))?;
    ibuf.upload(as_bytes(&v))?;
    Ok((pbuf, ibuf))
}
