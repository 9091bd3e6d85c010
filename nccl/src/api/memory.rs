//! Buffers and operations: registration, allocation, PreMulSum ops, and the calls only
//! NCCL runs (windows, the device API).

#![allow(non_snake_case)]

use super::entry::*;

#[no_mangle]
pub extern "C" fn ncclCommRegister(
    comm: CommHandle,
    buf: *mut c_void,
    size: usize,
    handle: *mut *mut c_void,
) -> NcclResult {
    entry("ncclCommRegister", comm as usize, || {
        let slot = out(handle, "handle")?;
        let c = comm::lookup(comm as usize)?;
        if buf.is_null() && size > 0 {
            return Err(arg("buff is NULL"));
        }
        // Host buffers need no registration; the handle names the range for Deregister.
        let mut reg = lock(&c.registered);
        // A counter, not the table's size: after a deregistration the size shrinks, and a
        // handle made from it could name a registration still alive.
        reg.1 += 1;
        let h = 0x5245_0000 + 16 * reg.1;
        reg.0.insert(h, (buf as usize, size));
        *slot = h as *mut c_void;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommDeregister(comm: CommHandle, handle: *mut c_void) -> NcclResult {
    entry("ncclCommDeregister", comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        lock(&c.registered)
            .0
            .remove(&(handle as usize))
            .ok_or_else(|| {
                arg(format!(
                    "handle {handle:?} is not a registration of this communicator"
                ))
            })?;
        Ok(SUCCESS)
    })
}

/// An entry point only NCCL runs: `pick` chooses the real NCCL's function, `go` calls it with
/// the real communicator beside `comm`'s (made on first need).
fn forward<F>(
    call: &'static str,
    comm: CommHandle,
    why: &str,
    pick: impl FnOnce(&crate::real::RealNccl) -> Option<F>,
    go: impl FnOnce(F, *mut c_void) -> NcclResult,
) -> NcclResult {
    entry(call, comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        let (real, rc) = crate::forward::real_comm(&c, why, call)?;
        let f =
            pick(real).ok_or_else(|| usage(format!("{} has no {call}", real.path.display())))?;
        Ok(go(f, rc))
    })
}

#[no_mangle]
pub extern "C" fn ncclCommWindowRegister(
    comm: CommHandle,
    buf: *mut c_void,
    size: usize,
    win: *mut *mut c_void,
    flags: c_int,
) -> NcclResult {
    // SAFETY (each forward below): NCCL's entry point with the caller's arguments.
    forward(
        "ncclCommWindowRegister",
        comm,
        "windows are NCCL's",
        |r| r.CommWindowRegister,
        |f, rc| unsafe { f(rc, buf, size, win, flags) },
    )
}

#[no_mangle]
pub extern "C" fn ncclCommWindowDeregister(comm: CommHandle, win: *mut c_void) -> NcclResult {
    forward(
        "ncclCommWindowDeregister",
        comm,
        "windows are NCCL's",
        |r| r.CommWindowDeregister,
        |f, rc| unsafe { f(rc, win) },
    )
}

#[no_mangle]
pub extern "C" fn ncclDevCommCreate(
    comm: CommHandle,
    reqs: *const c_void,
    dev_comm: *mut c_void,
) -> NcclResult {
    forward(
        "ncclDevCommCreate",
        comm,
        "the device API is NCCL's",
        |r| r.DevCommCreate,
        |f, rc| unsafe { f(rc, reqs, dev_comm) },
    )
}

#[no_mangle]
pub extern "C" fn ncclDevCommDestroy(comm: CommHandle, dev_comm: *const c_void) -> NcclResult {
    forward(
        "ncclDevCommDestroy",
        comm,
        "the device API is NCCL's",
        |r| r.DevCommDestroy,
        |f, rc| unsafe { f(rc, dev_comm) },
    )
}

#[no_mangle]
pub extern "C" fn ncclRedOpCreatePreMulSum(
    op: *mut c_int,
    scalar: *mut c_void,
    datatype: c_int,
    residence: c_int,
    comm: CommHandle,
) -> NcclResult {
    entry("ncclRedOpCreatePreMulSum", comm as usize, || {
        let slot = out(op, "op")?;
        let c = comm::lookup(comm as usize)?;
        let t = dtype(datatype)?;
        // SAFETY: the caller's scalar, one element of `t` (host) or a device address.
        *slot = unsafe { crate::premul::create(&c, scalar, t, residence) }?;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclRedOpDestroy(op: c_int, comm: CommHandle) -> NcclResult {
    entry("ncclRedOpDestroy", comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        if op < NUM_OPS {
            return Err(arg(format!(
                "op {op} is built in: only PreMulSum ops are destroyed"
            )));
        }
        crate::premul::destroy(&c, op)?;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> NcclResult {
    entry("ncclMemAlloc", 0, || {
        let slot = out(ptr, "ptr")?;
        if let Ok(real) = crate::real::get() {
            // SAFETY: NCCL's allocator.
            return Ok(unsafe { (real.MemAlloc)(slot, size) });
        }
        *slot = cuda::query::mem_alloc(size)
            .map_err(|e| ApiError::Cuda(format!("cannot allocate {size} bytes: {e}")))?
            as *mut c_void;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclMemFree(ptr: *mut c_void) -> NcclResult {
    entry("ncclMemFree", 0, || {
        if ptr.is_null() {
            return Ok(SUCCESS);
        }
        if let Ok(real) = crate::real::get() {
            // SAFETY: memory from ncclMemAlloc, which used the same allocator.
            return Ok(unsafe { (real.MemFree)(ptr) });
        }
        cuda::query::mem_free(ptr as usize).map_err(ApiError::Cuda)?;
        Ok(SUCCESS)
    })
}
