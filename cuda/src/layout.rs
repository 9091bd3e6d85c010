//! The device constants: sizes, flag-word layouts and option bits that the host and the
//! kernels of `cuda/kernels/` must agree on. They are defined here once and reach NVRTC as
//! `-D` options ([`defines`]); the kernel sources use them and define none of them (a test
//! checks). A leaf: every host module that sizes a buffer or fills a kernel argument reads
//! them from here.

/// Ranks a kernel addresses at most (`TP_MAXR`): the size of every per-rank pointer table.
pub const MAX_RANKS: usize = 8;

// ---------------------------------------------------------------- the executor (exec.cu)

/// CTAs of an executor grid at most: its per-CTA flag words exist for this many.
pub const EXEC_MAX_CTAS: u32 = 256;
/// Sources of one work item at most (`TP_MAXSRC`).
pub const MAX_SRCS: usize = 8;
/// Bytes of LL lines per half (`TP_LL_HALF`): twice the data they carry (16-byte lines of 8
/// data bytes).
pub const LL_HALF_BYTES: u64 = 2 * crate::lower::LL_DATA_BYTES;

/// The executor's words in a rank's flag region (u64 words, peers write some of them):
/// per-CTA barrier arrivals `[cta][src_rank]` (`TP_PC_FLAGS`), full barrier arrivals
/// `[src_rank]` (`TP_FULL_FLAGS`), per-CTA barriers done (`TP_PC_COUNT`), full barriers done
/// (`TP_FULL_COUNT`), the local grid barrier's arrival counter and generation (`TP_ARRIVE`,
/// `TP_RELEASE`), LL epochs per CTA (`TP_LL_COUNT`).
pub const EXEC_PC_FLAGS: usize = 0;
pub const EXEC_FULL_FLAGS: usize = EXEC_PC_FLAGS + EXEC_MAX_CTAS as usize * MAX_RANKS;
pub const EXEC_PC_COUNT: usize = EXEC_FULL_FLAGS + MAX_RANKS;
pub const EXEC_FULL_COUNT: usize = EXEC_PC_COUNT + EXEC_MAX_CTAS as usize;
pub const EXEC_ARRIVE: usize = EXEC_FULL_COUNT + 1;
pub const EXEC_RELEASE: usize = EXEC_FULL_COUNT + 2;
pub const EXEC_LL_COUNT: usize = EXEC_FULL_COUNT + 8;
/// End of the executor's words.
pub const EXEC_WORDS: usize = EXEC_LL_COUNT + EXEC_MAX_CTAS as usize;
/// Where the generic copy-engine path keeps its cross-rank counters: `[from_rank]` per signal.
pub const CE_FLAGS: usize = 3072;
/// Where the copy-engine pair path keeps its counters.
pub const PAIR_FLAGS: usize = 3200;
/// Copy streams per rank of the copy-engine pair path at most (`TOPOPLAN_CE_STREAMS`, default 1). Chunk c goes to stream c
/// mod the stream count; meant to overlap one stream's signals with the next chunk's copy, but
/// on 2×H200 two streams measured no faster than one and three or four slower
/// (`docs/benchmarks-gpu.md`).
pub const PAIR_COPY_STREAMS: usize = 4;
/// Words of the pair path's counters: FREED, then LANDED and PUSHED per copy stream.
pub const PAIR_WORDS: usize = 1 + 2 * PAIR_COPY_STREAMS;
/// Words in a rank's flag region of a `CudaGroup`.
pub const GROUP_FLAG_WORDS: usize = 4096;
const _: () = assert!(EXEC_WORDS <= CE_FLAGS && CE_FLAGS + 64 <= PAIR_FLAGS);
const _: () = assert!(PAIR_FLAGS + PAIR_WORDS <= GROUP_FLAG_WORDS);
const _: () = assert!(EXEC_LL_COUNT > EXEC_RELEASE);

// ---------------------------------------------------------------- the direct path (direct.cu)

