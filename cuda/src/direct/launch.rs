//! The driver call that enqueues a direct kernel (`cuLaunchKernelEx`, with programmatic stream
//! serialization), shared by every direct launch, and its host-time count for
//! `TOPOPLAN_BENCH_HOST=1`.

use crate::device::drv;
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::ffi::c_void;
use std::sync::Arc;

thread_local! {
    /// `TOPOPLAN_BENCH_HOST=1`: nanoseconds this thread spent in the driver's launch call.
    static LAUNCH_NS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Nanoseconds this thread spent in `cuLaunchKernelEx` since the last call (counted only
/// under `TOPOPLAN_BENCH_HOST=1`).
pub fn take_launch_ns() -> u64 {
    LAUNCH_NS.with(|c| c.replace(0))
}

/// Enqueues `f` with its one by-value parameter `args` (a `#[repr(C)]` mirror of the kernel's
/// parameter struct) on `stream` of `ctx`.
pub(super) fn launch<A: Copy>(
    ctx: &Arc<CudaContext>,
    f: &cudarc::driver::CudaFunction,
    grid: u32,
    block: u32,
    args: &A,
    stream: sys::CUstream,
    pdl: bool,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let mut a = *args;
    let mut params: [*mut c_void; 1] = [&mut a as *mut A as *mut c_void];
    // SAFETY: an all-zero attribute is a valid C value; we set the id and its union member.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let cfg = sys::CUlaunchConfig {
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: u32::from(pdl),
    };
    let t0 = crate::device::host_diagnostic().then(std::time::Instant::now);
    // SAFETY: the kernel takes one `A` by value (the caller's contract), which `params` points
    // to; the config and attribute outlive the call (the driver copies them).
    let r = unsafe {
        sys::cuLaunchKernelEx(
            &cfg,
            f.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if let Some(t0) = t0 {
        LAUNCH_NS.with(|c| c.set(c.get() + t0.elapsed().as_nanos() as u64));
    }
    r.result().map_err(drv)
}
