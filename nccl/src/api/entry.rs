//! What every entry point shares: the argument checks, and [`entry`], which turns a body's
//! error into a code and a message and a panic into `ncclInternalError`. A leaf: the entry
//! points import it, never the other way.

pub(super) use crate::abi::*;
pub(super) use crate::comm::{self, lock, Comm};
pub(super) use crate::error::{arg, global_last, usage, ApiError};
pub(super) use crate::group;
pub(super) use crate::knobs::{log, Level};
pub(super) use crate::op::{Kind, Op};
pub(super) use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
pub(super) use std::sync::Arc;

pub(super) type Stream = *mut c_void;
pub(super) type CommHandle = *mut c_void;

pub(super) fn record(call: &str, comm: usize, e: &ApiError) {
    let msg = format!("{call}: {e}");
    global_last().set(&msg);
    if let Ok(c) = comm::lookup(comm) {
        c.last_error.set(&msg);
    }
    log(Level::Warn, &msg);
}

/// Runs one entry point's body: errors become codes and messages, panics an internal error.
pub(super) fn entry(
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

/// [`entry`] for calls a group defers (collectives, point to point, inits, splits): inside a
/// group, a failure is also remembered, so that `ncclGroupEnd` runs nothing and returns it.
pub(super) fn deferring(
    call: &'static str,
    comm: usize,
    body: impl FnOnce() -> Result<NcclResult, ApiError>,
) -> NcclResult {
    entry(call, comm, || {
        body().inspect_err(|e| group::record_error(call, e))
    })
}

/// For the entry points that return no code: a panic becomes `fallback`.
pub(super) fn guarded<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

pub(super) fn out<T>(p: *mut T, what: &str) -> Result<&'static mut T, ApiError> {
    // SAFETY: the caller passes a writable T or NULL (refused).
    unsafe { p.as_mut() }.ok_or_else(|| arg(format!("{what} is NULL")))
}

pub(super) fn dtype(v: c_int) -> Result<NcclType, ApiError> {
    NcclType::from_raw(v).ok_or_else(|| {
        arg(format!(
            "datatype {v} is not an ncclDataType_t (0..{})",
            NcclType::ALL.len() - 1
        ))
    })
}

pub(super) fn red_op(c: &Comm, v: c_int, t: NcclType) -> Result<NcclOp, ApiError> {
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

pub(super) fn rank_below(c: &Comm, r: c_int, what: &str) -> Result<u32, ApiError> {
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
