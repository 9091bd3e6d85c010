//! loom model checks of the direct path's slot protocol (`cuda::direct::protocol`, the
//! rules `cuda/kernels/direct.cu` follows): a sender CTA and a receiver CTA of two GPUs, sequence
//! numbers persisting across calls, under every interleaving loom explores; the LL models at the
//! end run both ranks' CTAs, each pushing and consuming, over calls with implied credits. loom's cells fail a
//! run on any read of a slot concurrent with a write to it; payload checks catch lost or stale
//! data; a run where no thread can progress fails as a deadlock. The `should_panic` models break
//! one rule each and show the checks can fail. The hand-backs are release stores here; the kernel
//! stores them relaxed after a CTA barrier (see `direct::protocol`'s module doc).
//!
//! The abort models at the end run a flow whose waits may stop (`protocol::spin_step`): an abort
//! releases a sender whose receiver died and a receiver whose sender died, and an abort at any
//! point of a live flow never lets a stale or unwritten slot be read.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cuda --test loom_direct --release`
#![cfg(loom)]

use cuda::direct::protocol::{
    implied_credit, ll_flag, ll_line, ll_ready, may_read, may_write, progress, slot, spin_step,
    Spin,
};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
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

/// LL across calls of both ranks, as `td_ll` runs them: one CTA per rank, each rank pushing to
/// and/or consuming from the other. What lives in rank r's memory: its credit word toward the
/// peer (the word its pushes are gated by: the peer stores it in calls that hand credits back,
/// the rank itself at the end of calls with `TD_LL_IMPLIED`), and its slots for the peer's data.
/// A slot is an LL line (`ll_line`: flag and data in one store, which the receiver polls) and,
/// as a loom cell, the slot's bytes `(sequence number, payload)`: a push into a slot whose
/// previous occupant the receiver has not finished reading is a write concurrent with that read
/// (loom's "Causality violation"), or shows as a newer line than awaited. The lines are release
/// stores and acquire loads here, so that loom can see a slot's reuse ordered after its read
/// through the peer's later data (the implied credit's argument); in the kernel the peer's
/// reads of a call have returned before that call ends, and its next call's stores follow.
struct LlRank {
    credit: AtomicU64,
    lines: Vec<AtomicU64>,
    bytes: Vec<UnsafeCell<(u64, u32)>>,
}

/// One LL call as one rank runs it: `nseg` segments in this CTA's share; whether it pushes to
/// the peer and/or consumes from it; whether `TD_LL_IMPLIED` is set (both ranks set it alike).
#[derive(Clone, Copy)]
struct LlCall {
    nseg: u64,
    send: bool,
    recv: bool,
    implied: bool,
}

/// A call both ranks make alike, both pushing and consuming.
const fn sym(nseg: u64, implied: bool) -> [LlCall; 2] {
    let c = LlCall {
        nseg,
        send: true,
        recv: true,
        implied,
    };
    [c, c]
}

/// Rank 0 pushes `nseg` segments to rank 1, which only consumes (broadcast's shape).
const fn one_way(nseg: u64) -> [LlCall; 2] {
    let c = LlCall {
        nseg,
        send: false,
        recv: false,
        implied: false,
    };
    [LlCall { send: true, ..c }, LlCall { recv: true, ..c }]
}

/// The rules an `ll_rank` breaks on purpose.
#[derive(Clone, Copy, Default)]
struct LlBugs {
    /// Wait for the credits of segments past the one being consumed (the loop before
    /// `td_credit_ready`).
    blocking_ahead: bool,
    /// Implied credit `sent_at_start + 1`: as if the peer had read this call's segment too.
    implied_plus_one: bool,
}

fn ll_payload(sender: usize, call: usize, seg: u64) -> u32 {
    (1000 * sender + 10 * call) as u32 + seg as u32
}