/// Streams (sender CTAs) of the push path at most (`TD_MAXCTA`): slot regions and flags exist
/// for this many.
pub const DIRECT_MAX_CTAS: u32 = 64;
/// Streams one Simple or LL128 receiver CTA serves at most (`TD_RECV_STREAMS`).
pub const RECV_STREAMS: u32 = 4;
/// Protocols with per-peer words (Simple, LL, LL128; pull has its own) and the
/// roles of a word (`TD_ROLES`: sent, received, ready, credit).
pub const DIRECT_PROTOS: usize = 3;
pub const DIRECT_ROLES: usize = 4;
/// Per-CTA words of the in-place guard after the per-peer words: calls run by sender CTA b
/// (`TD_SCALLS`), by receiver CTA b (`TD_RCALLS`), the sender's progress (`TD_PROGRESS`).
pub const DIRECT_SCALLS: usize =
    DIRECT_PROTOS * DIRECT_ROLES * MAX_RANKS * DIRECT_MAX_CTAS as usize;
pub const DIRECT_RCALLS: usize = DIRECT_SCALLS + DIRECT_MAX_CTAS as usize;
pub const DIRECT_PROGRESS: usize = DIRECT_RCALLS + DIRECT_MAX_CTAS as usize;
/// End of the push path's words (`TD_FLAG_WORDS`); pull mode's follow.
pub const DIRECT_PUSH_WORDS: usize = DIRECT_PROGRESS + DIRECT_MAX_CTAS as usize;
/// CTAs of a pull grid at most (`TD_PULL_MAXCTA`): the pull words exist for this many.
pub const PULL_MAX_CTAS: u32 = 256;
/// Pull mode's words: arrive and done per (peer, CTA), then one call counter per CTA.
pub const PULL_WORDS: usize = (2 * MAX_RANKS + 1) * PULL_MAX_CTAS as usize;
/// Words of a rank's direct flag region.
pub const DIRECT_FLAG_WORDS: usize = DIRECT_PUSH_WORDS + PULL_WORDS;
/// Bytes of an LL128 line (`TD_L128_LINE`) and the data bytes it carries (`TD_L128_DATA`;
/// the last 8 bytes hold the sequence number).
pub const LL128_LINE: u64 = 128;
pub const LL128_DATA: u64 = 120;

/// `TdArgs.ll`: the protocol of a direct call.
pub const PROTO_SIMPLE: u32 = 0;
pub const PROTO_LL: u32 = 1;
pub const PROTO_LL128: u32 = 2;
pub const PROTO_PULL: u32 = 3;
/// `TdArgs.opts` bits: average (`TD_AVG`), a local copy (`TD_COPY`), the receiver overwrites
/// what this rank's senders still push (`TD_INPLACE`), LL credits implied by the peer's data
/// (`TD_LL_IMPLIED`).
pub const OPT_AVG: u32 = 1;
pub const OPT_COPY: u32 = 2;
pub const OPT_INPLACE: u32 = 4;
pub const OPT_LL_IMPLIED: u32 = 256;
/// Registers per thread of the register-capped direct kernels (`TD_SHARED_NREG`) unless
/// `TOPOPLAN_SHARED_MAXREG` says otherwise.
pub const SHARED_NREG: u32 = 96;

// ---------------------------------------------------------------- aborts (common.cuh)

/// Why a wait stopped, in a rank's status word (`TP_STOP_*`): the abort word was set, or the
/// wait lasted longer than `TOPOPLAN_TIMEOUT`.
pub const STOP_ABORTED: u64 = 1;
pub const STOP_TIMEOUT: u64 = 2;
/// Misses between two checks of the abort word and the clock in a spinning wait
/// (`TP_CHECK_EVERY`): a satisfied wait never checks; a long one reads host memory about once
/// a millisecond.
pub const CHECK_EVERY: u32 = 1024;
/// What a wait was for (`TP_WAIT_*`), as a stop reports it.
pub const WAIT_CREDIT: u64 = 1;
pub const WAIT_READY: u64 = 2;
pub const WAIT_LL: u64 = 3;
pub const WAIT_LL128: u64 = 4;
pub const WAIT_PROGRESS: u64 = 5;
pub const WAIT_ARRIVE: u64 = 6;
pub const WAIT_DONE: u64 = 7;
pub const WAIT_BARRIER: u64 = 8;
pub const WAIT_FULL_BARRIER: u64 = 9;
pub const WAIT_GRID: u64 = 10;
pub const WAIT_EXEC_LL: u64 = 11;
pub const WAIT_SIGNAL: u64 = 12;
/// Each wait's code, its name in the kernels and what an error calls it.
pub const WAITS: &[(u64, &str, &str)] = &[
    (
        WAIT_CREDIT,
        "TP_WAIT_CREDIT",
        "a slot's credit (direct push)",
    ),
    (WAIT_READY, "TP_WAIT_READY", "a Simple segment's ready word"),
    (WAIT_LL, "TP_WAIT_LL", "an LL line"),
    (WAIT_LL128, "TP_WAIT_LL128", "an LL128 line"),
    (
        WAIT_PROGRESS,
        "TP_WAIT_PROGRESS",
        "its own sender's progress (in place)",
    ),
    (WAIT_ARRIVE, "TP_WAIT_ARRIVE", "a pull-mode arrival"),
    (WAIT_DONE, "TP_WAIT_DONE", "a pull-mode reader's done word"),
    (
        WAIT_BARRIER,
        "TP_WAIT_BARRIER",
        "an executor per-CTA barrier",
    ),
    (
        WAIT_FULL_BARRIER,
        "TP_WAIT_FULL_BARRIER",
        "an executor full barrier",
    ),
    (
        WAIT_GRID,
        "TP_WAIT_GRID",
        "the executor's local grid barrier",
    ),
    (WAIT_EXEC_LL, "TP_WAIT_EXEC_LL", "an executor LL line"),
    (WAIT_SIGNAL, "TP_WAIT_SIGNAL", "a copy-engine signal"),
];

