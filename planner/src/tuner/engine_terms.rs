//! The simulator engine's terms that the tuner reads too.

use super::chain_paths::ChainPaths;
use serde_json::Value;

/// Bytes of the element the engine prices calls in (nccl-tests' float; `sim::SimConfig`'s
/// default `elem_bytes`): a schedule's chunks are cut at whole elements.
pub const ENGINE_ELEM_BYTES: u64 = 4;

/// Terms of the simulator's engine (the profile's `sim` section) that the tuner prices with as
/// well, so that both read one number: a channel's rate per protocol, the local copy rate, and
/// topoplan's executor grid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineTerms {
    /// Wire rate of one NCCL-style channel per protocol [LL, LL128, Simple], GB/s, and wire
    /// bytes per data byte.
    pub channel_gbps: [f64; 3],
    pub wire_factor: [f64; 3],
    /// Per protocol [LL, LL128, Simple]: the fixed one-way latency of a transfer on top of its
    /// route's link latencies, and the fixed cost of a step, µs.
    pub hop_us: [f64; 3],
    pub step_us: [f64; 3],
    /// Per protocol: payload bytes of one step, a packed tree's message.
    pub step_bytes: [u64; 3],
    /// Per protocol: the fewest steps a ring-pattern message is cut into (Simple's chunk of
    /// NCCL's four steps).
    pub min_steps: [u32; 3],
    /// The engine's host launch and kernel start before the first op, µs.
    pub launch_us: f64,
    /// NCCL's channels' size ramp in the engine (`sim.nccl_ramp_s0_bytes`, `sim.nccl_ramp_a`): a
    /// Simple or LL128 channel reaches `1 / (1 + (s0 / bytes)^a)` of its rate.
    pub nccl_ramp: [f64; 2],
    /// The fraction of a link's rate SM traffic reaches (`sim.sm_link_efficiency`).
    pub link_eff: f64,
    /// Local copy rate of one channel, GB/s.
    pub local_channel_gbps: f64,
    /// The executor's grid (`sim.exec`): bytes per CTA (Simple, LL), most CTAs (Simple, LL),
    /// one CTA's rate and the whole GPU's (Simple, LL), GB/s of wire.
    pub cta_bytes: [u64; 2],
    pub max_ctas: [u32; 2],
    pub cta_gbps: f64,
    pub gpu_gbps: [f64; 2],
    /// The executor's LL wire bytes per payload byte.
    pub ll_wire: f64,
    /// The executor's fixed cost of one call (Simple), µs, and of one LL call.
    pub exec_launch_us: f64,
    pub exec_launch_ll_us: f64,
    /// The executor's pull mode: fixed cost of one call, µs, and the whole GPU's read rate,
    /// GB/s (0: no pull mode).
    pub pull_launch_us: f64,
    pub pull_gbps: f64,
    /// A step's cost on a route through the network (`sim.net_step_us`), µs: point-to-point
    /// messages and ring hops that cross hosts pay it.
    pub net_step_us: f64,
    /// The slowest GPU-to-GPU route's latency on the first host, µs: a topology term, which the
    /// planner sets in its model from the paths the engine's messages take (0 from a profile).
    pub route_lat_us: f64,
    /// The rings' and trees' paths, which the planner measures from the topology as it does
    /// `route_lat_us` (empty from a profile, and past `plan::CHAIN_PATH_RANKS`).
    pub paths: ChainPaths,
    /// The hierarchical all-reduce's rings, measured as `paths` is: inside the first host, one
    /// per host chain (its reduce-scatter and all-gather), and across hosts, one per local GPU
    /// (its rail's all-reduce).
    pub hier_paths: [ChainPaths; 2],
}

impl EngineTerms {
    /// The terms of a profile's `sim` section (zero where one is missing).
    pub fn of(sim: &Value) -> Self {
        let f = |v: &Value| v.as_f64().unwrap_or(0.0);
        let u = |v: &Value| v.as_u64().unwrap_or(0);
        let protos = ["ll", "ll128", "simple"];
        let x = &sim["exec"];
        EngineTerms {
            channel_gbps: protos.map(|p| f(&sim[p]["channel_gbps"])),
            wire_factor: protos.map(|p| f(&sim[p]["wire_factor"])),
            hop_us: protos.map(|p| f(&sim[p]["hop_us"])),
            step_us: protos.map(|p| f(&sim[p]["step_us"])),
            step_bytes: protos.map(|p| u(&sim[p]["step_bytes"])),
            min_steps: protos.map(|p| u(&sim[p]["min_steps"]) as u32),
            launch_us: f(&sim["launch_us"]),
            nccl_ramp: [f(&sim["nccl_ramp_s0_bytes"]), f(&sim["nccl_ramp_a"])],
            link_eff: f(&sim["sm_link_efficiency"]),
            local_channel_gbps: f(&sim["local_channel_gbps"]),
            cta_bytes: [u(&x["cta_bytes"]), u(&x["ll_cta_bytes"])],
            max_ctas: [u(&x["max_ctas"]) as u32, u(&x["ll_ctas"]) as u32],
            cta_gbps: f(&x["cta_gbps"]),
            gpu_gbps: [f(&x["gpu_gbps"]), f(&x["ll_gpu_gbps"])],
            ll_wire: f(&x["ll_wire_factor"]),
            exec_launch_us: f(&x["launch_simple_us"]),
            exec_launch_ll_us: f(&x["launch_ll_us"]),
            pull_launch_us: f(&x["pull_launch_us"]),
            pull_gbps: f(&x["pull_gbps"]),
            net_step_us: f(&sim["net_step_us"]),
            route_lat_us: 0.0,
            paths: ChainPaths::default(),
            hier_paths: Default::default(),
        }
    }
}
