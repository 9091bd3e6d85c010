//! `CudaGroup`: one process driving several GPUs with peer access. Each call enqueues one rank's
//! part of a collective on the caller's stream for that rank; the host never waits for the GPU.
//! Ranks are usually driven from one host thread each; cross-GPU ordering happens on the devices
//! (flags in device memory), so the threads never talk to each other per call.
//!
//! Ranks may share a GPU (a device list with repeats, e.g. `[0, 0, 0, 0]`): they share its
//! primary context, and each rank's grids are sized from its share of the SMs so that every
//! rank's kernels are resident at once (`crate::residency`); a path whose least grid does not
//! fit is refused with [`crate::residency::ResidencyError`], never left to hang.

use crate::abort::{AbortWord, RankAbort, TpAbort};
use crate::ce::state::CeState;
use crate::ce_pair::state::{PairScratch, PairState};
use crate::device::{drv, open_devices, DevBuf, ExecModule, ModuleCache};
use crate::direct::DirectBufs;
use crate::hybrid::state::HybridState;
use crate::lower::{lower, Buf, LowerParams, Lowered};
use crate::request::{PlanKey, TpCtx};
use crate::residency::{self, Demand, Path};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::Schedule;
use runtime::types::{DataType, ReduceOp};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub mod own;
pub(crate) mod plan;
pub use crate::request::Request;
use plan::DevPlan;

use crate::layout::{
    CE_FLAGS, GROUP_FLAG_WORDS as FLAG_WORDS, LL_HALF_BYTES, MAX_RANKS, PAIR_FLAGS, PAIR_WORDS,
};
pub(crate) struct RankState {
    pub(crate) ctx: Arc<CudaContext>,
    /// The SMs this rank's spinning CTAs may fill: the GPU's SM count, or on a GPU that ranks
    /// share, this rank's share of it (`residency::rank_sms`). Every path sizes its grid from it.
    pub(crate) sm_count: u32,
    /// The GPU's SM count.
    device_sms: u32,
    /// Ranks of the group on this rank's GPU (1 unless ranks share it).
    ranks_on_device: u32,
    pub(crate) flags: DevBuf,
    /// Scratch: the ring, then (grown on demand) the region for snapshots and messages in flight.
    /// Buffers replaced by larger ones stay allocated (kernels in flight may use them) until the
    /// group is dropped.
    pub(crate) scratch: Mutex<Vec<DevBuf>>,
    /// LL lines: two halves of `LL_HALF_BYTES`, zeroed at start (epoch 0 never matches).
    pub(crate) ll: DevBuf,
    /// Shared by the ranks of one GPU (one context: one module per type serves them all).
    modules: Arc<ModuleCache>,
    plans: Mutex<HashMap<PlanKey, Arc<DevPlan>>>,
    pub(crate) ce: Mutex<CeState>,
    /// Copy stream and counters of the copy-engine pair all-reduce (`crate::ce_pair`).
    pub(crate) ce_pair: Mutex<PairState>,
    /// Side stream of the hybrid all-reduce (`crate::hybrid`).
    pub(crate) hybrid: Mutex<HybridState>,
    /// Slots and flags of the direct-push path (`crate::direct`).
    pub(crate) direct: DirectBufs,
    /// This rank's status word and call count (`crate::abort`).
    pub(crate) abort: RankAbort,
    /// The stream of this rank's last own call (`own`): a call on another stream waits for it.
    pub(crate) last_stream: Mutex<Option<usize>>,
}

impl RankState {
    pub(crate) fn scratch_ptr(&self) -> u64 {
        self.scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .map(|b| b.ptr)
            .unwrap_or(0)
    }

    /// Makes the scratch buffer at least `bytes` long.
    fn grow_scratch(&self, bytes: usize) -> Result<(), CudaError> {
        let mut v = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if v.last().map(|b| b.bytes).unwrap_or(0) < bytes {
            v.push(DevBuf::new(&self.ctx, bytes)?);
        }
        Ok(())
    }
}

/// Lowered plans by key; the schedule is kept alive so that its address stays unique.
type LoweredCache = Mutex<HashMap<PlanKey, (Arc<Schedule>, Arc<Lowered>)>>;

pub struct CudaGroup {
    pub(crate) ranks: Vec<RankState>,
    lowered: LoweredCache,
    scratch_elems_cap_bytes: usize,
    /// Some GPU runs more than one rank.
    shared: bool,
    /// Both ranks' scratch rings of the copy-engine pair all-reduce, allocated on first use.
    pub(crate) pair_scratch: PairScratch,
    /// The group's abort word: [`Self::abort`] sets it for every rank.
    pub(crate) abort_word: AbortWord,
}

impl std::fmt::Debug for CudaGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaGroup({} GPUs)", self.ranks.len())
    }
}

