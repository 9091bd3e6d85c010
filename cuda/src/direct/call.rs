//! One rank's call of the direct path: collective, buffers, element type. A leaf, so the
//! direct path's modules share it without importing each other.

use crate::abort::TpAbort;
use planner::schedule::{CollectiveKind, Protocol, Schedule};
use runtime::types::ReduceOp;

/// One rank's call: collective, buffers and element type.
#[derive(Clone, Copy, Debug)]
pub struct DirectCall {
    pub kind: CollectiveKind,
    pub root: u32,
    pub protocol: Protocol,
    pub count: u64,
    pub dtype: runtime::types::DataType,
    pub op: ReduceOp,
    pub input: u64,
    pub output: u64,
    pub in_place: bool,
    /// Every rank's input (one process: pull mode may read them); `None` across processes.
    pub inputs: Option<[u64; 8]>,
    /// Another kernel of this call runs beside it (the hybrid's copy-engine reduces): launch the
    /// register-capped kernels, whose CTAs leave room on their SMs.
    pub shares_sms: bool,
    /// Where the kernel polls for an abort and records a stop (`crate::abort`); the default
    /// polls nothing but the timeout and records nothing.
    pub(crate) ab: TpAbort,
}

impl DirectCall {
    /// The call of one rank running schedule `s` (collective, root, protocol from it).
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        s: &Schedule,
        count: u64,
        dtype: runtime::types::DataType,
        op: ReduceOp,
        input: u64,
        output: u64,
        in_place: bool,
    ) -> Self {
        DirectCall {
            kind: s.collective.kind,
            root: s.collective.root.unwrap_or(0),
            protocol: s.protocol,
            count,
            dtype,
            op,
            input,
            output,
            in_place,
            inputs: None,
            shares_sms: false,
            ab: TpAbort {
                timeout_ns: crate::abort::timeout_ns(),
                ..TpAbort::default()
            },
        }
    }
}
