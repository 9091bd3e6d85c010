//! Topology: the model (`model`), its readers and writers, and paths between components.

mod model;

pub use model::*;