impl CudaGroup {
    /// Opens the GPUs `ordinals` (rank i = `ordinals[i]`), enables peer access, allocates each
    /// rank's flag region and scratch ring (`scratch_bytes`, default 64 MiB, or
    /// `TOPOPLAN_SCRATCH_MB`). An ordinal may repeat: those ranks share that GPU (module doc);
    /// more ranks on a GPU than it has SMs are refused.
    pub fn new(ordinals: &[usize]) -> Result<Self, CudaError> {
        if ordinals.is_empty() || ordinals.len() > MAX_RANKS {
            return Err(CudaError::Input(format!(
                "{} GPUs: need 1 to 8",
                ordinals.len()
            )));
        }
        let scratch_bytes = params::SCRATCH_MB.bytes_or_warn().unwrap_or(64 << 20) as usize;
        let per_device = residency::ranks_per_device(ordinals);
        // A CUDA variable, not a topoplan knob: the driver reads it at context creation.
        let queues = std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok();
        for &(ordinal, ranks_on_device) in &per_device {
            residency::check_queues(ordinal, ranks_on_device, queues.as_deref())?;
        }
        let ctxs = open_devices(ordinals)?;
        let abort_word = AbortWord::new(&ctxs[0])?;
        let mut ranks = Vec::new();
        for (ctx, (ordinal, ranks_on_device)) in ctxs.into_iter().zip(per_device) {
            let device_sms = ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(drv)? as u32;
            let sm_count = residency::rank_sms(ordinal, ranks_on_device, device_sms)?;
            let flags = DevBuf::new(&ctx, FLAG_WORDS * 8)?;
            flags.fill(0)?;
            let scratch = DevBuf::new(&ctx, scratch_bytes)?;
            let ll = DevBuf::new(&ctx, 2 * LL_HALF_BYTES as usize)?;
            ll.fill(0)?;
            let ce = CeState::new(&ctx, ordinals.len())?;
            let direct = DirectBufs::new(&ctx, ordinals.len())?;
            let ce_pair = Mutex::new(PairState::new(&ctx)?);
            let hybrid = Mutex::new(HybridState::new(&ctx)?);
            let abort = RankAbort::new(&ctx, &abort_word)?;
            ranks.push(RankState {
                abort,
                ctx,
                sm_count,
                device_sms,
                ranks_on_device,
                flags,
                scratch: Mutex::new(vec![scratch]),
                ll,
                modules: match ranks
                    .iter()
                    .find(|r: &&RankState| r.ctx.ordinal() == ordinal)
                {
                    Some(r) => r.modules.clone(),
                    None => Arc::default(),
                },
                plans: Mutex::new(HashMap::new()),
                ce: Mutex::new(ce),
                ce_pair,
                hybrid,
                direct,
                last_stream: Mutex::new(None),
            });
        }
        let shared = ranks.iter().any(|r| r.ranks_on_device > 1);
        Ok(Self {
            ranks,
            lowered: Mutex::new(HashMap::new()),
            scratch_elems_cap_bytes: scratch_bytes,
            shared,
            pair_scratch: Mutex::new(None),
            abort_word,
        })
    }

    pub fn nranks(&self) -> usize {
        self.ranks.len()
    }

    /// Whether some GPU of the group runs more than one rank.
    pub fn shares_devices(&self) -> bool {
        self.shared
    }

    /// The grid every rank launches for `d`: the least over the ranks of what their GPU's
    /// residency allows (ranks must agree: CTA b of one rank meets CTA b of its peers).
    pub(crate) fn rank_grid(&self, d: Demand) -> Result<u32, CudaError> {
        let mut grid = u32::MAX;
        for st in &self.ranks {
            let o = st.ctx.ordinal();
            grid = grid.min(residency::rank_grid(
                o,
                st.ranks_on_device,
                st.device_sms,
                d,
            )?);
        }
        Ok(grid)
    }

    /// Refuses `path` where ranks share a GPU and its least grid does not fit their shares.
    pub(crate) fn check_resident(&self, path: Path) -> Result<(), CudaError> {
        if self.shared {
            for st in &self.ranks {
                let o = st.ctx.ordinal();
                residency::check(o, st.ranks_on_device, st.device_sms, path)?;
            }
        }
        Ok(())
    }

    pub fn context(&self, rank: usize) -> &Arc<CudaContext> {
        &self.ranks[rank].ctx
    }

    /// Compiles and loads the kernels for `dtype` on every GPU now (otherwise the first call
    /// of that type does it).
    pub fn prepare(&self, dtype: DataType) -> Result<(), CudaError> {
        for r in 0..self.ranks.len() {
            self.module(r, dtype)?;
        }
        Ok(())
    }

    pub(crate) fn module(
        &self,
        rank: usize,
        dtype: DataType,
    ) -> Result<Arc<ExecModule>, CudaError> {
        let st = &self.ranks[rank];
        st.modules.get(&st.ctx, dtype)
    }

    fn in_place(&self, req: &Request) -> Result<bool, CudaError> {
        let kind = req.schedule.collective.kind;
        let bytes = req.count * req.dtype.size() as u64;
        let aliased = |r: usize| {
            crate::direct::is_in_place(kind, r as u32, bytes, req.inputs[r], req.outputs[r])
        };
        let n = self.ranks.len();
        let flags: Vec<bool> = (0..n).map(aliased).collect();
        if flags.iter().all(|&f| f) {
            Ok(true)
        } else if flags.iter().all(|&f| !f) {
            Ok(false)
        } else {
            Err(CudaError::Input(
                "some ranks call in place and some do not".into(),
            ))
        }
    }

