//! The copy-engine path: executes a lowered plan whose transfers are copy-engine copies.
//!
//! Each rank has two streams: the caller's (reduce kernels) and a private copy stream (peer
//! copies). Work is issued phase by phase; a dependency between the two streams of a rank is an
//! event, a dependency on another rank's work is a counter published into this rank's flag words
//! by a one-thread signal kernel after that work and awaited by a wait kernel before ours. Both
//! ranks derive the same numbered list of signals from the same lowered plan, so the counters
//! agree without any host-side exchange per call. Copies of iteration k+1 thus run while the
//! reduce of iteration k does: the overlap that gets near the copy engines' both-ways ceiling.
//!
//! Unlike the SM path this one keeps host-side counters, so it must not be captured into a CUDA
//! graph that is replayed (the SM path can be).

use crate::abort::TpAbort;
use crate::device::{drv, ExecModule};
use crate::group::plan::{launch_exec, upload_local_plan};
use crate::group::CudaGroup;
use crate::layout::CE_FLAGS;
use crate::lower::{ItemKind, Lowered, Operand};
use crate::request::{Request, TpCtx};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext, CudaFunction};
use state::{CePlan, Step, S};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

pub(crate) mod state;

const START: usize = 0;
/// Data signals: one counter per (producer stream, sender), since signals from two streams of a
/// rank complete in no fixed order and a counter only orders what one stream publishes.
const DATA: usize = 8;
const END: usize = 24;

fn data_slot(s: S) -> usize {
    DATA + if s == S::Copy { 8 } else { 0 }
}

