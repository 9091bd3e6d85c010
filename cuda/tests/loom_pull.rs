//! loom model checks of the direct path's pull mode (`cuda::direct::protocol`'s pull
//! functions, the rules `cuda/kernels/direct_pull.cu` follows): CTA b of two ranks, each a thread,
//! over two consecutive calls of a one-shot all-reduce, call counters persisting across calls.
//! Each rank publishes `arrive`, loads the peer's input straight from the peer's memory once the
//! peer arrived, adds its own and stores the result, publishing `done` words to the peer. Out of
//! place, each rank's caller overwrites its input between calls; in place, the result lands on
//! the input the peer reads, pass by pass (two passes of one element each), and is the next
//! call's input. loom's cells fail a run on any load of an input concurrent with a store to it;
//! the value checks catch a stale or already overwritten input; a run where no thread can
//! progress fails. The `should_panic` models drop one wait each and show the checks can fail.
//! `arrive` and `done` are release stores here; the kernel stores them relaxed at system scope:
//! the input `arrive` announces was written by work that finished before the kernel passed
//! `griddepcontrol.wait`, and `done` follows a CTA barrier that every peer load of the pass
//! (in place, through the barrier's predicate, which depends on every loaded value) or of the
//! call precedes (see `direct::protocol`'s module doc). loom cannot model those hand-offs.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cuda --test loom_pull --release`
#![cfg(loom)]

use cuda::direct::protocol::{
    pull_done_all, pull_done_mark, pull_may_end, pull_may_overwrite, pull_may_read,
};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Release};

const CALLS: u64 = 2;
/// Passes of a CTA's share, one element each (in place, the guard works pass by pass).
const PASSES: u64 = 2;

/// `preemptions`: 3 as in the other loom models where that stays fast; the in-place models take
/// about 40 s each with 3 (release build), so they run with 2.
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(f);
}

fn spin(mut ok: impl FnMut() -> bool) {
    while !ok() {
        loom::thread::yield_now();
    }
}

/// One rank's device memory: its input (in place also its output), its output (out of place),
/// and CTA b's pull words in its flag region, both written by the peer: `arrive` (the peer as
/// sender) and `done` (the peer as reader of this rank's input).
struct Rank {
    input: Vec<UnsafeCell<u64>>,
    output: Vec<UnsafeCell<u64>>,
    arrive: AtomicU64,
    done: AtomicU64,
}

#[derive(Clone, Copy)]
struct Rules {
    /// The output is the input (`TD_INPLACE`).
    in_place: bool,
    /// Between calls, each rank's caller writes fresh values into its input.
    caller_writes: bool,
    /// The reader waits for the sender's `arrive` before loading ([`pull_may_read`]).
    arrive: bool,
    /// In place: pass p's results wait for the reader's `done` of pass p
    /// ([`pull_may_overwrite`]).
    pass: bool,
    /// Out of place: the call ends once the reader's `done` says all read ([`pull_may_end`]).
    end: bool,
}

const OUT_OF_PLACE: Rules = Rules {
    in_place: false,
    caller_writes: true,
    arrive: true,
    pass: false,
    end: true,
};

const IN_PLACE: Rules = Rules {
    in_place: true,
    caller_writes: false,
    arrive: true,
    pass: true,
    end: false,
};

/// Rank `r`'s input to call `call`, element `p`: the caller's values, or in place without them
/// the previous call's result.
fn input(rules: Rules, r: u64, call: u64, p: u64) -> u64 {
    if call == 1 || rules.caller_writes {
        100 * call + 10 * (r + 1) + p
    } else {
        expected(rules, call - 1, p)
    }
}

/// The all-reduce's result of call `call`, element `p`, on both ranks.
fn expected(rules: Rules, call: u64, p: u64) -> u64 {
    input(rules, 0, call, p) + input(rules, 1, call, p)
}

fn rank(r: u64, rules: Rules) -> Rank {
    Rank {
        input: (0..PASSES)
            .map(|p| UnsafeCell::new(input(rules, r, 1, p)))
            .collect(),
        output: (0..PASSES).map(|_| UnsafeCell::new(0)).collect(),
        arrive: AtomicU64::new(0),
        done: AtomicU64::new(0),
    }
}

/// Publishes a `done` word into the sender's flags; checks that it only grows.
fn publish_done(w: &AtomicU64, v: u64, last: &mut u64) {
    assert!(v > *last, "done word went back from {last:#x} to {v:#x}");
    *last = v;
    w.store(v, Release);
}

