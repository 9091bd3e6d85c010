//! The direct path's slot protocol, as pure decisions (`cuda/kernels/direct.cu` makes the same
//! ones; keep them in step). Sequence numbers count segments per (sender, receiver, stream),
//! start at 1 and only grow, across calls:
//!
//! - the sender may write segment `q` into slot [`slot`]`(q)` once the receiver's credit (the
//!   last segment it finished reading) satisfies [`may_write`];
//! - Simple: the sender publishes `ready = q` (release) after the data; the receiver reads the
//!   slot once [`may_read`]; LL: the sequence number travels inside every line ([`ll_line`]) and
//!   the receiver reads a line once [`ll_ready`];
//! - after reading, the receiver publishes `credit = q` (release);
//! - LL, implied credits (`TD_LL_IMPLIED`, when [`credit_implied_ok`]): the receiver publishes
//!   no credit; each rank, at the end of the call, raises its own credit word to
//!   [`implied_credit`]`(credit, sent_at_start)`, and in every symmetric LL call it raises its
//!   cached credit likewise once it consumed the peer's first segment of the call. Segments
//!   past the one being consumed are pushed only on credits already there (never waited for);
//! - in place, the receiver may overwrite input the sender pushes only after the sender's
//!   progress word (call number, segments pushed: [`progress`]) reached the segment;
//! - every wait may stop instead ([`spin_step`]): the CTA then leaves the call at once.
//!
//! `cuda/tests/loom_direct.rs` model-checks these rules under every interleaving, with the
//! hand-backs (`ready`, `credit`) as release stores. The kernels publish them as relaxed
//! system-scope stores after a CTA barrier (and, for `ready`, after thread 0's system fence
//! that follows the barrier): what orders them there is the barrier and fences, not the
//! store's own semantics (`docs/cuda.md`, "Relaxed hand-backs"). `cuda/tests/loom_publish.rs`
//! checks the `ready` pattern (and the in-place progress word's release) with the CTA's
//! threads modelled; the relaxed credit after loads rests on the hardware argument there.
//!
//! Pull mode (`cuda/kernels/direct_pull.cu`) has no slots: rank r's CTA b reads its share of each
//! peer's input from the peer's memory. Per CTA and call (`call` = the CTA's call counter + 1,
//! from 1, growing across calls), with words that only grow:
//!
//! - the sender publishes `arrive = call` (its input is final); the reader loads once
//!   [`pull_may_read`];
//! - the reader publishes `done` = [`pull_done_mark`]`(call, p + 1)` after its loads of pass `p`
//!   (in place) and [`pull_done_all`]`(call)` after all its loads of the call;
//! - out of place, the sender ends the call (its caller may then overwrite the input) once every
//!   reader's `done` satisfies [`pull_may_end`]; in place (the output is the input), it stores
//!   pass `p`'s results once every reader's `done` satisfies [`pull_may_overwrite`], after
//!   publishing its own mark for `p`, and skips the end wait.
//!
//! `cuda/tests/loom_pull.rs` model-checks these rules with `arrive` and `done` as release
//! stores; the kernel stores them relaxed (the input was written by work that finished before
//! the kernel passed `griddepcontrol.wait`; `done` follows a CTA barrier that every peer load of
//! the pass or call precedes), which again is an argument outside loom.

/// Slot index of sequence number `q` (>= 1) among `nslots`.
pub fn slot(q: u64, nslots: u32) -> u64 {
    debug_assert!(q >= 1 && nslots >= 1);
    (q - 1) % nslots as u64
}

/// Whether segment `q` may be written while the receiver's credit is `credit`: the slot's
/// previous occupant, `q - nslots`, has been read.
pub fn may_write(credit: u64, q: u64, nslots: u32) -> bool {
    credit + nslots as u64 >= q
}

/// LL, symmetric calls: the credit a rank may assume toward a peer once it saw the peer's data
/// of the current call, given its cached `credit` and `sent_at_start`, the count it had pushed
/// to that peer when the call began. Both ranks run the same calls in the same order and a
/// rank's calls run one after another, so the peer's data of this call proves the peer ended
/// its previous call, in which it had consumed everything pushed to it before this call. It
/// says nothing about this call's segments (the peer may not have read them yet).
///
/// direct.cu raises its cached credit to this after consuming the peer's segment in every
/// symmetric LL call, and, with `TD_LL_IMPLIED`, stores it into its own credit word at the end
/// of the call instead of having the receiver store credits across NVLink.
pub fn implied_credit(credit: u64, sent_at_start: u64) -> u64 {
    credit.max(sent_at_start)
}

