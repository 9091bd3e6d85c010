//! Device buffers on topoplan's CUDA backend, for ranks that run one process per GPU on one
//! host (what torchrun starts): each communicator gets a `cuda::ipc::CudaProcComm`
//! on first need, set up collectively over topoplan's own communicator, and each call enqueues
//! the schedule `cuda::schedules` picks for it on the caller's stream. A one-rank
//! communicator (nccl-tests `-g 1`) runs every call as a device copy on the caller's stream.
//! Ranks that all live in one process share one `cuda::CudaGroup` instead (`local`).
//!
//! On by default; `TOPOPLAN_NCCL_CUDA=0` forwards device buffers to NCCL (`exec::route_in`).
//! Calls this path has no kernel for run on topoplan's CPU runtime through host copies
//! (`crate::staged`).

use crate::comm::{lock, Comm};
use crate::error::ApiError;
use crate::op::{Kind, Op};
use cuda::ipc::{CudaProcComm, ProcRequest};
use cuda::CudaError;
use cuda::RankCall;
use runtime::{DataType, ReduceOp};

pub mod by_size;
mod local;
mod p2p;
pub mod premul;
pub mod rank;
use rank::{collective_kind, GpuRank, Schedules};
use std::sync::Arc;

/// Whether device-buffer calls may run on topoplan (`TOPOPLAN_NCCL_CUDA`).
pub fn enabled() -> bool {
    params::NCCL_CUDA.flag_or_warn()
}

/// Why a device-buffer call cannot run here (`None`: it can), from its arguments and the
/// communicator's CUDA state (the same on every rank: see [`ensure_open`]), so every rank
/// decides alike.
pub fn refusal(comm: &Comm, op: &Op) -> Option<String> {
    if let Some(why) = lock(&comm.gpu).as_ref().and_then(GpuRank::refuses) {
        return Some(why);
    }
    refusal_for(enabled(), cuda::direct::enabled(), op, comm.nranks)
}

/// `ncclCommAbort`: stops every kernel of this rank that waits on a peer (they poll an abort
/// word) and releases the copy engines' waits, so the stream drains and the GPU stays usable.
pub fn abort(comm: &Comm) {
    if let Some(g) = lock(&comm.gpu).as_ref() {
        if let Err(e) = g.abort() {
            crate::knobs::log(
                crate::knobs::Level::Warn,
                &format!("ncclCommAbort: stopping the GPU waits: {e}"),
            );
        }
    }
}

/// For `ncclCommGetAsyncError`: a dead peer while device calls may be in flight. Kernels waiting
/// on it spin where the runtime cannot see them, so a framework's watchdog learns of it here:
/// the communicator becomes unusable and the error names the rank. Skipped while another
/// thread holds the runtime communicator (its own waits check liveness).
pub fn check_peers(comm: &Comm) -> Result<(), ApiError> {
    // Never blocks a framework's watchdog: a call in flight holds these locks, and reading
    // the kernels' status word would wait for the kernels; the next call reports that.
    let Ok(gpu) = comm.gpu.try_lock() else {
        return Ok(());
    };
    // A peer found that the ranks call different things (`cuda::ipc::calls`): this rank's
    // kernels of that call were stopped, and the communicator is unusable. Ranks of one
    // process are alive as long as this one: only separate processes' liveness is checked.
    let (verdict, procs) = match gpu.as_ref() {
        Some(GpuRank::Procs { proc, .. }) => (proc.verdict(), true),
        Some(GpuRank::Local { calls, .. }) => (calls.as_ref().and_then(|c| c.verdict()), false),
        _ => return Ok(()),
    };
    if let Some(m) = verdict {
        drop(gpu);
        let e = crate::error::usage(format!("device calls in flight: {m}"));
        comm.fail(&e);
        return Err(e);
    }
    drop(gpu);
    if !procs {
        return Ok(());
    }
    let Ok(guard) = comm.cpu.try_lock() else {
        return Ok(());
    };
    let r = match guard.as_ref() {
        Some(cpu) => cpu.check_peers("device calls in flight", cpu.seq()),
        None => return Ok(()),
    };
    // `poison` takes the runtime communicator's lock itself.
    drop(guard);
    r.map_err(|e| {
        let e = ApiError::from(e);
        comm.poison(&e);
        e
    })
}

