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
use crate::device::{drv, DevBuf, ExecModule};
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

/// One node of the copy-engine plan's graph: per rank and phase, each copy on its own, and one
/// kernel for the phase's compute items.
#[derive(Clone)]
struct Node {
    rank: usize,
    stream: S,
    items: Vec<usize>,
}

/// The plan's graph, the same on every rank: nodes, each node's predecessors, and the numbered
/// signals between ranks.
struct Graph {
    nodes: Vec<Node>,
    preds: Vec<Vec<usize>>,
    /// Signals per (from rank, to rank, producer stream).
    seq: HashMap<(usize, usize, usize), u64>,
    /// The signal number of (producer node, to rank).
    sig_of: HashMap<(usize, usize), u64>,
}

impl Graph {
    fn new(l: &Lowered) -> Self {
        let (nodes, node_of) = Self::nodes(l);
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
        let mut g = Graph {
            nodes,
            preds,
            seq: HashMap::new(),
            sig_of: HashMap::new(),
        };
        g.number_signals();
        g
    }

    /// The nodes, and the node of every item.
    fn nodes(l: &Lowered) -> (Vec<Node>, Vec<usize>) {
        let mut nodes: Vec<Node> = Vec::new();
        let mut node_of = vec![usize::MAX; l.items.len()];
        for ph in 1..l.nphases() {
            for r in 0..l.nranks as usize {
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
        (nodes, node_of)
    }

    /// Signals: for each producer node (in order) and each other rank that waits on it.
    fn number_signals(&mut self) {
        for (pi, pn) in self.nodes.iter().enumerate() {
            let mut tos: Vec<usize> = Vec::new();
            for (ni, nd) in self.nodes.iter().enumerate() {
                if nd.rank != pn.rank && self.preds[ni].contains(&pi) && !tos.contains(&nd.rank) {
                    tos.push(nd.rank);
                }
            }
            tos.sort_unstable();
            for to in tos {
                let c = self
                    .seq
                    .entry((pn.rank, to, pn.stream as usize))
                    .or_insert(0);
                *c += 1;
                self.sig_of.insert((pi, to), *c);
            }
        }
    }
}

/// Builds rank `rank`'s step list from the lowered plan (every rank derives the same signals).
fn build(g: &CudaGroup, rank: usize, l: &Lowered, elem: u64) -> Result<CePlan, CudaError> {
    let n = l.nranks as usize;
    let graph = Graph::new(l);
    let mut b = Builder {
        g,
        rank,
        l,
        elem,
        graph: &graph,
        steps: Vec::new(),
        kernels: Vec::new(),
        events: Vec::new(),
        event_of: HashMap::new(),
    };
    for ni in 0..graph.nodes.len() {
        if graph.nodes[ni].rank == rank {
            b.node(ni)?;
        }
    }
    let get = |a: usize, b: usize, st: usize| *graph.seq.get(&(a, b, st)).unwrap_or(&0);
    let sent = (0..n).map(|b| [get(rank, b, 0), get(rank, b, 1)]).collect();
    let recvd = (0..n).map(|a| [get(a, rank, 0), get(a, rank, 1)]).collect();
    Ok(CePlan {
        steps: b.steps,
        sent,
        recvd,
        kernels: b.kernels,
        events: b.events,
    })
}

/// Rank `rank`'s steps, node by node.
struct Builder<'a> {
    g: &'a CudaGroup,
    rank: usize,
    l: &'a Lowered,
    elem: u64,
    graph: &'a Graph,
    steps: Vec<Step>,
    kernels: Vec<(DevBuf, DevBuf)>,
    events: Vec<sys::CUevent>,
    /// The event recorded after a node (consumed by the other local stream).
    event_of: HashMap<usize, usize>,
}

impl Builder<'_> {
    /// The waits before node `ni`, its work, the event after it, and its signals.
    fn node(&mut self, ni: usize) -> Result<(), CudaError> {
        let (graph, rank) = (self.graph, self.rank);
        let nd = &graph.nodes[ni];
        for &p in &graph.preds[ni] {
            let pn = &graph.nodes[p];
            if pn.rank != rank {
                self.steps.push(Step::WaitSignal {
                    stream: nd.stream,
                    from: pn.rank as u32,
                    pstream: pn.stream,
                    seq: graph.sig_of[&(p, rank)],
                });
            } else if pn.stream != nd.stream {
                let ev = *self
                    .event_of
                    .get(&p)
                    .ok_or_else(|| CudaError::Lower("event ordering".into()))?;
                self.steps.push(Step::WaitEvent {
                    stream: nd.stream,
                    event: ev,
                });
            }
        }
        self.work(nd)?;
        // Event for a later consumer on the other local stream.
        let consumed = graph.nodes.iter().enumerate().any(|(ci, c)| {
            c.rank == rank && c.stream != nd.stream && graph.preds[ci].contains(&ni)
        });
        if consumed {
            let ctx = &self.g.ranks[rank].ctx;
            ctx.bind_to_thread().map_err(drv)?;
            let mut e: sys::CUevent = std::ptr::null_mut();
            // SAFETY: out-pointer valid; 2 = CU_EVENT_DISABLE_TIMING.
            unsafe { sys::cuEventCreate(&mut e, 2) }
                .result()
                .map_err(drv)?;
            self.events.push(e);
            self.event_of.insert(ni, self.events.len() - 1);
            self.steps.push(Step::Record {
                stream: nd.stream,
                event: self.events.len() - 1,
            });
        }
        let mut tos: Vec<(usize, u64)> = graph
            .sig_of
            .iter()
            .filter(|((p, _), _)| *p == ni)
            .map(|((_, to), s)| (*to, *s))
            .collect();
        tos.sort_unstable();
        for (to, s) in tos {
            self.steps.push(Step::Signal {
                stream: nd.stream,
                to: to as u32,
                seq: s,
            });
        }
        Ok(())
    }

