//! The step-synchronisation protocol: one slot FIFO per connection (channel, from, to), with a
//! `tail` counter the sender advances and a `head` counter the receiver advances. Specified in
//! `docs/protocol.md`; the CUDA backend mirrors it with device flags.
//!
//! Message `i` lives in slot `i % slots`. The sender may write message `i` once
//! `i < head + slots` (the slot's previous message, `i - slots`, has been consumed); it fills the
//! slot, then publishes with `tail = i + 1` (release). The receiver may read message `i` once
//! `tail > i` (acquire); it reads the slot, then frees it with `head = i + 1` (release). Each
//! counter has exactly one writer, so plain load/store (no read-modify-write) suffices, and the
//! release/acquire pairs order the slot's bytes: the receiver never reads a slot before the
//! sender's writes to it, the sender never overwrites a slot before the receiver's reads of it.
//!
//! Every call here is non-blocking: the executor polls readiness across all its channels and
//! waits (with a timeout and an abort flag) only when nothing can move. The protocol is generic
//! over its memory ([`SlotMem`]) and counter type ([`Counter`]), so the same code runs on heap
//! memory (threads), on shared-memory segments (processes) and inside the loom model tests
//! (`runtime/tests/loom.rs`), which instantiate it with loom's atomics and cells.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes at the start of every slot holding the message header (length, tag).
pub const SLOT_HEADER: usize = 64;

/// A counter with one writer; `std`'s `AtomicU64` in production, loom's in the model tests.
pub trait Counter {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
}

impl Counter for AtomicU64 {
    #[inline]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    #[inline]
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
}

/// The memory of one connection: two counters and `slots` slots of `slot_bytes` bytes each
/// (header included). Implementations give access to one slot at a time; the protocol
/// guarantees that the sender and the receiver never touch the same slot concurrently.
pub trait SlotMem {
    type C: Counter;
    fn head(&self) -> &Self::C;
    fn tail(&self) -> &Self::C;
    fn nslots(&self) -> u32;
    fn slot_bytes(&self) -> usize;
    fn with_slot_mut<R>(&self, slot: u32, f: impl FnOnce(&mut [u8]) -> R) -> R;
    fn with_slot<R>(&self, slot: u32, f: impl FnOnce(&[u8]) -> R) -> R;
    /// [`SlotMem::with_slot_mut`] for a message of `len` payload bytes: memory that grows on
    /// demand need hold only the header and those bytes.
    fn with_slot_mut_for<R>(&self, slot: u32, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let _ = len;
        self.with_slot_mut(slot, f)
    }
}

/// A message header as it travels in a slot: the payload length and a tag (the collective's
/// sequence number) that lets the receiver detect ranks that disagree about what they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: u64,
    pub tag: u64,
}

impl Header {
    fn write(&self, slot: &mut [u8]) {
        slot[0..8].copy_from_slice(&self.len.to_le_bytes());
        slot[8..16].copy_from_slice(&self.tag.to_le_bytes());
    }
    fn read(slot: &[u8]) -> Header {
        let word =
            |r: std::ops::Range<usize>| u64::from_le_bytes(slot[r].try_into().unwrap_or([0; 8]));
        Header {
            len: word(0..8),
            tag: word(8..16),
        }
    }
}

/// Errors the protocol itself detects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("message of {len} bytes does not fit a slot of {cap} bytes")]
    TooLarge { len: usize, cap: usize },
    #[error("slot header claims {len} bytes but a slot holds {cap}: corrupted shared memory?")]
    Corrupt { len: u64, cap: usize },
}

/// One connection's slot FIFO. Both ends hold the same `Fifo` (threads) or a mapping of the same
/// memory (processes); the sender calls only `send_*`/`post`, the receiver only `recv_*`/`consume`.
#[derive(Debug)]
pub struct Fifo<M: SlotMem> {
    pub mem: M,
}

impl<M: SlotMem> Fifo<M> {
    pub fn new(mem: M) -> Self {
        Fifo { mem }
    }

