//! The call boards' side of a rank (`calls`): each call is compared with the peers' before it
//! is enqueued, and a verdict a peer reached stops this rank's kernels and calls.

use super::{calls, p2p, CudaProcComm};
use crate::CudaError;

impl CudaProcComm {
    /// Checks this rank's next call against the peers' (`calls`): a difference is
    /// [`CudaError::Mismatch`], on this rank now and on the others through their boards.
    pub(super) fn check_call(
        &self,
        f: impl FnOnce(&mut calls::Calls) -> Result<(), calls::CallsError>,
    ) -> Result<(), CudaError> {
        let Some(c) = &self.calls else {
            return Ok(());
        };
        let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c).map_err(|e| self.stopped(e.into()))
    }

    /// Checks a group's messages to and from peers ([`calls::Calls::messages`]).
    pub(super) fn check_messages(
        &self,
        sends: &[p2p::Transfer],
        recvs: &[p2p::Transfer],
    ) -> Result<(), CudaError> {
        self.check_call(|c| c.messages(sends, recvs))
    }

    /// A verdict a peer reached after this rank's check passed (its first call's kernels take
    /// seconds to compile): the call is not launched, so a rank whose peer found the
    /// difference runs none of it either.
    pub(super) fn flagged_since_check(&self) -> Result<(), CudaError> {
        match self.verdict() {
            Some(m) => Err(CudaError::Mismatch(m)),
            None => Ok(()),
        }
    }

    /// A mismatch also sets this rank's own abort word: its kernels of earlier calls, which
    /// may wait for a peer that stopped, leave too.
    pub(super) fn stopped(&self, e: CudaError) -> CudaError {
        if matches!(e, CudaError::Mismatch(_)) {
            self.abort_word.set();
        }
        e
    }

    /// The verdict of a rank that found the ranks calling different things, if one did (never
    /// blocks: it reads shared memory). It also stops this rank's kernels, which wait for data
    /// no peer sends.
    pub fn verdict(&self) -> Option<calls::Mismatch> {
        let c = self.calls.as_ref()?;
        let m = c.try_lock().ok()?.verdict()?;
        self.abort_word.set();
        Some(m)
    }
}
