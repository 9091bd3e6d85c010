//! loom model checks of the slot-FIFO step protocol (`runtime::protocol`, `docs/protocol.md`):
//! the production `Fifo` code, instantiated with loom's atomics and cells, under every thread
//! interleaving loom explores. loom's cells fail the run on any read of a slot concurrent with a
//! write to it (a read of an unwritten slot, an overwrite of an unread one); the payload checks
//! catch lost or reordered messages; a run where no thread can progress fails as a deadlock.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p runtime --test loom --release`
#![cfg(loom)]
// loom's cells hand out raw pointers: the slot accessors below dereference them.
#![allow(unsafe_code)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use runtime::protocol::{Counter, Fifo, SlotMem, SLOT_HEADER};
use std::sync::atomic::Ordering;

struct LoomCounter(AtomicU64);

impl Counter for LoomCounter {
    fn load(&self, o: Ordering) -> u64 {
        self.0.load(o)
    }
    fn store(&self, v: u64, o: Ordering) {
        self.0.store(v, o)
    }
}

struct LoomMem {
    head: LoomCounter,
    tail: LoomCounter,
    slots: Vec<UnsafeCell<Vec<u8>>>,
}

const PAYLOAD: usize = 2;

impl LoomMem {
    fn new(n: u32) -> Self {
        LoomMem {
            head: LoomCounter(AtomicU64::new(0)),
            tail: LoomCounter(AtomicU64::new(0)),
            slots: (0..n)
                .map(|_| UnsafeCell::new(vec![0u8; SLOT_HEADER + PAYLOAD]))
                .collect(),
        }
    }
}

impl SlotMem for LoomMem {
    type C = LoomCounter;
    fn head(&self) -> &LoomCounter {
        &self.head
    }
    fn tail(&self) -> &LoomCounter {
        &self.tail
    }
    fn nslots(&self) -> u32 {
        self.slots.len() as u32
    }
    fn slot_bytes(&self) -> usize {
        SLOT_HEADER + PAYLOAD
    }
    fn with_slot_mut<R>(&self, slot: u32, f: impl FnOnce(&mut [u8]) -> R) -> R {
        // SAFETY: loom checks that no other access to this cell is concurrent.
        self.slots[slot as usize].with_mut(|p| f(unsafe { &mut *p }))
    }
    fn with_slot<R>(&self, slot: u32, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: as above.
        self.slots[slot as usize].with(|p| f(unsafe { &*p }))
    }
}

type F = Arc<Fifo<LoomMem>>;

fn fifo(slots: u32) -> F {
    Arc::new(Fifo::new(LoomMem::new(slots)))
}

/// Sends message `i` (payload `[i, i+100]`) when the slot is free; false if not.
fn try_send(f: &F, i: u8) -> bool {
    if !f.send_ready() {
        return false;
    }
    f.post(i as u64, PAYLOAD, |b| b.copy_from_slice(&[i, i + 100]))
        .unwrap();
    true
}