/// Rank `r`'s CTA b over `CALLS` calls (each a kernel, in stream order), then its caller.
fn pull_rank(me: &Rank, peer: &Rank, r: u64, rules: Rules) {
    let mut calls = 0u64; // TD_PULL_CALLS(b): persists across calls in device memory
    let mut last_done = 0u64;
    for _ in 0..CALLS {
        let call = calls + 1;
        peer.arrive.store(call, Release); // arrive[r][b] in the peer's flags
        if rules.arrive {
            spin(|| pull_may_read(me.arrive.load(Acquire), call));
        }
        for p in 0..PASSES {
            let i = p as usize;
            // SAFETY: loom checks that no access to these cells is concurrent.
            let own = me.input[i].with(|x| unsafe { *x });
            let theirs = peer.input[i].with(|x| unsafe { *x });
            assert_eq!(
                theirs,
                input(rules, 1 - r, call, p),
                "rank {r} read a stale or overwritten input in call {call}, pass {p}"
            );
            let sum = own + theirs;
            if rules.in_place {
                publish_done(&peer.done, pull_done_mark(call, p + 1), &mut last_done);
                if rules.pass {
                    spin(|| pull_may_overwrite(me.done.load(Acquire), call, p));
                }
                // SAFETY: as above. The result overwrites the input the peer reads.
                me.input[i].with_mut(|x| unsafe { *x = sum });
            } else {
                // SAFETY: as above.
                me.output[i].with_mut(|x| unsafe { *x = sum });
            }
        }
        publish_done(&peer.done, pull_done_all(call), &mut last_done);
        if !rules.in_place && rules.end {
            spin(|| pull_may_end(me.done.load(Acquire), call));
        }
        calls = call;
        // The caller, after the call: reads the results, then may write the next call's input.
        let out = if rules.in_place {
            &me.input
        } else {
            &me.output
        };
        for p in 0..PASSES {
            // SAFETY: as above.
            let v = out[p as usize].with(|x| unsafe { *x });
            assert_eq!(
                v,
                expected(rules, call, p),
                "rank {r}, call {call}, pass {p}"
            );
        }
        if rules.caller_writes && call < CALLS {
            for p in 0..PASSES {
                let v = input(rules, r, call + 1, p);
                // SAFETY: as above.
                me.input[p as usize].with_mut(|x| unsafe { *x = v });
            }
        }
    }
}

fn run(rules: Rules) {
    model(if rules.in_place { 2 } else { 3 }, move || {
        let a = Arc::new(rank(0, rules));
        let b = Arc::new(rank(1, rules));
        let t = {
            let (a, b) = (a.clone(), b.clone());
            loom::thread::spawn(move || pull_rank(&b, &a, 1, rules))
        };
        pull_rank(&a, &b, 0, rules);
        t.join().unwrap();
    });
}

/// Out of place, two calls with fresh inputs between them: no input is read before its call's
/// values are there, none is overwritten by the caller while the peer still reads it.
#[test]
fn out_of_place_inputs_are_read_before_the_caller_overwrites_them() {
    run(OUT_OF_PLACE);
}

/// In place, two calls of two passes: no rank overwrites an input pass its peer has not read,
/// and each call reads the previous call's results.
#[test]
fn in_place_passes_wait_for_the_peer_read() {
    run(IN_PLACE);
}

/// In place the call ends without waiting for the reader: every pass already waited, so the
/// caller may overwrite the input at once.
#[test]
fn in_place_caller_may_overwrite_after_the_call() {
    run(Rules {
        caller_writes: true,
        ..IN_PLACE
    });
}

#[test]
#[should_panic(expected = "Causality violation")]
fn in_place_without_the_pass_wait_is_caught() {
    run(Rules {
        pass: false,
        ..IN_PLACE
    });
}

#[test]
#[should_panic(expected = "Causality violation")]
fn out_of_place_without_the_end_wait_is_caught() {
    run(Rules {
        end: false,
        ..OUT_OF_PLACE
    });
}

/// Caught by the value check: loom's first failing interleaving has the reader load the peer's
/// previous input before the peer's caller overwrote it (so not a concurrent access).
#[test]
#[should_panic(expected = "read a stale or overwritten input")]
fn a_reader_ignoring_arrive_is_caught() {
    run(Rules {
        arrive: false,
        ..OUT_OF_PLACE
    });
}
