//! The copy-engine path's per-rank state: its copy stream, the call and signal counts, and the
//! step lists built per lowered plan. A leaf, so the group can hold it without importing the
//! path.

use crate::device::DevBuf;
use crate::lower::{Lowered, Operand};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum S {
    Compute,
    Copy,
}

#[derive(Debug)]
pub(crate) enum Step {
    Copy {
        dst: Operand,
        src: Operand,
        bytes: u64,
    },
    Kernel {
        plan: usize,
        grid: u32,
    },
    Record {
        stream: S,
        event: usize,
    },
    WaitEvent {
        stream: S,
        event: usize,
    },
    /// Publish counter `seq` (of this stream's signals to `to`) after this stream's prior work.
    Signal {
        stream: S,
        to: u32,
        seq: u64,
    },
    /// Wait until `from`'s signals from its stream `pstream` reach `seq`.
    WaitSignal {
        stream: S,
        from: u32,
        pstream: S,
        seq: u64,
    },
}

#[derive(Debug)]
pub(crate) struct CePlan {
    pub(crate) steps: Vec<Step>,
    /// Data signals per call, to and from each rank, per producer stream (compute, copy).
    pub(crate) sent: Vec<[u64; 2]>,
    pub(crate) recvd: Vec<[u64; 2]>,
    pub(crate) kernels: Vec<(DevBuf, DevBuf)>,
    pub(crate) events: Vec<sys::CUevent>,
}

/// Per-rank state of the copy-engine path.
#[derive(Debug)]
pub(crate) struct CeState {
    pub(crate) copy_stream: sys::CUstream,
    pub(crate) calls: u64,
    pub(crate) sent: Vec<[u64; 2]>,
    pub(crate) recvd: Vec<[u64; 2]>,
    pub(crate) plans: HashMap<usize, (Arc<Lowered>, CePlan)>,
    pub(crate) ctx: Arc<CudaContext>,
}

// SAFETY: raw stream/event handles are used only while holding the state's mutex, with the
// owning context bound.
unsafe impl Send for CeState {}

impl CeState {
    pub(crate) fn new(ctx: &Arc<CudaContext>, nranks: usize) -> Result<Self, CudaError> {
        let s = crate::device::create_stream(ctx)?;
        Ok(Self {
            copy_stream: s,
            calls: 0,
            sent: vec![[0; 2]; nranks],
            recvd: vec![[0; 2]; nranks],
            plans: HashMap::new(),
            ctx: ctx.clone(),
        })
    }
}

impl Drop for CeState {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: handles created in this context, destroyed once.
            unsafe {
                for (_, (_, p)) in self.plans.drain() {
                    for e in p.events {
                        let _ = sys::cuEventDestroy_v2(e);
                    }
                }
                let _ = sys::cuStreamDestroy_v2(self.copy_stream);
            }
        }
    }
}
