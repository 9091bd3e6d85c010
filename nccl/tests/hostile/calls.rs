//! Every entry point of the library, called in-process with hostile arguments: NULL and
//! invented handles, out-of-range enums, negative and huge counts, configs and ids of the
//! wrong shape, unbalanced groups. A panic hook counts every panic, caught or not: the test
//! fails on any, and on any call that does not return an error code where one is due.

use nccl::abi::{RawConfig, RawSimInfo, RawUniqueId, UNIQUE_ID_BYTES};
use nccl::api::*;
use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

static PANICS: AtomicUsize = AtomicUsize::new(0);

const SUCCESS: c_int = 0;
const INVALID_ARGUMENT: c_int = 4;
const INVALID_USAGE: c_int = 5;

/// A handle no communicator has: refused by the registry, never followed.
fn bogus() -> *mut c_void {
    0xdead_0000 as *mut c_void
}

fn id_of(text: &[u8]) -> RawUniqueId {
    let mut id = RawUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    for (d, s) in id.internal.iter_mut().zip(text) {
        *d = *s as _;
    }
    id
}

fn failed(what: &str, r: c_int) {
    assert!(r != SUCCESS, "{what} succeeded");
    assert!(
        (1..8).contains(&r),
        "{what}: {r} is not an ncclResult_t error"
    );
}

/// The collectives and point to point, each on `comm`, with the given count, type and op.
fn every_call(
    comm: *mut c_void,
    count: usize,
    t: c_int,
    op: c_int,
    root: c_int,
) -> Vec<(&'static str, c_int)> {
    let (s, r) = (null::<c_void>(), null_mut::<c_void>());
    let st = null_mut();
    vec![
        ("ncclAllReduce", ncclAllReduce(s, r, count, t, op, comm, st)),
        ("ncclAllGather", ncclAllGather(s, r, count, t, comm, st)),
        (
            "ncclReduceScatter",
            ncclReduceScatter(s, r, count, t, op, comm, st),
        ),
        (
            "ncclBroadcast",
            ncclBroadcast(s, r, count, t, root, comm, st),
        ),
        ("ncclBcast", ncclBcast(r, count, t, root, comm, st)),
        ("ncclReduce", ncclReduce(s, r, count, t, op, root, comm, st)),
        ("ncclAlltoAll", ncclAlltoAll(s, r, count, t, comm, st)),
        ("ncclGather", ncclGather(s, r, count, t, root, comm, st)),
        ("ncclScatter", ncclScatter(s, r, count, t, root, comm, st)),
        ("ncclSend", ncclSend(s, count, t, root, comm, st)),
        ("ncclRecv", ncclRecv(r, count, t, root, comm, st)),
    ]
}

