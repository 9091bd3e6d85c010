//! Split calls (`kernels/src/direct_split.cu`; an experiment not yet run on a GPU, off unless
//! `TOPOPLAN_SPLIT_PCT` is set): one all-reduce in one grid, its first elements over the push path
//! and its last `TOPOPLAN_SPLIT_PCT` % pulled, so SM stores and SM peer loads share NVLink
//! inside one launch. On 2×H200 the copy-engine hybrid showed two kinds of traffic at once beat
//! either alone (371–376 against 360 GB/s); this asks the same of SM stores and loads without
//! the hybrid's fork, join and copy-engine floor, which would reach sizes the hybrid cannot
//! (32 MiB). `scripts/device/split.sh` measures it.
//!
//! One process only (the pulled half reads the peers' inputs), all-reduce, Simple, where every
//! input is readable by every GPU; both ranks cut alike (same size, same knobs). Every CTA must
//! be resident at once, and the direct kernels take one 512-thread CTA per SM (128 registers a
//! thread), so senders + receivers + pull CTAs stay within the smallest GPU's SM count.

use super::launch::launch as launch_kernel;
use super::{knobs, plan_launch, pull, DirectCall, DirectPeers, TdArgs, BLOCK, MAX_CTAS};
use crate::cuda::device::{env_num, ExecModule};
use crate::cuda::CudaError;
use cudarc::driver::{sys, CudaContext};
use planner::schedule::{CollectiveKind, Protocol};
use std::sync::{Arc, OnceLock};

/// The pulled half starts on pull mode's part grain.
const GRAIN_ELEMS: u64 = pull::PART_GRAIN_ELEMS;

struct Knobs {
    pct: u64,
    min_bytes: u64,
    max_bytes: u64,
    pull_ctas: u32,
}

fn split_knobs() -> &'static Knobs {
    static K: OnceLock<Knobs> = OnceLock::new();
    K.get_or_init(|| Knobs {
        pct: env_num::<u64>("TOPOPLAN_SPLIT_PCT").map_or(0, |v| v.min(90)),
        min_bytes: env_num::<u64>("TOPOPLAN_SPLIT_MIN_MB").map_or(32, |v| v.max(1)) << 20,
        max_bytes: env_num::<u64>("TOPOPLAN_SPLIT_MAX_MB").map_or(256, |v| v.max(1)) << 20,
        pull_ctas: env_num::<u32>("TOPOPLAN_SPLIT_PULL_CTAS").map_or(32, |v| v.max(1)),
    })
}

/// Whether the knobs ask for a split call: a Simple all-reduce of `bytes` per rank within
/// `TOPOPLAN_SPLIT_MIN_MB`–`TOPOPLAN_SPLIT_MAX_MB` (default 32–256) with a nonzero share.
pub(crate) fn wanted(kind: CollectiveKind, protocol: Protocol, bytes: u64) -> bool {
    let k = split_knobs();
    k.pct > 0
        && kind == CollectiveKind::AllReduce
        && protocol == Protocol::Simple
        && (k.min_bytes..=k.max_bytes).contains(&bytes)
}

/// How a split call of `n` elements is cut and laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitGeometry {
    /// Elements `[0, push_n)` are pushed; `push_n` is a multiple of 4096.
    pub push_n: u64,
    /// Elements `[push_n, push_n + pull_n)` are pulled.
    pub pull_n: u64,
    /// Push streams (sender CTAs), each with its own receiver CTA.
    pub senders: u32,
    pub pull_ctas: u32,
}

/// The cut of `n` elements with about `pct` % pulled, on GPUs of `min_sm` SMs with `pull_ctas`
/// pull CTAs wanted: `None` when either half would be empty or the grid cannot fit.
pub fn geometry(n: u64, pct: u64, min_sm: u32, pull_ctas: u32) -> Option<SplitGeometry> {
    let push_n = (n * (100 - pct.min(90)) / 100).next_multiple_of(GRAIN_ELEMS);
    if push_n == 0 || push_n >= n || min_sm < 3 {
        return None;
    }
    let pull_ctas = pull_ctas.clamp(1, min_sm - 2);
    let senders = ((min_sm - pull_ctas) / 2).min(MAX_CTAS);
    Some(SplitGeometry {
        push_n,
        pull_n: n - push_n,
        senders,
        pull_ctas,
    })
}

