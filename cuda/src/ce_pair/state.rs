//! The copy-engine pair path's per-rank state (copy streams, fork event, chunk count) and both
//! ranks' scratch rings. A leaf, so the group can hold them without importing the path.

use crate::device::{DevBuf, Event, Stream};
use crate::CudaError;
use cudarc::driver::CudaContext;
use std::sync::Arc;

pub(crate) use crate::layout::PAIR_COPY_STREAMS as MAX_COPY_STREAMS;

/// Per-rank state: the copy streams, the event that forks them from the caller's stream, and how
/// many chunks this rank has enqueued so far (the base of this call's counter values).
pub(crate) struct PairState {
    pub(crate) copy: Vec<Stream>,
    pub(crate) start: Event,
    pub(crate) chunks_done: u64,
}

impl PairState {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        Ok(Self {
            copy: (0..MAX_COPY_STREAMS)
                .map(|_| Stream::new(ctx))
                .collect::<Result<_, _>>()?,
            start: Event::new(ctx)?,
            chunks_done: 0,
        })
    }
}

/// Scratch rings of both ranks, allocated together on first use (each rank pushes into the
/// other's, so both must exist before either enqueues).
pub(crate) type PairScratch = std::sync::Mutex<Option<Vec<DevBuf>>>;
