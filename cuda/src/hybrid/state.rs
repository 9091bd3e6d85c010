//! The hybrid all-reduce's per-rank state: its side stream and the events that fork and join
//! it. A leaf, so the group can hold it without importing the path.

use crate::device::{Event, Stream};
use crate::CudaError;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Per-rank side stream and the events that fork it from and join it to the caller's stream.
pub(crate) struct HybridState {
    pub(crate) side: Stream,
    pub(crate) fork: Event,
    pub(crate) join: Event,
}

impl HybridState {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        Ok(Self {
            side: Stream::new(ctx)?,
            fork: Event::new(ctx)?,
            join: Event::new(ctx)?,
        })
    }
}