/// Every constant the kernels read, by its name there.
pub fn constants() -> Vec<(&'static str, u64)> {
    let u = |v: usize| v as u64;
    [
        ("TP_MAXR", u(MAX_RANKS)),
        ("TP_MAXSRC", u(MAX_SRCS)),
        ("TP_LL_HALF", LL_HALF_BYTES),
        ("TP_PC_FLAGS", u(EXEC_PC_FLAGS)),
        ("TP_FULL_FLAGS", u(EXEC_FULL_FLAGS)),
        ("TP_PC_COUNT", u(EXEC_PC_COUNT)),
        ("TP_FULL_COUNT", u(EXEC_FULL_COUNT)),
        ("TP_ARRIVE", u(EXEC_ARRIVE)),
        ("TP_RELEASE", u(EXEC_RELEASE)),
        ("TP_LL_COUNT", u(EXEC_LL_COUNT)),
        ("TD_MAXCTA", DIRECT_MAX_CTAS.into()),
        ("TD_RECV_STREAMS", RECV_STREAMS.into()),
        ("TD_ROLES", u(DIRECT_ROLES)),
        ("TD_SCALLS", u(DIRECT_SCALLS)),
        ("TD_RCALLS", u(DIRECT_RCALLS)),
        ("TD_PROGRESS", u(DIRECT_PROGRESS)),
        ("TD_FLAG_WORDS", u(DIRECT_PUSH_WORDS)),
        ("TD_PULL_MAXCTA", PULL_MAX_CTAS.into()),
        ("TD_L128_LINE", LL128_LINE),
        ("TD_L128_DATA", LL128_DATA),
        ("TD_PROTO_SIMPLE", PROTO_SIMPLE.into()),
        ("TD_PROTO_LL", PROTO_LL.into()),
        ("TD_PROTO_LL128", PROTO_LL128.into()),
        ("TD_PROTO_PULL", PROTO_PULL.into()),
        ("TD_AVG", OPT_AVG.into()),
        ("TD_COPY", OPT_COPY.into()),
        ("TD_INPLACE", OPT_INPLACE.into()),
        ("TD_LL_IMPLIED", OPT_LL_IMPLIED.into()),
        ("TP_STOP_ABORTED", STOP_ABORTED),
        ("TP_STOP_TIMEOUT", STOP_TIMEOUT),
        ("TP_CHECK_EVERY", CHECK_EVERY.into()),
    ]
    .into_iter()
    .chain(WAITS.iter().map(|&(code, name, _)| (name, code)))
    .collect()
}

/// [`constants`] as NVRTC options: plain decimal literals, typed as C types them (every value
/// fits an `int`).
pub fn defines() -> Vec<String> {
    constants()
        .into_iter()
        .map(|(name, v)| format!("-D{name}={v}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_layouts_do_not_overlap() {
        let c = constants();
        let mut names: Vec<_> = c.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), c.len());
        assert!(c.iter().all(|(_, v)| *v <= i32::MAX as u64));
        assert!(defines().iter().all(|d| d.starts_with("-DT")));
    }
}
