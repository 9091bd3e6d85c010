//! Communicators: ids, init, split, teardown, errors and queries.

#![allow(non_snake_case)]

use super::entry::*;

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
    deferring(call, 0, || {
        let slot = out(newcomm, "comm")?;
        *slot = std::ptr::null_mut();
        let cfg = unsafe { CommConfig::read(config) }.map_err(|e| arg(e.to_string()))?;
        if nranks < 1 {
            return Err(arg(format!("nranks {nranks} is below 1")));
        }
        if rank < 0 || rank >= nranks {
            return Err(arg(format!("rank {rank} is not in 0..{nranks}")));
        }
        crate::comm::check_rank_count(nranks as u64, rank == 0)?;
        let text = decode_id(id).ok_or_else(|| {
            arg("commId was not made by this library's ncclGetUniqueId (is the job mixing libraries?)")
        })?;
        let nonblocking = cfg.nonblocking;
        let background = nonblocking && !group::in_group();
        // Nobody waits for a background join: its failure is the communicator's async error,
        // and the last error and the log, written before that error shows, say why.
        let on_fail: Option<comm::OnFail> = background
            .then(|| Box::new(move |c: &comm::Comm, e: &ApiError| record(call, c.handle, e)) as _);
        let (c, join) = comm::start_rank(
            &text,
            nranks as u32,
            rank as u32,
            cuda::query::current_device(),
            cfg,
            on_fail,
        )?;
        *slot = c.handle as CommHandle;
        if background {
            std::thread::spawn(move || {
                let _ = join();
            });
            return Ok(IN_PROGRESS);
        }
        let slot_addr = slot as *mut CommHandle as usize;
        let comm = c.clone();
        let cancel: group::Cancel = Box::new(move |e| {
            group::cancel_comm(&comm, e);
            // SAFETY: the caller's newcomm stays valid until the group ends.
            unsafe { *(slot_addr as *mut CommHandle) = std::ptr::null_mut() };
        });
        let handle = c.handle;
        group::join(join, cancel).inspect_err(|_| {
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
        return deferring("ncclCommInitRankScalable", 0, || {
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
        // Before reading devlist or making anything: ndev ranks live in this process.
        crate::comm::check_local_ranks(ndev as u64)?;
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
    deferring("ncclCommSplit", comm as usize, || {
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
        // A split that never ran made nothing: newcomm stays NULL.
        group::join(Box::new(job), Box::new(|_| ()))?;
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
    c.hang.close();
    if abort {
        crate::gpu::abort(&c);
        c.abort();
    }
    crate::premul::forget(c.handle);
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
        // NCCL: destroying NULL is a no-op that succeeds.
        if comm.is_null() {
            return Ok(SUCCESS);
        }
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
        // Frameworks poll this: the hang report learns here that device work has finished.
        c.hang.settle();
        if let Err(e) = crate::gpu::check_peers(&c) {
            // The code goes into `*result`; the message is what ncclGetLastError says.
            record("ncclCommGetAsyncError", comm as usize, &e);
        }
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
    guarded(c"unknown result code".as_ptr(), || {
        crate::error::error_string(code).as_ptr()
    })
}

#[no_mangle]
pub extern "C" fn ncclGetLastError(comm: CommHandle) -> *const c_char {
    guarded(c"".as_ptr(), || match comm::lookup(comm as usize) {
        Ok(c) => c.last_error.as_ptr(),
        Err(_) => global_last().as_ptr(),
    })
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
