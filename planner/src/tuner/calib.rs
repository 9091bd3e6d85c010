//! The ramps that apply a profile's fitted terms (`TunerParams`, `profiles/`, `docs/tuner.md`)
//! to NCCL's model (`tuner::nccl`).

use super::profile::TunerParams;
use crate::schedule::{CollectiveKind, Protocol};

pub fn coll_idx(k: CollectiveKind) -> usize {
    match k {
        CollectiveKind::AllReduce => 0,
        CollectiveKind::AllGather => 1,
        CollectiveKind::ReduceScatter => 2,
        CollectiveKind::Broadcast => 3,
        CollectiveKind::Reduce => 4,
        CollectiveKind::AllToAll => 5,
        CollectiveKind::SendRecv => 6,
    }
}

/// The size ramp every fitted ramp takes: the fraction `1 / (1 + (s0 / bytes)^a)` of a rate
/// reached at `bytes`.
pub fn size_ramp(s0: f64, a: f64, bytes: u64) -> f64 {
    1.0 / (1.0 + (s0 / bytes.max(1) as f64).powf(a))
}

/// Fraction of peak bandwidth ring/tree Simple and LL128 reach at `bytes`,
/// `1 / (1 + (S0/bytes)^A)` with the profile's `ramp_s0`, `ramp_a`: pipelines fill, channels
/// start unevenly and buffers are cold at mid sizes. LL runs small messages whose time is
/// latency; NCCL's own factors stand.
pub fn ramp(c: &TunerParams, proto: Protocol, bytes: u64) -> f64 {
    match proto {
        Protocol::LL => 1.0,
        Protocol::LL128 | Protocol::Simple => size_ramp(c.ramp_s0, c.ramp_a, bytes),
    }
}

/// Size ramp of the Simple one-shot (`direct_ramp_s0`, `direct_ramp_a`): a stream's first
/// segment must land before its receiver starts.
pub fn direct_ramp(c: &TunerParams, proto: Protocol, bytes: u64) -> f64 {
    match proto {
        Protocol::LL => 1.0,
        Protocol::LL128 | Protocol::Simple => size_ramp(c.direct_ramp_s0, c.direct_ramp_a, bytes),
    }
}