/// Whether an LL call may leave its credits implied (`TD_LL_IMPLIED`): the call is `symmetric`
/// (every peer a rank pushes to pushes to it), every CTA's share is at most one segment
/// (`nseg_max`), and there are at least 2 slots. `ll_credit_implied` in `cuda/direct.rs` (the
/// host) and direct.cu follow it.
///
/// [`implied_credit`] is sound whatever the call; this rule is about progress. A call that
/// hands back no credit leaves the word at its own starting count `S - nseg`, where `S` is the
/// next call's starting count; that call's first segment `S + 1` may go only if
/// `S - nseg + nslots >= S + 1`, i.e. `nseg < nslots`, and it is pushed before anything of the
/// call is consumed (later segments follow on the credit raised by the peer's first one).
/// Otherwise both ranks wait for a credit nobody stores: with one slot, or with more segments
/// per call than slots allow (`cuda/tests/loom_direct.rs` shows both deadlocks).
pub fn credit_implied_ok(symmetric: bool, nseg_max: u64, nslots: u32) -> bool {
    symmetric && nseg_max <= 1 && nslots >= 2
}

/// Whether segment `q` may be read once the sender published `ready`.
pub fn may_read(ready: u64, q: u64) -> bool {
    ready >= q
}

/// The 32-bit flag an LL line carries for sequence number `q` (`td_ll_flag` in direct.cu):
/// 1 to 2^32 - 1, never 0, so a line never written (the buffer is zeroed) cannot match even
/// after the count wraps; consecutive sequence numbers never share a flag.
pub fn ll_flag(q: u64) -> u32 {
    (q % 0xffff_ffff) as u32 + 1
}

/// An LL line: 8 data bytes carried with the flag (direct.cu packs `{lo32, flag, hi32, flag}`
/// into one 16-byte store; the model packs `flag << 32 | data32`).
pub fn ll_line(q: u64, data: u32) -> u64 {
    ((ll_flag(q) as u64) << 32) | data as u64
}

/// Whether LL `line` carries segment `q`, and its data if so. A stale line holds an older
/// sequence number's flag (or 0 from the zeroed buffer), never `q`'s.
pub fn ll_ready(line: u64, q: u64) -> Option<u32> {
    ((line >> 32) as u32 == ll_flag(q)).then_some(line as u32)
}

/// The in-place progress word: segments pushed in call `call` (>= 1); grows across calls.
pub fn progress(call: u64, segments: u64) -> u64 {
    (call << 32) | segments
}

/// `TD_PULL_ALL` in direct_pull.cu: the low bits of a pull `done` word when every pass of the
/// call was read.
pub const PULL_ALL: u64 = 0xff_ffff;
/// Bits of a pull `done` word below the call number (`call << 24` in direct_pull.cu).
pub const PULL_CALL_SHIFT: u32 = 24;

/// The pull `done` word after the reader's loads of the first `passes` passes of call `call`
/// (in place: `passes = p + 1` after pass `p`). `passes` stays below [`PULL_ALL`]; a later
/// call's marks exceed every mark of an earlier one.
pub fn pull_done_mark(call: u64, passes: u64) -> u64 {
    debug_assert!(passes < PULL_ALL);
    (call << PULL_CALL_SHIFT) | passes
}

/// The pull `done` word once all the reader's loads of call `call` returned.
pub fn pull_done_all(call: u64) -> u64 {
    (call << PULL_CALL_SHIFT) | PULL_ALL
}

/// Whether the reader may load a sender's input in call `call` once the sender's `arrive` word
/// (its last call number) is `arrive`.
pub fn pull_may_read(arrive: u64, call: u64) -> bool {
    arrive >= call
}

/// In place: whether a rank may store pass `pass`'s results (overwriting the input that pass
/// covers) once a reader's `done` word is `done`: the reader finished pass `pass`.
pub fn pull_may_overwrite(done: u64, call: u64, pass: u64) -> bool {
    done >= pull_done_mark(call, pass + 1)
}

/// Out of place: whether a sender may end call `call` (its caller may then overwrite the input)
/// once a reader's `done` word is `done`: the reader finished every load of the call.
pub fn pull_may_end(done: u64, call: u64) -> bool {
    done >= pull_done_all(call)
}

/// What a waiting thread does next, in every wait on a peer (`tp_spin` in
/// `cuda/kernels/common.cuh`): go on once its condition holds, whatever else happened; else give
/// up once the call stopped (aborted, or past its deadline); else spin. A stopped wait leaves
/// its CTA's call without writing a slot, word or output the peers have not allowed, so a peer
/// that is only slow never sees data overwritten under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spin {
    Proceed,
    Stop,
    Again,
}

