//! Collectives, point to point and groups.

#![allow(non_snake_case)]

use super::entry::*;

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
    deferring(name, comm as usize, || {
        let c = comm::lookup(comm as usize)?;
        let t = dtype(datatype)?;
        let o = match kind {
            Kind::AllReduce | Kind::ReduceScatter | Kind::Reduce => red_op(&c, op, t)?,
            _ => NcclOp::Builtin(runtime::ReduceOp::Sum),
        };
        let peer = match kind {
            Kind::Broadcast | Kind::Reduce | Kind::Gather | Kind::Scatter => {
                rank_below(&c, peer, "root")?
            }
            Kind::Send | Kind::Recv => rank_below(&c, peer, "peer")?,
            _ => 0,
        };
        let me = c.rank;
        // Non-roots: broadcast and scatter read no send buffer, reduce and gather write no
        // receive buffer.
        let needs_send = !(kind == Kind::Recv
            || (matches!(kind, Kind::Broadcast | Kind::Scatter) && peer != me));
        let needs_recv =
            !(kind == Kind::Send || (matches!(kind, Kind::Reduce | Kind::Gather) && peer != me));
        check_sizes(&c, kind, count, t, peer, send as usize, recv as usize)?;
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

/// The bytes a call reads and writes on this rank, in checked arithmetic, each a size a buffer of
/// this process can have; and when the runtime stages a copy (in place, or a non-root reduce
/// with no receive buffer), that the copy fits the memory available. All before anything is
/// allocated or touched.
/// Staging copies up to this size are not checked against available memory (16 MiB).
const STAGING_UNCHECKED: u64 = 16 << 20;

fn check_sizes(
    c: &Comm,
    kind: Kind,
    count: usize,
    t: NcclType,
    root: u32,
    send: usize,
    recv: usize,
) -> Result<(), ApiError> {
    let n = c.nranks as u64;
    let per = (count as u64).checked_mul(t.size() as u64);
    let all = per.and_then(|b| b.checked_mul(n));
    let (inb, outb) = match kind {
        Kind::AllGather | Kind::Gather => (per, all),
        Kind::ReduceScatter | Kind::Scatter => (all, per),
        Kind::AllToAll => (all, all),
        _ => (per, per),
    };
    let what = |side: &str| format!("{count} x {} per rank on {n} ranks, {side}", t.name());
    let limit = |e: runtime::limits::LimitError| arg(e.to_string());
    // The description is formatted only for an error: a call must not pay for it.
    let buffer = |side: &str, bytes: Option<u64>| match bytes {
        Some(b) if b <= isize::MAX as u64 => Ok(b),
        _ => runtime::limits::check_buffer(what(side), bytes).map_err(limit),
    };
    let inb = buffer("the send buffer", inb)?;
    let outb = buffer("the receive buffer", outb)?;
    let collective = !matches!(kind, Kind::Send | Kind::Recv | Kind::Gather | Kind::Scatter);
    let staged = send == recv || (kind == Kind::Reduce && recv == 0 && root != c.rank);
    // A one-rank in-place call stages nothing (it does nothing), and a staging copy of up to
    // STAGING_UNCHECKED bytes cannot exhaust what a running process has: reading the kernel's
    // available memory costs microseconds, so only larger ones pay for it.
    let no_op = c.nranks == 1 && send == recv;
    let large = inb.max(outb) > STAGING_UNCHECKED;
    if collective && staged && count > 0 && !no_op && large {
        runtime::limits::check_memory(what("staged for the runtime"), Some(inb.max(outb)))
            .map_err(limit)?;
    }
    Ok(())
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
pub extern "C" fn ncclGather(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    root: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclGather",
        Kind::Gather,
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
pub extern "C" fn ncclScatter(
    s: *const c_void,
    r: *mut c_void,
    count: usize,
    t: c_int,
    root: c_int,
    comm: CommHandle,
    st: Stream,
) -> NcclResult {
    call(
        "ncclScatter",
        Kind::Scatter,
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
    entry("ncclGroupEnd", 0, || {
        group::end(false, None).map(|_| SUCCESS)
    })
}

#[no_mangle]
pub extern "C" fn ncclGroupSimulateEnd(info: *mut RawSimInfo) -> NcclResult {
    entry("ncclGroupSimulateEnd", 0, || {
        // SAFETY: the caller's ncclSimInfo_t, or NULL.
        let refused = match unsafe { info.as_mut() } {
            Some(i) if i.magic != SIM_INFO_MAGIC => Some(arg(format!(
                "simInfo.magic is {:#x}, not {SIM_INFO_MAGIC:#x}: initialise it with NCCL_SIM_INFO_INITIALIZER",
                i.magic
            ))),
            Some(i) if i.size < std::mem::size_of::<RawSimInfo>() => Some(arg(format!(
                "simInfo.size is {} bytes, less than ncclSimInfo_t's {}",
                i.size,
                std::mem::size_of::<RawSimInfo>()
            ))),
            Some(i) => {
                // The calls are dropped, not priced: estimatedTime stays NCCL_UNDEF_FLOAT.
                i.estimated_time = -1.0;
                None
            }
            None => None,
        };
        group::end(true, refused).map(|_| SUCCESS)
    })
}
