//! Devices, peer access, raw device buffers and the NVRTC-compiled executor modules.

use super::CudaError;
use crate::kernels::{self, Unit};
use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use runtime::types::DataType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// True when the CUDA driver library can be loaded (false on machines without a GPU driver,
/// such as CI). Call before anything else in this module: cudarc panics on a missing library.
pub fn driver_present() -> bool {
    // SAFETY: only probes dlopen.
    unsafe { sys::is_culib_present() }
}

/// True when NVRTC can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: only probes dlopen.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

pub fn drv(e: result::DriverError) -> CudaError {
    CudaError::Driver(format!(
        "{} ({})",
        e.error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        e.0 as i32
    ))
}

/// A `cuMemAlloc` allocation (peer-accessible after `cuCtxEnablePeerAccess`, IPC-exportable),
/// freed on drop.
#[derive(Debug)]
pub struct DevBuf {
    ctx: Arc<CudaContext>,
    pub ptr: u64,
    pub bytes: usize,
}

impl DevBuf {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self, CudaError> {
        ctx.bind_to_thread().map_err(drv)?;
        // Zero bytes would be an error for cuMemAlloc; keep a minimal allocation instead.
        // SAFETY: plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(bytes.max(256)) }.map_err(drv)?;
        Ok(Self {
            ctx: ctx.clone(),
            ptr,
            bytes,
        })
    }

    /// Synchronous memset to a byte value.
    pub fn fill(&self, byte: u8) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: the range is inside the allocation.
        unsafe { sys::cuMemsetD8_v2(self.ptr, byte, self.bytes.max(256)) }
            .result()
            .map_err(drv)
    }

    pub fn upload(&self, data: &[u8]) -> Result<(), CudaError> {
        assert!(data.len() <= self.bytes.max(256));
        self.ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: host slice valid for its length; destination inside the allocation.
        unsafe { sys::cuMemcpyHtoD_v2(self.ptr, data.as_ptr() as *const _, data.len()) }
            .result()
            .map_err(drv)
    }

    pub fn download(&self, out: &mut [u8]) -> Result<(), CudaError> {
        assert!(out.len() <= self.bytes.max(256));
        self.ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: as above.
        unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr() as *mut _, self.ptr, out.len()) }
            .result()
            .map_err(drv)
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by malloc_sync in this context; freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// `TOPOPLAN_BENCH_HOST=1`: `topoplan bench` prints each rank's host time per enqueued call
/// (stderr), and the direct path counts its time in the driver's launch call for it.
pub fn host_diagnostic() -> bool {
    static H: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *H.get_or_init(|| params::BENCH_HOST.flag_or_warn())
}

/// A non-blocking stream of one context, destroyed on drop (work already queued on it still
/// runs: the driver defers the destruction).
pub(crate) struct Stream {
    ctx: Arc<CudaContext>,
    s: sys::CUstream,
}

// SAFETY: a CUstream handle may be used from any thread with its context bound; the owners keep
// it behind a mutex.
unsafe impl Send for Stream {}

impl Stream {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        Ok(Self {
            ctx: ctx.clone(),
            s: create_stream(ctx)?,
        })
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.s
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            let _ = unsafe { sys::cuStreamDestroy_v2(self.s) };
        }
    }
}

/// A new non-blocking stream of `ctx` (binds `ctx` to this thread); the caller destroys it.
pub fn create_stream(ctx: &Arc<CudaContext>) -> Result<sys::CUstream, CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let mut s: sys::CUstream = std::ptr::null_mut();
    // SAFETY: out-pointer valid; context bound.
    unsafe { sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) }
        .result()
        .map_err(drv)?;
    Ok(s)
}

/// A timing event, destroyed on drop.
pub struct Event {
    ctx: Arc<CudaContext>,
    e: sys::CUevent,
}

// SAFETY: a CUevent handle may be used from any thread with its context bound (drop binds it).
unsafe impl Send for Event {}

impl Event {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        ctx.bind_to_thread().map_err(drv)?;
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer valid; default flags (timing enabled).
        unsafe { sys::cuEventCreate(&mut e, 0) }
            .result()
            .map_err(drv)?;
        Ok(Self {
            ctx: ctx.clone(),
            e,
        })
    }

    pub fn raw(&self) -> sys::CUevent {
        self.e
    }

    /// Records the event on `s`, a stream of the event's context (bound by the caller).
    pub fn record(&self, s: sys::CUstream) -> Result<(), CudaError> {
        // SAFETY: an event and a stream of the current context.
        unsafe { sys::cuEventRecord(self.e, s) }
            .result()
            .map_err(drv)
    }

    /// Waits for this event, then the milliseconds from `start` (recorded before it) to it.
    pub fn ms_since(&self, start: &Event) -> Result<f32, CudaError> {
        let mut ms = 0f32;
        // SAFETY: two recorded events of the current context; out-pointer valid.
        unsafe {
            sys::cuEventSynchronize(self.e).result().map_err(drv)?;
            sys::cuEventElapsedTime_v2(&mut ms, start.e, self.e)
                .result()
                .map_err(drv)?;
        }
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            let _ = unsafe { sys::cuEventDestroy_v2(self.e) };
        }
    }
}

