//! The copy engines across processes: the hybrid all-reduce (`super::super::hybrid`) for two
//! ranks in two processes. [`CudaProcComm::enable_copy_engines`] allocates this rank's scratch
//! ring and pair counter words and registers both with the peer (`register.rs`), so the copy
//! engines push into the peer's ring and the stream memory operations bump the peer's counters
//! through IPC mappings, exactly as in one process through peer mappings.

use super::registry::RegisteredBuffer;
use super::shared::{rank_err, Exchange};
use super::CudaProcComm;
use crate::ce_pair;
use crate::ce_pair::state::PairState;
use crate::device::{drv, DevBuf};
use crate::hybrid::state::HybridState;
use crate::CudaError;
use state::ProcPair;
use std::sync::Mutex;

pub(super) mod state;

/// Bytes of a rank's pair counter words (ample for `ce_pair`'s counters).
const PAIR_FLAG_BYTES: usize = 4096;
const _: () = assert!(ce_pair::PAIR_WORDS * 8 <= PAIR_FLAG_BYTES);

impl CudaProcComm {
    /// Lets 2-rank all-reduce from `TOPOPLAN_HYBRID_MIN_MB` (default 512 MiB per rank) run as
    /// the hybrid (half on the copy engines), as in one process. Collective: both ranks call it
    /// at the same point; `exchange` is the all-gather (called four times). Takes one scratch
    /// ring per GPU (256 MiB by default, `TOPOPLAN_CE_SLOTS` × `TOPOPLAN_CE_CHUNK_MB`). Calling
    /// it again does nothing.
    pub fn enable_copy_engines(&self, exchange: &mut Exchange<'_>) -> Result<(), CudaError> {
        if self.nranks != 2 {
            return Err(rank_err(
                self.rank,
                format!(
                    "the copy-engine pair path runs 2 ranks, this communicator has {}",
                    self.nranks
                ),
            ));
        }
        let mut pair = self.pair.lock().unwrap_or_else(|p| p.into_inner());
        if pair.is_some() {
            return Ok(());
        }
        let ring = DevBuf::new(&self.ctx, ce_pair::ring_bytes() as usize)?;
        let flags = DevBuf::new(&self.ctx, PAIR_FLAG_BYTES)?;
        flags.fill(0)?;
        // The counters must be zero before the peer can see them (the exchange below).
        self.ctx.synchronize().map_err(drv)?;
        let reg_ring = self.register(ring.ptr, ring.bytes as u64, exchange)?;
        let reg_flags = self.register(flags.ptr, flags.bytes as u64, exchange)?;
        let starts = |r: RegisteredBuffer| -> [u64; 2] {
            let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            // Registered just above and never deregistered (the pair owns the buffers).
            let s = reg[r.0 as usize].as_ref().map_or([0; 8], |x| x.starts);
            [s[0], s[1]]
        };
        *pair = Some(ProcPair {
            scratch: starts(reg_ring),
            flags: starts(reg_flags),
            state: Mutex::new(PairState::new(&self.ctx)?),
            hybrid: Mutex::new(HybridState::new(&self.ctx)?),
            bufs: [ring, flags],
        });
        Ok(())
    }

    /// Whether [`Self::enable_copy_engines`] ran.
    pub fn copy_engines_enabled(&self) -> bool {
        self.pair
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}
