//! Errors of the C entry points: each becomes an `ncclResult_t` code and a message that
//! `ncclGetLastError` returns, prefixed with the call's name.

use crate::abi::*;
use runtime::bootstrap::BootstrapError;
use runtime::CommError;
use std::ffi::c_char;
use std::sync::Mutex;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    InvalidUsage(String),
    /// A peer died, left or never answered.
    #[error("{0}")]
    Remote(String),
    #[error("{0}")]
    System(String),
    #[error("{0}")]
    Cuda(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The same code with another message.
    pub fn reworded(&self, m: String) -> ApiError {
        match self {
            ApiError::InvalidArgument(_) => ApiError::InvalidArgument(m),
            ApiError::InvalidUsage(_) => ApiError::InvalidUsage(m),
            ApiError::Remote(_) => ApiError::Remote(m),
            ApiError::System(_) => ApiError::System(m),
            ApiError::Cuda(_) => ApiError::Cuda(m),
            ApiError::Internal(_) => ApiError::Internal(m),
        }
    }

    pub fn code(&self) -> NcclResult {
        match self {
            ApiError::InvalidArgument(_) => INVALID_ARGUMENT,
            ApiError::InvalidUsage(_) => INVALID_USAGE,
            ApiError::Remote(_) => REMOTE_ERROR,
            ApiError::System(_) => SYSTEM_ERROR,
            ApiError::Cuda(_) => UNHANDLED_CUDA_ERROR,
            ApiError::Internal(_) => INTERNAL_ERROR,
        }
    }
}

pub fn arg(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidArgument(msg.into())
}

pub fn usage(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidUsage(msg.into())
}

impl From<CommError> for ApiError {
    fn from(e: CommError) -> Self {
        let m = e.to_string();
        match e {
            CommError::InvalidArgument(_) => ApiError::InvalidArgument(m),
            CommError::Config(_) | CommError::Mismatch { .. } | CommError::Poisoned(_) => {
                ApiError::InvalidUsage(m)
            }
            CommError::Aborted { .. } => ApiError::InvalidUsage(m),
            CommError::Timeout { .. } | CommError::PeerGone { .. } => ApiError::Remote(m),
            CommError::Transport(_) => ApiError::System(m),
            CommError::Plan(_) => ApiError::Internal(m),
            CommError::Bootstrap(b) => b.into(),
        }
    }
}

impl From<BootstrapError> for ApiError {
    fn from(e: BootstrapError) -> Self {
        let m = e.to_string();
        match e {
            BootstrapError::Timeout { .. } | BootstrapError::Rejected(_) => ApiError::Remote(m),
            BootstrapError::Io { .. } | BootstrapError::AddressInUse { .. } => ApiError::System(m),
            _ => ApiError::InvalidUsage(m),
        }
    }
}

/// `ncclGetErrorString`'s texts (static, NUL-terminated).
pub fn error_string(code: NcclResult) -> &'static std::ffi::CStr {
    match code {
        SUCCESS => c"no error",
        UNHANDLED_CUDA_ERROR => {
            c"unhandled cuda error (run with NCCL_DEBUG=INFO or TOPOPLAN_DEBUG=INFO for details)"
        }
        SYSTEM_ERROR => c"unhandled system error (run with TOPOPLAN_DEBUG=INFO for details)",
        INTERNAL_ERROR => c"internal error - please report this issue to the topoplan developers",
        INVALID_ARGUMENT => c"invalid argument (run with TOPOPLAN_DEBUG=WARN for details)",
        INVALID_USAGE => c"invalid usage (run with TOPOPLAN_DEBUG=WARN for details)",
        REMOTE_ERROR => c"remote process exited or there was a network error",
        IN_PROGRESS => c"NCCL operation in progress",
        _ => c"unknown result code",
    }
}

/// Room for one message; longer ones are cut at a character boundary.
const MESSAGE_BYTES: usize = 2048;

/// A message buffer with a stable address, returned to C by `ncclGetLastError`.
pub struct MessageSlot(Mutex<Box<[u8; MESSAGE_BYTES]>>);

impl Default for MessageSlot {
    fn default() -> Self {
        MessageSlot(Mutex::new(Box::new([0; MESSAGE_BYTES])))
    }
}

impl MessageSlot {
    pub fn set(&self, msg: &str) {
        let mut cut = msg.len().min(MESSAGE_BYTES - 1);
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        b[..cut].copy_from_slice(&msg.as_bytes()[..cut]);
        b[cut] = 0;
    }

    pub fn get(&self) -> String {
        let b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let end = b.iter().position(|c| *c == 0).unwrap_or(0);
        String::from_utf8_lossy(&b[..end]).into_owned()
    }

    /// The buffer's address: stays valid as long as the slot (the boxed array never moves).
    pub fn as_ptr(&self) -> *const c_char {
        let b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        b.as_ptr() as *const c_char
    }
}

/// The process-wide last error (`ncclGetLastError(NULL)`), also kept per communicator.
pub fn global_last() -> &'static MessageSlot {
    static LAST: std::sync::OnceLock<MessageSlot> = std::sync::OnceLock::new();
    LAST.get_or_init(MessageSlot::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let s = MessageSlot::default();
        s.set("ncclAllReduce: root 3 is not below 2 ranks");
        assert_eq!(s.get(), "ncclAllReduce: root 3 is not below 2 ranks");
        let long = "é".repeat(MESSAGE_BYTES);
        s.set(&long);
        assert!(s.get().len() < MESSAGE_BYTES && s.get().chars().all(|c| c == 'é'));
    }

    #[test]
    fn runtime_errors_map_to_nccl_codes() {
        let gone = CommError::PeerGone {
            what: "all-reduce".into(),
            seq: 3,
            rank: 0,
            peer: 2,
            detail: "exited".into(),
        };
        let e: ApiError = gone.into();
        assert_eq!(e.code(), REMOTE_ERROR);
        assert!(e.to_string().contains("peer rank 2") && e.to_string().contains("#3"));
        let e: ApiError = CommError::InvalidArgument("x".into()).into();
        assert_eq!(e.code(), INVALID_ARGUMENT);
    }
}