/// Opens `ordinals` (one context per rank, in rank order), checks and enables peer access
/// between every pair of distinct GPUs. A repeated ordinal (ranks sharing a GPU) gets the same
/// context, the device's primary one: kernels of one context on different streams run at the
/// same time, those of different contexts on one GPU take turns, and the ranks' kernels wait
/// for each other inside the kernel. A GPU never needs peer access to itself.
pub fn open_devices(ordinals: &[usize]) -> Result<Vec<Arc<CudaContext>>, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    let n = CudaContext::device_count().map_err(drv)? as usize;
    let mut ctxs: Vec<Arc<CudaContext>> = Vec::new();
    for &o in ordinals {
        if o >= n {
            return Err(CudaError::Input(format!(
                "GPU {o} requested but only {n} present"
            )));
        }
        if let Some(c) = ctxs.iter().find(|c| c.ordinal() == o) {
            ctxs.push(c.clone());
            continue;
        }
        let c = CudaContext::new(o).map_err(drv)?;
        // The runtime orders all work itself (schedules, events, device flags).
        // SAFETY: called before any allocation through this context by us.
        unsafe { c.disable_event_tracking() };
        ctxs.push(c);
    }
    for (i, a) in ctxs.iter().enumerate() {
        for b in &ctxs {
            if a.ordinal() == b.ordinal() || ctxs[..i].iter().any(|p| p.ordinal() == a.ordinal()) {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: valid device handles.
            unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.cu_device(), b.cu_device()) }
                .result()
                .map_err(drv)?;
            if can == 0 {
                return Err(CudaError::NoPeerAccess(a.ordinal(), b.ordinal()));
            }
            a.bind_to_thread().map_err(drv)?;
            // SAFETY: a is current; b a valid context.
            match unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) } {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => return Err(drv(result::DriverError(e))),
            }
        }
    }
    Ok(ctxs)
}

/// The executor's functions for one element type in one context.
#[derive(Debug)]
pub struct ExecModule {
    /// The executor, direct and pair units, loaded.
    _modules: [Arc<CudaModule>; 3],
    /// sum, prod, min, max
    pub funcs: [CudaFunction; 4],
    /// Direct-push kernels (`direct.cu`): sum, prod, min, max.
    pub direct: [CudaFunction; 4],
    /// The grouped point-to-point kernel (`direct_p2p.cuh`).
    pub p2p: CudaFunction,
    /// Two-buffer reduce kernels (`pair.cu`): sum, prod, min, max.
    pub pair: [CudaFunction; 4],
    pub signal: CudaFunction,
    pub wait: CudaFunction,
    /// PreMulSum's scaling kernel (`exec.cu`, `crate::scale`).
    pub scale: CudaFunction,
    ctx: Arc<CudaContext>,
    dtype: DataType,
    /// [`Self::direct_shared`], once loaded.
    shared: OnceLock<SharedDirect>,
}

/// Index of `op`'s kernel in [`ExecModule::funcs`] and [`ExecModule::direct`]: sum, prod, min,
/// max (average runs the sum kernel and divides by the rank count).
pub(crate) fn op_index(op: runtime::types::ReduceOp) -> usize {
    use runtime::types::ReduceOp;
    match op {
        ReduceOp::Sum | ReduceOp::Avg => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Min => 2,
        ReduceOp::Max => 3,
    }
}

/// The executor modules of one context, loaded once per element type.
#[derive(Debug, Default)]
pub struct ModuleCache(Mutex<HashMap<DataType, Arc<ExecModule>>>);

impl ModuleCache {
    /// The module for `dtype` in `ctx`, compiling and loading it on first use.
    pub fn get(
        &self,
        ctx: &Arc<CudaContext>,
        dtype: DataType,
    ) -> Result<Arc<ExecModule>, CudaError> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(x) = m.get(&dtype) {
            return Ok(x.clone());
        }
        // A type's first call may come inside a graph capture (loading touches no stream).
        let _relaxed = crate::capture::RelaxedCapture::enter();
        let x = Arc::new(load_exec(ctx, dtype)?);
        m.insert(dtype, x.clone());
        Ok(x)
    }
}

fn ptx_cache() -> &'static Mutex<HashMap<(DataType, String), Ptx>> {
    static C: OnceLock<Mutex<HashMap<(DataType, String), Ptx>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The compiled units kept across processes (`TOPOPLAN_KERNEL_CACHE`), behind [`ptx_cache`].
fn disk_cache() -> &'static kernels::cache::DiskCache {
    static C: OnceLock<kernels::cache::DiskCache> = OnceLock::new();
    C.get_or_init(kernels::cache::DiskCache::from_env)
}

fn arch_name(major: i32, minor: i32) -> &'static str {
    // NVRTC takes a 'static str; map the capabilities we expect, fall back to the oldest we need.
    match (major, minor) {
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (10, 0) => "compute_100",
        (12, 0) => "compute_120",
        _ => "compute_80",
    }
}

