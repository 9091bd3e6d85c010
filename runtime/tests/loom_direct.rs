//! loom model checks of the direct path's slot protocol (`runtime::cuda::direct::protocol`, the
//! rules `kernels/src/direct.cu` follows): a sender CTA and a receiver CTA of two GPUs, sequence
//! numbers persisting across calls, under every interleaving loom explores. loom's cells fail a
//! run on any read of a slot concurrent with a write to it; payload checks catch lost or stale
//! data; a run where no thread can progress fails as a deadlock. The `should_panic` models break
//! one rule each and show the checks can fail. The hand-backs are release stores here; the kernel
//! stores them relaxed after a CTA barrier (see `direct::protocol`'s module doc).
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p runtime --test loom_direct --release`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use runtime::cuda::direct::protocol::{ll_line, ll_ready, may_read, may_write, progress, slot};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn spin(mut ok: impl FnMut() -> bool) {
    while !ok() {
        loom::thread::yield_now();
    }
}

/// One direction of a Simple flow: the receiver's slots and `ready` word, the sender's
/// `credit` word.
struct Simple {
    slots: Vec<UnsafeCell<u64>>,
    ready: AtomicU64,
    credit: AtomicU64,
}

const CALLS: u64 = 2;
const SEGS: u64 = 2;

fn payload(call: u64, seg: u64) -> u64 {
    100 * call + seg
}

/// Sender CTA over `CALLS` calls of `SEGS` segments; `respect_credit: false` breaks the rule.
fn simple_sender(f: &Simple, nslots: u32, respect_credit: bool) {
    let mut sent = 0u64; // TD_SENT: persists across calls in device memory
    for call in 1..=CALLS {
        for seg in 0..SEGS {
            let q = sent + seg + 1;
            if respect_credit {
                spin(|| may_write(f.credit.load(Acquire), q, nslots));
            }
            let s = slot(q, nslots) as usize;
            // SAFETY: loom checks that no access to this cell is concurrent.
            f.slots[s].with_mut(|p| unsafe { *p = payload(call, seg) });
            f.ready.store(q, Release); // fence, then st.release of the ready word
        }
        sent += SEGS;
    }
}

fn simple_receiver(f: &Simple, nslots: u32) {
    let mut recvd = 0u64; // TD_RECVD
    for call in 1..=CALLS {
        for seg in 0..SEGS {
            let q = recvd + seg + 1;
            spin(|| may_read(f.ready.load(Acquire), q));
            let s = slot(q, nslots) as usize;
            // SAFETY: as above.
            let v = f.slots[s].with(|p| unsafe { *p });
            assert_eq!(v, payload(call, seg), "stale or lost segment {q}");
            f.credit.store(q, Release);
        }
        recvd += SEGS;
    }
}

fn simple(nslots: u32) -> Arc<Simple> {
    Arc::new(Simple {
        slots: (0..nslots).map(|_| UnsafeCell::new(0)).collect(),
        ready: AtomicU64::new(0),
        credit: AtomicU64::new(0),
    })
}

/// A one-way Simple flow (broadcast's shape: the receiver never sends back) over two calls with
/// more segments than slots: no slot is overwritten before it is read, none read before written.
#[test]
fn simple_one_way_flow_recycles_slots_only_after_credit() {
    model(|| {
        let f = simple(1);
        let g = f.clone();
        let t = loom::thread::spawn(move || simple_sender(&g, 1, true));
        simple_receiver(&f, 1);
        t.join().unwrap();
    });
}

#[test]
fn simple_two_slots_across_calls() {
    model(|| {
        let f = simple(2);
        let g = f.clone();
        let t = loom::thread::spawn(move || simple_sender(&g, 2, true));
        simple_receiver(&f, 2);
        t.join().unwrap();
    });
}

#[test]
#[should_panic(expected = "Causality violation")]
fn a_sender_ignoring_credits_is_caught() {
    model(|| {
        let f = simple(1);
        let g = f.clone();
        let t = loom::thread::spawn(move || simple_sender(&g, 1, false));
        simple_receiver(&f, 1);
        t.join().unwrap();
    });
}

/// LL: the sequence number travels with the data in one store, so there is no ready word; a
/// stale line (older sequence number, or the zeroed buffer) is never mistaken for new data.
struct Ll {
    lines: Vec<AtomicU64>,
    credit: AtomicU64,
}

fn ll_sender(f: &Ll, nslots: u32) {
    let mut sent = 0u64;
    for call in 1..=CALLS {
        for seg in 0..SEGS {
            let q = sent + seg + 1;
            spin(|| may_write(f.credit.load(Acquire), q, nslots));
            let s = slot(q, nslots) as usize;
            f.lines[s].store(ll_line(q, payload(call, seg) as u32), Relaxed);
        }
        sent += SEGS;
    }
}

fn ll_receiver(f: &Ll, nslots: u32) {
    let mut recvd = 0u64;
    for call in 1..=CALLS {
        for seg in 0..SEGS {
            let q = recvd + seg + 1;
            let s = slot(q, nslots) as usize;
            let mut got = None;
            spin(|| {
                got = ll_ready(f.lines[s].load(Relaxed), q);
                got.is_some()
            });
            assert_eq!(got, Some(payload(call, seg) as u32), "LL segment {q}");
            f.credit.store(q, Release);
        }
        recvd += SEGS;
    }
}

#[test]
fn ll_lines_carry_their_own_readiness() {
    model(|| {
        let f = Arc::new(Ll {
            lines: (0..1).map(|_| AtomicU64::new(0)).collect(),
            credit: AtomicU64::new(0),
        });
        let g = f.clone();
        let t = loom::thread::spawn(move || ll_sender(&g, 1));
        ll_receiver(&f, 1);
        t.join().unwrap();
    });
}

/// In place: the receiver CTA overwrites input its own rank's sender CTA still pushes; it waits
/// for the sender's progress word. Two calls, each a kernel: both CTAs of call 1 finish before
/// call 2 starts (stream order), and each keeps its own call counter (TD_SCALLS / TD_RCALLS).
struct InPlace {
    input: Vec<UnsafeCell<u64>>,
    progress: AtomicU64,
}

fn in_place_call(f: &Arc<InPlace>, call: u64, guard: bool) {
    let g = f.clone();
    let sender = loom::thread::spawn(move || {
        for seg in 0..SEGS {
            // SAFETY: loom checks that no access to this cell is concurrent.
            let v = g.input[seg as usize].with(|p| unsafe { *p });
            assert_eq!(
                v,
                payload(call, seg),
                "pushed a segment already overwritten"
            );
            g.progress.store(progress(call, seg + 1), Release);
        }
    });
    for seg in 0..SEGS {
        if guard {
            spin(|| f.progress.load(Acquire) >= progress(call, seg + 1));
        }
        // SAFETY: as above. The result of this call is next call's input.
        f.input[seg as usize].with_mut(|p| unsafe { *p = payload(call + 1, seg) });
    }
    sender.join().unwrap();
}

#[test]
fn in_place_receiver_waits_for_its_own_sender() {
    model(|| {
        let f = Arc::new(InPlace {
            input: (0..SEGS).map(|s| UnsafeCell::new(payload(1, s))).collect(),
            progress: AtomicU64::new(0),
        });
        for call in 1..=CALLS {
            in_place_call(&f, call, true);
        }
    });
}

#[test]
#[should_panic(expected = "Causality violation")]
fn an_unguarded_in_place_receiver_is_caught() {
    model(|| {
        let f = Arc::new(InPlace {
            input: (0..SEGS).map(|s| UnsafeCell::new(payload(1, s))).collect(),
            progress: AtomicU64::new(0),
        });
        in_place_call(&f, 1, false);
    });
}
