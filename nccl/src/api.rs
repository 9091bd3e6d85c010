//! The exported C functions: each checks its arguments, then hands the work to
//! [`crate::comm`], [`crate::group`] and [`crate::exec`]. Every entry returns an
//! `ncclResult_t` and never unwinds into C; a failure's message, prefixed with the call's
//! name, is what `ncclGetLastError` returns (process-wide and for the communicator).

#![allow(non_snake_case)]

use crate::abi::*;
use crate::comm::{self, lock, Comm};
use crate::error::{arg, global_last, usage, ApiError};
use crate::exec::{Kind, Op};
use crate::group;
use crate::knobs::{log, Level};
use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

type Stream = *mut c_void;
type CommHandle = *mut c_void;

fn record(call: &str, comm: usize, e: &ApiError) {
    let msg = format!("{call}: {e}");
    global_last().set(&msg);
    if let Ok(c) = comm::lookup(comm) {
        c.last_error.set(&msg);
    }
    log(Level::Warn, &msg);
}

/// Runs one entry point's body: errors become codes and messages, panics an internal error.
fn entry(
    call: &'static str,
    comm: usize,
    body: impl FnOnce() -> Result<NcclResult, ApiError>,
) -> NcclResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            record(call, comm, &e);
            e.code()
        }
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            record(
                call,
                comm,
                &ApiError::Internal(format!("internal error: {what}")),
            );
            INTERNAL_ERROR
        }
    }
}

fn out<T>(p: *mut T, what: &str) -> Result<&'static mut T, ApiError> {
    // SAFETY: the caller passes a writable T or NULL (refused).
    unsafe { p.as_mut() }.ok_or_else(|| arg(format!("{what} is NULL")))
}

fn dtype(v: c_int) -> Result<NcclType, ApiError> {
    NcclType::from_raw(v).ok_or_else(|| {
        arg(format!(
            "datatype {v} is not an ncclDataType_t (0..{})",
            NcclType::ALL.len() - 1
        ))
    })
}

fn red_op(c: &Comm, v: c_int, t: NcclType) -> Result<NcclOp, ApiError> {
    match NcclOp::from_raw(v) {
        Some(NcclOp::PreMulSum(p)) if !crate::premul::exists(c, p) => Err(arg(format!(
            "op {v} is neither a built-in ncclRedOp_t nor a PreMulSum op of this communicator"
        ))),
        Some(NcclOp::PreMulSum(p)) if crate::premul::dtype(c, p) != Some(t) => Err(arg(format!(
            "op {v} was made for another datatype than {}",
            t.name()
        ))),
        Some(o) => Ok(o),
        None => Err(arg(format!("op {v} is not an ncclRedOp_t"))),
    }
}

fn rank_below(c: &Comm, r: c_int, what: &str) -> Result<u32, ApiError> {
    u32::try_from(r)
        .ok()
        .filter(|r| *r < c.nranks)
        .ok_or_else(|| {
            arg(format!(
                "{what} {r} is not a rank of this {}-rank communicator",
                c.nranks
            ))
        })
}

