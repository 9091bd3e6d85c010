//! One NCCL call as the caller made it, and where it runs: the leaf types the dispatcher
//! (`exec`), the forwarder (`forward`), the CUDA path (`gpu`) and the entry points (`api`)
//! share.

use crate::abi::{NcclOp, NcclType};
use runtime::{DataType, ReduceOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    /// NCCL 2.28's rooted data movement, run as the sends and receives it is made of.
    Gather,
    Scatter,
    Send,
    Recv,
}

/// One call as the caller made it (addresses kept as integers: the call may run on another
/// thread at `ncclGroupEnd`).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub call: &'static str,
    pub kind: Kind,
    pub send: usize,
    pub recv: usize,
    /// NCCL's count: per rank (all-gather's send count, reduce-scatter's receive count).
    pub count: usize,
    pub dtype: NcclType,
    pub op: NcclOp,
    /// Root of broadcast, reduce, gather and scatter, peer of send and receive.
    pub peer: u32,
    pub stream: usize,
}

#[cfg(test)]
impl Op {
    /// A call of `count` 10 with distinct, non-null buffers, root 0 and the default stream: the
    /// unit tests' call, whose route depends only on kind, type and operation.
    pub(crate) fn sample(kind: Kind, dtype: NcclType, op: NcclOp) -> Op {
        Op {
            call: "t",
            kind,
            send: 8,
            recv: 16,
            count: 10,
            dtype,
            op,
            peer: 0,
            stream: 0,
        }
    }
}

/// Where a call runs, and why.
#[derive(Debug, PartialEq)]
pub enum Route {
    /// On topoplan's CPU runtime, as `count` elements of `dtype`.
    Topoplan {
        dtype: DataType,
        op: ReduceOp,
        count: usize,
    },
    /// On topoplan's CUDA backend (device buffers), as `count` elements of `dtype`.
    Gpu {
        dtype: DataType,
        op: ReduceOp,
        count: usize,
    },
    /// On topoplan's CPU runtime through host copies of device buffers (`crate::staged`),
    /// where the CUDA path has no kernel for the call: `why` says so.
    Staged {
        dtype: DataType,
        op: ReduceOp,
        count: usize,
        why: String,
    },
    Nccl(String),
}

impl Op {
    pub(crate) fn reduces(&self) -> bool {
        matches!(
            self.kind,
            Kind::AllReduce | Kind::ReduceScatter | Kind::Reduce
        )
    }

    /// The buffers this call touches on this rank.
    pub(crate) fn buffers(&self) -> [usize; 2] {
        [self.send, self.recv]
    }
}

/// # Safety
/// `p` is null only when `len` is 0, and `len` bytes at `p` are readable for the call.
pub(crate) unsafe fn bytes<'a>(p: usize, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    std::slice::from_raw_parts(p as *const u8, len)
}

/// # Safety
/// As [`bytes`], writable, and not aliased by another slice of the same call.
pub(crate) unsafe fn bytes_mut<'a>(p: usize, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    std::slice::from_raw_parts_mut(p as *mut u8, len)
}

/// A call with the runtime type, operation and count it runs as (see [`Route`]).
pub type Typed = (Op, DataType, ReduceOp, usize);
