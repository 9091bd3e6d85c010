//! CUDA graph capture for the benchmark harness (`topoplan bench --cuda-graph`, nccl-tests' -G):
//! capture a stream's calls, instantiate, replay.

use super::device::drv;
use super::CudaError;
use cudarc::driver::sys;

/// An instantiated CUDA graph (destroyed on drop, in the context current on that thread).
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Graph {
    pub fn launch(&self, s: sys::CUstream) -> Result<(), CudaError> {
        // SAFETY: an instantiated graph of this context, a stream of this context.
        unsafe { sys::cuGraphLaunch(self.exec, s) }
            .result()
            .map_err(drv)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: created by end_capture, destroyed once.
        unsafe {
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

/// Starts capturing `s`. Relaxed mode: the first call of a size may allocate and upload.
pub fn begin_capture(s: sys::CUstream) -> Result<(), CudaError> {
    // SAFETY: a live stream of the current context.
    unsafe {
        sys::cuStreamBeginCapture_v2(s, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
    }
    .result()
    .map_err(drv)
}

pub fn end_capture(s: sys::CUstream) -> Result<Graph, CudaError> {
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: out-pointers valid; the stream is capturing (begin_capture).
    unsafe {
        sys::cuStreamEndCapture(s, &mut graph)
            .result()
            .map_err(drv)?;
        sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
            .result()
            .map_err(|e| {
                let _ = sys::cuGraphDestroy(graph);
                drv(e)
            })?;
    }
    Ok(Graph { graph, exec })
}
