//! PreMulSum's first step on the GPU (`ncclRedOpCreatePreMulSum`): every input element times a
//! scalar, on the caller's stream, before a sum runs on the scaled copy (`tp_scale` in
//! `cuda/kernels/exec.cu`). NCCL scales each rank's input once and then sums, so a sum over
//! scaled inputs is the same reduction.

use crate::device::{drv, ExecModule};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::ffi::c_void;
use std::sync::Arc;

/// Where the scalar lives: its bits (one element, little-endian, at most 8 bytes) or a device
/// address read when the kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    Host(u64),
    Device(u64),
}

impl Scalar {
    /// From NCCL's record of it: the element's bytes (host residence) or the address's.
    pub fn from_bytes(bytes: &[u8], device: bool) -> Result<Scalar, CudaError> {
        if bytes.is_empty() || bytes.len() > 8 {
            return Err(CudaError::Input(format!(
                "a PreMulSum scalar of {} bytes",
                bytes.len()
            )));
        }
        let mut b = [0u8; 8];
        b[..bytes.len()].copy_from_slice(bytes);
        let v = u64::from_le_bytes(b);
        Ok(if device {
            Scalar::Device(v)
        } else {
            Scalar::Host(v)
        })
    }
}

/// Threads per block and the most blocks of one scaling launch (a grid-stride loop covers the
/// rest).
const BLOCK: u32 = 512;
const MAX_BLOCKS: u64 = 1024;

/// One scaling: `dst[0, n) = src[0, n) * scalar`, device addresses of `n` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scaling {
    pub dst: u64,
    pub src: u64,
    pub n: u64,
    pub scalar: Scalar,
}

/// Enqueues `s` (elements of the module's type) on `stream`.
pub fn enqueue(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    s: &Scaling,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    let n = s.n;
    if n == 0 {
        return Ok(());
    }
    ctx.bind_to_thread().map_err(drv)?;
    let (mut dst, mut src, mut n_arg) = (s.dst, s.src, n);
    let (mut imm, mut dev) = match s.scalar {
        Scalar::Host(v) => (v, 0u64),
        Scalar::Device(p) => (0u64, p),
    };
    let mut params: [*mut c_void; 5] = [
        &mut dst as *mut u64 as *mut c_void,
        &mut src as *mut u64 as *mut c_void,
        &mut n_arg as *mut u64 as *mut c_void,
        &mut imm as *mut u64 as *mut c_void,
        &mut dev as *mut u64 as *mut c_void,
    ];
    let blocks = n.div_ceil(BLOCK as u64).min(MAX_BLOCKS) as u32;
    // SAFETY: `tp_scale(T*, const T*, u64, u64, const T*)` takes five 8-byte values, which
    // `params` points to; the ranges are the caller's device buffers on its stream.
    let r = unsafe {
        sys::cuLaunchKernel(
            module.scale.cu_function(),
            blocks,
            1,
            1,
            BLOCK,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(CudaError::Driver(format!("launching tp_scale: {r:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_keep_their_bits_and_residence() {
        let half_one = 0x3c00u16.to_le_bytes();
        assert_eq!(
            Scalar::from_bytes(&half_one, false).unwrap(),
            Scalar::Host(0x3c00)
        );
        let addr = 0x7f00_1234_5678u64.to_ne_bytes();
        assert_eq!(
            Scalar::from_bytes(&addr, true).unwrap(),
            Scalar::Device(0x7f00_1234_5678)
        );
        assert!(Scalar::from_bytes(&[], false).is_err());
        assert!(Scalar::from_bytes(&[0; 9], false).is_err());
    }
}
