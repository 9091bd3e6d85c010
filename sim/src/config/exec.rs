//! The simulator's model of topoplan's CUDA SM executor ([`ExecParams`]): its fitted floors and
//! rates, and the rules that pick the push, pull, hybrid or copy-engine path for a schedule.

use super::SimParams;
use planner::schedule::{Algorithm, CollectiveKind, Protocol, Schedule};
use serde::{Deserialize, Serialize};

/// topoplan's CUDA SM executor (`docs/cuda.md`) as the simulator models it for direct schedules
/// (one-shot, two-shot, direct; not the copy-engine pipeline, whose copies and reduce kernels the
/// NCCL-style model already charges). One-shot schedules run on the direct-push kernel
/// (`cuda/src/direct.rs`): every sender pushes its message into credit-recycled slots of
/// the receiver's scratch, where the receiver's CTAs fold it into the output; no barriers. So:
/// - a message is one transfer, not cut into hand-off steps, with no per-step cost and no slot
///   credit round trip beyond the route's latency (the slots pipeline it);
/// - copies, receives and reductions are fused into that transfer: they cost no separate pass;
/// - a channel's rate is its CTAs' rate, `min(ctas × cta_gbps, gpu_gbps / channels)` (LL:
///   `ll_gpu_gbps`), with one CTA (Simple: one stream) per `cta_bytes` of the message up to
///   `max_ctas`, and for LL one CTA per `ll_cta_bytes` up to `ll_ctas` (`ll_cta_bytes` 0: a fixed
///   grid of `ll_ctas`, the previous executor's rule);
/// - a call costs a fixed floor per protocol: launch, then the first data crossing and the last
///   segment's flag (Simple) or one flag-in-data round (LL).
///
/// The Simple model has no per-segment cost: the kernel's fence per segment, whose share
/// shrinks as segments grow with the message, is folded into the fitted floor and rate (the
/// misses this leaves are in `docs/fidelity.md`).
///
/// **Pull mode** (`cuda/src/direct/pull.rs`, `cuda/kernels/direct_pull.cu`): in one
/// process the runtime runs the one-shot Simple all-reduce of `pull_min_bytes..=pull_max_bytes`
/// bytes per rank (2×H200: 512 KiB–16 MiB) by having each rank's CTAs read its peers' inputs
/// over NVLink, with two per-CTA handshakes (arrive, done) instead of the push path's slots and
/// per-segment fences. The model mirrors that rule ([`ExecParams::pulls`]) and times such a call
/// as a floor (`pull_launch_us`) plus the bytes read at `pull_gbps` (whole GPU, split among the
/// schedule's channels); the push terms time every other size. The simulator has one process,
/// so the rule's "in one process" always holds.
///
/// **Hybrid** (`cuda/src/hybrid.rs`): the runtime runs the one-shot Simple all-reduce of
/// 2 ranks and at least `hybrid_min_bytes` per rank (2×H200: 512 MiB) as two paths at once on
/// disjoint ranges, the last half on the copy-engine pair path and the rest (whole 4096-element
/// grains) on the SM direct-push path. The model mirrors that rule ([`ExecParams::runs_hybrid`])
/// and times such a call as one transfer per rank, as the push path does, but with a floor
/// (`hybrid_launch_us`) and a whole-GPU rate (`hybrid_gbps`, split among the schedule's channels)
/// fitted on the hybrid itself: the two paths are not modelled separately. The fitted rate is
/// above the NVLink as the topology loader models it (2×H200: 18 × 20.6 = 370.8 GB/s per
/// direction, SM traffic's figure; the link's nominal rate is 478, and copy engines alone move
/// 392 both ways), so a hybrid transfer is not held to the route's link capacity: its bytes are
/// still recorded on the links (the `links` report, utilisation above 100 % at the fitted rate),
/// and it still shares the GPUs' memory. Its rate follows the links through
/// `hybrid_link_factor`: at most that multiple of the route's slowest link. Within one two-rank call no other flow crosses those
/// links. Where the hybrid and pull ranges overlap (not with the runtime's defaults), the hybrid
/// wins, as in the runtime, which checks it first.
///
/// Defaults fitted on the 2×H200 one-shot all-reduce of the direct-push kernel with relaxed
/// credits (`fidelity::OWN_DIRECT_H200X2`) and on the copy-engine pair all-reduce
/// (`fidelity::OWN_CE_PAIR_H200X2`) by `cargo run --release -p sim --example exec_fit`; the fit
/// and its errors are in `docs/fidelity.md`. [`ExecParams::direct_fenced_h200x2`] keeps the
/// fit of the same kernel with fenced credits, [`ExecParams::pull_h200x2`] the previous
/// executor's; both have pull mode and the hybrid off. The pull terms are fitted on
/// `fidelity::OWN_PULL_H200X2`, the hybrid terms on `fidelity::OWN_HYBRID_H200X2`, by the same
/// example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecParams {
    /// Fixed cost of one call with the Simple (or LL128) protocol, µs.
    pub launch_simple_us: f64,
    /// Fixed cost of one call with LL, µs.
    pub launch_ll_us: f64,
    /// Message bytes per CTA (stream) of a Simple grid (the executor: one per 32 KiB).
    pub cta_bytes: u64,
    /// Most CTAs (streams) of a Simple grid.
    pub max_ctas: u32,
    /// Most CTAs of an LL grid (a fixed grid of this many when `ll_cta_bytes` is 0).
    pub ll_ctas: u32,
    /// Message bytes per CTA of an LL grid (the direct-push kernel: one per 4 KiB, one 16-byte
    /// line per thread); 0: every LL grid has `ll_ctas` CTAs (the previous executor, and configs
    /// written before this field).
    #[serde(default)]
    pub ll_cta_bytes: u64,
    /// Throughput of one CTA (stream), GB/s of wire traffic.
    pub cta_gbps: f64,
    /// Whole-GPU peer throughput, GB/s of wire traffic (Simple).
    pub gpu_gbps: f64,
    /// Whole-GPU wire throughput of the LL path, GB/s (flags in the data, stores of 16-byte lines).
    pub ll_gpu_gbps: f64,
    /// Wire bytes per payload byte of the LL path (8 data bytes per 16-byte line: 2).
    pub ll_wire_factor: f64,
    /// Copy-engine path (the copy-engine pipeline): fixed cost of one call, µs.
    #[serde(default = "ce_launch_us")]
    pub ce_launch_us: f64,
    /// Copy-engine path: rate of one peer copy (`cuMemcpyAsync`, one per message), GB/s. (The
    /// copy also pays `SimConfig::ce_setup_us` and shares the links at `ce_link_efficiency`.)
    #[serde(default = "ce_gbps")]
    pub ce_gbps: f64,
    /// Pull mode: the smallest per-rank size (bytes of each rank's input) of a one-shot Simple
    /// all-reduce that the runtime pulls (`TOPOPLAN_PULL_MIN_KB`; the runtime: 512 KiB).
    #[serde(default)]
    pub pull_min_bytes: u64,
    /// Pull mode: the largest per-rank size pulled, inclusive (`TOPOPLAN_PULL_MAX_KB`; the
    /// runtime: 16 MiB). 0: pull mode off (configs written before these fields, which model the
    /// push path at every size).
    #[serde(default)]
    pub pull_max_bytes: u64,
    /// Pull mode: fixed cost of one pulled call, µs (launch, the arrive handshake, the first
    /// load round trip, the done handshake).
    #[serde(default)]
    pub pull_launch_us: f64,
    /// Pull mode: whole-GPU rate at which a rank reads its peers' inputs, GB/s (the schedule's
    /// channels split it); 0: pull mode off.
    #[serde(default)]
    pub pull_gbps: f64,
    /// Hybrid: the smallest per-rank size (bytes of each rank's input) of a two-rank one-shot
    /// Simple all-reduce that the runtime splits between the SM path and the copy engines
    /// (`TOPOPLAN_HYBRID_MIN_MB`; the runtime: 512 MiB). 0: hybrid off (configs written before
    /// these fields, which model the push path at every size).
    #[serde(default)]
    pub hybrid_min_bytes: u64,
    /// Hybrid: fixed cost of one hybrid call, µs (launch, forking the copy-engine side stream,
    /// the copy-engine half's first copy and last reduce, the join).
    #[serde(default)]
    pub hybrid_launch_us: f64,
    /// Hybrid: whole-GPU rate at which a rank's message crosses to its peer, both paths together,
    /// GB/s (the schedule's channels split it); not held to the route's link capacity (see
    /// above). For the runtime's default split (half on the copy engines). 0: hybrid off.
    #[serde(default)]
    pub hybrid_gbps: f64,
    /// Hybrid: the most it moves as a multiple of its route's slowest link as modelled (fitted
    /// rate over the calibration machine's modelled NVLink: 380.65 / 370.8). A topology or
    /// what-if with slower (or failed) links scales the hybrid through it, since the links do not
    /// meter its flows.
    #[serde(default = "hybrid_link_factor")]
    pub hybrid_link_factor: f64,
}

