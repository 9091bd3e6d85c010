//! Hybrid two-rank all-reduce: one call split in two element ranges that run at once, the first
//! on the SM direct-push path (`direct`) on the caller's stream, the last `pct` % on the
//! copy-engine pair path (`ce_pair`) on a side stream forked from the caller's and joined back
//! into it. SM stores alone top out near 360 GB/s and the copy engines near 345 on 2×H200;
//! together NVLink carries more: with half on each, 512 MiB reaches 371 GB/s and 1 GiB 376
//! (docs/benchmarks-gpu.md). Default: 50 % from 512 MiB per rank (`TOPOPLAN_HYBRID_CE_PCT`,
//! `TOPOPLAN_HYBRID_MIN_MB`; 0 turns it off), where it was measured. SM stores with SM peer
//! loads (pull mode) on the side range did not beat the push path alone (commit d319ab5 has that
//! variant).
//!
//! In place, the SM half runs the register-capped direct kernels and the copy-engine half's
//! reduces run in 256-thread CTAs, so both fit on one SM (`DirectCall::shares_sms`): with the
//! direct kernels' 128 registers per thread a direct CTA fills an SM, the reduces then find only
//! the 4 SMs the direct grid leaves, and in place they often fell behind (2×H200, 512 MiB in
//! place: 369.5-369.8 GB/s shared against 364.9-366.8 not, alternating in one run). Out of place
//! the reduces keep up on those 4 SMs, and sharing SMs cost 1.5-3 GB/s, so the uncapped kernels
//! run there.
//!
//! Both ranks split alike (same size, same knobs), so each path sees the same sequence of calls
//! on every rank. The ranges are disjoint, so neither path reads what the other writes. Under
//! CUDA graph capture the call runs on the direct path alone (the copy-engine counters live on
//! the host).

use crate::abort::TpAbort;
use crate::device::{drv, ExecModule};
use crate::group::CudaGroup;
use crate::request::Request;
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::{CollectiveKind, Protocol, Schedule};
use state::HybridState;
use std::sync::{Arc, OnceLock};

pub(crate) mod state;

/// The SM range is a whole number of these elements, so the copy-engine range starts 16-byte
/// aligned wherever the buffers do.
const GRAIN_ELEMS: u64 = 4096;

struct Knobs {
    /// Copy-engine share in tenths of a percent (`TOPOPLAN_HYBRID_CE_PCT`, a decimal).
    permille: u64,
    min_bytes: u64,
}

fn knobs() -> &'static Knobs {
    static K: OnceLock<Knobs> = OnceLock::new();
    K.get_or_init(|| {
        use params::*;
        Knobs {
            permille: HYBRID_CE_PCT
                .f64_or_warn()
                .map_or(500, |v| (v * 10.0).round() as u64),
            min_bytes: HYBRID_MIN_MB.bytes_or_warn().unwrap_or(512 << 20),
        }
    })
}

/// Elements the copy engines take of an `n`-element call at `permille` tenths of a percent,
/// from the end: at least that share, such that the SM path keeps a whole number of grains (at
/// least one) from the start. The copy-engine range then starts aligned and takes any odd tail;
/// with the odd tail on the SM side instead, a count like 512 MiB + 12 bytes started the copies
/// and the reduces unaligned, and the call ran at 315 GB/s out of place and 264 in place instead
/// of 372 and 370 (2×H200). 0 when the call is too small.
pub fn ce_share(n: u64, permille: u64) -> u64 {
    if permille == 0 || n < 2 * GRAIN_ELEMS {
        return 0;
    }
    let target = n * permille.min(900) / 1000;
    let sm = ((n - target) / GRAIN_ELEMS * GRAIN_ELEMS).max(GRAIN_ELEMS);
    n - sm
}

/// The copy-engine share of this call in elements, 0 when the hybrid does not apply: a one-shot
/// Simple all-reduce of two ranks of at least `TOPOPLAN_HYBRID_MIN_MB` (default 512) per rank,
/// with a nonzero share.
pub fn share(s: &Schedule, count: u64, elem: u64) -> u64 {
    let k = knobs();
    if k.permille == 0
        || s.nranks != 2
        || s.collective.kind != CollectiveKind::AllReduce
        || s.protocol != Protocol::Simple
        || count * elem < k.min_bytes
    {
        return 0;
    }
    ce_share(count, k.permille)
}