/// Learns whether the direct path can serve the communicator's ranks (collective: every rank
/// calls it at its first batch with device buffers, before routing it): through CUDA IPC, or
/// where ranks share a process, whose own memory CUDA IPC cannot map, through one group in it
/// (`local::open`); and whether calls may go to NCCL by size (`by_size`).
pub fn check_residency(comm: &Comm) -> Result<(), ApiError> {
    let mut slot = lock(&comm.gpu);
    if slot.is_some() {
        return Ok(());
    }
    let r = by_size::learn(comm)?;
    comm.gpu_by_size
        .store(r.by_size, std::sync::atomic::Ordering::Relaxed);
    *slot = Some(match r.shared_process {
        Some(pair) => local::open(comm, pair)?,
        None => GpuRank::Separate,
    });
    Ok(())
}

/// [`refusal`] from the knobs (`TOPOPLAN_NCCL_CUDA`, `TOPOPLAN_DIRECT`), the call and the rank
/// count.
fn refusal_for(enabled: bool, direct: bool, op: &Op, nranks: u32) -> Option<String> {
    if !enabled {
        return Some("TOPOPLAN_NCCL_CUDA=0 forwards device buffers to NCCL".into());
    }
    if nranks == 1 {
        // Every collective of one rank is a copy, a send to itself the matching receive.
        return None;
    }
    if !direct {
        return Some("TOPOPLAN_DIRECT=0 turns the CUDA direct kernels off".into());
    }
    if !(2..=8).contains(&nranks) {
        return Some(format!(
            "{nranks} ranks: the CUDA direct path across processes runs 2 to 8"
        ));
    }
    if op.kind == Kind::Reduce && op.recv == 0 {
        return Some("a reduce without a receive buffer on a non-root rank".into());
    }
    None
}

/// Sets up the CUDA side of `comm` (collective: every rank calls it at the same call).
fn open(comm: &Comm) -> Result<GpuRank, ApiError> {
    let ordinal = usize::try_from(comm.device)
        .map_err(|_| ApiError::Cuda("no CUDA device was current when this rank joined".into()))?;
    if comm.nranks == 1 {
        let ctx = cuda::device::open_devices(&[ordinal])
            .map_err(|e| ApiError::Cuda(e.to_string()))?
            .remove(0);
        return Ok(GpuRank::Alone(ctx, cuda::device::ModuleCache::default()));
    }
    let proc = CudaProcComm::new(ordinal, comm.rank, comm.nranks, &mut local::exchange(comm))
        .map_err(|e| ApiError::Cuda(e.to_string()))?;
    Ok(GpuRank::Procs {
        proc: Box::new(proc),
        schedules: Schedules::default(),
        mark: cuda::query::StreamMark::new().ok().map(Arc::new),
        scratch: rank::Scratch::default(),
    })
}

/// Enqueues `ops` (device buffers, each accepted by [`refusal`]) on their streams.
pub fn run(comm: &Comm, ops: &[(Op, DataType, ReduceOp, usize)]) -> Result<(), ApiError> {
    let mut slot = lock(&comm.gpu);
    if matches!(*slot, None | Some(GpuRank::Separate)) {
        *slot = Some(open(comm)?);
    }
    match slot.as_mut().expect("opened above") {
        GpuRank::Alone(ctx, modules) => run_alone(comm, ctx, modules, ops),
        GpuRank::Procs {
            proc,
            schedules,
            scratch,
            ..
        } => run_procs(comm, proc, schedules, scratch, ops).inspect_err(|e| {
            // Ranks that call different things leave the communicator unusable.
            if proc.verdict().is_some() {
                comm.fail(e);
            }
        }),
        GpuRank::Local {
            group,
            schedules,
            calls,
            scratch,
            ..
        } => local::run(comm, group, schedules, scratch, calls.as_mut(), ops).inspect_err(|e| {
            if calls.as_ref().is_some_and(|c| c.verdict().is_some()) {
                comm.fail(e);
            }
        }),
        GpuRank::Separate => Err(ApiError::Internal("the CUDA path did not open".into())),
        GpuRank::Unavailable(why) => Err(ApiError::Internal(format!(
            "a call was routed to the CUDA path, which is unavailable: {why}"
        ))),
    }
}

