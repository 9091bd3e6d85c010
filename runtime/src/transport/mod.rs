//! Transports give the executor the two ends of a connection `(channel, from, to)`: a
//! [`SendPort`] on `from`, a [`RecvPort`] on `to`. All of them speak the slot-FIFO protocol of
//! [`crate::protocol`]:
//! - [`local`]: ranks as threads of one process; the FIFO lives on the heap, shared by `Arc`;
//! - [`shm`]: ranks as processes of one host; the FIFO lives in a shared-memory segment;
//! - [`tcp`]: ranks on different hosts; the receiver keeps the FIFO in its memory, the sender
//!   streams messages into it over a socket, and `head` travels back as credit messages.

pub mod local;
pub mod shm;
pub mod tcp;

use crate::error::CommError;
use crate::protocol::{Fifo, Header, SlotMem};
use std::sync::Arc;

/// Channel number of the point-to-point connections used by grouped `send`/`recv`.
pub const P2P_CHANNEL: u32 = u32::MAX;

/// Why a port could not be used; the executor wraps it with the collective's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortError {
    /// The connection to the peer is closed or broken.
    Gone(String),
    /// The peer sent something the protocol does not allow.
    Protocol(String),
}

pub type PortResult<T> = Result<T, PortError>;

/// The sending end of a connection.
pub trait SendPort: Send + Sync {
    /// Whether the next message's slot is free.
    fn ready(&self) -> PortResult<bool>;
    /// Fills and publishes the next message; only after `ready()` returned true.
    fn post(&self, tag: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> PortResult<()>;
    /// Payload bytes one message may carry.
    fn capacity(&self) -> usize;
}

/// What a receiver does with a message (header, payload).
pub type Consumer<'a> = dyn FnMut(Header, &[u8]) -> Result<(), CommError> + 'a;

/// The receiving end of a connection.
pub trait RecvPort: Send + Sync {
    /// Whether the next message has arrived.
    fn ready(&self) -> PortResult<bool>;
    /// Hands the next message to `f` and frees its slot; only after `ready()` returned true.
    fn consume(&self, f: &mut Consumer<'_>) -> Result<(), CommError>;
}

impl<M: SlotMem + Send + Sync> SendPort for Fifo<M> {
    fn ready(&self) -> PortResult<bool> {
        Ok(self.send_ready())
    }
    fn post(&self, tag: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> PortResult<()> {
        Fifo::post(self, tag, len, fill).map_err(|e| PortError::Protocol(e.to_string()))
    }
    fn capacity(&self) -> usize {
        Fifo::capacity(self)
    }
}

impl<M: SlotMem + Send + Sync> RecvPort for Fifo<M> {
    fn ready(&self) -> PortResult<bool> {
        Ok(self.recv_ready())
    }
    fn consume(&self, f: &mut Consumer<'_>) -> Result<(), CommError> {
        Fifo::consume(self, f).map_err(|e| CommError::Transport(e.to_string()))?
    }
}

/// What a communicator needs from its transport.
pub trait Transport: Send {
    /// Short name for messages (`threads`, `shm`, `tcp`, `shm+tcp`).
    fn name(&self) -> &'static str;
    fn send_port(&mut self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError>;
    fn recv_port(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError>;
    /// Cheap liveness check of a peer the executor has been waiting on for a while.
    fn check_peer(&self, _peer: u32) -> PortResult<()> {
        Ok(())
    }
}