pub fn spin_step(ready: bool, stopped: bool) -> Spin {
    if ready {
        Spin::Proceed
    } else if stopped {
        Spin::Stop
    } else {
        Spin::Again
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_only_after_their_previous_occupant_was_read() {
        for nslots in 1..5u32 {
            for q in 1..20u64 {
                assert!(slot(q, nslots) < nslots as u64);
                // The first nslots segments need no credit; later ones need q - nslots read.
                assert_eq!(may_write(0, q, nslots), q <= nslots as u64);
                assert!(may_write(q - 1, q, nslots));
                if q > nslots as u64 {
                    assert!(!may_write(q - nslots as u64 - 1, q, nslots));
                    assert_eq!(slot(q, nslots), slot(q - nslots as u64, nslots));
                }
            }
        }
    }

    #[test]
    fn implied_credits_are_sound_and_let_the_next_call_start() {
        assert_eq!(implied_credit(3, 5), 5);
        assert_eq!(implied_credit(7, 5), 7);
        assert!(credit_implied_ok(true, 1, 2) && credit_implied_ok(true, 1, 4));
        assert!(credit_implied_ok(true, 0, 2));
        assert!(!credit_implied_ok(false, 1, 2));
        assert!(!credit_implied_ok(true, 2, 2) && !credit_implied_ok(true, 2, 4));
        assert!(!credit_implied_ok(true, 1, 1));
        // A run of calls of nseg segments each, all with implied credits, both ranks in step.
        // After call k the word holds what call k implied: the count at its start; the peer had
        // consumed at least that much (everything up to its previous call), never this call's.
        for nslots in 1..5u32 {
            for nseg in 1..4u64 {
                let mut credit = 0u64;
                let mut live = true;
                for call in 0..6u64 {
                    let start = call * nseg;
                    // The first segment of the call is pushed before anything is consumed.
                    let first_ok = may_write(credit, start + 1, nslots);
                    live &= first_ok;
                    // The peer consumed everything before this call's start: never more.
                    assert!(implied_credit(credit, start) <= start);
                    credit = implied_credit(credit, start);
                }
                assert_eq!(
                    live,
                    nseg < nslots as u64,
                    "{nslots} slots, {nseg} segments"
                );
                if credit_implied_ok(true, nseg, nslots) {
                    assert!(live);
                }
            }
        }
    }

    #[test]
    fn ll_lines_match_only_their_own_sequence_number() {
        let l = ll_line(7, 0xdead_beef);
        assert_eq!(ll_ready(l, 7), Some(0xdead_beef));
        assert_eq!(ll_ready(l, 8), None);
        assert_eq!(ll_ready(0, 1), None);
        assert!(progress(2, 0) > progress(1, u32::MAX as u64));
        // Around the 32-bit wrap the flag stays non-zero and distinct from its neighbours.
        for q in [
            1u64,
            0xffff_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            0x1_ffff_fffe,
            0x1_ffff_ffff,
        ] {
            assert_ne!(ll_flag(q), 0, "{q:#x}");
            assert_ne!(ll_flag(q), ll_flag(q + 1), "{q:#x}");
            assert_eq!(ll_ready(0, q), None, "{q:#x}: a zeroed line passed");
        }
        assert!(may_read(5, 5) && !may_read(4, 5));
    }

    #[test]
    fn pull_marks_grow_across_passes_and_calls() {
        // Pass counts up to 2^24 - 2 stay below ALL, and a later call's marks exceed every
        // mark of an earlier one, ALL included (a stale done word never satisfies a new call).
        let max = PULL_ALL - 1;
        assert_eq!(max, (1 << 24) - 2);
        for call in [1u64, 2, 3, 1 << 20, (1 << 40) - 2] {
            for p in [0u64, 1, 2, max - 1, max] {
                assert!(pull_done_mark(call, p) < pull_done_all(call), "{call} {p}");
                assert!(pull_done_mark(call + 1, 0) > pull_done_mark(call, p));
                if p > 0 {
                    assert!(pull_done_mark(call, p) > pull_done_mark(call, p - 1));
                }
            }
            assert!(pull_done_mark(call + 1, 0) > pull_done_all(call));
            assert_eq!(pull_done_all(call) >> PULL_CALL_SHIFT, call);
        }
        assert_eq!(pull_done_mark(3, 5), (3 << 24) | 5);
        assert_eq!(pull_done_all(3), (3 << 24) | 0xff_ffff);
    }

    #[test]
    fn pull_waits_need_this_calls_words() {
        for call in 1..5u64 {
            // arrive: the sender's call counter.
            assert!(pull_may_read(call, call) && pull_may_read(call + 1, call));
            assert!(!pull_may_read(call - 1, call));
            // The previous call's ALL satisfies no wait of this one.
            let stale = pull_done_all(call - 1);
            assert!(!pull_may_end(stale, call));
            assert!(pull_may_end(pull_done_all(call), call));
            for pass in 0..4u64 {
                assert!(!pull_may_overwrite(stale, call, pass));
                assert!(!pull_may_end(pull_done_mark(call, pass + 1), call));
                // Pass p may be overwritten once the reader read pass p, not before.
                assert!(pull_may_overwrite(
                    pull_done_mark(call, pass + 1),
                    call,
                    pass
                ));
                assert!(!pull_may_overwrite(pull_done_mark(call, pass), call, pass));
                assert!(pull_may_overwrite(pull_done_all(call), call, pass));
            }
        }
    }
}