/// Builds rank `rank`'s step list from the lowered plan (every rank derives the same signals).
fn build(g: &CudaGroup, rank: usize, l: &Lowered, elem: u64) -> Result<CePlan, CudaError> {
    let n = l.nranks as usize;
    // Nodes: per rank, per phase, the copies (one node each) and one kernel node for the
    // phase's compute items.
    #[derive(Clone)]
    struct Node {
        rank: usize,
        stream: S,
        items: Vec<usize>,
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_of = vec![usize::MAX; l.items.len()];
    for ph in 1..l.nphases() {
        for r in 0..n {
            let mut compute = Vec::new();
            for (i, it) in l.items.iter().enumerate() {
                if it.phase != ph || it.exec as usize != r {
                    continue;
                }
                if it.copy_engine {
                    node_of[i] = nodes.len();
                    nodes.push(Node {
                        rank: r,
                        stream: S::Copy,
                        items: vec![i],
                    });
                } else {
                    compute.push(i);
                }
            }
            if !compute.is_empty() {
                for &i in &compute {
                    node_of[i] = nodes.len();
                }
                nodes.push(Node {
                    rank: r,
                    stream: S::Compute,
                    items: compute,
                });
            }
        }
    }
    // Edges between nodes, deduplicated.
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (ni, nd) in nodes.iter().enumerate() {
        for &i in &nd.items {
            for &d in &l.items[i].deps {
                let p = node_of[d];
                if p != ni && !preds[ni].contains(&p) {
                    preds[ni].push(p);
                }
            }
        }
    }
    // Signals: for each producer node (in order) and each other rank that waits on it.
    let mut seq: HashMap<(usize, usize, usize), u64> = HashMap::new();
    let mut sig_of: HashMap<(usize, usize), u64> = HashMap::new(); // (node, to) -> seq
    for (pi, pn) in nodes.iter().enumerate() {
        let mut tos: Vec<usize> = Vec::new();
        for (ni, nd) in nodes.iter().enumerate() {
            if nd.rank != pn.rank && preds[ni].contains(&pi) && !tos.contains(&nd.rank) {
                tos.push(nd.rank);
            }
        }
        tos.sort_unstable();
        for to in tos {
            let c = seq.entry((pn.rank, to, pn.stream as usize)).or_insert(0);
            *c += 1;
            sig_of.insert((pi, to), *c);
        }
    }
    // Rank `rank`'s steps.
    let ctx = &g.ranks[rank].ctx;
    let mut steps = Vec::new();
    let mut kernels = Vec::new();
    let mut events: Vec<sys::CUevent> = Vec::new();
    let mut event_of: HashMap<usize, usize> = HashMap::new();
    // Which local nodes need an event after them (consumed by the other local stream).
    for (ni, nd) in nodes.iter().enumerate() {
        if nd.rank != rank {
            continue;
        }
        for &p in &preds[ni] {
            let pn = &nodes[p];
            if pn.rank == rank {
                if pn.stream != nd.stream {
                    let ev = *event_of
                        .get(&p)
                        .ok_or_else(|| CudaError::Lower("event ordering".into()))?;
                    steps.push(Step::WaitEvent {
                        stream: nd.stream,
                        event: ev,
                    });
                }
            } else {
                let s = sig_of[&(p, rank)];
                steps.push(Step::WaitSignal {
                    stream: nd.stream,
                    from: pn.rank as u32,
                    pstream: pn.stream,
                    seq: s,
                });
            }
        }
        match nd.stream {
            S::Copy => {
                let it = &l.items[nd.items[0]];
                steps.push(Step::Copy {
                    dst: it.dsts[0],
                    src: it.srcs[0],
                    bytes: it.n * elem,
                });
            }
            S::Compute => {
                let list: Vec<_> = nd
                    .items
                    .iter()
                    .map(|&i| {
                        let it = &l.items[i];
                        (it.kind, it.srcs.clone(), it.dsts.clone(), it.n)
                    })
                    .collect::<Vec<(ItemKind, Vec<Operand>, Vec<Operand>, u64)>>();
                let max = list.iter().map(|x| x.3).max().unwrap_or(0) * elem;
                let grid = (max.div_ceil(32 << 10) as u32).clamp(1, g.ranks[rank].sm_count);
                kernels.push(upload_local_plan(ctx, &list)?);
                steps.push(Step::Kernel {
                    plan: kernels.len() - 1,
                    grid,
                });
            }
        }
        // Event for a later consumer on the other local stream.
        if nodes
            .iter()
            .enumerate()
            .any(|(ci, c)| c.rank == rank && c.stream != nd.stream && preds[ci].contains(&ni))
        {
            ctx.bind_to_thread().map_err(drv)?;
            let mut e: sys::CUevent = std::ptr::null_mut();
            // SAFETY: out-pointer valid; 2 = CU_EVENT_DISABLE_TIMING.
            unsafe { sys::cuEventCreate(&mut e, 2) }
                .result()
                .map_err(drv)?;
            events.push(e);
            event_of.insert(ni, events.len() - 1);
            steps.push(Step::Record {
                stream: nd.stream,
                event: events.len() - 1,
            });
        }
        let mut tos: Vec<(usize, u64)> = sig_of
            .iter()
            .filter(|((p, _), _)| *p == ni)
            .map(|((_, to), s)| (*to, *s))
            .collect();
        tos.sort_unstable();
        for (to, s) in tos {
            steps.push(Step::Signal {
                stream: nd.stream,
                to: to as u32,
                seq: s,
            });
        }
    }
    let get = |a: usize, b: usize, st: usize| *seq.get(&(a, b, st)).unwrap_or(&0);
    let sent = (0..n).map(|b| [get(rank, b, 0), get(rank, b, 1)]).collect();
    let recvd = (0..n).map(|a| [get(a, rank, 0), get(a, rank, 1)]).collect();
    Ok(CePlan {
        steps,
        sent,
        recvd,
        kernels,
        events,
    })
}

pub(crate) fn launch_small(
    ctx: &Arc<CudaContext>,
    f: &CudaFunction,
    addr: u64,
    v: u64,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let mut a = addr;
    let mut val = v;
    let mut params: [*mut c_void; 2] = [
        &mut a as *mut u64 as *mut c_void,
        &mut val as *mut u64 as *mut c_void,
    ];
    // SAFETY: (u64*, u64) matches tp_signal.
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (1, 1, 1),
            (1, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
    .map_err(drv)
}

/// Enqueues the wait kernel `f` (`tp_wait`): the stream's later work waits until `*addr >= v`,
/// the counter `peer` bumps, or until the call stops (`ab`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_wait(
    ctx: &Arc<CudaContext>,
    f: &CudaFunction,
    addr: u64,
    v: u64,
    ab: TpAbort,
    peer: u32,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let (mut a, mut val, mut ab, mut peer) = (addr, v, ab, peer);
    let mut params: [*mut c_void; 4] = [
        &mut a as *mut u64 as *mut c_void,
        &mut val as *mut u64 as *mut c_void,
        &mut ab as *mut TpAbort as *mut c_void,
        &mut peer as *mut u32 as *mut c_void,
    ];
    // SAFETY: (u64*, u64, TpAbort, u32) matches tp_wait; the values outlive the call.
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (1, 1, 1),
            (1, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
    .map_err(drv)
}

pub(crate) fn enqueue(
    g: &CudaGroup,
    rank: usize,
    req: &Request,
    l: &Arc<Lowered>,
    m: &ExecModule,
    stream: sys::CUstream,
    ab: TpAbort,
) -> Result<(), CudaError> {
    let st = &g.ranks[rank];
    let ctx = &st.ctx;
    let n = g.nranks();
    let elem = req.dtype.size() as u64;
    let mut ce = st.ce.lock().unwrap_or_else(|p| p.into_inner());
    let key = Arc::as_ptr(l) as usize;
    if let std::collections::hash_map::Entry::Vacant(e) = ce.plans.entry(key) {
        e.insert((l.clone(), build(g, rank, l, elem)?));
    }
    let copy = ce.copy_stream;
    let calls = ce.calls + 1;
    let (sent0, recvd0) = (ce.sent.clone(), ce.recvd.clone());
    let plan = &ce.plans[&key].1;
    let tctx = g.tp_ctx(rank, req, ab);
    let wait = |addr: u64, v: u64, peer: usize, s: sys::CUstream| {
        launch_wait(ctx, &m.wait, addr, v, ab, peer as u32, s)
    };
    let peer_flag =
        |to: usize, slot: usize| g.ranks[to].flags.ptr + ((CE_FLAGS + slot + rank) * 8) as u64;
    let my_flag = |from: usize, slot: usize| st.flags.ptr + ((CE_FLAGS + slot + from) * 8) as u64;
    let sref = |s: S| if s == S::Copy { copy } else { stream };
    let op_index = crate::device::op_index(req.op);
    ctx.bind_to_thread().map_err(drv)?;
    // Start: peers' streams have reached this call; the copy stream follows the caller's.
    for p in (0..n).filter(|&p| p != rank) {
        launch_small(ctx, &m.signal, peer_flag(p, START), calls, stream)?;
    }
    let start_ev = plan.events.first().copied();
    let mut tmp: sys::CUevent = std::ptr::null_mut();
    // SAFETY: event handles created in this context; streams of this context.
    unsafe {
        sys::cuEventCreate(&mut tmp, 2).result().map_err(drv)?;
        sys::cuEventRecord(tmp, stream).result().map_err(drv)?;
        sys::cuStreamWaitEvent(copy, tmp, 0).result().map_err(drv)?;
        sys::cuEventDestroy_v2(tmp).result().map_err(drv)?;
    }
    let _ = start_ev;
    for p in (0..n).filter(|&p| p != rank) {
        wait(my_flag(p, START), calls, p, stream)?;
        wait(my_flag(p, START), calls, p, copy)?;
    }
    let resolve = |o: &Operand| tctx_ptr(&tctx, o, elem);
    for step in &plan.steps {
        match step {
            Step::Copy { dst, src, bytes } => {
                // SAFETY: both ranges lie inside buffers of the request (checked by lowering);
                // unified addressing routes a peer source through the copy engine.
                unsafe { sys::cuMemcpyAsync(resolve(dst), resolve(src), *bytes as usize, copy) }
                    .result()
                    .map_err(drv)?;
            }
            Step::Kernel { plan: k, grid } => {
                let (ph, it) = &plan.kernels[*k];
                launch_exec(
                    ctx,
                    &m.funcs[op_index],
                    *grid,
                    ph.ptr,
                    1,
                    it.ptr,
                    &tctx,
                    stream,
                )?;
            }
            Step::Record { stream: s, event } => {
                // SAFETY: event of this context, stream of this context.
                unsafe { sys::cuEventRecord(plan.events[*event], sref(*s)) }
                    .result()
                    .map_err(drv)?;
            }
            Step::WaitEvent { stream: s, event } => {
                // SAFETY: as above.
                unsafe { sys::cuStreamWaitEvent(sref(*s), plan.events[*event], 0) }
                    .result()
                    .map_err(drv)?;
            }
            Step::Signal { stream: s, to, seq } => {
                let base = sent0[*to as usize][*s as usize];
                launch_small(
                    ctx,
                    &m.signal,
                    peer_flag(*to as usize, data_slot(*s)),
                    base + seq,
                    sref(*s),
                )?;
            }
            Step::WaitSignal {
                stream: s,
                from,
                pstream,
                seq,
            } => {
                let base = recvd0[*from as usize][*pstream as usize];
                wait(
                    my_flag(*from as usize, data_slot(*pstream)),
                    base + seq,
                    *from as usize,
                    sref(*s),
                )?;
            }
        }
    }
    // End: the caller's stream follows the copy stream, then waits until no peer touches our
    // memory any more.
    let mut tmp: sys::CUevent = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe {
        sys::cuEventCreate(&mut tmp, 2).result().map_err(drv)?;
        sys::cuEventRecord(tmp, copy).result().map_err(drv)?;
        sys::cuStreamWaitEvent(stream, tmp, 0)
            .result()
            .map_err(drv)?;
        sys::cuEventDestroy_v2(tmp).result().map_err(drv)?;
    }
    for p in (0..n).filter(|&p| p != rank) {
        launch_small(ctx, &m.signal, peer_flag(p, END), calls, stream)?;
    }
    for p in (0..n).filter(|&p| p != rank) {
        wait(my_flag(p, END), calls, p, stream)?;
    }
    let (ps, pr) = (plan.sent.clone(), plan.recvd.clone());
    ce.calls = calls;
    for b in 0..n {
        for k in 0..2 {
            ce.sent[b][k] += ps[b][k];
            ce.recvd[b][k] += pr[b][k];
        }
    }
    Ok(())
}

fn tctx_ptr(c: &TpCtx, o: &Operand, elem: u64) -> u64 {
    c.base_of(o.rank as usize, o.buf as usize) + o.off * elem
}