/// Whether the two halves of a call share SMs (register-capped direct kernels beside 256-thread
/// reduces): in place. Out of place the uncapped direct kernels and 512-thread reduces run,
/// which measured faster there; in place, sharing measured faster.
pub(crate) fn shares_sms(in_place: bool) -> bool {
    in_place
}

/// Enqueues rank `rank`'s part of `req` with about the last `ce` elements on the side stream.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue(
    g: &CudaGroup,
    rank: usize,
    req: &Request,
    in_place: bool,
    module: &ExecModule,
    stream: sys::CUstream,
    ce: u64,
    ab: TpAbort,
) -> Result<(), CudaError> {
    let elem = req.dtype.size() as u64;
    let sm = req.count - ce;
    if sm >= req.count {
        return crate::direct::local::enqueue(g, rank, req, in_place, false, module, stream, ab);
    }
    let shift = |v: &[u64]| v.iter().map(|p| p + sm * elem).collect::<Vec<u64>>();
    let (ce_in, ce_out) = (shift(req.inputs), shift(req.outputs));
    let ce_req = Request {
        count: ce,
        inputs: &ce_in,
        outputs: &ce_out,
        ..*req
    };
    let sm_req = Request { count: sm, ..*req };
    let st = g.ranks[rank]
        .hybrid
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let share = shares_sms(in_place);
    fork_join(
        &g.ranks[rank].ctx,
        &st,
        stream,
        |s| crate::direct::local::enqueue(g, rank, &sm_req, in_place, share, module, s, ab),
        |side| crate::ce_pair::enqueue(g, rank, &ce_req, module, share, side, ab),
    )
}

/// Runs `sm_part` on the caller's `stream` and `ce_part` on the side stream of `st`, forked
/// from the caller's stream first and joined back into it after (the caller's later work waits
/// for both). One process (`enqueue`) and one process per GPU (`ipc`) alike.
pub(crate) fn fork_join(
    ctx: &Arc<CudaContext>,
    st: &HybridState,
    stream: sys::CUstream,
    sm_part: impl FnOnce(sys::CUstream) -> Result<(), CudaError>,
    ce_part: impl FnOnce(sys::CUstream) -> Result<(), CudaError>,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    // Fork: the side stream starts where the caller's stream is.
    st.fork.record(stream)?;
    // SAFETY: an event and a stream of this context.
    unsafe { sys::cuStreamWaitEvent(st.side.raw(), st.fork.raw(), 0) }
        .result()
        .map_err(drv)?;
    sm_part(stream)?;
    ce_part(st.side.raw())?;
    // Join: the caller's stream continues once the side range is reduced.
    st.join.record(st.side.raw())?;
    // SAFETY: as above.
    unsafe { sys::cuStreamWaitEvent(stream, st.join.raw(), 0) }
        .result()
        .map_err(drv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_copy_engine_share_is_aligned_and_leaves_the_sm_path_work(n in 0u64..1 << 30, permille in 0u64..1000) {
            let ce = ce_share(n, permille);
            let target = n * permille.min(900) / 1000;
            if ce > 0 {
                // The SM range: whole grains, at least one; the copy engines: at least their
                // share, less than a grain more (or all but the SM path's one grain).
                prop_assert_eq!((n - ce) % GRAIN_ELEMS, 0);
                prop_assert!(n - ce >= GRAIN_ELEMS);
                prop_assert!(ce >= target.min(n - GRAIN_ELEMS));
                prop_assert!(ce < target + GRAIN_ELEMS || n - ce == GRAIN_ELEMS);
            } else {
                prop_assert!(permille == 0 || n < 2 * GRAIN_ELEMS);
            }
            if permille == 0 {
                prop_assert_eq!(ce, 0);
            }
        }
    }

    #[test]
    fn a_fifth_of_a_gibibyte() {
        let n = (1u64 << 30) / 4;
        // n is whole grains: the SM path's 80 % rounds down by under a grain.
        assert_eq!(
            n - ce_share(n, 200),
            (n - n / 5) / GRAIN_ELEMS * GRAIN_ELEMS
        );
        assert_eq!(ce_share(4096, 500), 0);
        // 512 MiB + 12 bytes of floats: the 3 odd elements go to the copy engines.
        let odd = (512u64 << 20) / 4 + 3;
        assert_eq!(ce_share(odd, 500), (512u64 << 20) / 4 / 2 + 3);
    }
}
