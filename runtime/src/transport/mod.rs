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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

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
    /// Whether the receiver has taken every message posted so far (a send is complete only
    /// then: until it is read, a message could still meet a receive it was not meant for).
    fn delivered(&self) -> PortResult<bool>;
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
    fn delivered(&self) -> PortResult<bool> {
        Ok(self.all_taken())
    }
}

impl<M: SlotMem + Send + Sync> RecvPort for Fifo<M> {
    fn ready(&self) -> PortResult<bool> {
        Ok(self.recv_ready())
    }
    fn consume(&self, f: &mut Consumer<'_>) -> Result<(), CommError> {
        Fifo::consume_if(self, f).map_err(|e| CommError::Transport(e.to_string()))?
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
    /// A counter that moves whenever a message or a free slot may have appeared for this rank
    /// (0 forever where the transport cannot tell).
    fn epoch(&self) -> u64 {
        0
    }
    /// Waits, after `idle` fruitless sweeps, until the epoch moves past `epoch` or a short while
    /// passes. The default sleeps (shared memory between processes has no doorbell).
    fn idle_wait(&self, _epoch: u64, idle: u32) {
        std::thread::sleep(Duration::from_micros(if idle < 4096 { 20 } else { 200 }));
    }
}

/// A doorbell: posters ring it, idle ranks sleep on it. Ringing costs an atomic load when
/// nobody sleeps.
#[derive(Debug, Default)]
pub struct Bell {
    epoch: Mutex<u64>,
    cv: Condvar,
    sleepers: AtomicU32,
    fast: AtomicU64,
}

impl Bell {
    pub fn epoch(&self) -> u64 {
        self.fast.load(Ordering::SeqCst)
    }
    // SeqCst on the two counters: ring (bump epoch, then read sleepers) and wait (bump sleepers,
    // then read epoch) form a Dekker pair; at least one side sees the other. A missed wake-up
    // would only cost the wait's timeout.
    pub fn ring(&self) {
        self.fast.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let mut e = self.epoch.lock().unwrap_or_else(|p| p.into_inner());
            *e += 1;
            self.cv.notify_all();
        }
    }
    /// Sleeps until a ring after `seen` was taken, or `max` passes.
    pub fn wait(&self, seen: u64, max: Duration) {
        let g = self.epoch.lock().unwrap_or_else(|p| p.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        // Checked under the lock: a ring after this point needs the lock to notify.
        if self.fast.load(Ordering::SeqCst) == seen {
            let _ = self.cv.wait_timeout(g, max);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}