fn handles_and_queries() {
    let mut v: c_int = 0;
    let mut res: c_int = 0;
    let mut p: *mut c_void = null_mut();
    for c in [null_mut(), bogus()] {
        for (what, r) in every_call(c, 8, 7, 0, 0) {
            failed(what, r);
        }
        failed("ncclCommFinalize", ncclCommFinalize(c));
        failed("ncclCommGetAsyncError", ncclCommGetAsyncError(c, &mut res));
        failed("ncclCommCount", ncclCommCount(c, &mut v));
        failed("ncclCommUserRank", ncclCommUserRank(c, &mut v));
        failed("ncclCommCuDevice", ncclCommCuDevice(c, &mut v));
        failed(
            "ncclCommRegister",
            ncclCommRegister(c, null_mut(), 0, &mut p),
        );
        failed("ncclCommDeregister", ncclCommDeregister(c, bogus()));
        failed(
            "ncclCommWindowRegister",
            ncclCommWindowRegister(c, null_mut(), 0, &mut p, 0),
        );
        failed(
            "ncclCommWindowDeregister",
            ncclCommWindowDeregister(c, bogus()),
        );
        failed(
            "ncclDevCommCreate",
            ncclDevCommCreate(c, null(), null_mut()),
        );
        failed("ncclDevCommDestroy", ncclDevCommDestroy(c, null()));
        failed("ncclRedOpDestroy", ncclRedOpDestroy(5, c));
        failed("ncclCommSplit", ncclCommSplit(c, 0, 0, &mut p, null()));
        failed(
            "ncclCommShrink",
            ncclCommShrink(c, null_mut(), 0, &mut p, null(), 0),
        );
        let mut op: c_int = 0;
        let mut s = 1.0f32;
        let sp = &mut s as *mut f32 as *mut c_void;
        failed(
            "ncclRedOpCreatePreMulSum",
            ncclRedOpCreatePreMulSum(&mut op, sp, 7, 1, c),
        );
        assert!(!ncclGetLastError(c).is_null());
    }
    assert_eq!(ncclCommDestroy(null_mut()), SUCCESS);
    assert_eq!(ncclCommAbort(null_mut()), SUCCESS);
    failed("ncclCommDestroy", ncclCommDestroy(bogus()));
    failed("ncclCommAbort", ncclCommAbort(bogus()));
    failed(
        "ncclCommGetAsyncError(NULL)",
        ncclCommGetAsyncError(bogus(), null_mut()),
    );
    failed("ncclGetVersion(NULL)", ncclGetVersion(null_mut()));
    failed("ncclGetUniqueId(NULL)", ncclGetUniqueId(null_mut()));
    failed("ncclMemAlloc(NULL)", ncclMemAlloc(null_mut(), 1));
    assert_eq!(ncclMemFree(null_mut()), SUCCESS);
    for code in [-1, 0, 3, 8, 1000, c_int::MIN, c_int::MAX] {
        assert!(!ncclGetErrorString(code).is_null());
    }
}

fn inits() {
    let mut c: *mut c_void = null_mut();
    let mut id = RawUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    assert_eq!(ncclGetUniqueId(&mut id), SUCCESS);
    for (n, r) in [
        (0, 0),
        (-1, 0),
        (2, 2),
        (2, -1),
        (c_int::MAX, 0),
        (1 << 30, 5),
    ] {
        failed("ncclCommInitRank", ncclCommInitRank(&mut c, n, id, r));
        assert!(c.is_null());
    }
    failed(
        "ncclCommInitRank(NULL)",
        ncclCommInitRank(null_mut(), 1, id, 0),
    );
    let wide = [
        b"topoplan1:".to_vec(),
        "\u{e9}".repeat(16).into_bytes(),
        b"@h:1".to_vec(),
    ]
    .concat();
    for text in [
        &[0xffu8; 127][..],
        &wide,
        b"topoplan1:zz@h:1",
        b"topoplan1:00112233445566778899aabbccddeeff@",
    ] {
        failed(
            "ncclCommInitRank(hostile id)",
            ncclCommInitRank(&mut c, 2, id_of(text), 1),
        );
    }
    let mut cfg = [0u8; std::mem::size_of::<RawConfig>()];
    for size in [0usize, 3, 15] {
        cfg[..8].copy_from_slice(&size.to_ne_bytes());
        let r = ncclCommInitRankConfig(&mut c, 1, id, 0, cfg.as_ptr() as *const RawConfig);
        assert_eq!(r, INVALID_ARGUMENT, "config of size {size}");
    }
    failed(
        "ncclCommInitRankScalable",
        ncclCommInitRankScalable(&mut c, 1, 0, 0, null(), null()),
    );
    failed(
        "ncclCommInitRankScalable",
        ncclCommInitRankScalable(&mut c, 1, 0, -4, &id, null()),
    );
    let mut comms = [null_mut::<c_void>(); 4];
    failed(
        "ncclCommInitAll(NULL)",
        ncclCommInitAll(null_mut(), 2, null()),
    );
    for n in [0, -3, 100_000, c_int::MAX] {
        failed(
            "ncclCommInitAll",
            ncclCommInitAll(comms.as_mut_ptr(), n, null()),
        );
    }
}