    /// A node's copy, or its compute items as one uploaded local plan.
    fn work(&mut self, nd: &Node) -> Result<(), CudaError> {
        let (l, elem) = (self.l, self.elem);
        match nd.stream {
            S::Copy => {
                let it = &l.items[nd.items[0]];
                self.steps.push(Step::Copy {
                    dst: it.dsts[0],
                    src: it.srcs[0],
                    bytes: it.n * elem,
                });
            }
            S::Compute => {
                let list = nd
                    .items
                    .iter()
                    .map(|&i| {
                        let it = &l.items[i];
                        (it.kind, it.srcs.clone(), it.dsts.clone(), it.n)
                    })
                    .collect::<Vec<(ItemKind, Vec<Operand>, Vec<Operand>, u64)>>();
                let max = list.iter().map(|x| x.3).max().unwrap_or(0) * elem;
                let st = &self.g.ranks[self.rank];
                let grid = (max.div_ceil(32 << 10) as u32).clamp(1, st.sm_count);
                self.kernels.push(upload_local_plan(&st.ctx, &list)?);
                self.steps.push(Step::Kernel {
                    plan: self.kernels.len() - 1,
                    grid,
                });
            }
        }
        Ok(())
    }
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
    let elem = req.dtype.size() as u64;
    let mut ce = st.ce.lock().unwrap_or_else(|p| p.into_inner());
    let key = Arc::as_ptr(l) as usize;
    if let std::collections::hash_map::Entry::Vacant(e) = ce.plans.entry(key) {
        e.insert((l.clone(), build(g, rank, l, elem)?));
    }
    let call = Call {
        g,
        rank,
        m,
        stream,
        copy: ce.copy_stream,
        calls: ce.calls + 1,
        ab,
        elem,
        op_index: crate::device::op_index(req.op),
        tctx: g.tp_ctx(rank, req, ab),
    };
    let plan = &ce.plans[&key].1;
    st.ctx.bind_to_thread().map_err(drv)?;
    call.start()?;
    for step in &plan.steps {
        call.step(step, plan, &ce.sent, &ce.recvd)?;
    }
    call.end()?;
    let (ps, pr) = (plan.sent.clone(), plan.recvd.clone());
    ce.calls = call.calls;
    for b in 0..g.nranks() {
        for k in 0..2 {
            ce.sent[b][k] += ps[b][k];
            ce.recvd[b][k] += pr[b][k];
        }
    }
    Ok(())
}

/// One rank's call of the copy-engine path: its streams, counters and kernel arguments.
struct Call<'a> {
    g: &'a CudaGroup,
    rank: usize,
    m: &'a ExecModule,
    stream: sys::CUstream,
    copy: sys::CUstream,
    /// This call's number (the start and end counters' value).
    calls: u64,
    ab: TpAbort,
    elem: u64,
    op_index: usize,
    tctx: TpCtx,
}

