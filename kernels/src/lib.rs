//! CUDA C sources of topoplan's device kernels, compiled at run time with NVRTC by the runtime.
