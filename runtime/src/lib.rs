//! topoplan's runtime: the `Communicator` a training binary embeds. It executes the planner's
//! schedule IR on a CPU backend (threads, processes, TCP) and a CUDA backend (cudarc).

pub mod cuda;
pub mod element;
pub mod reference;
pub mod types;

pub use element::Element;
pub use types::{DataType, ReduceOp};
