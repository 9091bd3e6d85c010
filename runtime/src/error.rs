//! The runtime's error type. Every error that comes from waiting names what was waited for:
//! the collective, its sequence number on this communicator, this rank and the peer.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommError {
    #[error("{what} #{seq} on rank {rank}: timed out after {waited:?} waiting for {waiting_for}")]
    Timeout {
        what: String,
        seq: u64,
        rank: u32,
        /// The peer whose message or free slot never came (None: a local dependency).
        peer: Option<u32>,
        waiting_for: String,
        waited: Duration,
    },
    #[error("{what} #{seq} on rank {rank}: aborted")]
    Aborted { what: String, seq: u64, rank: u32 },
    #[error("{what} #{seq} on rank {rank}: peer rank {peer} is gone: {detail}")]
    PeerGone {
        what: String,
        seq: u64,
        rank: u32,
        peer: u32,
        detail: String,
    },
    #[error("{what} #{seq} on rank {rank}: message from rank {peer} does not match: {detail} (do all ranks call the same collectives with the same counts, types, operations and plans?)")]
    Mismatch {
        what: String,
        seq: u64,
        rank: u32,
        peer: u32,
        detail: String,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("no schedule: {0}")]
    Plan(String),
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] crate::bootstrap::BootstrapError),
    #[error("transport: {0}")]
    Transport(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("communicator is unusable after an earlier error or abort: {0}")]
    Poisoned(String),
}

impl CommError {
    /// True for errors caused by the caller's input (bad arguments, configuration, bootstrap
    /// inputs that disagree), as opposed to failures while running.
    pub fn is_usage(&self) -> bool {
        matches!(self, CommError::InvalidArgument(_) | CommError::Config(_))
    }

    /// True when rank 0 could not listen because the address it was given is taken.
    pub fn is_address_in_use(&self) -> bool {
        matches!(
            self,
            CommError::Bootstrap(crate::bootstrap::BootstrapError::AddressInUse { .. })
        )
    }
}

pub type Result<T, E = CommError> = std::result::Result<T, E>;
