//! Registered buffers in the multi-process mode: every rank registers one of its buffers
//! together ([`CudaProcComm::register`]), the ranks exchange its IPC handle, and each maps the
//! others'. A call whose input lies in a registered buffer can then run pull mode across
//! processes (each rank reads its peers' inputs over NVLink, `direct::pull`), as in one process,
//! where every input is already mapped.
//!
//! The contract, like count and operator: every rank names the same registration for a call and
//! passes its input at the same offset into the buffer it registered, except in an in-place
//! all-gather, where by NCCL's rule rank r's input is block r of its output (the outputs at the
//! same offset). Registration is checked (same index, same size on every rank, every rank's
//! input inside its buffer); the offsets the other ranks pass cannot be seen from here.

use super::registry::{check_reg_table, RegRecord, RegisteredBuffer, Registration};
use super::shared::{agree, at, export, rank_err, Exchange, IpcMapping};
use super::CudaProcComm;
use crate::device::drv;
use crate::CudaError;
use cudarc::driver::sys;

impl CudaProcComm {
    /// Registers `bytes` at `ptr` (this rank's, `cuMemAlloc` memory: IPC cannot export pool
    /// memory) with every other rank, which all call this at the same point with their own
    /// buffer of the same size; `exchange` is the all-gather across the ranks (called twice).
    /// Calls naming the result may run pull mode across processes. Meant for buffers reused
    /// call after call (gradient buckets, the bench's): registering maps memory (slow).
    pub fn register(
        &self,
        ptr: u64,
        bytes: u64,
        exchange: &mut Exchange<'_>,
    ) -> Result<RegisteredBuffer, CudaError> {
        let rank = self.rank;
        let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let index = reg.len() as u32;
        self.ctx.bind_to_thread().map_err(drv)?;
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers valid; the context is bound.
        unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) }
            .result()
            .map_err(drv)
            .map_err(at(rank, "registering a buffer (cuMemGetAddressRange)"))?;
        if ptr + bytes > base + size as u64 {
            return Err(rank_err(
                rank,
                format!(
                    "registering {bytes} bytes at {ptr:#x}: its allocation ends {} bytes after it",
                    base + size as u64 - ptr
                ),
            ));
        }
        let handle = export(&self.ctx, base).map_err(at(
            rank,
            "registering a buffer (cuIpcGetMemHandle: it must be cuMemAlloc memory)",
        ))?;
        let me = RegRecord {
            index,
            handle,
            offset: ptr - base,
            bytes,
        };
        let table = exchange(&me.encode()).map_err(at(rank, "exchanging registrations"))?;
        let recs = check_reg_table(&table, &me, rank, self.nranks)?;
        let mut starts = [0u64; 8];
        let mut mapped = Vec::new();
        let mut opened = || -> Result<(), CudaError> {
            for (r, p) in recs.iter().enumerate() {
                starts[r] = if r as u32 == rank {
                    ptr
                } else {
                    let m = IpcMapping::open(&self.ctx, &p.handle).map_err(at(
                        rank,
                        &format!("mapping rank {r}'s registered buffer (cuIpcOpenMemHandle)"),
                    ))?;
                    let s = m.ptr + p.offset;
                    mapped.push(m);
                    s
                };
            }
            Ok(())
        };
        // Every rank learns whether every other could map: all register, or all fail.
        agree(rank, exchange, opened(), "map a registered buffer")?;
        reg.push(Some(Registration {
            starts,
            bytes,
            _mapped: mapped,
        }));
        Ok(RegisteredBuffer(index))
    }

    /// Ends a registration on every rank together (all call this at the same point, as they
    /// called [`Self::register`]): each rank waits for its GPU's work, closes its mappings of the
    /// others' buffers, and returns once every rank has, so each owner may then free its buffer.
    /// Calls may no longer name it. A buffer freed while still registered leaves the others'
    /// mappings of it open, and a later allocation at the same place then cannot be registered.
    pub fn deregister(
        &self,
        buf: RegisteredBuffer,
        exchange: &mut Exchange<'_>,
    ) -> Result<(), CudaError> {
        let rank = self.rank;
        let mine = (|| {
            let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            let slot = reg
                .get_mut(buf.0 as usize)
                .filter(|r| r.is_some())
                .ok_or_else(|| {
                    rank_err(
                        rank,
                        format!("registered buffer {} is not registered", buf.0),
                    )
                })?;
            self.ctx.bind_to_thread().map_err(drv)?;
            // Calls in flight may still read the peers' buffers through these mappings.
            self.ctx
                .synchronize()
                .map_err(drv)
                .map_err(at(rank, "deregistering (waiting for this GPU)"))?;
            *slot = None; // closes the mappings
            Ok(())
        })();
        agree(rank, exchange, mine, "deregister a buffer")
    }
}