/// [`ExecParams::hybrid_link_factor`] of the defaults (and of configs written without it).
fn hybrid_link_factor() -> f64 {
    SimParams::bundled().exec.hybrid_link_factor
}

/// The copy-engine terms of the defaults (also the serde default of configs written before the
/// fields): the bundled profile's, fitted (minimax, worst 1.6%) on the copy-engine pair
/// all-reduce (`cuda::ce_pair`) on 2×H200, `fidelity::OWN_CE_PAIR_H200X2`, with the
/// planner's pipeline interleaving send j and receive j and `SimConfig::ce_link_efficiency`
/// 1.0. See `docs/fidelity.md`.
fn ce_launch_us() -> f64 {
    SimParams::bundled().exec.ce_launch_us
}

fn ce_gbps() -> f64 {
    SimParams::bundled().exec.ce_gbps
}

impl Default for ExecParams {
    /// The direct-push executor with relaxed credits on 2×H200: the grid rules are the runtime's
    /// (`grid()` in `cuda/src/direct.rs`); floors and rates fitted on
    /// `fidelity::OWN_DIRECT_H200X2`, the copy-engine terms on `fidelity::OWN_CE_PAIR_H200X2`,
    /// by `cargo run --release -p sim --example exec_fit`. Pull mode on, with the runtime's
    /// `auto` range (`MIN_BYTES`, `MAX_BYTES` in `cuda/src/direct/pull.rs`) and the
    /// floor and rate fitted on `fidelity::OWN_PULL_H200X2`. Hybrid on from the runtime's
    /// default 512 MiB per rank (`TOPOPLAN_HYBRID_MIN_MB` in `cuda/src/hybrid.rs`), with
    /// the floor and rate fitted on `fidelity::OWN_HYBRID_H200X2`.
    fn default() -> Self {
        SimParams::bundled().exec.clone()
    }
}

