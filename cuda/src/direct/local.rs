//! The direct path in one process (`CudaGroup`): a call of every rank, whose inputs the ranks'
//! GPUs may read directly, so pull mode can run here
//! (across processes `ipc` calls `launch_call` with no peer inputs: the push path).

use super::{launch_call_pdl, pull, DirectCall, DirectPeers};
use crate::abort::TpAbort;
use crate::device::{drv, ExecModule};
use crate::group::CudaGroup;
use crate::request::Request;
use crate::residency;
use crate::CudaError;
use cudarc::driver::sys;

/// Enqueues rank `rank`'s part of a one-shot collective on `stream` (one process, all ranks):
/// pull mode where the knobs ask for it and every GPU may read every input, else the push path.
/// `shares_sms`: see [`DirectCall::shares_sms`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue(
    g: &CudaGroup,
    rank: usize,
    req: &Request,
    in_place: bool,
    shares_sms: bool,
    module: &ExecModule,
    stream: sys::CUstream,
    ab: TpAbort,
) -> Result<(), CudaError> {
    // Pull mode reads the peers' inputs: only where every GPU may read every input (the same
    // answer on every rank, so all ranks of the call pull or all push).
    let bytes = req.count * req.dtype.size() as u64;
    let pullable = pull::wanted(req.schedule.collective.kind, req.schedule.protocol, bytes)
        && inputs_readable(g, rank, req)?;
    // Each rank's SM share (the whole GPU unless ranks share it). Pull mode places two CTAs
    // per SM when alone; on a shared GPU every CTA counts as an SM, so it gets half the share.
    let share = g.ranks.iter().map(|r| r.sm_count).min().unwrap_or(1);
    let mut peers = DirectPeers {
        nranks: g.nranks() as u32,
        min_sm: if g.shares_devices() && pullable {
            residency::path_min_sm(share, 512 / pull::block())
        } else {
            share
        },
        simple: [0; 8],
        ll: [0; 8],
        flags: [0; 8],
    };
    for (r, st) in g.ranks.iter().enumerate() {
        (peers.simple[r], peers.ll[r], peers.flags[r]) = st.direct.ptrs();
    }
    let call = DirectCall {
        shares_sms,
        ab,
        ..call_of(req, rank, in_place, pullable)
    };
    // No programmatic dependent launch on a shared GPU (`residency`).
    launch_call_pdl(
        &g.ranks[rank].ctx,
        module,
        &peers,
        rank as u32,
        &call,
        stream,
        !g.shares_devices(),
    )
}

/// `rank`'s call of `req`, with every rank's input when `with_inputs` (pull mode may read them).
fn call_of(req: &Request, rank: usize, in_place: bool, with_inputs: bool) -> DirectCall {
    let mut inputs = [0u64; 8];
    inputs[..req.inputs.len()].copy_from_slice(req.inputs);
    DirectCall {
        inputs: with_inputs.then_some(inputs),
        ..DirectCall::of(
            req.schedule,
            req.count,
            req.dtype,
            req.op,
            req.inputs[rank],
            req.outputs[rank],
            in_place,
        )
    }
}

/// Whether every GPU of the group may read every rank's input of `req` (pull mode's
/// condition; the same answer on every rank).
fn inputs_readable(g: &CudaGroup, rank: usize, req: &Request) -> Result<bool, CudaError> {
    g.ranks[rank].ctx.bind_to_thread().map_err(drv)?;
    let readers: Vec<i32> = g.ranks.iter().map(|r| r.ctx.ordinal() as i32).collect();
    Ok(pull::inputs_readable(req.inputs, &readers))
}