    /// The lowered plan for this request (cached per schedule, count and aliasing).
    pub fn lowered(&self, req: &Request) -> Result<Arc<Lowered>, CudaError> {
        let key = self.key(req)?;
        self.lowered_for(req, key)
    }

    pub(crate) fn key(&self, req: &Request) -> Result<PlanKey, CudaError> {
        if req.schedule.nranks as usize != self.ranks.len() {
            return Err(CudaError::Input(format!(
                "schedule is for {} ranks, group has {}",
                req.schedule.nranks,
                self.ranks.len()
            )));
        }
        if req.inputs.len() != self.ranks.len() || req.outputs.len() != self.ranks.len() {
            return Err(CudaError::Input(
                "one input and one output pointer per rank".into(),
            ));
        }
        Ok(PlanKey {
            sched: Arc::as_ptr(req.schedule) as usize,
            count: req.count,
            in_place: self.in_place(req)?,
            average: req.op == ReduceOp::Avg,
            elem: req.dtype.size(),
        })
    }

    pub(crate) fn lowered_for(
        &self,
        req: &Request,
        key: PlanKey,
    ) -> Result<Arc<Lowered>, CudaError> {
        let mut cache = self.lowered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, l)) = cache.get(&key) {
            return Ok(l.clone());
        }
        let l = Arc::new(
            lower(
                req.schedule,
                LowerParams {
                    count: req.count,
                    in_place: key.in_place,
                    average: key.average,
                    scratch_cap: (self.scratch_elems_cap_bytes / req.dtype.size()) as u64,
                    flatten_loops: true,
                    elide_copies: !params::NO_ELIDE.flag_or_warn(),
                    ce_push: !params::CE_PULL.flag_or_warn(),
                    elem_bytes: req.dtype.size() as u64,
                },
            )
            .map_err(|e| CudaError::Lower(e.to_string()))?,
        );
        let need = l.scratch_elems as usize * req.dtype.size();
        for st in &self.ranks {
            st.grow_scratch(need)?;
        }
        cache.insert(key, (req.schedule.clone(), l.clone()));
        Ok(l)
    }

    pub(crate) fn tp_ctx(&self, rank: usize, req: &Request, ab: TpAbort) -> TpCtx {
        let mut base = [0u64; 4 * MAX_RANKS];
        let mut flags = [0u64; MAX_RANKS];
        for (r, st) in self.ranks.iter().enumerate() {
            base[r * 4 + Buf::Input as usize] = req.inputs[r];
            base[r * 4 + Buf::Output as usize] = req.outputs[r];
            base[r * 4 + Buf::Scratch as usize] = st.scratch_ptr();
            base[r * 4 + Buf::Ll as usize] = st.ll.ptr;
            flags[r] = st.flags.ptr;
        }
        TpCtx {
            base,
            flags,
            rank: rank as u32,
            nranks: self.ranks.len() as u32,
            ll: 0,
            pad: 0,
            ab,
        }
    }

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
    pub(crate) fn plan(
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
        let grid = self.rank_grid(plan::demand(&l, key.elem as u64))?;
        let p = Arc::new(DevPlan::upload(&st.ctx, l, rank, grid)?);
        plans.insert(key, p.clone());
        Ok(p)
    }

    /// Aborts every rank's GPU waits: kernels waiting on a peer leave their call (recording
    /// which wait, see [`Self::check`]), the copy-engine paths' stream waits are released, and
    /// every later call fails with [`CudaError::Aborted`]. Returns at once; the caller then
    /// synchronises its streams, which complete, and drops the group. A new group on the same
    /// GPUs works.
    pub fn abort(&self) -> Result<(), CudaError> {
        self.abort_word.set();
        for st in &self.ranks {
            let word = |i: usize| st.flags.ptr + (i * 8) as u64;
            let ce = (CE_FLAGS..CE_FLAGS + 32).map(word);
            let pair = (PAIR_FLAGS..PAIR_FLAGS + PAIR_WORDS).map(word);
            crate::abort::release(&st.ctx, ce.chain(pair))?;
        }
        Ok(())
    }

    /// Whether [`Self::abort`] ran.
    pub fn aborted(&self) -> bool {
        self.abort_word.is_set()
    }

    /// The wait of `rank` that stopped (aborted or timed out), as an error naming it; `Ok` when
    /// none did. Read it after the rank's stream completed.
    pub fn check(&self, rank: usize) -> Result<(), CudaError> {
        let st = self
            .ranks
            .get(rank)
            .ok_or_else(|| CudaError::Input(format!("rank {rank} out of range")))?;
        match st.abort.read()? {
            Some(stop) => Err(stop.error(rank as u32)),
            None => Ok(()),
        }
    }

    /// The abort argument of `rank`'s next call, or [`CudaError::Aborted`] after an abort.
    pub(crate) fn next_call(&self, rank: usize) -> Result<TpAbort, CudaError> {
        if self.aborted() {
            return Err(CudaError::Aborted);
        }
        Ok(self.ranks[rank].abort.next_call())
    }
}
