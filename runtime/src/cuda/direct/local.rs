//! The direct path in one process (`CudaGroup`): a call of every rank, whose inputs the ranks'
//! GPUs may read directly, so pull mode, split calls and the hybrid's pull side can run here
//! (across processes `ipc` calls `launch_call` with no peer inputs: the push path).

use super::{launch_call, pull, role, split, DirectCall, DirectPeers};
use crate::cuda::device::{drv, ExecModule};
use crate::cuda::group::CudaGroup;
use crate::cuda::CudaError;
use crate::types::ReduceOp;
use cudarc::driver::sys;

/// How a one-process direct call moves its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Pull mode where the knobs ask for it and every input is readable, else push.
    Auto,
    /// The push path.
    Push,
    /// Pull mode at any size; refused (an error, never pushed) where it cannot run, so callers
    /// check [`can_pull`] first.
    Pull,
}

/// Enqueues rank `rank`'s part of a one-shot collective on `stream` (one process, all ranks).
pub(crate) fn enqueue(
    g: &CudaGroup,
    rank: usize,
    req: &crate::cuda::Request,
    in_place: bool,
    module: &ExecModule,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    enqueue_path(g, rank, req, in_place, module, stream, Path::Auto)
}

/// [`enqueue`] along `path`.
pub(crate) fn enqueue_path(
    g: &CudaGroup,
    rank: usize,
    req: &crate::cuda::Request,
    in_place: bool,
    module: &ExecModule,
    stream: sys::CUstream,
    path: Path,
) -> Result<(), CudaError> {
    let mut peers = DirectPeers {
        nranks: g.nranks() as u32,
        min_sm: g.ranks.iter().map(|r| r.sm_count).min().unwrap_or(1),
        simple: [0; 8],
        ll: [0; 8],
        flags: [0; 8],
    };
    for (r, st) in g.ranks.iter().enumerate() {
        (peers.simple[r], peers.ll[r], peers.flags[r]) = st.direct.ptrs();
    }
    // Pull mode reads the peers' inputs: only where every GPU may read every input (the same
    // answer on every rank, so all ranks of the call pull or all push).
    let bytes = req.count * req.dtype.size() as u64;
    let pullable = match path {
        Path::Push => false,
        Path::Pull => true,
        Path::Auto => {
            pull::wanted(req.schedule.collective.kind, req.schedule.protocol, bytes)
                && inputs_readable(g, rank, req)?
        }
    };
    let call = DirectCall {
        force_pull: path == Path::Pull,
        ..call_of(req, rank, in_place, pullable)
    };
    let ctx = &g.ranks[rank].ctx;
    let rank = rank as u32;
    // A forced pull that cannot run is refused, never pushed: the hybrid runs it beside a push
    // kernel, and two push kernels at once would share the push path's per-stream words.
    if path == Path::Pull && !pull_runs(&call, rank, peers.nranks) {
        return Err(CudaError::Lower(
            "pull mode cannot run this call (inputs not all known, or not 16-byte aligned in place)"
                .into(),
        ));
    }
    // A split call (`direct::split`, an experiment, off unless `TOPOPLAN_SPLIT_PCT` is set):
    // the push and pull halves of one all-reduce in one grid.
    if path == Path::Auto
        && !pullable
        && split::wanted(call.kind, call.protocol, bytes)
        && inputs_readable(g, rank as usize, req)?
    {
        let split_call = call_of(req, rank as usize, in_place, true);
        if let Some(geo) = split::geometry_for(call.count, peers.min_sm) {
            if pull_runs(&split_call, rank, peers.nranks) {
                return split::launch(ctx, module, &peers, rank, &split_call, &geo, stream);
            }
        }
    }
    launch_call(ctx, module, &peers, rank, &call, stream)
}

/// Whether pull mode can run `req`: every input readable by every GPU, and 16-byte aligned
/// buffers where the result overwrites what the peers read (the same answer on every rank).
pub(crate) fn can_pull(
    g: &CudaGroup,
    rank: usize,
    req: &crate::cuda::Request,
    in_place: bool,
) -> Result<bool, CudaError> {
    if !inputs_readable(g, rank, req)? {
        return Ok(false);
    }
    let call = call_of(req, rank, in_place, true);
    Ok(pull_runs(&call, rank as u32, g.nranks() as u32))
}

/// `rank`'s call of `req`, with every rank's input when `with_inputs` (pull mode may read them).
fn call_of(
    req: &crate::cuda::Request,
    rank: usize,
    in_place: bool,
    with_inputs: bool,
) -> DirectCall {
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

/// Whether pull mode can run `call` of `rank` among `nranks` (`pull::runnable` on its role).
fn pull_runs(call: &DirectCall, rank: u32, nranks: u32) -> bool {
    role(
        call.kind,
        call.root,
        rank,
        nranks,
        call.count,
        call.in_place,
        call.op == ReduceOp::Avg,
    )
    .is_some_and(|r| pull::runnable(call, &r))
}

/// Whether every GPU of the group may read every rank's input of `req` (pull mode's
/// condition; the same answer on every rank).
fn inputs_readable(
    g: &CudaGroup,
    rank: usize,
    req: &crate::cuda::Request,
) -> Result<bool, CudaError> {
    g.ranks[rank].ctx.bind_to_thread().map_err(drv)?;
    let readers: Vec<i32> = g.ranks.iter().map(|r| r.ctx.ordinal() as i32).collect();
    Ok(pull::inputs_readable(req.inputs, &readers))
}
