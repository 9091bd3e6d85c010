//! Device-buffer calls that topoplan's CUDA path has no kernel for, run on topoplan's CPU
//! runtime through host copies: each device range a call reads or writes is copied to host
//! memory after the work already on the caller's stream, the call runs on the host copies, and
//! the written ranges are copied back before the call returns.
//!
//! Correct in every residency form (one process per GPU, ranks of several processes sharing a
//! GPU, which NCCL refuses) and abortable like every CPU-runtime wait, but synchronous: the
//! host waits for the stream, so it cannot be captured into a CUDA graph, and its speed is the
//! host's. Ranges that overlap (NCCL's in-place forms) are copied as one span, so the host
//! copies alias exactly as the device buffers do.

use crate::error::{usage, ApiError};
use crate::op::{Op, Typed};
use cudarc::driver::sys;

/// One device span mirrored in host memory.
struct Span {
    dev: usize,
    host: Vec<u8>,
    /// Written back after the call: (offset in the span, length).
    written: Option<(usize, usize)>,
    stream: usize,
}

/// The host copies of one batch's device ranges; [`Staged::finish`] writes the outputs back.
pub struct Staged {
    spans: Vec<Span>,
}

/// A call's (input, output) byte ranges on this rank: `layout` as the CPU path reads it.
pub type Layout = fn(&Op, usize, usize, usize, usize) -> (usize, usize, bool);

fn check(r: sys::CUresult, what: &str) -> Result<(), ApiError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(ApiError::Cuda(format!("{what}: {r:?}")))
    }
}

/// Makes the context that owns `p` current on this thread (a group may run a communicator's
/// calls on a thread of its own), returning whether one was pushed.
fn push_context_of(p: usize) -> Result<bool, ApiError> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: queries one attribute of a device address; writes one context handle.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut ctx as *mut sys::CUcontext as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
            p as sys::CUdeviceptr,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS || ctx.is_null() {
        return Ok(false);
    }
    // SAFETY: a context the driver just named; popped in `pop_context`.
    check(unsafe { sys::cuCtxPushCurrent_v2(ctx) }, "cuCtxPushCurrent")?;
    Ok(true)
}

fn pop_context(pushed: bool) {
    if pushed {
        let mut old: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context `push_context_of` pushed on this thread.
        unsafe { sys::cuCtxPopCurrent_v2(&mut old) };
    }
}

/// Copies `len` bytes at device address `dev` into a new host buffer, after the work already
/// on `stream`.
fn download(dev: usize, len: usize, stream: usize) -> Result<Vec<u8>, ApiError> {
    let mut host = vec![0u8; len];
    let pushed = push_context_of(dev)?;
    // SAFETY: `len` device bytes at `dev` belong to the caller's call; `host` holds `len`.
    let r = unsafe {
        sys::cuMemcpyDtoHAsync_v2(
            host.as_mut_ptr() as *mut std::ffi::c_void,
            dev as sys::CUdeviceptr,
            len,
            stream as sys::CUstream,
        )
    };
    // SAFETY: the caller's stream, in the context pushed above.
    let s = unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) };
    pop_context(pushed);
    check(r, "cuMemcpyDtoHAsync")?;
    check(s, "cuStreamSynchronize")?;
    Ok(host)
}

fn upload(dev: usize, host: &[u8], stream: usize) -> Result<(), ApiError> {
    let pushed = push_context_of(dev)?;
    // SAFETY: `host.len()` device bytes at `dev` are the call's output range.
    let r = unsafe {
        sys::cuMemcpyHtoDAsync_v2(
            dev as sys::CUdeviceptr,
            host.as_ptr() as *const std::ffi::c_void,
            host.len(),
            stream as sys::CUstream,
        )
    };
    // SAFETY: as in `download`; the host buffer must outlive the copy.
    let s = unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) };
    pop_context(pushed);
    check(r, "cuMemcpyHtoDAsync")?;
    check(s, "cuStreamSynchronize")
}

impl Staged {
    /// Mirrors every device range of `ops` in host memory and returns the calls rewritten to
    /// use the host copies. `layout` gives each call's (input, output) byte counts on this rank.
    pub fn stage(
        ops: &[Typed],
        n: usize,
        rank: usize,
        layout: Layout,
        is_device: impl Fn(usize) -> bool,
    ) -> Result<(Vec<Typed>, Staged), ApiError> {
        let mut staged = Staged { spans: Vec::new() };
        let mut out = Vec::with_capacity(ops.len());
        for (op, dt, rop, count) in ops {
            if cuda::query::capturing(op.stream) {
                return Err(usage(format!(
                    "{}: topoplan runs this call through host copies, which a CUDA graph cannot capture",
                    op.call
                )));
            }
            let (inb, outb, _) = layout(op, n, rank, *count, dt.size());
            let mut op = *op;
            let input = (op.send != 0 && inb > 0 && is_device(op.send)).then_some((op.send, inb));
            let output =
                (op.recv != 0 && outb > 0 && is_device(op.recv)).then_some((op.recv, outb));
            let (send, recv) = staged.mirror(input, output, op.stream)?;
            op.send = send.unwrap_or(op.send);
            op.recv = recv.unwrap_or(op.recv);
            out.push((op, *dt, *rop, *count));
        }
        Ok((out, staged))
    }

    /// Host addresses standing for the input and output ranges (one span if they overlap).
    fn mirror(
        &mut self,
        input: Option<(usize, usize)>,
        output: Option<(usize, usize)>,
        stream: usize,
    ) -> Result<(Option<usize>, Option<usize>), ApiError> {
        let overlap = match (input, output) {
            (Some((a, al)), Some((b, bl))) => a < b + bl && b < a + al,
            _ => false,
        };
        if overlap {
            let ((a, al), (b, bl)) = (input.unwrap(), output.unwrap());
            let (lo, hi) = (a.min(b), (a + al).max(b + bl));
            let host = download(lo, hi - lo, stream)?;
            let base = host.as_ptr() as usize;
            self.spans.push(Span {
                dev: lo,
                host,
                written: Some((b - lo, bl)),
                stream,
            });
            return Ok((Some(base + (a - lo)), Some(base + (b - lo))));
        }
        let mut addr = |range: Option<(usize, usize)>, written: bool| {
            range
                .map(|(dev, len)| {
                    // Outputs are copied in too: a call may write only part of its range.
                    let host = download(dev, len, stream)?;
                    let base = host.as_ptr() as usize;
                    self.spans.push(Span {
                        dev,
                        host,
                        written: written.then_some((0, len)),
                        stream,
                    });
                    Ok::<usize, ApiError>(base)
                })
                .transpose()
        };
        let send = addr(input, false)?;
        let recv = addr(output, true)?;
        Ok((send, recv))
    }

    /// Copies every written range back to the device.
    pub fn finish(self) -> Result<(), ApiError> {
        for s in &self.spans {
            if let Some((off, len)) = s.written {
                upload(s.dev + off, &s.host[off..off + len], s.stream)?;
            }
        }
        Ok(())
    }
}
