//! `ncclRedOpCreatePreMulSum` operations: recorded per communicator, and made on the real
//! NCCL's communicator when a call first uses one (PreMulSum reductions run on NCCL).

use crate::abi::{NcclType, NUM_OPS, SUCCESS};
use crate::comm::{lock, Comm};
use crate::error::{arg, usage, ApiError};
use crate::real::RealNccl;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock};

struct PreMul {
    /// The scalar itself (host-immediate residence) or its device address.
    scalar: Vec<u8>,
    device: bool,
    dtype: NcclType,
    real: Option<c_int>,
}

type Table = HashMap<(usize, c_int), PreMul>;

fn table() -> &'static Mutex<Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(Mutex::default)
}

/// A new op value for `comm`. `residence`: 0 device, 1 host immediate.
///
/// # Safety
/// `scalar` points to one element of `dtype` (host) or is a device address.
pub unsafe fn create(
    comm: &Comm,
    scalar: *const c_void,
    dtype: NcclType,
    residence: c_int,
) -> Result<c_int, ApiError> {
    if scalar.is_null() {
        return Err(arg("scalar is NULL"));
    }
    let (bytes, device) = match residence {
        1 => (
            std::slice::from_raw_parts(scalar as *const u8, dtype.size()).to_vec(),
            false,
        ),
        0 => ((scalar as usize).to_ne_bytes().to_vec(), true),
        r => {
            return Err(arg(format!(
                "residence {r}: expected ncclScalarDevice (0) or ncclScalarHostImmediate (1)"
            )))
        }
    };
    let mut t = lock(table());
    let v = (NUM_OPS..)
        .find(|v| !t.contains_key(&(comm.handle, *v)))
        .expect("a free value");
    t.insert(
        (comm.handle, v),
        PreMul {
            scalar: bytes,
            device,
            dtype,
            real: None,
        },
    );
    Ok(v)
}

pub fn exists(comm: &Comm, v: c_int) -> bool {
    lock(table()).contains_key(&(comm.handle, v))
}

pub fn dtype(comm: &Comm, v: c_int) -> Option<NcclType> {
    lock(table()).get(&(comm.handle, v)).map(|p| p.dtype)
}

pub fn destroy(comm: &Comm, v: c_int) -> Result<(), ApiError> {
    let p = lock(table())
        .remove(&(comm.handle, v))
        .ok_or_else(|| arg(format!("op {v} is not a PreMulSum op of this communicator")))?;
    if let (Some(r), Ok(real)) = (p.real, crate::real::get()) {
        if let Some(rc) = &*lock(&comm.real) {
            // SAFETY: an op made on this real communicator.
            unsafe { (real.RedOpDestroy)(r, rc.ptr) };
        }
    }
    Ok(())
}

/// The real NCCL's op for `v` on `rc`, made on first use.
pub fn real_op(comm: &Comm, v: c_int, real: &RealNccl, rc: *mut c_void) -> Result<c_int, ApiError> {
    let mut t = lock(table());
    let p = t
        .get_mut(&(comm.handle, v))
        .ok_or_else(|| arg(format!("op {v} is not a PreMulSum op of this communicator")))?;
    if let Some(r) = p.real {
        return Ok(r);
    }
    let mut out: c_int = 0;
    let scalar = if p.device {
        usize::from_ne_bytes(p.scalar[..].try_into().expect("an address")) as *mut c_void
    } else {
        p.scalar.as_mut_ptr() as *mut c_void
    };
    // SAFETY: NCCL copies a host-immediate scalar at creation; a device scalar is the caller's.
    let r = unsafe {
        (real.RedOpCreatePreMulSum)(&mut out, scalar, p.dtype.raw(), c_int::from(!p.device), rc)
    };
    if r != SUCCESS {
        return Err(usage(format!(
            "NCCL's ncclRedOpCreatePreMulSum failed ({r})"
        )));
    }
    p.real = Some(out);
    Ok(out)
}