/// Checks and submits one collective or point-to-point call.
#[allow(clippy::too_many_arguments)]
fn call(
    name: &'static str,
    kind: Kind,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    peer: c_int,
    comm: CommHandle,
    stream: Stream,
) -> NcclResult {
    entry(name, comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        let t = dtype(datatype)?;
        let o = match kind {
            Kind::AllReduce | Kind::ReduceScatter | Kind::Reduce => red_op(&c, op, t)?,
            _ => NcclOp::Builtin(runtime::ReduceOp::Sum),
        };
        let peer = match kind {
            Kind::Broadcast | Kind::Reduce => rank_below(&c, peer, "root")?,
            Kind::Send | Kind::Recv => rank_below(&c, peer, "peer")?,
            _ => 0,
        };
        let me = c.rank;
        let needs_send = !(kind == Kind::Recv || (kind == Kind::Broadcast && peer != me));
        let needs_recv = !(kind == Kind::Send || (kind == Kind::Reduce && peer != me));
        if count > 0 && needs_send && send.is_null() {
            return Err(arg("sendbuff is NULL"));
        }
        if count > 0 && needs_recv && recv.is_null() {
            return Err(arg("recvbuff is NULL"));
        }
        let op = Op {
            call: name,
            kind,
            send: send as usize,
            recv: recv as usize,
            count,
            dtype: t,
            op: o,
            peer,
            stream: stream as usize,
        };
        group::submit(c, op)?;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclAllReduce(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    op: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclAllReduce",
        Kind::AllReduce,
        s,
        r,
        count,
        t,
        op,
        0,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclAllGather(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclAllGather",
        Kind::AllGather,
        s,
        r,
        count,
        t,
        0,
        0,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclReduceScatter(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    op: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclReduceScatter",
        Kind::ReduceScatter,
        s,
        r,
        count,
        t,
        op,
        0,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclBroadcast(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    root: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclBroadcast",
        Kind::Broadcast,
        s,
        r,
        count,
        t,
        0,
        root,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclBcast(
    buf: *mut c_void,
    count: usize,
    t: c_int,
    root: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclBcast",
        Kind::Broadcast,
        buf,
        buf,
        count,
        t,
        0,
        root,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclReduce(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    op: c_int,
    root: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclReduce",
        Kind::Reduce,
        s,
        r,
        count,
        t,
        op,
        root,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclAlltoAll(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclAlltoAll",
        Kind::AllToAll,
        s,
        r,
        count,
        t,
        0,
        0,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclSend(
    s: *const c_void,
    count: usize,
    t: c_int,
    peer: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclSend",
        Kind::Send,
        s,
        std::ptr::null_mut(),
        count,
        t,
        0,
        peer,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclRecv(
    r: *mut c_void,
    count: usize,
    t: c_int,
    peer: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclRecv",
        Kind::Recv,
        std::ptr::null(),
        r,
        count,
        t,
        0,
        peer,
        comm,
        st,
    )
}

#[no_mangle]
pub extern "C" fn ncclGroupStart() -> NcclResult {
    entry("ncclGroupStart", 0, || {
        group::start();
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclGroupEnd() -> NcclResult {
    entry("ncclGroupEnd", 0, || group::end(false).map(|_| SUCCESS))
}

#[no_mangle]
pub extern "C" fn ncclGroupSimulateEnd(info: *mut RawSimInfo) -> NcclResult {
    entry("ncclGroupSimulateEnd", 0, || {
        // The calls are dropped, not priced: estimatedTime stays NCCL_UNDEF_FLOAT.
        if let Some(i) = unsafe { info.as_mut() } {
            i.estimated_time = -1.0;
        }
        group::end(true).map(|_| SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclGetVersion(version: *mut c_int) -> NcclResult {
    entry("ncclGetVersion", 0, || {
        *out(version, "version")? = VERSION_CODE;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclGetUniqueId(id: *mut RawUniqueId) -> NcclResult {
    entry("ncclGetUniqueId", 0, || {
        let slot = out(id, "uniqueId")?;
        let text = comm::new_unique_id()?;
        *slot = encode_id(&text)
            .ok_or_else(|| ApiError::Internal(format!("id {text:?} does not fit 128 bytes")))?;
        Ok(SUCCESS)
    })
}

/// The shared part of every `ncclCommInitRank*`.
fn init_rank(
    call: &'static str,
    newcomm: *mut CommHandle,
    nranks: c_int,
    id: &RawUniqueId,
    rank: c_int,
    config: *const RawConfig,
) -> NcclResult {
    entry(call, 0, || {
        let slot = out(newcomm, "comm")?;
        *slot = std::ptr::null_mut();
        let cfg = unsafe { CommConfig::read(config) }.map_err(|e| arg(e.to_string()))?;
        if nranks < 1 {
            return Err(arg(format!("nranks {nranks} is below 1")));
        }
        if rank < 0 || rank >= nranks {
            return Err(arg(format!("rank {rank} is not in 0..{nranks}")));
        }
        let text = decode_id(id).ok_or_else(|| {
            arg("commId was not made by this library's ncclGetUniqueId (is the job mixing libraries?)")
        })?;
        let nonblocking = cfg.nonblocking;
        let (c, join) = comm::start_rank(
            &text,
            nranks as u32,
            rank as u32,
            crate::cuda::current_device(),
            cfg,
        )?;
        *slot = c.handle as CommHandle;
        if nonblocking && !group::in_group() {
            std::thread::spawn(join);
            return Ok(IN_PROGRESS);
        }
        let handle = c.handle;
        group::join(join).inspect_err(|_| {
            let _ = comm::remove(handle);
            *slot = std::ptr::null_mut();
        })?;
        Ok(if group::in_group() && nonblocking {
            IN_PROGRESS
        } else {
            SUCCESS
        })
    })
}

#[no_mangle]
pub extern "C" fn ncclCommInitRank(
    newcomm: *mut CommHandle,
    nranks: c_int,
    id: RawUniqueId,
    rank: c_int,
) -> NcclResult {
    init_rank(
        "ncclCommInitRank",
        newcomm,
        nranks,
        &id,
        rank,
        std::ptr::null(),
    )
}

#[no_mangle]
pub extern "C" fn ncclCommInitRankConfig(
    newcomm: *mut CommHandle,
    nranks: c_int,
    id: RawUniqueId,
    rank: c_int,
    config: *const RawConfig,
) -> NcclResult {
    init_rank("ncclCommInitRankConfig", newcomm, nranks, &id, rank, config)
}

#[no_mangle]
pub extern "C" fn ncclCommInitRankScalable(
    newcomm: *mut CommHandle,
    nranks: c_int,
    rank: c_int,
    n_id: c_int,
    ids: *const RawUniqueId,
    config: *const RawConfig,
) -> NcclResult {
    if n_id < 1 || ids.is_null() {
        return entry("ncclCommInitRankScalable", 0, || {
            Err(arg(format!("{n_id} ids at {ids:?}: need at least one")))
        });
    }
    // SAFETY: at least one id (checked above); one rendezvous serves any job size here.
    init_rank(
        "ncclCommInitRankScalable",
        newcomm,
        nranks,
        unsafe { &*ids },
        rank,
        config,
    )
}

#[no_mangle]
pub extern "C" fn ncclCommInitAll(
    comms: *mut CommHandle,
    ndev: c_int,
    devlist: *const c_int,
) -> NcclResult {
    entry("ncclCommInitAll", 0, || {
        if comms.is_null() {
            return Err(arg("comm is NULL"));
        }
        if ndev < 1 {
            return Err(arg(format!("ndev {ndev} is below 1")));
        }
        let devs: Vec<i32> = (0..ndev as usize)
            // SAFETY: devlist holds ndev ints when it is not NULL.
            .map(|i| {
                if devlist.is_null() {
                    i as i32
                } else {
                    unsafe { *devlist.add(i) }
                }
            })
            .collect();
        let made = comm::init_all(&devs)?;
        for (i, c) in made.iter().enumerate() {
            // SAFETY: comms holds ndev handles.
            unsafe { *comms.add(i) = c.handle as CommHandle };
        }
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommSplit(
    comm: CommHandle,
    color: c_int,
    key: c_int,
    newcomm: *mut CommHandle,
    config: *const RawConfig,
) -> NcclResult {
    entry("ncclCommSplit", comm as usize, || {
        let slot = out(newcomm, "newcomm")?;
        *slot = std::ptr::null_mut();
        let parent = comm::lookup(comm as usize)?;
        let cfg = if config.is_null() {
            parent.config.clone()
        } else {
            unsafe { CommConfig::read(config) }.map_err(|e| arg(e.to_string()))?
        };
        let slot_addr = slot as *mut CommHandle as usize;
        let job = move || -> Result<(), ApiError> {
            parent.wait_ready()?;
            if let Some((c, join)) = comm::split(&parent, color, key, cfg)? {
                // SAFETY: the caller's newcomm stays valid until the group ends.
                unsafe { *(slot_addr as *mut CommHandle) = c.handle as CommHandle };
                join()?;
            }
            Ok(())
        };
        group::join(Box::new(job))?;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommShrink(
    comm: CommHandle,
    _exclude: *mut c_int,
    _n: c_int,
    newcomm: *mut CommHandle,
    _config: *const RawConfig,
    _flags: c_int,
) -> NcclResult {
    entry("ncclCommShrink", comm as usize, || {
        if let Some(s) = unsafe { newcomm.as_mut() } {
            *s = std::ptr::null_mut();
        }
        comm::lookup(comm as usize)?;
        Err(usage("topoplan communicators cannot shrink: make a new communicator of the surviving ranks (ncclCommSplit before a failure, or ncclCommInitRank)"))
    })
}

#[no_mangle]
pub extern "C" fn ncclCommFinalize(comm: CommHandle) -> NcclResult {
    entry("ncclCommFinalize", comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        // Calls run to completion before they return: nothing is left to flush.
        match c.async_result() {
            Ok(true) | Err(_) => Ok(SUCCESS),
            Ok(false) => Ok(IN_PROGRESS),
        }
    })
}

fn teardown(c: Arc<Comm>, abort: bool) {
    if abort {
        c.abort();
    }
    drop(lock(&c.cpu).take());
    if let (Some(rc), Ok(real)) = (lock(&c.real).take(), crate::real::get()) {
        // SAFETY: NCCL's own communicator, released once.
        unsafe {
            if abort {
                (real.CommAbort)(rc.ptr);
            } else {
                (real.CommDestroy)(rc.ptr);
            }
        }
    }
}

#[no_mangle]
pub extern "C" fn ncclCommDestroy(comm: CommHandle) -> NcclResult {
    entry("ncclCommDestroy", comm as usize, || {
        let c = comm::remove(comm as usize)?;
        teardown(c, false);
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommAbort(comm: CommHandle) -> NcclResult {
    entry("ncclCommAbort", comm as usize, || {
        if comm.is_null() {
            return Ok(SUCCESS);
        }
        let c = comm::remove(comm as usize)?;
        teardown(c, true);
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommGetAsyncError(comm: CommHandle, result: *mut NcclResult) -> NcclResult {
    entry("ncclCommGetAsyncError", comm as usize, || {
        let slot = out(result, "asyncError")?;
        let c = comm::lookup(comm as usize)?;
        *slot = match c.async_result() {
            Ok(true) => SUCCESS,
            Ok(false) => IN_PROGRESS,
            Err(e) => e.code(),
        };
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclGetErrorString(code: NcclResult) -> *const c_char {
    crate::error::error_string(code).as_ptr()
}

#[no_mangle]
pub extern "C" fn ncclGetLastError(comm: CommHandle) -> *const c_char {
    match comm::lookup(comm as usize) {
        Ok(c) => c.last_error.as_ptr(),
        Err(_) => global_last().as_ptr(),
    }
}

fn query(
    call: &'static str,
    comm: CommHandle,
    v: *mut c_int,
    f: impl FnOnce(&Comm) -> c_int,
) -> NcclResult {
    entry(call, comm as usize, || {
        let slot = out(v, "result")?;
        let c = comm::lookup(comm as usize)?;
        *slot = f(&c);
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommCount(comm: CommHandle, count: *mut c_int) -> NcclResult {
    query("ncclCommCount", comm, count, |c| c.nranks as c_int)
}

#[no_mangle]
pub extern "C" fn ncclCommUserRank(comm: CommHandle, rank: *mut c_int) -> NcclResult {
    query("ncclCommUserRank", comm, rank, |c| c.rank as c_int)
}

#[no_mangle]
pub extern "C" fn ncclCommCuDevice(comm: CommHandle, dev: *mut c_int) -> NcclResult {
    query("ncclCommCuDevice", comm, dev, |c| c.device)
}

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
        let h = 0x5245_0000 + 16 * (reg.len() + 1);
        reg.insert(h, (buf as usize, size));
        *slot = h as *mut c_void;
        Ok(SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclCommDeregister(comm: CommHandle, handle: *mut c_void) -> NcclResult {
    entry("ncclCommDeregister", comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        lock(&c.registered)
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
        let (real, rc) = crate::exec::real_comm(&c, why, call)?;
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
        *slot = crate::cuda::mem_alloc(size)
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
        crate::cuda::mem_free(ptr as usize).map_err(ApiError::Cuda)?;
        Ok(SUCCESS)
    })
}
