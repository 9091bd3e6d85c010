//! Several processes on one host, one GPU each: the direct-push path (`super::direct`) with the
//! peers' slot and flag buffers mapped through CUDA IPC instead of peer access.
//!
//! Setup ([`CudaProcComm::new`]): open the GPU, allocate and zero this rank's [`DirectBufs`],
//! wait for the zeroing to finish, export the three buffers' IPC handles with the SM count in a
//! fixed-size [`PeerRecord`], all-gather the records (the caller's exchange, normally the
//! bootstrap), open every peer's handles, then all-gather a "ready" word so that no rank
//! launches against a peer whose setup failed. The exchange is the ordering point: a peer can
//! only see our pointers after our flags and LL slots are zero.
//!
//! Buffers the ranks register together ([`CudaProcComm::register`], `ipc/register.rs`) are
//! mapped in every rank too, so a call whose input is registered runs pull mode as in one
//! process.
//!
//! Only one-shot schedules run here (the ones [`direct::applies`] accepts): the generic
//! lowering and the copy-engine pipeline address peers' scratch rings and contexts that exist
//! only in a one-process [`super::CudaGroup`].

use super::device::{driver_present, drv, open_devices, ExecModule, ModuleCache};
use super::direct::{self, p2p, DirectBufs, DirectCall, DirectPeers};
use super::CudaError;
use crate::abort::{AbortWord, RankAbort};
use crate::request::RankCall;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::Schedule;
use runtime::types::DataType;
use std::sync::{Arc, Mutex};

mod agree;
pub mod calls;
mod pair;
mod record;
mod register;
mod registry;
mod shared;
use pair::state::ProcPair;
use record::BUF_NAMES;
pub use record::{
    check_table, PeerRecord, RecordError, RECORD_BYTES, RECORD_MAGIC, RECORD_VERSION,
};
use registry::Registration;
pub use registry::{
    check_reg_table, peer_inputs, RegRecord, RegisteredBuffer, REG_BYTES, REG_MAGIC, REG_VERSION,
};
pub use shared::Exchange;
use shared::{agree, at, export, rank_err, IpcMapping};

/// Whether `s` runs in the multi-process mode; a clear error otherwise.
pub fn check_direct(s: &Schedule) -> Result<(), CudaError> {
    if direct::applies(s) {
        return Ok(());
    }
    Err(CudaError::Input(format!(
        "the multi-process (CUDA IPC) mode runs the one-shot (direct) schedules only \
         (all-reduce, all-gather, reduce-scatter, broadcast, reduce, and the direct \
         all-to-all, on 2 to 8 ranks, TOPOPLAN_DIRECT not 0); algorithm `{}` for {} on {} ranks is not one",
        s.algorithm.name(),
        s.collective.kind.name(),
        s.nranks
    )))
}

/// Opens every peer's buffers (`recs`, in rank order) in `ctx`, keeping the mappings in
/// `mapped`; this rank's own come from `bufs`.
fn map_peers(
    ctx: &Arc<CudaContext>,
    rank: u32,
    recs: &[PeerRecord],
    bufs: &DirectBufs,
    mapped: &mut Vec<IpcMapping>,
) -> Result<DirectPeers, CudaError> {
    let mut peers = DirectPeers {
        nranks: recs.len() as u32,
        min_sm: recs.iter().map(|p| p.sm_count).min().unwrap_or(1),
        simple: [0; 8],
        ll: [0; 8],
        flags: [0; 8],
    };
    for p in recs {
        let r = p.rank as usize;
        let ptrs = if p.rank == rank {
            let (s, l, f) = bufs.ptrs();
            [s, l, f]
        } else {
            let mut v = [0; 3];
            for (i, h) in p.handles.iter().enumerate() {
                let m = IpcMapping::open(ctx, h).map_err(at(
                    rank,
                    &format!(
                        "opening rank {}'s {} (GPU {}, cuIpcOpenMemHandle)",
                        p.rank, BUF_NAMES[i], p.ordinal
                    ),
                ))?;
                v[i] = m.ptr;
                mapped.push(m);
            }
            v
        };
        (peers.simple[r], peers.ll[r], peers.flags[r]) = (ptrs[0], ptrs[1], ptrs[2]);
    }
    Ok(peers)
}

/// One rank's call in the multi-process mode (this rank's buffers only).
#[derive(Clone, Copy, Debug)]
pub struct ProcRequest<'a> {
    pub call: RankCall<'a>,
    /// The registered buffer `input` lies in ([`CudaProcComm::register`]), the same on every
    /// rank, with every rank's input at the same offset into its buffer: then pull mode may run
    /// (the peers' inputs are mapped). `None`: the push path, which reads no peer's buffer.
    pub registered_input: Option<RegisteredBuffer>,
}