/// Rank `me` runs `calls` (each entry: what rank 0 and rank 1 do in that call) as `td_ll` does.
fn ll_rank(me: usize, ranks: &[LlRank; 2], calls: &[[LlCall; 2]], nslots: u32, bugs: LlBugs) {
    let peer = 1 - me;
    let (own, theirs) = (&ranks[me], &ranks[peer]);
    let (mut sent, mut recvd) = (0u64, 0u64); // TD_SENT, TD_RECVD: persist across calls
    for (i, call) in calls.iter().enumerate() {
        let c = call[me];
        // td_load_seq
        let (s_sent, s_recvd) = (sent, recvd);
        let mut s_credit = own.credit.load(Acquire);
        let mut pushed = 0u64; // `sent` in td_ll
        let mut j = 0u64;
        while j < c.nseg || pushed < c.nseg {
            while pushed < c.nseg && pushed < j + nslots as u64 {
                if c.send {
                    let q = s_sent + pushed + 1;
                    // td_credit_ready: ahead of segment j only on credits already there
                    // (one reload of the word).
                    if pushed > j && !bugs.blocking_ahead && !may_write(s_credit, q, nslots) {
                        s_credit = own.credit.load(Acquire);
                        if !may_write(s_credit, q, nslots) {
                            break;
                        }
                    }
                    // td_credit: wait.
                    if !may_write(s_credit, q, nslots) {
                        spin(|| {
                            s_credit = own.credit.load(Acquire);
                            may_write(s_credit, q, nslots)
                        });
                    }
                    let s = slot(q, nslots) as usize;
                    let v = ll_payload(me, i, pushed);
                    // SAFETY: loom checks that no access to this cell is concurrent.
                    theirs.bytes[s].with_mut(|p| unsafe { *p = (q, v) });
                    theirs.lines[s].store(ll_line(q, v), Release);
                }
                pushed += 1;
            }
            if j < c.nseg && c.recv {
                let q = s_recvd + j + 1;
                let s = slot(q, nslots) as usize;
                let mut got = None;
                spin(|| {
                    let line = own.lines[s].load(Acquire);
                    // Small sequence numbers: flags grow with them.
                    assert!(
                        (line >> 32) as u32 <= ll_flag(q),
                        "LL segment {q} overwritten before it was read"
                    );
                    got = ll_ready(line, q);
                    got.is_some()
                });
                let want = ll_payload(peer, i, j);
                assert_eq!(got, Some(want), "LL segment {q}");
                // SAFETY: as above.
                let b = own.bytes[s].with(|p| unsafe { *p });
                assert_eq!(b, (q, want), "LL slot of segment {q}");
                // The peer's data of this call: it finished its previous call.
                if c.send {
                    s_credit = implied_credit(s_credit, s_sent);
                }
                if !c.implied {
                    theirs.credit.store(q, Release); // hand the slot back
                }
            }
            j += 1;
        }
        if c.send {
            sent += c.nseg;
        }
        if c.recv {
            recvd += c.nseg;
        }
        if c.implied && c.nseg > 0 && c.send && c.recv {
            let v = if bugs.implied_plus_one {
                s_sent + 1
            } else {
                s_sent
            };
            own.credit.store(v, Relaxed); // a plain store to the rank's own word
        }
    }
}

fn ll_ranks(calls: &'static [[LlCall; 2]], nslots: u32, bugs: LlBugs) {
    model(move || {
        let rank = || LlRank {
            credit: AtomicU64::new(0),
            lines: (0..nslots).map(|_| AtomicU64::new(0)).collect(),
            bytes: (0..nslots).map(|_| UnsafeCell::new((0, 0))).collect(),
        };
        let ranks = Arc::new([rank(), rank()]);
        let r = ranks.clone();
        let t = loom::thread::spawn(move || ll_rank(1, &r, calls, nslots, bugs));
        ll_rank(0, &ranks, calls, nslots, bugs);
        t.join().unwrap();
    });
}

/// Two calls with implied credits (symmetric, one segment, 2 slots), then a symmetric call of
/// two segments that hands credits back: its second segment needs the credit the peer's first
/// segment implies, so it goes after that is consumed, not before (the deadlock of run 5). A
/// one-way call follows, whose receiver hands credits back into the word the implied calls set.
#[test]
fn ll_implied_credits_then_multi_segment_and_one_way_calls() {
    static CALLS: [[LlCall; 2]; 4] = [sym(1, true), sym(1, true), sym(2, false), one_way(2)];
    ll_ranks(&CALLS, 2, LlBugs::default());
}

/// As above with three segments in 2 slots: the third needs the credit the peer hands back
/// after reading the first, past what the implied one covers. (With the one-way call after
/// it, loom takes over 30 s.)
#[test]
fn ll_implied_credits_then_three_segments() {
    static CALLS: [[LlCall; 2]; 3] = [sym(1, true), sym(1, true), sym(3, false)];
    ll_ranks(&CALLS, 2, LlBugs::default());
}

/// Handed-back credits only: the old loop, which waited for the credits of segments ahead,
/// was live then (the peer's credit for its first segment came without any wait of its own).
#[test]
fn ll_blocking_push_ahead_is_live_without_implied_credits() {
    static CALLS: [[LlCall; 2]; 3] = [sym(1, false), sym(1, false), sym(2, false)];
    let bugs = LlBugs {
        blocking_ahead: true,
        ..LlBugs::default()
    };
    ll_ranks(&CALLS, 2, bugs);
}

/// The old loop after implied calls: both ranks wait to push their second segment for a credit
/// that only the other's first segment implies, and neither consumes. The spins never end, so
/// loom stops the run at its branch limit.
#[test]
#[should_panic(expected = "maximum number of branches")]
fn ll_blocking_push_ahead_after_implied_credits_deadlocks() {
    static CALLS: [[LlCall; 2]; 3] = [sym(1, true), sym(1, true), sym(2, false)];
    let bugs = LlBugs {
        blocking_ahead: true,
        ..LlBugs::default()
    };
    ll_ranks(&CALLS, 2, bugs);
}

/// An implied credit that counts this call's segment as read: the next-but-one push reuses a
/// slot the peer may still be reading, or has not read yet.
#[test]
#[should_panic(expected = "Causality violation")]
fn an_implied_credit_counting_this_calls_segment_is_caught() {
    static CALLS: [[LlCall; 2]; 3] = [sym(1, true), sym(1, true), sym(2, false)];
    let bugs = LlBugs {
        implied_plus_one: true,
        ..LlBugs::default()
    };
    ll_ranks(&CALLS, 2, bugs);
}