    /// Payload bytes one message may carry.
    pub fn capacity(&self) -> usize {
        self.mem.slot_bytes() - SLOT_HEADER
    }

    /// Index of the next message the sender will post (the tail; only the sender writes it).
    pub fn sent(&self) -> u64 {
        self.mem.tail().load(Ordering::Relaxed)
    }

    /// Index of the next message the receiver will consume (the head; only the receiver writes it).
    pub fn consumed(&self) -> u64 {
        self.mem.head().load(Ordering::Relaxed)
    }

    /// Sender: whether the next message's slot is free.
    pub fn send_ready(&self) -> bool {
        let i = self.sent();
        // Acquire: the receiver's reads of the slot happen before our writes to it.
        i < self.mem.head().load(Ordering::Acquire) + self.mem.nslots() as u64
    }

    /// Sender: fills the next slot with `len` bytes via `fill` and publishes it.
    /// Call only after `send_ready()` returned true.
    pub fn post(
        &self,
        tag: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), ProtocolError> {
        if len > self.capacity() {
            return Err(ProtocolError::TooLarge {
                len,
                cap: self.capacity(),
            });
        }
        let i = self.sent();
        debug_assert!(self.send_ready(), "post without a free slot");
        self.mem
            .with_slot_mut_for((i % self.mem.nslots() as u64) as u32, len, |slot| {
                Header {
                    len: len as u64,
                    tag,
                }
                .write(slot);
                fill(&mut slot[SLOT_HEADER..SLOT_HEADER + len]);
            });
        // Release: our slot writes happen before the receiver sees the new tail.
        self.mem.tail().store(i + 1, Ordering::Release);
        Ok(())
    }

    /// Sender: whether the receiver has consumed every message posted so far.
    pub fn all_taken(&self) -> bool {
        // Acquire: the receiver's reads of every slot happen before our caller goes on.
        self.mem.head().load(Ordering::Acquire) >= self.sent()
    }

    /// Receiver: whether the next message has been published.
    pub fn recv_ready(&self) -> bool {
        self.mem.tail().load(Ordering::Acquire) > self.consumed()
    }

    /// Receiver: hands the next message (header, payload) to `f`, then frees its slot.
    /// Call only after `recv_ready()` returned true.
    pub fn consume<R>(&self, f: impl FnOnce(Header, &[u8]) -> R) -> Result<R, ProtocolError> {
        let i = self.consumed();
        debug_assert!(self.recv_ready(), "consume of an unpublished slot");
        let cap = self.capacity();
        let r = self
            .mem
            .with_slot((i % self.mem.nslots() as u64) as u32, |slot| {
                let h = Header::read(slot);
                if h.len as usize > cap {
                    return Err(ProtocolError::Corrupt { len: h.len, cap });
                }
                Ok(f(h, &slot[SLOT_HEADER..SLOT_HEADER + h.len as usize]))
            })?;
        // Release: our reads of the slot happen before the sender may overwrite it.
        self.mem.head().store(i + 1, Ordering::Release);
        Ok(r)
    }

    /// Receiver: like [`Fifo::consume`], but frees the slot only when `f` accepts the message
    /// (`Ok`). A refused message (another call's, of another size) stays where it is, so its
    /// sender never sees it taken and no later receive mistakes the next message for it.
    pub fn consume_if<R, E>(
        &self,
        f: impl FnOnce(Header, &[u8]) -> Result<R, E>,
    ) -> Result<Result<R, E>, ProtocolError> {
        let i = self.consumed();
        debug_assert!(self.recv_ready(), "consume of an unpublished slot");
        let cap = self.capacity();
        let r = self
            .mem
            .with_slot((i % self.mem.nslots() as u64) as u32, |slot| {
                let h = Header::read(slot);
                if h.len as usize > cap {
                    return Err(ProtocolError::Corrupt { len: h.len, cap });
                }
                Ok(f(h, &slot[SLOT_HEADER..SLOT_HEADER + h.len as usize]))
            })?;
        if r.is_ok() {
            // Release: our reads of the slot happen before the sender may overwrite it.
            self.mem.head().store(i + 1, Ordering::Release);
        }
        Ok(r)
    }
}

