//! A rank's lowered plan as the executor kernel reads it (phase and item tables in device
//! memory, uploaded once per schedule, count and aliasing), its grid, and the launch.

use crate::device::{drv, DevBuf};
use crate::lower::{Barrier, ItemKind, Lowered, Operand};
use crate::request::TpCtx;
use crate::residency::{Demand, Path};
use crate::CudaError;
use cudarc::driver::{result, sys, CudaContext};
use std::ffi::c_void;
use std::sync::Arc;

use crate::layout::{EXEC_MAX_CTAS as MAX_CTAS, MAX_SRCS};
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
    src: [u64; MAX_SRCS],
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
    pub(crate) phases: DevBuf,
    pub(crate) nphases: u32,
    pub(crate) items: DevBuf,
    pub(crate) grid: u32,
    pub(crate) lowered: Arc<Lowered>,
}

impl DevPlan {
    /// Uploads `rank`'s phase and item tables of `l`, to run on `grid` CTAs.
    pub(crate) fn upload(
        ctx: &Arc<CudaContext>,
        l: Arc<Lowered>,
        rank: usize,
        grid: u32,
    ) -> Result<Self, CudaError> {
        let (phases, items) = tables(&l, rank)?;
        let pbuf = DevBuf::new(ctx, std::mem::size_of_val(phases.as_slice()))?;
        pbuf.upload(as_bytes(&phases))?;
        let ibuf = DevBuf::new(ctx, std::mem::size_of_val(items.as_slice()))?;
        ibuf.upload(as_bytes(&items))?;
        Ok(DevPlan {
            phases: pbuf,
            nphases: phases.len() as u32,
            items: ibuf,
            grid,
            lowered: l,
        })
    }
}

/// The CTAs the executor wants for `l` with `elem`-byte elements (before residency caps it).
pub(crate) fn demand(l: &Lowered, elem: u64) -> Demand {
    let bytes = l.max_item() * elem;
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
    Demand {
        path: Path::Exec,
        wanted_ctas: wanted.min(MAX_CTAS),
        min_ctas: 1,
        ctas_per_sm: 1,
    }
}

fn item(kind: ItemKind, srcs: &[Operand], dsts: &[Operand], n: u64) -> Result<TpItem, CudaError> {
    if srcs.len() > MAX_SRCS || dsts.len() > 2 {
        return Err(CudaError::Lower("item with too many operands".into()));
    }
    let mut src = [0u64; MAX_SRCS];
    let mut dst = [0u64; 2];
    for (k, s) in srcs.iter().enumerate() {
        src[k] = enc(s);
    }
    for (k, d) in dsts.iter().enumerate() {
        dst[k] = enc(d);
    }
    Ok(TpItem {
        kind: if kind == ItemKind::Scale { 1 } else { 0 },
        nsrc: srcs.len() as u32,
        ndst: dsts.len() as u32,
        pad: 0,
        n,
        src,
        dst,
    })
}

/// `rank`'s phase and item tables of `l`, as the executor reads them.
fn tables(l: &Lowered, rank: usize) -> Result<(Vec<TpPhase>, Vec<TpItem>), CudaError> {
    let mut phases = Vec::new();
    let mut items = Vec::new();
    for ph in 1..l.nphases() {
        let first = items.len() as u32;
        for it in l
            .items
            .iter()
            .filter(|i| i.phase == ph && i.exec as usize == rank)
        {
            items.push(item(it.kind, &it.srcs, &it.dsts, it.n)?);
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
    Ok((phases, items))
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
    let v = items
        .iter()
        .map(|(kind, srcs, dsts, n)| item(*kind, srcs, dsts, *n))
        .collect::<Result<Vec<_>, _>>()?;
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
