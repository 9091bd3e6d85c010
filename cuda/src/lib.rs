//! The CUDA backend: executes planner schedules on NVIDIA GPUs (see `docs/cuda.md`). The host
//! side is this crate's Rust; the device side is the CUDA C of `kernels/` ([`kernels`]),
//! compiled at run time with NVRTC, so one binary built without a CUDA toolkit runs anywhere.
//!
//! - [`lower`]: schedule → phases of work items with the barriers they need (pure, CPU-tested);
//! - [`group::CudaGroup`]: one process driving several GPUs with peer access; the SM path runs a
//!   whole collective as one kernel per GPU (`cuda/kernels/exec.cu`), the copy-engine path
//!   ([`ce`]) overlaps peer copies with reduce kernels; [`ce_pair`] runs the two-rank copy-engine
//!   all-reduce with stream memory operations for the cross-GPU waits;
//! - [`device`]: contexts, peer access, `cuMemAlloc` buffers, NVRTC compilation;
//! - [`residency`]: the CTAs each rank may launch when several ranks share a GPU;
//! - [`ipc::CudaProcComm`]: one process per GPU, peers' direct-path buffers mapped through CUDA
//!   IPC handles exchanged over the bootstrap;
//! - [`graph`]: capturing a stream's calls into a CUDA graph and replaying it; [`capture`]:
//!   the work a capture forbids, done relaxed (first-use module loads, pointer queries);
//!
//! Everything that touches the driver first checks [`device::driver_present`], so machines
//! without a GPU get an error (or a test skip), never a panic.

pub mod abort;
pub mod capture;
pub mod ce;
pub mod ce_pair;
pub mod device;
pub mod direct;
mod dispatch;
pub mod graph;
pub mod group;
pub mod hybrid;
pub mod ipc;
pub mod kernels;
pub mod layout;
pub mod lower;
pub mod query;
mod request;
pub mod residency;
pub mod scale;
pub mod schedules;

pub use group::CudaGroup;
pub use request::{RankCall, Request};

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver library (libcuda.so) on this machine")]
    NoDriver,
    #[error("no NVRTC library (libnvrtc.so.13) on this machine")]
    NoNvrtc,
    #[error("GPU {0} cannot access GPU {1} directly (peer access unsupported)")]
    NoPeerAccess(usize, usize),
    #[error("CUDA driver error: {0}")]
    Driver(String),
    #[error("NVRTC compile failed: {0}")]
    Compile(String),
    #[error("cannot lower the schedule: {0}")]
    Lower(String),
    #[error("NCCL: {0}")]
    Nccl(String),
    #[error("{0}")]
    Input(String),
    /// Ranks sharing a GPU whose kernels could not all be resident at once.
    #[error(transparent)]
    Residency(#[from] residency::ResidencyError),
    /// Ranks sharing a GPU without a hardware queue each.
    #[error(transparent)]
    Queues(#[from] residency::QueueError),
    /// A step of the multi-process (CUDA IPC) mode failed on this rank.
    #[error("rank {rank}: {what}")]
    Rank { rank: u32, what: String },
    /// A GPU wait of this rank stopped (`abort::WaitStop`): the call's results are undefined.
    #[error("rank {rank}: {reason} waiting for {what} from rank {peer} (call {seq} of this rank)")]
    Stopped {
        rank: u32,
        reason: &'static str,
        what: &'static str,
        peer: u32,
        seq: u32,
    },
    /// Ranks of a multi-process communicator called different things (`ipc::calls`).
    #[error(transparent)]
    Mismatch(#[from] ipc::calls::Mismatch),
    /// A call on a communicator after its `abort()`.
    #[error("the communicator was aborted")]
    Aborted,
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] runtime::bootstrap::BootstrapError),
}