/// For the hang report: marks the work now on `stream` (the last batch's, enqueued by the
/// direct path) and returns whether it has finished, asked later without waiting. `None` where
/// there is nothing to wait for (one rank, a stream being captured: its work runs at replay).
pub fn finished_after(comm: &Comm, stream: usize) -> Option<impl Fn() -> bool + Send + 'static> {
    let slot = lock(&comm.gpu);
    let m = slot.as_ref().and_then(GpuRank::mark)?;
    if cuda::query::capturing(stream) || m.record(stream).is_err() {
        return None;
    }
    let m = m.clone();
    Some(move || m.done())
}

fn copy(dst: usize, src: usize, bytes: usize, stream: usize) -> Result<(), ApiError> {
    if dst == src || bytes == 0 {
        return Ok(());
    }
    // SAFETY: device ranges of the caller's call, on the caller's stream.
    let r = unsafe {
        cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
            dst as cudarc::driver::sys::CUdeviceptr,
            src as cudarc::driver::sys::CUdeviceptr,
            bytes,
            stream as cudarc::driver::sys::CUstream,
        )
    };
    if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(ApiError::Cuda(format!(
            "cuMemcpyDtoDAsync of {bytes} bytes: {r:?}"
        )));
    }
    Ok(())
}

/// One rank: each collective copies its input to its output; the i-th send to itself fills
/// the i-th receive from itself.
fn run_alone(
    comm: &Comm,
    ctx: &Arc<cudarc::driver::CudaContext>,
    modules: &cuda::device::ModuleCache,
    ops: &[(Op, DataType, ReduceOp, usize)],
) -> Result<(), ApiError> {
    ctx.bind_to_thread()
        .map_err(|e| ApiError::Cuda(e.to_string()))?;
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for (op, dtype, _, count) in ops {
        let bytes = count * dtype.size();
        match (op.kind, op.op) {
            (Kind::Send, _) => sends.push((op, bytes)),
            (Kind::Recv, _) => recvs.push((op, bytes)),
            // One rank's PreMulSum is its input scaled.
            (_, crate::abi::NcclOp::PreMulSum(v)) => {
                let (scalar, _) = crate::premul::scalar(comm, v)
                    .ok_or_else(|| crate::error::usage(format!("PreMulSum op {v} is not live")))?;
                let cuda = |e: CudaError| ApiError::Cuda(format!("{}: {e}", op.call));
                let module = modules.get(ctx, *dtype).map_err(cuda)?;
                let stream = op.stream as cudarc::driver::sys::CUstream;
                let s = cuda::scale::Scaling {
                    dst: op.recv as u64,
                    src: op.send as u64,
                    n: *count as u64,
                    scalar,
                };
                cuda::scale::enqueue(ctx, &module, &s, stream).map_err(cuda)?;
            }
            _ => copy(op.recv, op.send, bytes, op.stream)?,
        }
    }
    if sends.len() != recvs.len() {
        return Err(crate::error::usage(format!(
            "{} sends and {} receives to and from this rank itself in one group",
            sends.len(),
            recvs.len()
        )));
    }
    for ((s, sb), (r, rb)) in sends.into_iter().zip(recvs) {
        if sb != rb {
            return Err(crate::error::usage(format!(
                "a {sb}-byte send to itself meets a {rb}-byte receive"
            )));
        }
        if s.stream != r.stream {
            // The receive's stream must see the send's data: wait for what precedes the send.
            cuda::query::wait_stream(s.stream).map_err(ApiError::Cuda)?;
        }
        copy(r.recv, s.send, sb, r.stream)?;
    }
    Ok(())
}