/// One process, one GPU, one rank of a job whose other ranks are processes on the same host.
/// Every rank must enqueue the same sequence of collectives. Before dropping it (or exiting),
/// synchronise the streams and meet the other ranks (a barrier): a peer still running a call
/// writes into this rank's buffers.
pub struct CudaProcComm {
    rank: u32,
    nranks: u32,
    ctx: Arc<CudaContext>,
    peers: DirectPeers,
    /// Registered buffers (their peers' mappings) by registration number; `None` once
    /// deregistered (numbers are never reused).
    registry: Mutex<Vec<Option<Registration>>>,
    /// The copy engines' ring and counters once enabled (`enable_copy_engines`, 2 ranks).
    pair: Mutex<Option<ProcPair>>,
    /// Declared before `_bufs`: the peers' mappings close before our own buffers are freed.
    mapped: Vec<IpcMapping>,
    /// This rank's slots and flags: only kernels use them (through `peers`), so they are
    /// merely kept alive here.
    _bufs: DirectBufs,
    modules: ModuleCache,
    /// The abort word ([`Self::abort`]) and this rank's status word (`crate::abort`). The
    /// abort word lives on this rank's call board where there is one, so it drops before it.
    abort_word: AbortWord,
    /// The check that the ranks call the same things (`calls`); `None` without boards.
    calls: Option<Mutex<calls::Calls>>,
    stops: RankAbort,
    /// The stream of this rank's last call: kernels of one rank share its flag words, so a call
    /// on another stream waits for it, as NCCL orders a communicator's calls ([`Self::order`]).
    last_stream: Mutex<Option<usize>>,
}

impl std::fmt::Debug for CudaProcComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaProcComm(rank {} of {}, GPU {})",
            self.rank,
            self.nranks,
            self.ctx.ordinal()
        )
    }
}

impl CudaProcComm {
    /// Opens GPU `ordinal` as `rank` of `nranks` and maps the peers' buffers. `exchange` is an
    /// all-gather across the ranks (called twice: the records, then the "ready" words).
    pub fn new(
        ordinal: usize,
        rank: u32,
        nranks: u32,
        exchange: &mut Exchange<'_>,
    ) -> Result<Self, CudaError> {
        if !(2..=8).contains(&nranks) || rank >= nranks {
            return Err(CudaError::Input(format!(
                "rank {rank} of {nranks}: the multi-process mode needs 2 to 8 ranks"
            )));
        }
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let ctx = open_devices(&[ordinal])
            .map_err(at(rank, &format!("opening GPU {ordinal}")))?
            .remove(0);
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(drv)
            .map_err(at(rank, "reading the SM count"))? as u32;
        let bufs = DirectBufs::new(&ctx, nranks as usize)
            .map_err(at(rank, "allocating the direct-path buffers"))?;
        // cuMemset on device memory may return before it is done: the flags and LL slots must
        // be zero before any peer can see them, i.e. before the exchange.
        ctx.synchronize()
            .map_err(drv)
            .map_err(at(rank, "zeroing the direct-path buffers"))?;
        let mut me = PeerRecord {
            rank,
            nranks,
            sm_count,
            ordinal: ordinal as u32,
            pid: std::process::id(),
            host: runtime::config::fnv1a(runtime::bootstrap::hostname().as_bytes()),
            handles: [[0; 64]; 3],
            bytes: [0; 3],
        };
        for (i, b) in bufs.bufs().iter().enumerate() {
            me.handles[i] = export(&ctx, b.ptr).map_err(at(
                rank,
                &format!("exporting the {} (cuIpcGetMemHandle)", BUF_NAMES[i]),
            ))?;
            me.bytes[i] = b.bytes as u64;
        }
        let table = exchange(&me.encode()).map_err(at(rank, "exchanging IPC records"))?;
        let recs = check_table(&table, &me)?;
        // Map the peers; whatever happens, tell the others before launching anything.
        let mut mapped = Vec::new();
        let mut peers = None;
        let opened = map_peers(&ctx, rank, &recs, &bufs, &mut mapped).map(|p| peers = Some(p));
        agree(rank, exchange, opened, "map its peers")?;
        let peers = peers.ok_or_else(|| rank_err(rank, "no peers mapped"))?;
        let calls = calls::setup(rank, nranks, &table, calls::wait_timeout(), exchange)?;
        // On the board, any rank can stop this rank's kernels; a private word otherwise (a
        // verdict then reaches them through `Self::verdict`).
        let abort_word = match &calls {
            Some(c) => AbortWord::on_page(
                &ctx,
                c.board().header(),
                calls::Board::HEADER,
                calls::Board::ABORT_BYTE,
            )
            .or_else(|_| AbortWord::new(&ctx))?,
            None => AbortWord::new(&ctx)?,
        };
        let stops = RankAbort::new(&ctx, &abort_word)?;
        Ok(Self {
            rank,
            nranks,
            ctx,
            peers,
            registry: Mutex::default(),
            pair: Mutex::default(),
            mapped,
            _bufs: bufs,
            modules: ModuleCache::default(),
            abort_word,
            calls: calls.map(Mutex::new),
            stops,
            last_stream: Mutex::new(None),
        })
    }