/// [`geometry`] with the knobs' share and pull CTAs.
pub(crate) fn geometry_for(n: u64, min_sm: u32) -> Option<SplitGeometry> {
    let k = split_knobs();
    geometry(n, k.pct, min_sm, k.pull_ctas)
}

/// `TdSplitArgs` of direct_split.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TdSplitArgs {
    a: TdArgs,
    pull_in: [u64; 8],
    pull_off: u64,
    pull_n: u64,
    receivers: u32,
    pull_ctas: u32,
}

/// Enqueues `rank`'s part of the split call `call` (its `inputs` set: every rank's input) on
/// `stream` of `ctx`.
pub(crate) fn launch(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    peers: &DirectPeers,
    rank: u32,
    call: &DirectCall,
    geo: &SplitGeometry,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    let inputs = call
        .inputs
        .ok_or_else(|| CudaError::Lower("a split call needs every rank's input".into()))?;
    let push = DirectCall {
        count: geo.push_n,
        inputs: None,
        force_pull: false,
        ..*call
    };
    let plan = plan_launch(peers, rank, &push, Some(geo.senders))?;
    let senders = plan.args.senders;
    let receivers = plan.ctas - senders;
    let mut a = plan.args;
    a.opts |= pull::opts();
    let args = TdSplitArgs {
        a,
        pull_in: inputs,
        pull_off: geo.push_n,
        pull_n: geo.pull_n,
        receivers,
        pull_ctas: geo.pull_ctas,
    };
    let f = &module.split[crate::cuda::device::op_index(call.op)];
    let grid = senders + receivers + geo.pull_ctas;
    launch_kernel(ctx, f, grid, BLOCK, &args, stream, knobs().pdl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The halves tile the message, the pulled half starts on a grain, and every CTA of
        /// the grid fits on the smallest GPU at one per SM (else the halves could wait forever
        /// for CTAs that never start).
        #[test]
        fn the_cut_tiles_the_message_and_the_grid_fits(
            n in 0u64..1 << 28,
            pct in 0u64..100,
            min_sm in 0u32..200,
            pull_ctas in 0u32..300,
        ) {
            if let Some(g) = geometry(n, pct, min_sm, pull_ctas) {
                prop_assert_eq!(g.push_n + g.pull_n, n);
                prop_assert_eq!(g.push_n % GRAIN_ELEMS, 0);
                prop_assert!(g.push_n > 0 && g.pull_n > 0);
                prop_assert!(g.senders >= 1 && g.senders <= MAX_CTAS);
                prop_assert!(g.pull_ctas >= 1);
                prop_assert!(2 * g.senders + g.pull_ctas <= min_sm);
            }
        }
    }

    #[test]
    fn thirty_percent_of_32_mib_on_h200() {
        let n = (32u64 << 20) / 4;
        let g = geometry(n, 30, 132, 32).unwrap();
        assert_eq!((g.senders, g.pull_ctas), (50, 32));
        assert_eq!(g.push_n, (n * 70 / 100).next_multiple_of(GRAIN_ELEMS));
        assert!(geometry(1000, 30, 132, 32).is_none(), "too small to cut");
        assert!(geometry(n, 0, 132, 32).is_none(), "nothing pulled");
    }

    /// `TdSplitArgs` is `TdArgs` then 8 pointers, 2 u64 and 2 u32 (direct_split.cu).
    #[test]
    fn split_args_match_the_kernel_layout() {
        assert_eq!(
            std::mem::size_of::<TdSplitArgs>(),
            std::mem::size_of::<TdArgs>() + 8 * 8 + 2 * 8 + 2 * 4
        );
    }
}