/// Heap memory for a connection between two threads of one process. Each slot sits behind its
/// own (never contended, by the protocol) mutex, which keeps this path free of `unsafe`.
#[derive(Debug)]
pub struct HeapMem {
    head: AtomicU64,
    tail: AtomicU64,
    slot_bytes: usize,
    slots: Vec<std::sync::Mutex<Vec<u8>>>,
}

impl HeapMem {
    pub fn new(nslots: u32, slot_bytes: usize) -> Self {
        HeapMem {
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            slot_bytes,
            // Allocated lazily: a connection that never carries a big message stays small.
            slots: (0..nslots)
                .map(|_| std::sync::Mutex::new(Vec::new()))
                .collect(),
        }
    }
}

impl SlotMem for HeapMem {
    type C = AtomicU64;
    fn head(&self) -> &AtomicU64 {
        &self.head
    }
    fn tail(&self) -> &AtomicU64 {
        &self.tail
    }
    fn nslots(&self) -> u32 {
        self.slots.len() as u32
    }
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }
    fn with_slot_mut<R>(&self, slot: u32, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.with_slot_mut_for(slot, self.slot_bytes - SLOT_HEADER, f)
    }
    fn with_slot_mut_for<R>(&self, slot: u32, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut g = self.slots[slot as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Grown to the largest message it carried, never to the whole slot up front: with a
        // connection between every pair of ranks (agreement), small messages must stay small.
        let need = (SLOT_HEADER + len).min(self.slot_bytes);
        if g.len() < need {
            g.resize(need, 0);
        }
        f(&mut g)
    }
    fn with_slot<R>(&self, slot: u32, f: impl FnOnce(&[u8]) -> R) -> R {
        let g = self.slots[slot as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f(&g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that carries only small messages (agreement connects every pair of ranks)
    /// holds small slots, not `slot_bytes` each.
    #[test]
    fn heap_slots_grow_to_the_largest_message_only() {
        let f = Fifo::new(HeapMem::new(2, SLOT_HEADER + (1 << 20)));
        f.post(1, 38, |b| b.fill(7)).unwrap();
        assert_eq!(f.consume(|_, d| d.to_vec()).unwrap(), vec![7; 38]);
        let held: usize = f.mem.slots.iter().map(|s| s.lock().unwrap().len()).sum();
        assert_eq!(held, SLOT_HEADER + 38);
        f.post(2, 1000, |b| b.fill(9)).unwrap();
        assert_eq!(f.consume(|_, d| d.len()).unwrap(), 1000);
    }

    #[test]
    fn fifo_respects_slots_and_order() {
        let f = Fifo::new(HeapMem::new(2, SLOT_HEADER + 8));
        assert!(!f.recv_ready());
        for i in 0..2u8 {
            assert!(f.send_ready());
            f.post(7, 1, |b| b[0] = i).unwrap();
        }
        assert!(!f.send_ready(), "both slots full");
        assert_eq!(
            f.consume(|h, d| (h, d.to_vec())).unwrap(),
            (Header { len: 1, tag: 7 }, vec![0])
        );
        assert!(f.send_ready());
        f.post(8, 3, |b| b.copy_from_slice(&[5, 6, 7])).unwrap();
        assert_eq!(f.consume(|_, d| d.to_vec()).unwrap(), vec![1]);
        assert_eq!(
            f.consume(|h, d| (h.tag, d.to_vec())).unwrap(),
            (8, vec![5, 6, 7])
        );
        assert!(!f.recv_ready());
        assert_eq!(
            f.post(0, 9, |_| ()),
            Err(ProtocolError::TooLarge { len: 9, cap: 8 })
        );
    }
}