impl ExecParams {
    /// The direct-push executor with fenced credits, before they were relaxed (credit and Simple ready words
    /// written as release stores), fitted on 2×H200 (`fidelity::OWN_DIRECT_FENCED_H200X2`, by
    /// `exec_fit -- --fenced`), with the previous generic copy-engine lowering's terms
    /// (`ce_launch_us` 12.0, `ce_gbps` 199, fitted on `fidelity::OWN_CE_H200X2_RUN3`): kept to
    /// check those measurements, not used by default.
    pub fn direct_fenced_h200x2() -> Self {
        SimParams::bundled().exec_direct_fenced.clone()
    }

    /// The previous, pull-based executor (the receiver's CTAs loaded the peer's buffer behind a
    /// barrier; LL on a fixed 32-CTA grid), as fitted on 2×H200 (`fidelity::OWN_ONE_SHOT_H200X2`
    /// and `…_RUN3`), with the previous generic copy-engine lowering's terms (12.0 µs, 199 GB/s):
    /// kept to check those measurements, not used by default. Its loads are timed by the Simple
    /// terms as fitted then; the pull-mode terms (today's `direct_pull.cu`) are off.
    pub fn pull_h200x2() -> Self {
        SimParams::bundled().exec_pull_previous.clone()
    }

    /// These parameters with pull mode off: every one-shot Simple call on the push path (the
    /// runtime with `TOPOPLAN_PULL=0`, and every executor before pull mode).
    pub fn without_pull(self) -> Self {
        Self {
            pull_min_bytes: 0,
            pull_max_bytes: 0,
            pull_launch_us: 0.0,
            pull_gbps: 0.0,
            ..self
        }
    }

    /// These parameters with the hybrid off: every one-shot Simple all-reduce on the SM path
    /// alone (the runtime with `TOPOPLAN_HYBRID_CE_PCT=0`, under CUDA graph capture, and every
    /// executor before the hybrid).
    pub fn without_hybrid(self) -> Self {
        Self {
            hybrid_min_bytes: 0,
            hybrid_launch_us: 0.0,
            hybrid_gbps: 0.0,
            hybrid_link_factor: hybrid_link_factor(),
            ..self
        }
    }