fn groups() {
    assert_eq!(ncclGroupEnd(), INVALID_USAGE, "an end without a start");
    failed("ncclGroupSimulateEnd", ncclGroupSimulateEnd(null_mut()));
    let mut sim = RawSimInfo {
        size: 0,
        magic: 0,
        version: 0,
        estimated_time: 0.0,
    };
    assert_eq!(ncclGroupStart(), SUCCESS);
    assert_eq!(
        ncclGroupSimulateEnd(&mut sim),
        INVALID_ARGUMENT,
        "bad magic"
    );
    // Deep nesting, then a failed call inside: the outermost end reports it.
    for _ in 0..1000 {
        assert_eq!(ncclGroupStart(), SUCCESS);
    }
    failed(
        "in a group",
        ncclAllReduce(null(), null_mut(), 1, 7, 0, bogus(), null_mut()),
    );
    for _ in 0..999 {
        assert_eq!(ncclGroupEnd(), SUCCESS);
    }
    assert_eq!(ncclGroupEnd(), INVALID_ARGUMENT, "the recorded error");
    assert_eq!(ncclGroupEnd(), INVALID_USAGE, "balanced now");
}

fn on_a_live_communicator() {
    let mut id = RawUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    assert_eq!(ncclGetUniqueId(&mut id), SUCCESS);
    let mut c: *mut c_void = null_mut();
    assert_eq!(ncclCommInitRank(&mut c, 1, id, 0), SUCCESS);
    for (count, t, op, root) in [
        (usize::MAX, 7, 0, 0),
        (usize::MAX / 2, 9, 0, 0),
        (1 << 62, 8, 0, 0),
        (8, -1, 0, 0),
        (8, 12, 0, 0),
        (8, 7, -1, 0),
        (8, 7, 1 << 30, 0),
        (8, 7, 0, -1),
        (8, 7, 0, 1),
        (8, 7, 0, c_int::MAX),
    ] {
        for (what, r) in every_call(c, count, t, op, root) {
            failed(what, r);
        }
    }
    let mut op: c_int = 0;
    let mut s = 1.0f32;
    let sp = &mut s as *mut f32 as *mut c_void;
    failed(
        "PreMulSum NULL scalar",
        ncclRedOpCreatePreMulSum(&mut op, null_mut(), 7, 1, c),
    );
    failed(
        "PreMulSum residence 9",
        ncclRedOpCreatePreMulSum(&mut op, sp, 7, 9, c),
    );
    failed(
        "PreMulSum type 40",
        ncclRedOpCreatePreMulSum(&mut op, sp, 40, 1, c),
    );
    failed(
        "PreMulSum NULL op",
        ncclRedOpCreatePreMulSum(null_mut(), sp, 7, 1, c),
    );
    for v in [-1, 0, 4, 5, 1 << 20] {
        failed("ncclRedOpDestroy", ncclRedOpDestroy(v, c));
    }
    let mut h: *mut c_void = null_mut();
    failed(
        "register NULL buffer",
        ncclCommRegister(c, null_mut(), 64, &mut h),
    );
    failed(
        "register NULL handle",
        ncclCommRegister(c, sp, 4, null_mut()),
    );
    failed("deregister unknown", ncclCommDeregister(c, bogus()));
    failed(
        "split NULL newcomm",
        ncclCommSplit(c, 0, 0, null_mut(), null()),
    );
    let mut sub: *mut c_void = null_mut();
    failed("split color -7", ncclCommSplit(c, -7, 0, &mut sub, null()));
    assert_eq!(ncclCommDestroy(c), SUCCESS);
    for (what, r) in every_call(c, 8, 7, 0, 0) {
        failed(what, r);
    }
    failed("destroy twice", ncclCommDestroy(c));
}

pub fn run_all() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
    handles_and_queries();
    inits();
    groups();
    on_a_live_communicator();
    let _ = std::panic::take_hook();
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "entry points panicked (see above)"
    );
}
