//! Helpers of the GPU tests (`cuda_device`, `cuda_split`).

use runtime::cuda::device;

/// CUDA devices present: 0 without a driver (CI), so the GPU tests skip with a message.
pub fn gpus() -> usize {
    if !device::driver_present() {
        return 0;
    }
    cudarc::driver::CudaContext::device_count()
        .map(|n| n as usize)
        .unwrap_or(0)
}