    /// Whether the hybrid times `s` moving `rank_bytes` bytes per rank (each rank's input): the
    /// runtime's rule (`hybrid::share` in `cuda/src/hybrid.rs`, reached through
    /// `direct::applies`), a one-shot Simple all-reduce of exactly 2 ranks and at least
    /// `hybrid_min_bytes` per rank. Off when `hybrid_min_bytes` or `hybrid_gbps` is 0. (The
    /// runtime also needs a nonzero copy-engine share, at least two 4096-element grains: always
    /// so from its smallest threshold, 1 MiB.)
    pub fn runs_hybrid(&self, s: &Schedule, rank_bytes: u64) -> bool {
        self.hybrid_min_bytes > 0
            && self.hybrid_gbps > 0.0
            && s.nranks == 2
            && s.algorithm == Algorithm::OneShot
            && s.protocol == Protocol::Simple
            && s.collective.kind == CollectiveKind::AllReduce
            && rank_bytes >= self.hybrid_min_bytes
    }

    /// Rate cap (bytes/µs) of one channel of a hybrid schedule with `channels` channels.
    pub fn hybrid_channel_cap(&self, channels: u32) -> f64 {
        self.hybrid_gbps / channels.max(1) as f64 * 1e3
    }

    /// Whether pull mode times `s` moving `rank_bytes` bytes per rank (each rank's input):
    /// the runtime's `auto` rule (`pull::wanted` in `cuda/src/direct/pull.rs`), a
    /// one-shot Simple all-reduce of `pull_min_bytes..=pull_max_bytes` bytes per rank. Off when
    /// `pull_max_bytes` or `pull_gbps` is 0.
    pub fn pulls(&self, s: &Schedule, rank_bytes: u64) -> bool {
        self.pull_max_bytes > 0
            && self.pull_gbps > 0.0
            && s.algorithm == Algorithm::OneShot
            && s.protocol == Protocol::Simple
            && s.collective.kind == CollectiveKind::AllReduce
            && (self.pull_min_bytes..=self.pull_max_bytes).contains(&rank_bytes)
    }

    /// Read-rate cap (bytes/µs) of one channel of a pulled schedule with `channels` channels.
    pub fn pull_channel_cap(&self, channels: u32) -> f64 {
        self.pull_gbps / channels.max(1) as f64 * 1e3
    }

    /// Whether the executor model times `s`: direct SM schedules only.
    pub fn applies(s: &Schedule) -> bool {
        matches!(
            s.algorithm,
            Algorithm::OneShot | Algorithm::TwoShot | Algorithm::Direct
        )
    }

    /// Whether the executor's copy-engine path times `s`: one peer copy per message (not cut
    /// into steps), receives free (the copy lands in scratch), reduce kernels as local ops.
    pub fn applies_ce(s: &Schedule) -> bool {
        s.algorithm == Algorithm::CopyEnginePipeline
    }

    /// Fixed cost of one call, µs.
    pub fn launch_us(&self, p: Protocol) -> f64 {
        match p {
            Protocol::LL => self.launch_ll_us,
            _ => self.launch_simple_us,
        }
    }

    pub fn wire_factor(&self, p: Protocol) -> f64 {
        match p {
            Protocol::LL => self.ll_wire_factor,
            _ => 1.0,
        }
    }

    /// Wire throughput cap (bytes/µs) of one channel of a schedule with `channels` channels
    /// moving a message of `payload` bytes.
    pub fn channel_cap(&self, p: Protocol, payload: u64, channels: u32) -> f64 {
        let c = channels.max(1) as f64;
        let grid = |per: u64, max: u32| payload.div_ceil(per.max(1)).clamp(1, max.max(1) as u64);
        let (ctas, gpu) = match p {
            Protocol::LL if self.ll_cta_bytes == 0 => {
                (self.ll_ctas.max(1) as u64, self.ll_gpu_gbps)
            }
            Protocol::LL => (grid(self.ll_cta_bytes, self.ll_ctas), self.ll_gpu_gbps),
            _ => (grid(self.cta_bytes, self.max_ctas), self.gpu_gbps),
        };
        let ctas = ctas as f64;
        (ctas * self.cta_gbps).min(gpu / c) * 1e3
    }
}
