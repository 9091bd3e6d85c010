//! CUDA C sources of topoplan's device kernels, compiled at run time with NVRTC (one release
//! binary, built without a CUDA toolkit, compiles them on whatever GPU it meets).
//!
//! Each `.cu` file of `cuda/kernels/` is one compilation unit ([`Unit`]) that `#include`s the
//! headers it uses (`.cuh`, handed to NVRTC by name: [`HEADERS`]). The element type and every
//! layout constant reach the units as `-D` options ([`options`], from [`crate::layout`]): no
//! kernel file defines them. [`compile_cached`] keeps the PTX on disk ([`cache`]) for the next
//! process.

pub mod cache;

use crate::CudaError;
use cache::{DiskCache, Key};
use cudarc::nvrtc::{result, sys, Ptx};
use std::ffi::{c_char, CString};

/// One compilation unit: its file name (NVRTC's program name) and source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub name: &'static str,
    pub source: &'static str,
}

/// The schedule executor (one kernel per reduction operator) and the copy-engine path's
/// signal and wait kernels.
pub const EXEC: Unit = Unit {
    name: "exec.cu",
    source: include_str!("../kernels/exec.cu"),
};
/// The direct path: push (Simple, LL, LL128) and pull mode, one kernel per operator; built a
/// second time with `TD_SHARED_BUILD` for the register-capped kernels.
pub const DIRECT: Unit = Unit {
    name: "direct.cu",
    source: include_str!("../kernels/direct.cu"),
};
/// The two-buffer reduce of the copy-engine pair all-reduce.
pub const PAIR: Unit = Unit {
    name: "pair.cu",
    source: include_str!("../kernels/pair.cu"),
};
/// Every unit.
pub const UNITS: [Unit; 3] = [EXEC, DIRECT, PAIR];

/// The headers the units include, by the name they include them by.
pub const HEADERS: [(&str, &str); 8] = [
    ("common.cuh", include_str!("../kernels/common.cuh")),
    ("reduce.cuh", include_str!("../kernels/reduce.cuh")),
    ("direct.cuh", include_str!("../kernels/direct.cuh")),
    (
        "direct_stream.cuh",
        include_str!("../kernels/direct_stream.cuh"),
    ),
    (
        "direct_simple.cuh",
        include_str!("../kernels/direct_simple.cuh"),
    ),
    (
        "direct_ll128.cuh",
        include_str!("../kernels/direct_ll128.cuh"),
    ),
    (
        "direct_pull.cuh",
        include_str!("../kernels/direct_pull.cuh"),
    ),
    ("direct_p2p.cuh", include_str!("../kernels/direct_p2p.cuh")),
];

/// Two-buffer reduce kernels of [`PAIR`], indexed like [`EXEC_KERNELS`].
pub const PAIR_KERNELS: [&str; 4] = ["td_pair_sum", "td_pair_prod", "td_pair_min", "td_pair_max"];

/// The grouped point-to-point kernel of [`DIRECT`] (`direct_p2p.cuh`).
pub const P2P_KERNEL: &str = "td_p2p";

/// Direct kernels of [`DIRECT`], indexed like [`EXEC_KERNELS`].
pub const DIRECT_KERNELS: [&str; 4] = [
    "td_direct_sum",
    "td_direct_prod",
    "td_direct_min",
    "td_direct_max",
];

/// The direct kernels with fewer registers per thread, so other kernels' CTAs fit beside theirs
/// on an SM (the in-place hybrid's SM half), in the same order: [`DIRECT`] built with
/// [`shared_options`].
pub const DIRECT_SHARED_KERNELS: [&str; 4] = [
    "td_direct_shared_sum",
    "td_direct_shared_prod",
    "td_direct_shared_min",
    "td_direct_shared_max",
];

/// Executor kernels of [`EXEC`], indexed like [`exec_kernel`]'s `op` argument.
pub const EXEC_KERNELS: [&str; 4] = ["tp_exec_sum", "tp_exec_prod", "tp_exec_min", "tp_exec_max"];
/// The copy-engine path's one-thread signal and wait kernels of [`EXEC`].
pub const SIGNAL_KERNELS: [&str; 2] = ["tp_signal", "tp_wait"];

/// PreMulSum's scaling kernel of [`EXEC`] (`cuda::scale`).
pub const SCALE_KERNEL: &str = "tp_scale";

/// Element types the kernels are compiled for, by their `TP_TYPE` code: the index in this list.
/// Names follow `runtime::DataType`'s serde names.
pub const TYPE_CODES: [&str; 12] = [
    "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8", "f8e4m3", "f8e5m2", "u32", "u64",
];

