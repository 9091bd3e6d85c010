//! loom model checks of the copy-engine pair all-reduce's counter protocol
//! (`cuda::ce_pair::protocol`, the rules `ce_pair::enqueue` issues as stream memory
//! operations), one direction of it: rank A's copy stream pushes A's input chunks into rank B's
//! scratch slot and bumps B's `LANDED`; B's copy stream pushes B's input out and bumps B's
//! `PUSHED`; B's compute stream waits for both, reduces in place into B's input and bumps A's
//! `FREED`, which A's copy stream waits for before refilling the slot. Two in-place calls, more
//! chunks than slots; B's copy stream of call 2 starts after B's compute stream finished call 1
//! (the fork from the caller's stream). The other direction is the mirror image. A stream is a
//! thread; a counter is a mutex-guarded word with a condition variable, so a write is a release
//! (the stream write's fence) and a wait blocks until the value is reached, then acquires (the
//! front end's semaphore wait; blocking instead of spinning keeps loom's search finite).
//! loom's cells fail a run on any concurrent access to a slot or an input chunk; the value checks
//! catch lost or stale data; a run where no thread can progress fails. The `should_panic` models
//! each drop one wait and show the checks can fail.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cuda --test loom_ce_pair --release`
#![cfg(loom)]

use cuda::ce_pair::protocol::{may_refill, slot, stream_of};
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};

const SLOTS: u64 = 1;
/// Chunks per call, more than slots: every chunk after the first refills the slot.
const CHUNKS: u64 = 2;
const CALLS: u64 = 2;
const STREAMS: u64 = 1;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// A counter word in device memory that only grows, with the stream operations on it.
struct Counter {
    v: Mutex<u64>,
    cv: Condvar,
}

impl Counter {
    fn new() -> Self {
        Self {
            v: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    /// `cuStreamWriteValue64`: after the stream's prior work, `*addr = v`.
    fn store(&self, v: u64) {
        *self.v.lock().unwrap() = v;
        self.cv.notify_all();
    }

    /// `cuStreamWaitValue64`: the stream's later work waits until `ok(*addr)`.
    fn wait(&self, ok: impl Fn(u64) -> bool) {
        let mut g = self.v.lock().unwrap();
        while !ok(*g) {
            g = self.cv.wait(g).unwrap();
        }
    }
}

/// One rank's device memory: its input (= output, in place), its scratch ring, its flag words,
/// and how many calls its compute stream finished (the event the next call's copy stream forks
/// from on the caller's stream).
struct Rank {
    input: Vec<UnsafeCell<u64>>,
    scratch: Vec<UnsafeCell<u64>>,
    freed: Counter,
    landed: Counter,
    pushed: Counter,
    calls_done: Counter,
}

fn rank(r: u64) -> Rank {
    Rank {
        input: (0..CHUNKS)
            .map(|k| UnsafeCell::new(10 * r + k + 1))
            .collect(),
        scratch: (0..SLOTS).map(|_| UnsafeCell::new(0)).collect(),
        freed: Counter::new(),
        landed: Counter::new(),
        pushed: Counter::new(),
        calls_done: Counter::new(),
    }
}

#[derive(Clone, Copy)]
struct Rules {
    /// A's copy stream waits for A's FREED (B reduced the slot's last chunk) before refilling.
    refill: bool,
    /// B's compute stream waits for B's PUSHED before overwriting B's input chunk.
    pushed: bool,
}

const SOUND: Rules = Rules {
    refill: true,
    pushed: true,
};

/// A copy stream: reads `me`'s chunks and pushes them into `peer`'s slot (`None`: a peer this
/// one-way model never reads, so only `PUSHED` matters); `fork`: each call starts after `me`'s
/// compute stream finished the previous one; `refill`: waits for `me.freed` per `may_refill`.
fn copy_stream(me: &Rank, peer: Option<&Rank>, fork: bool, refill: bool) {
    for call in 1..=CALLS {
        if fork {
            me.calls_done.wait(|d| d >= call - 1);
        }
        for k in 0..CHUNKS {
            let c = (call - 1) * CHUNKS + k;
            if refill {
                me.freed.wait(|f| may_refill(f, c, SLOTS));
            }
            // SAFETY: loom checks that no access to these cells is concurrent.
            let v = me.input[k as usize].with(|p| unsafe { *p });
            let (_, nth) = stream_of(c, STREAMS);
            if let Some(peer) = peer {
                peer.scratch[slot(c, SLOTS) as usize].with_mut(|p| unsafe { *p = v });
                peer.landed.store(nth);
            }
            me.pushed.store(nth);
        }
    }
}

/// B's compute stream: reduces A's chunk (in B's scratch) into B's input, in place.
fn compute_stream(me: &Rank, peer: &Rank, rules: Rules, a_input: &[u64]) {
    for call in 1..=CALLS {
        for k in 0..CHUNKS {
            let c = (call - 1) * CHUNKS + k;
            let (_, nth) = stream_of(c, STREAMS);
            me.landed.wait(|l| l >= nth);
            if rules.pushed {
                me.pushed.wait(|p| p >= nth);
            }
            // SAFETY: as above.
            let theirs = me.scratch[slot(c, SLOTS) as usize].with(|p| unsafe { *p });
            assert_eq!(theirs, a_input[k as usize], "stale chunk {c}");
            let sum = me.input[k as usize].with_mut(|p| unsafe {
                *p += theirs;
                *p
            });
            // B's chunk k after `call` reductions of A's unchanging chunk k into it.
            assert_eq!(sum, 10 + k + 1 + call * (k + 1), "chunk {k} of call {call}");
            peer.freed.store(c + 1);
        }
        me.calls_done.store(call);
    }
}

fn run(rules: Rules) {
    model(move || {
        let a = Arc::new(rank(0));
        let b = Arc::new(rank(1));
        let a_input: Vec<u64> = (0..CHUNKS).map(|k| k + 1).collect();
        let ta = {
            let (a, b) = (a.clone(), b.clone());
            loom::thread::spawn(move || copy_stream(&a, Some(&b), false, rules.refill))
        };
        let tb = {
            let b = b.clone();
            // B's pushes go to A's scratch, which this one-way model never reads.
            loom::thread::spawn(move || copy_stream(&b, None, true, false))
        };
        compute_stream(&b, &a, rules, &a_input);
        ta.join().unwrap();
        tb.join().unwrap();
    });
}

/// Two in-place calls through one slot: every chunk lands before it is reduced, no slot is
/// refilled before it is read, no input chunk is overwritten before it is pushed.
#[test]
fn pair_protocol_is_race_free_across_calls() {
    run(SOUND);
}

/// Refilling the slot early is caught by the value check: loom's first failing interleaving has
/// A's next chunk land before B read the previous one (in order, so not a concurrent access).
#[test]
#[should_panic(expected = "stale chunk")]
fn a_copy_stream_ignoring_freed_is_caught() {
    run(Rules {
        refill: false,
        ..SOUND
    });
}

#[test]
#[should_panic(expected = "Causality violation")]
fn a_compute_stream_ignoring_pushed_is_caught() {
    run(Rules {
        pushed: false,
        ..SOUND
    });
}
