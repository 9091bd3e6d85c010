//! The CUDA driver queries the NCCL-compatible library needs, each answering "no GPU" when the driver is
//! absent (CI, CPU-only hosts): the current device, whether a pointer is device memory, a
//! stream wait before host buffers are touched, and one stream waiting for another.

use cudarc::driver::sys;
use std::sync::OnceLock;

/// The driver is loadable and initialised.
fn driver() -> bool {
    static UP: OnceLock<bool> = OnceLock::new();
    *UP.get_or_init(|| {
        crate::device::driver_present()
            // SAFETY: cuInit has no preconditions once the library is loaded.
            && unsafe { sys::cuInit(0) } == sys::CUresult::CUDA_SUCCESS
    })
}

/// `r` as a result, a failure named by the call `what`.
fn checked(r: sys::CUresult, what: &str) -> Result<(), String> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(format!("{what}: {e:?}")),
    }
}

/// Refuses a call that needs the driver where there is none.
fn need_driver() -> Result<(), String> {
    if driver() {
        Ok(())
    } else {
        Err("no CUDA driver on this machine".into())
    }
}

/// The device of the calling thread's current context (what `cudaSetDevice` chose), or -1.
pub fn current_device() -> i32 {
    if !driver() {
        return -1;
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: writes one device ordinal; fails without a current context.
    match unsafe { sys::cuCtxGetDevice(&mut dev) } {
        sys::CUresult::CUDA_SUCCESS => dev,
        _ => -1,
    }
}

/// Whether `p` is memory the CPU cannot read directly (device or managed memory).
pub fn is_device_memory(p: usize) -> bool {
    if p == 0 || !driver() {
        return false;
    }
    let mut kind: u32 = 0;
    // SAFETY: queries one attribute of an address; unknown (plain host) addresses fail.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut kind as *mut u32 as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            p as sys::CUdeviceptr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
}

/// Waits for the work already on `stream`, so host buffers it writes are complete.
pub fn wait_stream(stream: usize) -> Result<(), String> {
    if stream == 0 || !driver() {
        return Ok(());
    }
    // SAFETY: the caller's stream.
    checked(
        unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) },
        "cuStreamSynchronize",
    )
}

/// Makes `waiter` wait (on the GPU, capturable) for the work already on `on`: an event recorded
/// on `on` and waited for on `waiter`. A group's point-to-point calls on several streams run on
/// one of them, joined to the others before and after.
pub fn stream_waits_for(waiter: usize, on: usize) -> Result<(), String> {
    if waiter == on || !driver() {
        return Ok(());
    }
    let mut ev: sys::CUevent = std::ptr::null_mut();
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    // SAFETY: creates one event, records it on the caller's stream `on`, makes the caller's
    // stream `waiter` wait for it, and releases it (the driver keeps it until it completes).
    unsafe {
        checked(sys::cuEventCreate(&mut ev, flags), "cuEventCreate")?;
        let r =
            checked(sys::cuEventRecord(ev, on as sys::CUstream), "cuEventRecord").and_then(|_| {
                checked(
                    sys::cuStreamWaitEvent(waiter as sys::CUstream, ev, 0),
                    "cuStreamWaitEvent",
                )
            });
        let _ = sys::cuEventDestroy_v2(ev);
        r
    }
}

/// The UUID of device `ordinal` (as this process numbers its devices), or `None`: the same
/// GPU has the same UUID in every process, whatever `CUDA_VISIBLE_DEVICES` says.
pub fn device_uuid(ordinal: i32) -> Option<[u8; 16]> {
    if ordinal < 0 || !driver() {
        return None;
    }
    let mut dev: sys::CUdevice = 0;
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: writes one device handle, then 16 bytes of its UUID.
    let ok = unsafe {
        sys::cuDeviceGet(&mut dev, ordinal) == sys::CUresult::CUDA_SUCCESS
            && sys::cuDeviceGetUuid_v2(&mut uuid, dev) == sys::CUresult::CUDA_SUCCESS
    };
    ok.then(|| uuid.bytes.map(|b| b as u8))
}

/// Whether `stream` is being captured into a CUDA graph (false without a driver).
pub fn capturing(stream: usize) -> bool {
    if !driver() {
        return false;
    }
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: queries the caller's stream.
    let r = unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status) };
    r == sys::CUresult::CUDA_SUCCESS
        && status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

/// A reusable mark of a stream's progress: an event without timing, recorded after a call's
/// work and queried later without waiting (the hang report learns so that a device call has
/// finished).
#[derive(Debug)]
pub struct StreamMark(sys::CUevent);