/// NVRTC options selecting element type `ty` (a name from [`TYPE_CODES`]); `None` if unknown.
pub fn type_options(ty: &str) -> Option<Vec<String>> {
    let code = TYPE_CODES.iter().position(|t| *t == ty)?;
    Some(vec![format!("-DTP_TYPE={code}"), "-std=c++17".to_string()])
}

/// Every option a unit is compiled with for element type `ty`: the type and the layout
/// constants.
pub fn options(ty: &str) -> Option<Vec<String>> {
    let mut o = type_options(ty)?;
    o.extend(crate::layout::defines());
    Some(o)
}

/// The extra options of the register-capped direct build: `nreg` registers per thread
/// (`TOPOPLAN_SHARED_MAXREG`), else [`crate::layout::SHARED_NREG`].
pub fn shared_options(nreg: Option<u32>) -> Vec<String> {
    vec![
        "-DTD_SHARED_BUILD".into(),
        format!(
            "-DTD_SHARED_NREG={}",
            nreg.unwrap_or(crate::layout::SHARED_NREG)
        ),
    ]
}

/// Kernel name for operator `op` ("sum", "prod", "min", "max"; "avg" runs "sum" then a scale).
pub fn exec_kernel(op: &str) -> Option<&'static str> {
    match op {
        "sum" | "avg" => Some(EXEC_KERNELS[0]),
        "prod" => Some(EXEC_KERNELS[1]),
        "min" => Some(EXEC_KERNELS[2]),
        "max" => Some(EXEC_KERNELS[3]),
        _ => None,
    }
}

/// [`compile`] through `cache`: the stored PTX of this unit, options, architecture and NVRTC
/// version if a process compiled it before, else compiled and stored. Needs libnvrtc, as
/// [`compile`] does.
pub fn compile_cached(
    cache: &DiskCache,
    unit: Unit,
    arch: &str,
    options: &[String],
) -> Result<Ptx, CudaError> {
    let Some(key) = cache_key(unit, arch, options) else {
        return compile(unit, arch, options);
    };
    cache
        .get_or_compile(&key, || compile_text(unit, arch, options))
        .map(Ptx::from_src)
}

/// The cache key of `unit` built for `arch` with `options` by the loaded NVRTC; `None` if NVRTC
/// does not say its version (nothing is cached then). Needs libnvrtc.
pub fn cache_key(unit: Unit, arch: &str, options: &[String]) -> Option<Key> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters that outlive the call.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .ok()?;
    let nvrtc = format!("{major}.{minor}");
    Some(Key::new(
        (unit.name, unit.source),
        &HEADERS,
        arch,
        options,
        &nvrtc,
    ))
}

/// Compiles `unit` for `arch` (e.g. `compute_90`) with `options`, the [`HEADERS`] available to
/// its `#include`s. Needs libnvrtc (check `device::nvrtc_present` first: cudarc panics
/// without it).
pub fn compile(unit: Unit, arch: &str, options: &[String]) -> Result<Ptx, CudaError> {
    compile_text(unit, arch, options).map(Ptx::from_src)
}

/// [`compile`]'s PTX as text.
fn compile_text(unit: Unit, arch: &str, options: &[String]) -> Result<String, CudaError> {
    let c = |s: &str| CString::new(s).map_err(|e| CudaError::Compile(e.to_string()));
    let src = c(unit.source)?;
    let name = c(unit.name)?;
    let texts = HEADERS
        .iter()
        .map(|h| c(h.1))
        .collect::<Result<Vec<_>, _>>()?;
    let names = HEADERS
        .iter()
        .map(|h| c(h.0))
        .collect::<Result<Vec<_>, _>>()?;
    let text_ptrs: Vec<*const c_char> = texts.iter().map(|s| s.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = names.iter().map(|s| s.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a NUL-terminated string that outlives the call (NVRTC copies
    // them); the two arrays hold HEADERS.len() entries each.
    unsafe {
        sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            HEADERS.len() as i32,
            text_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
    }
    .result()
    .map_err(|e| CudaError::Compile(format!("{}: {e:?}", unit.name)))?;
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(options.iter().cloned());
    // SAFETY: `prog` was created above and is destroyed once, below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    let out = match compiled {
        // SAFETY: as above; the program compiled.
        Ok(()) => unsafe { result::get_ptx(prog) }
            .map(|p| text(&p))
            .map_err(|e| CudaError::Compile(format!("{}: {e:?}", unit.name))),
        Err(e) => {
            // SAFETY: as above.
            let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
            Err(CudaError::Compile(format!(
                "{}: {e:?}\n{}",
                unit.name,
                text(&log)
            )))
        }
    };
    // SAFETY: created above, destroyed once.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// A NUL-terminated C buffer as text.
fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests;
