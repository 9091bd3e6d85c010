//! The schedule IR (`ir`), its structural validation (`validate`), topology-free builders
//! (`build`) and a chunk-level symbolic check (`symbolic`).

pub mod build;
mod expand;
mod ir;
pub mod msccl;
pub mod symbolic;
mod validate;

pub use build::TreeChannel;
pub use ir::*;
pub use validate::*;
