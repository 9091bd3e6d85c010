//! `ncclRedOpCreatePreMulSum` operations: one table per communicator, dropped with it
//! ([`forget`] at destroy and abort). On device buffers topoplan's CUDA path runs them (each
//! input scaled, then summed: [`scalar`]); on host buffers topoplan's CPU runtime sums scaled
//! copies of the inputs ([`factor`], [`scaled_copy`]), a device scalar read once the call's
//! streams have drained; elsewhere (NCCL's network, `TOPOPLAN_NCCL_CUDA=0`) they run on NCCL,
//! where the op is made on the real NCCL's communicator when a call first uses one. Values come from a free list, so creating and
//! destroying one is O(log n) however many are alive.

use crate::abi::{NcclOp, NcclType, NUM_OPS, SUCCESS};
use crate::comm::{lock, Comm};
use crate::error::{arg, usage, ApiError};
use crate::real::RealNccl;
use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

struct PreMul {
    /// The scalar itself (host-immediate residence) or its device address.
    scalar: Vec<u8>,
    device: bool,
    dtype: NcclType,
    real: Option<c_int>,
}

/// One communicator's PreMulSum ops.
#[derive(Default)]
pub struct Ops {
    live: HashMap<c_int, PreMul>,
    /// Values destroyed and free again, smallest first.
    free: BTreeSet<c_int>,
    /// The next value never handed out (from `ncclNumOps`).
    next: Option<c_int>,
}

impl Ops {
    fn take_value(&mut self) -> Option<c_int> {
        if let Some(v) = self.free.pop_first() {
            return Some(v);
        }
        let v = self.next.unwrap_or(NUM_OPS);
        self.next = Some(v.checked_add(1)?);
        Some(v)
    }
}

fn tables() -> &'static Mutex<HashMap<usize, Ops>> {
    static T: OnceLock<Mutex<HashMap<usize, Ops>>> = OnceLock::new();
    T.get_or_init(Mutex::default)
}

/// `comm`'s table, under the lock of all tables.
fn ops_of(comm: &Comm) -> impl std::ops::DerefMut<Target = Ops> + '_ {
    struct Guard<'a>(MutexGuard<'a, HashMap<usize, Ops>>, usize);
    impl std::ops::Deref for Guard<'_> {
        type Target = Ops;
        fn deref(&self) -> &Ops {
            &self.0[&self.1]
        }
    }
    impl std::ops::DerefMut for Guard<'_> {
        fn deref_mut(&mut self) -> &mut Ops {
            self.0.get_mut(&self.1).expect("inserted")
        }
    }
    let mut g = lock(tables());
    g.entry(comm.handle).or_default();
    Guard(g, comm.handle)
}

/// Drops every op of a communicator that is going away.
pub fn forget(handle: usize) {
    lock(tables()).remove(&handle);
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
    let mut t = ops_of(comm);
    let v = t.take_value().ok_or_else(|| {
        usage("every ncclRedOp_t value is taken by a live PreMulSum op: destroy some")
    })?;
    t.live.insert(
        v,
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
    ops_of(comm).live.contains_key(&v)
}

pub fn dtype(comm: &Comm, v: c_int) -> Option<NcclType> {
    ops_of(comm).live.get(&v).map(|p| p.dtype)
}

pub fn destroy(comm: &Comm, v: c_int) -> Result<(), ApiError> {
    let p = {
        let mut t = ops_of(comm);
        let p = t
            .live
            .remove(&v)
            .ok_or_else(|| arg(format!("op {v} is not a PreMulSum op of this communicator")))?;
        t.free.insert(v);
        p
    };
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
    let mut t = ops_of(comm);
    let p = t
        .live
        .get_mut(&v)
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

/// The factor a call scales its inputs by before it sums, on every path that runs it: a
/// PreMulSum op's scalar, or a float8 average's 1/nranks as NCCL rounds it
/// (`NcclType::fp8_avg_scalar`). `None`: the call does not scale first, or names no live op of
/// its type.
pub fn factor(comm: &Comm, op: &crate::op::Op) -> Option<cuda::scale::Scalar> {
    match op.op {
        NcclOp::PreMulSum(v) => scalar(comm, v)
            .filter(|(_, t)| *t == op.dtype)
            .map(|(s, _)| s),
        NcclOp::Builtin(runtime::ReduceOp::Avg) => op
            .dtype
            .fp8_avg_scalar(comm.nranks)
            .map(|bits| cuda::scale::Scalar::Host(u64::from(bits))),
        NcclOp::Builtin(_) => None,
    }
}

/// `s` as one element of `size` bytes for the host path: its bits, or read from the device
/// (`ncclScalarDevice`: NCCL reads it when its kernel runs; the host path reads it once the
/// call's streams have drained, with its inputs).
pub fn element_bytes(s: cuda::scale::Scalar, size: usize) -> Result<Vec<u8>, ApiError> {
    match s {
        cuda::scale::Scalar::Host(bits) => Ok(bits.to_le_bytes()[..size.min(8)].to_vec()),
        cuda::scale::Scalar::Device(p) => cuda::query::read_device(p as usize, size)
            .map_err(|e| ApiError::Cuda(format!("reading the PreMulSum scalar at {p:#x}: {e}"))),
    }
}

/// `input` with every element multiplied by `factor` (one element of `dtype`), as NCCL's
/// PreMulSum multiplies: the type's own product, rounded once (float8 through half, as its
/// reductions; `runtime::element`).
pub fn scaled_copy(input: &[u8], dtype: runtime::DataType, factor: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    let factors = factor.repeat(input.len() / factor.len().max(1));
    runtime::element::reduce_into(dtype, runtime::ReduceOp::Prod, &mut out, &factors);
    out
}

/// Op `v`'s scalar as the CUDA path takes it, and the type it was made for; `None` for an
/// unknown op.
pub fn scalar(comm: &Comm, v: c_int) -> Option<(cuda::scale::Scalar, NcclType)> {
    let ops = ops_of(comm);
    let p = ops.live.get(&v)?;
    let s = cuda::scale::Scalar::from_bytes(&p.scalar, p.device).ok()?;
    Some((s, p.dtype))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::DataType;

    /// A host scalar's element comes back as the bytes it was made from, whatever its size.
    #[test]
    fn a_host_scalar_is_the_element_it_was_made_from() {
        for elem in [
            2.5f32.to_le_bytes().to_vec(),
            0x3c00u16.to_le_bytes().to_vec(),
            vec![0x38],
            (-3.0f64).to_le_bytes().to_vec(),
        ] {
            let s = cuda::scale::Scalar::from_bytes(&elem, false).unwrap();
            assert_eq!(element_bytes(s, elem.len()).unwrap(), elem);
        }
    }

    #[test]
    fn scaled_copies_multiply_each_element_in_its_own_type() {
        let f: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let got = scaled_copy(&f, DataType::F32, &0.5f32.to_le_bytes());
        let want: Vec<u8> = [0.75f32, -1.0, 1.625]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(got, want);
        // Integers wrap, as NCCL's product does.
        let i = i32::MAX.to_le_bytes();
        assert_eq!(
            scaled_copy(&i, DataType::I32, &2i32.to_le_bytes()),
            (-2i32).to_le_bytes()
        );
        // float8 e4m3 saturates: 448 x 2 is 448 (0x7E), 1.0 x 0.5 is 0.5 (0x30).
        assert_eq!(
            scaled_copy(&[0x7E, 0x38], DataType::F8E4M3, &[0x40]),
            [0x7E, 0x40]
        );
        assert_eq!(scaled_copy(&[0x38], DataType::F8E4M3, &[0x30]), [0x30]);
    }
}
