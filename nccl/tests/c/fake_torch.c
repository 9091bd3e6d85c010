/*
 * A stand-in for PyTorch's libtorch_cuda.so: when loaded, it loads the NCCL named by
 * FAKE_TORCH_NCCL (an absolute path, defined at build time) globally, as `import torch` loads
 * the NCCL of its `nvidia/nccl/lib` folder before the job's first NCCL call.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void load_nccl(void) {
  if (!dlopen(FAKE_TORCH_NCCL, RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "fake torch: %s\n", dlerror());
    exit(3);
  }
}

int fake_torch_marker(void) { return 1; }
