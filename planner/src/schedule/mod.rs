//! The schedule IR (`ir`) and its structural validation (`validate`).

mod ir;
mod validate;

pub use ir::*;
pub use validate::*;