fn run_procs(
    comm: &Comm,
    proc: &CudaProcComm,
    schedules: &mut Schedules,
    scratch: &mut rank::Scratch,
    ops: &[(Op, DataType, ReduceOp, usize)],
) -> Result<(), ApiError> {
    let mut group = p2p::Group::default();
    for (op, dtype, rop, count) in ops {
        let Some(k) = collective_kind(op.kind) else {
            group.add(op, comm.rank, comm.nranks, (*count * dtype.size()) as u64);
            continue;
        };
        let bytes = (*count * dtype.size()) as u64;
        let sched = schedules.get(comm.nranks, k, op.peer, bytes)?;
        let on = premul::Scaler::Proc(proc);
        let (input, output) = premul::prepare(comm, on, scratch, op, *dtype, *count)?;
        let req = ProcRequest {
            call: RankCall {
                schedule: &sched,
                count: *count as u64,
                dtype: *dtype,
                op: *rop,
                input,
                output,
            },
            registered_input: None,
        };
        proc.enqueue(&req, op.stream as cudarc::driver::sys::CUstream)
            .map_err(|e| p2p::cuda_error(op.call, e))?;
    }
    group.run(proc)
}

/// The runtime type a device call runs as: data movement as bytes, reductions exactly.
pub fn runtime_type(op: &Op, r: ReduceOp) -> Option<(DataType, usize)> {
    match op.kind {
        Kind::AllReduce | Kind::ReduceScatter | Kind::Reduce => {
            op.dtype.reducible_as(r).map(|t| (t, op.count))
        }
        _ => Some((DataType::U8, op.count * op.dtype.size())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{NcclOp, NcclType};

    fn op(kind: Kind, dtype: NcclType) -> Op {
        Op::sample(kind, dtype, NcclOp::Builtin(ReduceOp::Sum))
    }

    #[test]
    fn device_calls_run_on_topoplan_only_when_enabled_and_supported() {
        let ar = op(Kind::AllReduce, NcclType::Bf16);
        assert!(refusal_for(false, true, &ar, 2)
            .unwrap()
            .contains("TOPOPLAN_NCCL_CUDA"));
        assert_eq!(refusal_for(true, true, &ar, 2), None);
        // One rank runs everything as copies, point to point included.
        assert_eq!(refusal_for(true, true, &ar, 1), None);
        assert_eq!(
            refusal_for(true, true, &op(Kind::Send, NcclType::F8E4M3), 1),
            None
        );
        assert!(refusal_for(true, true, &ar, 9).is_some());
        assert!(refusal_for(true, false, &ar, 2)
            .unwrap()
            .contains("TOPOPLAN_DIRECT=0"));
        assert_eq!(refusal_for(true, false, &ar, 1), None);
        assert_eq!(
            refusal_for(true, true, &op(Kind::AllToAll, NcclType::F32), 4),
            None
        );
        // Gather, scatter and point-to-point run on the point-to-point kernel.
        for k in [Kind::Gather, Kind::Scatter, Kind::Send, Kind::Recv] {
            assert_eq!(refusal_for(true, true, &op(k, NcclType::Bf16), 2), None);
            assert_eq!(refusal_for(true, true, &op(k, NcclType::Bf16), 1), None);
            assert_eq!(
                runtime_type(&op(k, NcclType::Bf16), ReduceOp::Sum),
                Some((DataType::U8, 20))
            );
        }
        let mut red = op(Kind::Reduce, NcclType::F32);
        red.recv = 0;
        assert!(refusal_for(true, true, &red, 4).is_some());
        assert_eq!(
            runtime_type(&op(Kind::AllGather, NcclType::F8E5M2), ReduceOp::Sum),
            Some((DataType::U8, 10))
        );
        // FP8 reduces on topoplan, its average through `premul` (not the runtime's Avg).
        assert_eq!(
            runtime_type(&op(Kind::AllReduce, NcclType::F8E5M2), ReduceOp::Sum),
            Some((DataType::F8E5M2, 10))
        );
        assert_eq!(
            runtime_type(&op(Kind::ReduceScatter, NcclType::F8E4M3), ReduceOp::Min),
            Some((DataType::F8E4M3, 10))
        );
        assert_eq!(
            runtime_type(&op(Kind::Reduce, NcclType::F8E4M3), ReduceOp::Avg),
            None
        );
        assert_eq!(
            runtime_type(&op(Kind::AllReduce, NcclType::Bf16), ReduceOp::Avg),
            Some((DataType::Bf16, 10))
        );
    }
}
