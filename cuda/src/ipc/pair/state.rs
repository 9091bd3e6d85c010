//! The copy engines' per-rank state across processes: both ranks' rings and counter words as
//! this process addresses them, the pair and hybrid streams. A leaf, so the communicator holds
//! it without importing the setup.

use crate::abort::TpAbort;
use crate::ce_pair::state::PairState;
use crate::ce_pair::PairSide;
use crate::device::DevBuf;
use crate::hybrid::state::HybridState;
use cudarc::driver::CudaContext;
use std::sync::{Arc, Mutex};

/// This rank's copy-engine state across processes.
pub(crate) struct ProcPair {
    /// Each rank's scratch ring and counter words, as this process addresses them.
    pub(super) scratch: [u64; 2],
    pub(super) flags: [u64; 2],
    pub(super) state: Mutex<PairState>,
    pub(crate) hybrid: Mutex<HybridState>,
    /// This rank's own ring and counters (the peer maps them): kept alive here.
    pub(super) bufs: [DevBuf; 2],
}

impl ProcPair {
    /// This rank's own counter words, which its streams wait on (released on abort).
    pub(crate) fn counter_words(&self) -> impl Iterator<Item = u64> + '_ {
        let base = self.bufs[1].ptr;
        (0..crate::layout::PAIR_WORDS).map(move |i| base + (i * 8) as u64)
    }

    /// The pair path's view for this rank.
    pub(crate) fn side<'a>(
        &'a self,
        ctx: &'a Arc<CudaContext>,
        rank: u32,
        sm_count: u32,
        shares_sms: bool,
        ab: TpAbort,
    ) -> PairSide<'a> {
        PairSide {
            ctx,
            sm_count,
            rank: rank as usize,
            scratch: self.scratch,
            flags: self.flags,
            state: &self.state,
            shares_sms,
            ab,
        }
    }
}
