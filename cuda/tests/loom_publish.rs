//! loom model checks of how a Simple sender CTA publishes a segment (`td_simple_send` in
//! `cuda/kernels/direct.cu`): many threads store or load the data, one thread publishes a word.
//!
//! - Ready word: the threads push their parts of
//!   the segment, meet at the CTA barrier, and only thread 0 fences (system scope) and then
//!   stores the ready word relaxed. The fence comes after the barrier, so the other threads'
//!   stores, ordered before it by the barrier, are published by it (fences are cumulative).
//! - Progress word (in place): the threads load the input the receiver will overwrite, meet at
//!   the barrier, and thread 0 stores the word with a GPU-scope release.
//!
//! The CTA barrier (`bar.sync`) is modelled as thread 0 joining the CTA's other threads (it
//! orders their work before thread 0's next steps, and only thread 0 acts after it);
//! `__threadfence_system()` as a release fence (all the publication needs). The
//! `should_panic` models move the fence before the barrier, or drop the release, and loom
//! catches the receiver reading (or overwriting) a cell concurrently with a thread's access.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cuda --test loom_publish --release`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicU64};
use loom::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Threads of the sender CTA in the model (thread 0 publishes).
const THREADS: usize = 2;

/// What the ready-word models get wrong on purpose.
#[derive(Clone, Copy, PartialEq)]
enum Fence {
    /// Thread 0 fences after the barrier (what `td_simple_send` in direct.cu does).
    AfterBarrier,
    /// Every thread fences before the barrier (worked on the hardware; no model promises it).
    EveryThreadBefore,
    /// Broken: only thread 0 fences, and before the barrier.
    OnlyThreadZeroBefore,
}

struct Segment {
    /// The receiver's slot, one cell per sender thread's part.
    slot: Vec<UnsafeCell<u64>>,
    ready: AtomicU64,
}

fn spin(mut ok: impl FnMut() -> bool) {
    while !ok() {
        loom::thread::yield_now();
    }
}

/// The sender CTA: thread 0 starts the other threads, each pushes its part (and fences, for
/// `EveryThreadBefore`); thread 0 joins them, which orders their work before whatever it does
/// next as `bar.sync` does, then publishes.
fn sender_cta(s: &Arc<Segment>, how: Fence) {
    let push = move |s: &Segment, t: usize| {
        // SAFETY: loom checks that no access to this cell is concurrent.
        s.slot[t].with_mut(|p| unsafe { *p = 100 + t as u64 });
        if how == Fence::EveryThreadBefore || (how == Fence::OnlyThreadZeroBefore && t == 0) {
            fence(Release);
        }
    };
    let others: Vec<_> = (1..THREADS)
        .map(|t| {
            let s = s.clone();
            loom::thread::spawn(move || push(&s, t))
        })
        .collect();
    push(s, 0);
    for h in others {
        h.join().unwrap(); // the barrier
    }
    if how == Fence::AfterBarrier {
        fence(Release);
    }
    s.ready.store(1, Relaxed);
}

fn ready_word(how: Fence) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        let s = Arc::new(Segment {
            slot: (0..THREADS).map(|_| UnsafeCell::new(0)).collect(),
            ready: AtomicU64::new(0),
        });
        let cta = {
            let s = s.clone();
            loom::thread::spawn(move || sender_cta(&s, how))
        };
        spin(|| s.ready.load(Acquire) == 1);
        for (t, cell) in s.slot.iter().enumerate() {
            // SAFETY: as above.
            let v = cell.with(|p| unsafe { *p });
            assert_eq!(v, 100 + t as u64, "the receiver read a part not yet pushed");
        }
        cta.join().unwrap();
    });
}

#[test]
fn one_fence_after_the_barrier_publishes_every_threads_stores() {
    ready_word(Fence::AfterBarrier);
}

/// The earlier pattern, every thread fencing before the barrier. It ran correctly on the GPU (0 wrong in every check): there a
/// thread's fence returns only once its stores are performed. A memory model promises less: a
/// fence publishes what precedes it to whoever reads a store that follows it in the same thread,
/// and the other threads' fences are followed by no store of the flag.
#[test]
#[should_panic(expected = "Causality violation")]
fn every_thread_fencing_before_the_barrier_is_not_enough_for_the_cpp_model() {
    ready_word(Fence::EveryThreadBefore);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn one_fence_before_the_barrier_is_caught() {
    ready_word(Fence::OnlyThreadZeroBefore);
}

/// In place: the sender threads load their parts of the input; the receiver CTA overwrites
/// them once thread 0's progress word says the loads are done.
struct Input {
    cells: Vec<UnsafeCell<u64>>,
    progress: AtomicU64,
}

fn progress_word(release: bool) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        let s = Arc::new(Input {
            cells: (0..THREADS).map(|t| UnsafeCell::new(t as u64)).collect(),
            progress: AtomicU64::new(0),
        });
        let cta = {
            let s = s.clone();
            loom::thread::spawn(move || {
                let load = |s: &Input, t: usize| {
                    // SAFETY: as above.
                    let v = s.cells[t].with(|p| unsafe { *p });
                    assert_eq!(v, t as u64, "pushed input already overwritten");
                };
                let others: Vec<_> = (1..THREADS)
                    .map(|t| {
                        let s = s.clone();
                        loom::thread::spawn(move || load(&s, t))
                    })
                    .collect();
                load(&s, 0);
                for h in others {
                    h.join().unwrap(); // the barrier
                }
                s.progress.store(1, if release { Release } else { Relaxed });
            })
        };
        spin(|| s.progress.load(Acquire) == 1);
        for cell in &s.cells {
            // SAFETY: as above.
            cell.with_mut(|p| unsafe { *p = 99 });
        }
        cta.join().unwrap();
    });
}

#[test]
fn a_released_progress_word_after_the_barrier_guards_the_input() {
    progress_word(true);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn a_relaxed_progress_word_without_a_fence_is_caught() {
    progress_word(false);
}