/// Receives the next message if published and checks it is message `want`.
fn try_recv(f: &F, want: u8) -> bool {
    if !f.recv_ready() {
        return false;
    }
    let (tag, data) = f.consume(|h, d| (h.tag, d.to_vec())).unwrap();
    assert_eq!(
        (tag, data),
        (want as u64, vec![want, want + 100]),
        "lost, torn or reordered message"
    );
    true
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// One sender, one receiver, more messages than slots (5 through 2): every message arrives intact and in
/// order, the sender never overwrites an unread slot, the receiver never reads an unwritten one.
#[test]
fn single_connection_wraps_around_the_slots() {
    model(|| {
        let f = fifo(2);
        let g = f.clone();
        let t = loom::thread::spawn(move || {
            for i in 0..5 {
                while !try_send(&g, i) {
                    loom::thread::yield_now();
                }
            }
        });
        for i in 0..5 {
            while !try_recv(&f, i) {
                loom::thread::yield_now();
            }
        }
        t.join().unwrap();
        assert_eq!((f.sent(), f.consumed()), (5, 5));
    });
}

/// Two ranks exchange three messages each over one-slot connections, each polling its send and
/// its receive like the executor does: no interleaving deadlocks.
#[test]
fn exchange_with_one_slot_never_deadlocks() {
    model(|| {
        let (ab, ba) = (fifo(1), fifo(1));
        let (ab2, ba2) = (ab.clone(), ba.clone());
        let rank = |out: F, inp: F| {
            let (mut s, mut r) = (0u8, 0u8);
            while s < 3 || r < 3 {
                let mut moved = false;
                if s < 3 && try_send(&out, s) {
                    s += 1;
                    moved = true;
                }
                if r < 3 && try_recv(&inp, r) {
                    r += 1;
                    moved = true;
                }
                if !moved {
                    loom::thread::yield_now();
                }
            }
        };
        let t = loom::thread::spawn(move || rank(ba2, ab2));
        rank(ab, ba);
        t.join().unwrap();
    });
}

/// A relay (A → B → C, one slot each) where B forwards from inside its consume, as the
/// executor's receive-and-send ops do: B's read slot and write slot never race, and A's next
/// message never overwrites the slot B is still forwarding from. A and C are one thread polling
/// both ends, like a rank's drive loop (three spinning threads exceed loom's branch budget).
#[test]
fn relay_forwards_inside_consume() {
    model(|| {
        let (ab, bc) = (fifo(1), fifo(1));
        let (ab2, bc2) = (ab.clone(), bc.clone());
        let b = loom::thread::spawn(move || {
            for i in 0..2u8 {
                while !(ab2.recv_ready() && bc2.send_ready()) {
                    loom::thread::yield_now();
                }
                ab2.consume(|h, d| {
                    assert_eq!(h.tag, i as u64);
                    bc2.post(h.tag, d.len(), |o| o.copy_from_slice(d)).unwrap();
                })
                .unwrap();
            }
        });
        let (mut s, mut r) = (0u8, 0u8);
        while s < 2 || r < 2 {
            let mut moved = false;
            if s < 2 && try_send(&ab, s) {
                s += 1;
                moved = true;
            }
            if r < 2 && try_recv(&bc, r) {
                r += 1;
                moved = true;
            }
            if !moved {
                loom::thread::yield_now();
            }
        }
        b.join().unwrap();
    });
}

/// A receiver that refuses a message (`consume_if` with `Err`: another call's) leaves it in its
/// slot: the sender never sees it taken (`all_taken`, what completes a send), cannot reuse the
/// slot, and the message is read intact when accepted later. Once the sender sees it taken,
/// the receiver is done with the slot, so the next message can be written into it.
#[test]
fn a_refused_message_stays_and_is_not_delivered() {
    model(|| {
        let f = fifo(1);
        let g = f.clone();
        let seen = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let seen2 = seen.clone();
        let t = loom::thread::spawn(move || {
            while !try_send(&g, 0) {
                loom::thread::yield_now();
            }
            while !g.all_taken() {
                loom::thread::yield_now();
            }
            seen2.store(true, Ordering::SeqCst);
            while !try_send(&g, 1) {
                loom::thread::yield_now();
            }
        });
        while !f.recv_ready() {
            loom::thread::yield_now();
        }
        let refused = f
            .consume_if(|h, d| Err::<(), _>((h.tag, d.to_vec())))
            .unwrap();
        assert_eq!(refused, Err((0, vec![0, 100])));
        assert_eq!(f.consumed(), 0, "a refused message was taken");
        assert!(
            !seen.load(Ordering::SeqCst),
            "the sender saw a refused message taken"
        );
        let got = f
            .consume_if(|h, d| Ok::<_, ()>((h.tag, d.to_vec())))
            .unwrap();
        assert_eq!(got, Ok((0, vec![0, 100])));
        while !try_recv(&f, 1) {
            loom::thread::yield_now();
        }
        t.join().unwrap();
        assert!(f.all_taken());
    });
}
