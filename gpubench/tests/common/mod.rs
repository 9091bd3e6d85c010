//! Helpers of the GPU tests (`cuda_device`).

use cuda::device;

/// CUDA devices present: 0 without a driver (CI).
fn gpus() -> usize {
    if !device::driver_present() {
        return 0;
    }
    cudarc::driver::CudaContext::device_count()
        .map(|n| n as usize)
        .unwrap_or(0)
}

/// Whether 2 GPUs and a CUDA driver are present; otherwise prints why `test` skips (CI).
pub fn two_gpus(test: &str) -> bool {
    let n = gpus();
    if n < 2 {
        eprintln!("SKIP {test}: needs 2 GPUs and a CUDA driver, found {n} GPU(s)");
    }
    n >= 2
}