    /// Orders a call on `stream` after this rank's previous call, when that one went to another
    /// stream: two kernels of one rank running at once would race on its sequence words. Under
    /// graph capture the graph's own order holds, and nothing is joined.
    fn order(&self, stream: sys::CUstream) -> Result<(), CudaError> {
        let s = stream as usize;
        let mut last = self.last_stream.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = last.filter(|&p| p != s) {
            if !crate::query::capturing(s) {
                crate::query::stream_waits_for(s, prev).map_err(|e| {
                    rank_err(self.rank, format!("ordering after the last call: {e}"))
                })?;
            }
        }
        *last = Some(s);
        Ok(())
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Every rank's buffers as this process sees them.
    pub fn peers(&self) -> &DirectPeers {
        &self.peers
    }

    /// Compiles and loads the kernels for `dtype` now (otherwise the first call does it).
    pub fn prepare(&self, dtype: DataType) -> Result<(), CudaError> {
        self.module(dtype).map(|_| ())
    }

    fn module(&self, dtype: DataType) -> Result<Arc<ExecModule>, CudaError> {
        self.modules
            .get(&self.ctx, dtype)
            .map_err(at(self.rank, &format!("loading the {dtype:?} kernels")))
    }

    /// Enqueues this rank's part of `req` on `stream` (a stream of [`Self::context`]).
    pub fn enqueue(&self, req: &ProcRequest, stream: sys::CUstream) -> Result<(), CudaError> {
        let s = req.call.schedule;
        if s.nranks != self.nranks {
            return Err(CudaError::Input(format!(
                "a schedule for {} ranks on a {}-rank communicator",
                s.nranks, self.nranks
            )));
        }
        check_direct(s)?;
        self.check_call(|c| {
            c.collective(&calls::Desc::Coll {
                kind: s.collective.kind,
                count: req.call.count,
                dtype: req.call.dtype,
                op: req.call.op,
                root: s.collective.root.unwrap_or(0),
            })
        })?;
        if req.call.count == 0 {
            return Ok(());
        }
        if self.aborted() {
            return Err(CudaError::Aborted);
        }
        let module = self.module(req.call.dtype)?;
        self.flagged_since_check()?;
        self.order(stream)?;
        let in_place = direct::is_in_place(
            s.collective.kind,
            self.rank,
            req.call.count * req.call.dtype.size() as u64,
            req.call.input,
            req.call.output,
        );
        let call = DirectCall {
            inputs: self.peer_inputs_of(req, in_place)?,
            ab: self.stops.next_call(),
            ..DirectCall::of(
                s,
                req.call.count,
                req.call.dtype,
                req.call.op,
                req.call.input,
                req.call.output,
                in_place,
            )
        };
        if let Some(done) = self.enqueue_hybrid(req, &call, &module, stream) {
            return done.map_err(at(self.rank, "launching a hybrid call"));
        }
        direct::launch_call(&self.ctx, &module, &self.peers, self.rank, &call, stream)
            .map_err(at(self.rank, "launching a direct call"))
    }

    /// Enqueues this rank's sends and receives of one group (in issue order; `bytes` each) on
    /// `stream`: the copies to itself, then one point-to-point launch per round
    /// (`direct::p2p`). Every rank of the group calls it with its own part.
    pub fn enqueue_p2p(
        &self,
        sends: &[p2p::Transfer],
        recvs: &[p2p::Transfer],
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        self.check_messages(sends, recvs)?;
        if self.aborted() {
            return Err(CudaError::Aborted);
        }
        let plan = p2p::plan(self.rank, self.nranks, sends, recvs)?;
        let module = self.module(DataType::U8)?;
        self.flagged_since_check()?;
        self.ctx.bind_to_thread().map_err(drv)?;
        self.order(stream)?;
        for &(dst, src, bytes) in &plan.copies {
            if dst == src || bytes == 0 {
                continue;
            }
            // SAFETY: device ranges of the caller's group, on the caller's stream.
            let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, stream) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(rank_err(
                    self.rank,
                    format!("copying a {bytes}-byte send to itself: {r:?}"),
                ));
            }
        }
        for round in &plan.rounds {
            let ab = self.stops.next_call();
            p2p::launch_round(
                &self.ctx,
                &module,
                &self.peers,
                self.rank,
                round,
                ab,
                stream,
            )
            .map_err(at(self.rank, "launching a point-to-point round"))?;
        }
        Ok(())
    }

    /// Enqueues PreMulSum's scaling `s` in `dtype` on `stream` (`crate::scale`).
    pub fn scale(
        &self,
        s: &crate::scale::Scaling,
        dtype: DataType,
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        let module = self.module(dtype)?;
        crate::scale::enqueue(&self.ctx, &module, s, stream)
            .map_err(at(self.rank, "scaling a PreMulSum input"))
    }

    /// Every rank's input of `req` when it names a registered buffer (pull mode may read them).
    fn peer_inputs_of(
        &self,
        req: &ProcRequest,
        in_place: bool,
    ) -> Result<Option<[u64; 8]>, CudaError> {
        let Some(RegisteredBuffer(i)) = req.registered_input else {
            return Ok(None);
        };
        let s = req.call.schedule;
        let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let r = reg
            .get(i as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                rank_err(
                    self.rank,
                    format!("registered buffer {i} is not registered here (deregistered?)"),
                )
            })?;
        let (in_len, _) =
            runtime::reference::buffer_lens(&s.collective, self.nranks, req.call.count as usize);
        let in_bytes = in_len as u64 * req.call.dtype.size() as u64;
        // In place, an all-gather's input is block `rank` of the output (NCCL's rule), so the
        // ranks' inputs sit at different offsets.
        let gather_in_place =
            in_place && s.collective.kind == planner::schedule::CollectiveKind::AllGather;
        peer_inputs(
            &r.starts,
            r.bytes,
            self.nranks,
            self.rank,
            req.call.input,
            in_bytes,
            if gather_in_place { in_bytes } else { 0 },
        )
        .map(Some)
    }

    /// From 512 MiB (2 ranks, copy engines enabled): the hybrid, as in one process; `None`
    /// where it does not run. Not under graph capture (the counters' bases live on the host),
    /// as in one process.
    fn enqueue_hybrid(
        &self,
        req: &ProcRequest,
        call: &DirectCall,
        module: &ExecModule,
        stream: sys::CUstream,
    ) -> Option<Result<(), CudaError>> {
        let elem = req.call.dtype.size() as u64;
        let ce = super::hybrid::share(req.call.schedule, req.call.count, elem);
        if ce == 0 {
            return None;
        }
        let pair = self.pair.lock().unwrap_or_else(|p| p.into_inner());
        let p = pair.as_ref()?;
        let capturing = self
            .ctx
            .bind_to_thread()
            .map_err(drv)
            .and_then(|()| super::ce_pair::capturing(stream));
        match capturing {
            Ok(false) => {}
            Ok(true) => return None,
            Err(e) => return Some(Err(e)),
        }
        let sm = req.call.count - ce;
        // In place the two halves share SMs (`DirectCall::shares_sms`).
        let share = super::hybrid::shares_sms(call.in_place);
        let sm_call = DirectCall {
            count: sm,
            shares_sms: share,
            ..*call
        };
        let hy = p.hybrid.lock().unwrap_or_else(|p| p.into_inner());
        let side = p.side(&self.ctx, self.rank, self.peers.min_sm, share, call.ab);
        Some(super::hybrid::fork_join(
            &self.ctx,
            &hy,
            stream,
            |st| direct::launch_call(&self.ctx, module, &self.peers, self.rank, &sm_call, st),
            |side_stream| {
                super::ce_pair::enqueue_on(
                    &side,
                    req.call.input + sm * elem,
                    req.call.output + sm * elem,
                    ce,
                    req.call.dtype,
                    req.call.op,
                    module,
                    side_stream,
                )
            },
        ))
    }

    /// Aborts this rank's GPU waits: kernels waiting on a peer leave their call (recording
    /// which wait, see [`Self::check`]), the copy engines' stream waits are released, and every
    /// later call fails with [`CudaError::Aborted`]. Returns at once; the caller then
    /// synchronises its streams, which complete, and drops the communicator. A new
    /// communicator on the same GPU works.
    pub fn abort(&self) -> Result<(), CudaError> {
        self.abort_word.set();
        let pair = self.pair.lock().unwrap_or_else(|p| p.into_inner());
        match pair.as_ref() {
            Some(p) => crate::abort::release(&self.ctx, p.counter_words()),
            None => Ok(()),
        }
    }

    /// Whether [`Self::abort`] ran.
    pub fn aborted(&self) -> bool {
        self.abort_word.is_set()
    }

    /// The wait of this rank that stopped (aborted or timed out), as an error naming the wait,
    /// the peer and the call; `Ok` when none did. Read it after the stream completed.
    pub fn check(&self) -> Result<(), CudaError> {
        match self.stops.read()? {
            Some(stop) => Err(stop.error(self.rank)),
            None => Ok(()),
        }
    }
}

impl Drop for CudaProcComm {
    fn drop(&mut self) {
        // Unmap the peers first (field order does it too; this states the intent).
        self.mapped.clear();
    }
}

#[cfg(test)]
mod tests;