/// Implied credits outside `credit_implied_ok` are still sound but not live. One slot: the
/// second call's segment needs the first call's segment read, which no credit says.
#[test]
#[should_panic(expected = "maximum number of branches")]
fn implied_credits_with_one_slot_deadlock() {
    static CALLS: [[LlCall; 2]; 2] = [sym(1, true), sym(1, true)];
    ll_ranks(&CALLS, 1, LlBugs::default());
}

/// Two segments per call in 2 slots: the second call's first segment reuses the slot of the
/// first call's second segment, which no credit says was read.
#[test]
#[should_panic(expected = "maximum number of branches")]
fn implied_credits_over_two_segments_deadlock() {
    static CALLS: [[LlCall; 2]; 2] = [sym(2, true), sym(2, true)];
    ll_ranks(&CALLS, 2, LlBugs::default());
}

/// Fewer segments than slots is all that progress needs (`credit_implied_ok` asks for one
/// segment, what the host can tell from the share size): two segments in 3 slots.
#[test]
fn implied_credits_with_fewer_segments_than_slots() {
    static CALLS: [[LlCall; 2]; 3] = [sym(2, true), sym(2, true), sym(1, false)];
    ll_ranks(&CALLS, 3, LlBugs::default());
}

/// A wait that may stop (the kernels' `tp_spin`, `direct::protocol::spin_step`): true once `ok`,
/// false once the abort word is set first.
fn abortable(abort: &AtomicU64, mut ok: impl FnMut() -> bool) -> bool {
    loop {
        match spin_step(ok(), abort.load(Relaxed) != 0) {
            Spin::Proceed => return true,
            Spin::Stop => return false,
            Spin::Again => loom::thread::yield_now(),
        }
    }
}

/// A Simple sender that leaves the call when a wait stops; returns the segments it wrote.
fn abortable_sender(f: &Simple, nslots: u32, abort: &AtomicU64) -> u64 {
    for seg in 0..SEGS {
        let q = seg + 1;
        if !abortable(abort, || may_write(f.credit.load(Acquire), q, nslots)) {
            return seg;
        }
        let s = slot(q, nslots) as usize;
        // SAFETY: loom checks that no access to this cell is concurrent.
        f.slots[s].with_mut(|p| unsafe { *p = payload(1, seg) });
        f.ready.store(q, Release);
    }
    SEGS
}

/// A Simple receiver that leaves the call when a wait stops; returns the segments it read.
fn abortable_receiver(f: &Simple, nslots: u32, abort: &AtomicU64) -> u64 {
    for seg in 0..SEGS {
        let q = seg + 1;
        if !abortable(abort, || may_read(f.ready.load(Acquire), q)) {
            return seg;
        }
        let s = slot(q, nslots) as usize;
        // SAFETY: as above.
        let v = f.slots[s].with(|p| unsafe { *p });
        assert_eq!(v, payload(1, seg), "stale or lost segment {q}");
        f.credit.store(q, Release);
    }
    SEGS
}

#[test]
fn an_abort_releases_a_sender_whose_receiver_died() {
    // One slot, two segments, a receiver that never reads: the second push waits for a credit
    // that never comes, until the abort; the unread first segment is never overwritten.
    model(|| {
        let f = simple(1);
        let abort = Arc::new(AtomicU64::new(0));
        let (f2, a2) = (f.clone(), abort.clone());
        let s = loom::thread::spawn(move || abortable_sender(&f2, 1, &a2));
        abort.store(1, Relaxed);
        assert_eq!(s.join().unwrap(), 1);
        // SAFETY: every thread has joined.
        assert_eq!(f.slots[0].with(|p| unsafe { *p }), payload(1, 0));
    });
}

#[test]
fn an_abort_releases_a_receiver_whose_sender_died() {
    model(|| {
        let f = simple(2);
        let abort = Arc::new(AtomicU64::new(0));
        let (f2, a2) = (f.clone(), abort.clone());
        let r = loom::thread::spawn(move || abortable_receiver(&f2, 2, &a2));
        abort.store(1, Relaxed);
        assert_eq!(r.join().unwrap(), 0);
    });
}

#[test]
fn an_abort_at_any_point_of_a_live_flow_never_reads_a_stale_slot() {
    // Both ranks alive, the abort lands anywhere: each side either finishes or stops, every
    // segment read is the one written, and none is read that was not written.
    model(|| {
        let f = simple(1);
        let abort = Arc::new(AtomicU64::new(0));
        let (fs, as_) = (f.clone(), abort.clone());
        let s = loom::thread::spawn(move || abortable_sender(&fs, 1, &as_));
        let (fr, ar) = (f.clone(), abort.clone());
        let r = loom::thread::spawn(move || abortable_receiver(&fr, 1, &ar));
        abort.store(1, Relaxed);
        let (sent, read) = (s.join().unwrap(), r.join().unwrap());
        assert!(read <= sent, "read {read} of {sent} written");
    });
}