// SAFETY: a CUevent is a driver handle, usable from any thread of the process.
unsafe impl Send for StreamMark {}
unsafe impl Sync for StreamMark {}

impl StreamMark {
    /// A new mark, or why not (no driver, or the driver refused).
    pub fn new() -> Result<StreamMark, String> {
        if !driver() {
            return Err("no CUDA driver".into());
        }
        let mut ev: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: creates one event, released in Drop.
        match unsafe { sys::cuEventCreate(&mut ev, flags) } {
            sys::CUresult::CUDA_SUCCESS => Ok(StreamMark(ev)),
            e => Err(format!("cuEventCreate: {e:?}")),
        }
    }

    /// Marks the work now on `stream` (the caller's stream, not being captured).
    pub fn record(&self, stream: usize) -> Result<(), String> {
        // SAFETY: our event, the caller's stream.
        checked(
            unsafe { sys::cuEventRecord(self.0, stream as sys::CUstream) },
            "cuEventRecord",
        )
    }

    /// Whether the marked work has finished; an error counts as finished (never waits). Polled
    /// by a framework's watchdog thread, maybe while another thread captures in global mode,
    /// which would refuse the query: this thread's mode is relaxed for it.
    pub fn done(&self) -> bool {
        let _relaxed = crate::capture::RelaxedCapture::enter();
        // SAFETY: our event; the query does not block.
        unsafe { sys::cuEventQuery(self.0) != sys::CUresult::CUDA_ERROR_NOT_READY }
    }
}

impl Drop for StreamMark {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; the driver defers it past pending work.
        unsafe {
            let _ = sys::cuEventDestroy_v2(self.0);
        }
    }
}

/// `cuMemAlloc` where no real NCCL is loaded to make `ncclMemAlloc`'s allocation.
pub fn mem_alloc(bytes: usize) -> Result<usize, String> {
    need_driver()?;
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: allocates in the current context.
    checked(
        unsafe { sys::cuMemAlloc_v2(&mut p, bytes.max(1)) },
        "cuMemAlloc",
    )?;
    Ok(p as usize)
}

pub fn mem_free(p: usize) -> Result<(), String> {
    need_driver()?;
    // SAFETY: a pointer from mem_alloc.
    checked(
        unsafe { sys::cuMemFree_v2(p as sys::CUdeviceptr) },
        "cuMemFree",
    )
}

/// Allocates `bytes` in the current context from the device's stream-ordered pool, on a
/// private stream this call waits for, so the memory is ready for any stream. Unlike
/// `cuMemAlloc` it never waits for the device's other work, and it works while another stream
/// of this thread is captured into a CUDA graph (the thread's capture mode relaxed meanwhile).
pub fn mem_alloc_now(bytes: usize) -> Result<usize, String> {
    need_driver()?;
    let _relaxed = crate::capture::RelaxedCapture::enter();
    let mut s: sys::CUstream = std::ptr::null_mut();
    let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    // SAFETY: a stream of the current context, used for this allocation only and destroyed
    // once it has completed.
    unsafe {
        checked(sys::cuStreamCreate(&mut s, flags), "cuStreamCreate")?;
        let mut p: sys::CUdeviceptr = 0;
        let r = checked(
            sys::cuMemAllocAsync(&mut p, bytes.max(1), s),
            "cuMemAllocAsync",
        )
        .and_then(|()| checked(sys::cuStreamSynchronize(s), "cuStreamSynchronize"));
        let _ = sys::cuStreamDestroy_v2(s);
        r.map(|()| p as usize)
    }
}

/// Frees `p` (from [`mem_alloc_now`]) once the work already on `stream` is done, without
/// waiting for it.
pub fn mem_free_async(p: usize, stream: usize) -> Result<(), String> {
    need_driver()?;
    // SAFETY: a pointer from mem_alloc_now, no longer used after the work on `stream`.
    checked(
        unsafe { sys::cuMemFreeAsync(p as sys::CUdeviceptr, stream as sys::CUstream) },
        "cuMemFreeAsync",
    )
}

/// Reads `len` bytes at device address `p` (synchronous: a PreMulSum's device scalar, read by
/// the host path after the call's stream has drained).
pub fn read_device(p: usize, len: usize) -> Result<Vec<u8>, String> {
    need_driver()?;
    let mut out = vec![0u8; len];
    // SAFETY: `len` bytes of the caller's device memory into a host buffer of that size.
    checked(
        unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), p as sys::CUdeviceptr, len) },
        "cuMemcpyDtoH",
    )?;
    Ok(out)
}