/// `TOPOPLAN_SHARED_MAXREG` (32-255): registers per thread of the direct kernels that leave
/// room for other CTAs on their SMs (`td_direct_shared_*`; default `layout::SHARED_NREG`).
fn shared_maxreg() -> Option<u32> {
    static R: OnceLock<Option<u32>> = OnceLock::new();
    *R.get_or_init(|| params::SHARED_MAXREG.u32_or_warn())
}

/// The PTX of `unit` for `dtype` on `ctx`'s GPU, compiled once per process, unit, type, arch
/// and build (`shared`: the register-capped direct kernels, `TD_SHARED_BUILD`), or read from
/// the disk cache where an earlier process compiled it.
fn unit_ptx(
    ctx: &Arc<CudaContext>,
    dtype: DataType,
    unit: Unit,
    shared: bool,
) -> Result<Ptx, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoNvrtc);
    }
    let (maj, min) = ctx.compute_capability().map_err(drv)?;
    let arch = arch_name(maj, min);
    let tyname = serde_json::to_value(dtype)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let key = (
        dtype,
        format!(
            "{}/{arch}{}",
            unit.name,
            if shared { "/shared" } else { "" }
        ),
    );
    let mut cache = ptx_cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = cache.get(&key) {
        return Ok(p.clone());
    }
    let mut options = kernels::options(&tyname)
        .ok_or_else(|| CudaError::Input(format!("no kernel for type {tyname}")))?;
    if shared {
        options.extend(kernels::shared_options(shared_maxreg()));
    }
    let p = kernels::compile_cached(disk_cache(), unit, arch, &options)?;
    cache.insert(key, p.clone());
    Ok(p)
}

/// The register-capped direct kernels, loaded into a module of their own.
#[derive(Debug)]
struct SharedDirect {
    _module: Arc<CudaModule>,
    funcs: [CudaFunction; 4],
}

impl ExecModule {
    /// The direct kernels with registers capped so other CTAs fit beside theirs
    /// (`td_direct_shared_*`: sum, prod, min, max), compiled and loaded at the first call that
    /// needs them (the in-place hybrid), not with the rest.
    pub fn direct_shared(&self) -> Result<&[CudaFunction; 4], CudaError> {
        if let Some(s) = self.shared.get() {
            return Ok(&s.funcs);
        }
        let _relaxed = crate::capture::RelaxedCapture::enter();
        let module = self
            .ctx
            .load_module(unit_ptx(&self.ctx, self.dtype, kernels::DIRECT, true)?)
            .map_err(drv)?;
        let f = |name: &str| module.load_function(name).map_err(drv);
        let funcs = [
            f(kernels::DIRECT_SHARED_KERNELS[0])?,
            f(kernels::DIRECT_SHARED_KERNELS[1])?,
            f(kernels::DIRECT_SHARED_KERNELS[2])?,
            f(kernels::DIRECT_SHARED_KERNELS[3])?,
        ];
        let loaded = SharedDirect {
            _module: module,
            funcs,
        };
        Ok(&self.shared.get_or_init(|| loaded).funcs)
    }
}

/// Compiles (once per process and type/arch) and loads the kernel units for `dtype` into `ctx`.
pub fn load_exec(ctx: &Arc<CudaContext>, dtype: DataType) -> Result<ExecModule, CudaError> {
    let load = |unit| -> Result<Arc<CudaModule>, CudaError> {
        ctx.load_module(unit_ptx(ctx, dtype, unit, false)?)
            .map_err(drv)
    };
    let (exec, direct, pair) = (
        load(kernels::EXEC)?,
        load(kernels::DIRECT)?,
        load(kernels::PAIR)?,
    );
    let four = |m: &Arc<CudaModule>, names: [&str; 4]| -> Result<[CudaFunction; 4], CudaError> {
        let f = |name: &str| m.load_function(name).map_err(drv);
        Ok([f(names[0])?, f(names[1])?, f(names[2])?, f(names[3])?])
    };
    let funcs = four(&exec, kernels::EXEC_KERNELS)?;
    let direct_funcs = four(&direct, kernels::DIRECT_KERNELS)?;
    let pair_funcs = four(&pair, kernels::PAIR_KERNELS)?;
    let p2p = direct.load_function(kernels::P2P_KERNEL).map_err(drv)?;
    let signal = exec
        .load_function(kernels::SIGNAL_KERNELS[0])
        .map_err(drv)?;
    let wait = exec
        .load_function(kernels::SIGNAL_KERNELS[1])
        .map_err(drv)?;
    let scale = exec.load_function(kernels::SCALE_KERNEL).map_err(drv)?;
    Ok(ExecModule {
        _modules: [exec, direct, pair],
        funcs,
        direct: direct_funcs,
        p2p,
        pair: pair_funcs,
        signal,
        wait,
        scale,
        ctx: ctx.clone(),
        dtype,
        shared: OnceLock::new(),
    })
}
