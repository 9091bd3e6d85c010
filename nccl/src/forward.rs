//! Calls topoplan does not run, on the real NCCL: its communicator beside ours, made
//! collectively on first need, and each forwarded batch inside one NCCL group.

use crate::abi::{NcclOp, RawUniqueId, SUCCESS};
use crate::comm::{lock, Comm};
use crate::error::{usage, ApiError};
use crate::knobs::{log, Level};
use crate::op::{bytes_mut, Kind, Op};
use crate::real::{self, RealComm};
use std::ffi::c_void;

/// The real NCCL communicator for `comm`'s ranks, made on first need: rank 0 makes an NCCL id
/// and broadcasts it over topoplan's own communicator, then every rank joins it.
pub(crate) fn real_comm(
    comm: &Comm,
    why: &str,
    call: &str,
) -> Result<(&'static real::RealNccl, *mut c_void), ApiError> {
    let real = real::get().map_err(|e| usage(format!("{call} needs NCCL ({why}), but {}", e.0)))?;
    let mut slot = lock(&comm.real);
    if let Some(rc) = &*slot {
        return Ok((real, rc.ptr));
    }
    let mut id = RawUniqueId {
        internal: [0; crate::abi::UNIQUE_ID_BYTES],
    };
    if comm.rank == 0 {
        // SAFETY: writes one id.
        let r = unsafe { (real.GetUniqueId)(&mut id) };
        if r != SUCCESS {
            return Err(usage(format!(
                "NCCL's ncclGetUniqueId failed ({r}): {}",
                real::last_error(real, std::ptr::null_mut())
            )));
        }
    }
    {
        let mut guard = lock(&comm.cpu);
        let cpu = guard
            .as_mut()
            .ok_or_else(|| usage("communicator has not joined"))?;
        // SAFETY: the id is plain bytes.
        let raw = unsafe {
            bytes_mut(
                id.internal.as_mut_ptr() as usize,
                crate::abi::UNIQUE_ID_BYTES,
            )
        };
        cpu.broadcast_in_place(raw, 0)?;
    }
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: NCCL's ncclCommInitRank; every rank of the communicator calls it now.
    let r = unsafe { (real.CommInitRank)(&mut ptr, comm.nranks as i32, id, comm.rank as i32) };
    if r != SUCCESS {
        return Err(from_nccl(
            r,
            format!(
                "NCCL's ncclCommInitRank for rank {} of {} failed ({r}): {}",
                comm.rank,
                comm.nranks,
                real::last_error(real, std::ptr::null_mut())
            ),
        ));
    }
    log(
        Level::Info,
        &format!(
            "comm {:#x} rank {}: NCCL {} communicator made ({})",
            comm.handle,
            comm.rank,
            real.version,
            real.path.display()
        ),
    );
    *slot = Some(RealComm { ptr });
    Ok((real, ptr))
}

/// The real NCCL's result code `r` as our error, with its message.
fn from_nccl(r: i32, msg: String) -> ApiError {
    match r {
        crate::abi::INVALID_ARGUMENT => ApiError::InvalidArgument(msg),
        crate::abi::INVALID_USAGE => ApiError::InvalidUsage(msg),
        crate::abi::REMOTE_ERROR => ApiError::Remote(msg),
        crate::abi::UNHANDLED_CUDA_ERROR => ApiError::Cuda(msg),
        crate::abi::INTERNAL_ERROR => ApiError::Internal(msg),
        _ => ApiError::System(msg),
    }
}

