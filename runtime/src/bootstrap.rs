//! (being written)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error("x")]
    X,
}
#[derive(Debug, Clone)]
pub struct UniqueId;