impl Call<'_> {
    fn ctx(&self) -> &Arc<CudaContext> {
        &self.g.ranks[self.rank].ctx
    }

    /// Counter word `slot` (+ our rank) in rank `to`'s flags.
    fn peer_flag(&self, to: usize, slot: usize) -> u64 {
        self.g.ranks[to].flags.ptr + ((CE_FLAGS + slot + self.rank) * 8) as u64
    }

    /// Counter word `slot` (+ `from`) in our flags.
    fn my_flag(&self, from: usize, slot: usize) -> u64 {
        self.g.ranks[self.rank].flags.ptr + ((CE_FLAGS + slot + from) * 8) as u64
    }

    fn sref(&self, s: S) -> sys::CUstream {
        if s == S::Copy {
            self.copy
        } else {
            self.stream
        }
    }

    fn wait(&self, addr: u64, v: u64, peer: usize, s: sys::CUstream) -> Result<(), CudaError> {
        launch_wait(self.ctx(), &self.m.wait, addr, v, self.ab, peer as u32, s)
    }

    fn signal(&self, addr: u64, v: u64, s: sys::CUstream) -> Result<(), CudaError> {
        launch_small(self.ctx(), &self.m.signal, addr, v, s)
    }

    fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.g.nranks()).filter(move |&p| p != self.rank)
    }

    /// `to` follows `from` from here on (a throwaway event).
    fn follow(&self, to: sys::CUstream, from: sys::CUstream) -> Result<(), CudaError> {
        let mut tmp: sys::CUevent = std::ptr::null_mut();
        // SAFETY: an event created here in the bound context; streams of this context.
        unsafe {
            sys::cuEventCreate(&mut tmp, 2).result().map_err(drv)?;
            sys::cuEventRecord(tmp, from).result().map_err(drv)?;
            sys::cuStreamWaitEvent(to, tmp, 0).result().map_err(drv)?;
            sys::cuEventDestroy_v2(tmp).result().map_err(drv)?;
        }
        Ok(())
    }

    /// Start: peers' streams have reached this call; the copy stream follows the caller's.
    fn start(&self) -> Result<(), CudaError> {
        for p in self.peers() {
            self.signal(self.peer_flag(p, START), self.calls, self.stream)?;
        }
        self.follow(self.copy, self.stream)?;
        for p in self.peers() {
            self.wait(self.my_flag(p, START), self.calls, p, self.stream)?;
            self.wait(self.my_flag(p, START), self.calls, p, self.copy)?;
        }
        Ok(())
    }

    /// End: the caller's stream follows the copy stream, then waits until no peer touches our
    /// memory any more.
    fn end(&self) -> Result<(), CudaError> {
        self.follow(self.stream, self.copy)?;
        for p in self.peers() {
            self.signal(self.peer_flag(p, END), self.calls, self.stream)?;
        }
        for p in self.peers() {
            self.wait(self.my_flag(p, END), self.calls, p, self.stream)?;
        }
        Ok(())
    }

    /// One step; `sent0` and `recvd0` are the signal counts before this call.
    fn step(
        &self,
        step: &Step,
        plan: &CePlan,
        sent0: &[[u64; 2]],
        recvd0: &[[u64; 2]],
    ) -> Result<(), CudaError> {
        let resolve = |o: &Operand| tctx_ptr(&self.tctx, o, self.elem);
        match step {
            Step::Copy { dst, src, bytes } => {
                // SAFETY: both ranges lie inside buffers of the request (checked by lowering);
                // unified addressing routes a peer source through the copy engine.
                unsafe {
                    sys::cuMemcpyAsync(resolve(dst), resolve(src), *bytes as usize, self.copy)
                }
                .result()
                .map_err(drv)
            }
            Step::Kernel { plan: k, grid } => {
                let (ph, it) = &plan.kernels[*k];
                launch_exec(
                    self.ctx(),
                    &self.m.funcs[self.op_index],
                    *grid,
                    ph.ptr,
                    1,
                    it.ptr,
                    &self.tctx,
                    self.stream,
                )
            }
            Step::Record { stream: s, event } => {
                // SAFETY: event of this context, stream of this context.
                unsafe { sys::cuEventRecord(plan.events[*event], self.sref(*s)) }
                    .result()
                    .map_err(drv)
            }
            Step::WaitEvent { stream: s, event } => {
                // SAFETY: as above.
                unsafe { sys::cuStreamWaitEvent(self.sref(*s), plan.events[*event], 0) }
                    .result()
                    .map_err(drv)
            }
            Step::Signal { stream: s, to, seq } => {
                let base = sent0[*to as usize][*s as usize];
                let addr = self.peer_flag(*to as usize, data_slot(*s));
                self.signal(addr, base + seq, self.sref(*s))
            }
            Step::WaitSignal {
                stream: s,
                from,
                pstream,
                seq,
            } => {
                let base = recvd0[*from as usize][*pstream as usize];
                let addr = self.my_flag(*from as usize, data_slot(*pstream));
                self.wait(addr, base + seq, *from as usize, self.sref(*s))
            }
        }
    }
}

fn tctx_ptr(c: &TpCtx, o: &Operand, elem: u64) -> u64 {
    c.base_of(o.rank as usize, o.buf as usize) + o.off * elem
}