/// Gather or scatter on the real NCCL: its own call where it has one (2.28 on), else the sends
/// and receives it is made of, inside the group [`run`] has open (NCCL runs a rank's send to
/// itself against its receive from itself). Returns NCCL's first failing code.
///
/// # Safety
/// NCCL's calls with the caller's buffers and stream, inside an NCCL group.
unsafe fn rooted(real: &real::RealNccl, rc: *mut c_void, op: &Op, rank: usize, n: usize) -> i32 {
    let (ty, s, root) = (op.dtype.raw(), op.stream as *mut c_void, op.peer as i32);
    let (send, recv) = (op.send as *const c_void, op.recv as *mut c_void);
    let own = match op.kind {
        Kind::Gather => real.Gather,
        _ => real.Scatter,
    };
    if let Some(f) = own {
        return f(send, recv, op.count, ty, root, rc, s);
    }
    if op.count == 0 {
        return SUCCESS;
    }
    let c = op.count * op.dtype.size();
    let is_root = rank == op.peer as usize;
    let mut calls: Vec<i32> = Vec::new();
    match op.kind {
        Kind::Gather => {
            let in_place = op.send == op.recv + op.peer as usize * c;
            if !(is_root && in_place) {
                calls.push((real.Send)(send, op.count, ty, root, rc, s));
            }
            if is_root {
                for i in 0..n {
                    if i != rank || !in_place {
                        let slot = (op.recv + i * c) as *mut c_void;
                        calls.push((real.Recv)(slot, op.count, ty, i as i32, rc, s));
                    }
                }
            }
        }
        _ => {
            let in_place = op.recv == op.send + op.peer as usize * c;
            if is_root {
                for i in 0..n {
                    if i != rank || !in_place {
                        let block = (op.send + i * c) as *const c_void;
                        calls.push((real.Send)(block, op.count, ty, i as i32, rc, s));
                    }
                }
            }
            if !(is_root && in_place) {
                calls.push((real.Recv)(recv, op.count, ty, root, rc, s));
            }
        }
    }
    calls.into_iter().find(|r| *r != SUCCESS).unwrap_or(SUCCESS)
}

pub fn run(comm: &Comm, ops: &[(Op, String)]) -> Result<(), ApiError> {
    if ops.is_empty() {
        return Ok(());
    }
    let (real, rc) = real_comm(comm, &ops[0].1, ops[0].0.call)?;
    let check = |r: i32, call: &str| -> Result<(), ApiError> {
        if r == SUCCESS {
            return Ok(());
        }
        let msg = format!(
            "{call} on NCCL failed ({r}): {}",
            real::last_error(real, rc)
        );
        Err(from_nccl(r, msg))
    };
    // SAFETY: NCCL's own entry points with the caller's arguments and NCCL's communicator.
    unsafe {
        check((real.GroupStart)(), "ncclGroupStart")?;
        let mut first = Ok(());
        for (op, _) in ops {
            let ty = op.dtype.raw();
            let s = op.stream as *mut c_void;
            let (send, recv) = (op.send as *const c_void, op.recv as *mut c_void);
            let rop = match op.op {
                NcclOp::Builtin(r) => NcclOp::builtin_raw(r),
                NcclOp::PreMulSum(v) => crate::premul::real_op(comm, v, real, rc)?,
            };
            let r = match op.kind {
                Kind::AllReduce => (real.AllReduce)(send, recv, op.count, ty, rop, rc, s),
                Kind::AllGather => (real.AllGather)(send, recv, op.count, ty, rc, s),
                Kind::ReduceScatter => (real.ReduceScatter)(send, recv, op.count, ty, rop, rc, s),
                Kind::Broadcast => {
                    (real.Broadcast)(send, recv, op.count, ty, op.peer as i32, rc, s)
                }
                Kind::Reduce => (real.Reduce)(send, recv, op.count, ty, rop, op.peer as i32, rc, s),
                Kind::AllToAll => (real.AlltoAll)(send, recv, op.count, ty, rc, s),
                Kind::Send => (real.Send)(send, op.count, ty, op.peer as i32, rc, s),
                Kind::Recv => (real.Recv)(recv, op.count, ty, op.peer as i32, rc, s),
                Kind::Gather | Kind::Scatter => {
                    rooted(real, rc, op, comm.rank as usize, comm.nranks as usize)
                }
            };
            if first.is_ok() {
                first = check(r, op.call);
            }
        }
        let end = check((real.GroupEnd)(), "ncclGroupEnd");
        first.and(end)
    }
}
