//! Simulation parameters: protocol costs, launch and copy-engine overheads, link efficiencies.
//! The fitted ones come from a machine profile's `sim` section ([`SimParams`], `profiles/`,
//! `docs/profile.md`); the defaults are the bundled 2×H200 profile's (see `docs/fidelity.md`).

use planner::schedule::{Algorithm, CollectiveKind, OpKind, Protocol, Schedule};
use planner::tuner::profile::{Profile, ProfileError};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

mod exec;
pub use exec::ExecParams;

/// The fitted part of the simulator's configuration: a machine profile's `sim` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimParams {
    pub launch_us: f64,
    pub ll: ProtoParams,
    pub ll128: ProtoParams,
    pub simple: ProtoParams,
    pub sm_link_efficiency: f64,
    pub ce_link_efficiency: f64,
    pub ce_setup_us: f64,
    pub net_step_us: f64,
    pub local_channel_gbps: f64,
    pub direct_gbps: f64,
    pub direct_local_gbps: f64,
    /// Size ramp of NCCL's own Simple and LL128 channels (`--as nccl`): each channel reaches
    /// `1 / (1 + (s0/bytes)^a)` of its rate at an nccl-tests size of `bytes`. Measured NCCL
    /// bandwidth keeps climbing long after its pipeline is full (2×H200 all-reduce busbw 314 GB/s
    /// at 512 MiB, 340 at 2 GiB), which steps and slots alone do not produce. 0: off.
    pub nccl_ramp_s0_bytes: f64,
    pub nccl_ramp_a: f64,
    /// How much faster NCCL's channels move data when every GPU's links carry it one way only
    /// (two-rank broadcast and reduce) than both ways at once, as in the rings the channel
    /// rates were fitted on: the machine's SM peer-read ceilings one way over both ways
    /// (2×H200: 369 / 337 GB/s). 1: no difference.
    #[serde(default = "one_f64")]
    pub one_way_gain: f64,
    /// topoplan's executor as the runtime runs it now.
    pub exec: ExecParams,
    /// The direct-push executor with fenced credits (kept to check its measurements).
    pub exec_direct_fenced: ExecParams,
    /// The earlier pull-based executor (kept to check its measurements).
    pub exec_pull_previous: ExecParams,
}

impl SimParams {
    /// The `sim` section of `p` (read from `file`), typed. `Profile::parse` already checked its
    /// shape and numbers against the bundled profile, so this rarely fails; it names the file.
    pub fn from_profile(p: &Profile, file: &str) -> Result<SimParams, ProfileError> {
        serde_json::from_value(p.sim.clone()).map_err(|e| ProfileError::Field {
            file: file.into(),
            field: "sim".into(),
            msg: e.to_string(),
        })
    }

    /// The bundled 2×H200 profile's (a test checks that it parses).
    pub fn bundled() -> &'static SimParams {
        static P: OnceLock<SimParams> = OnceLock::new();
        P.get_or_init(|| {
            SimParams::from_profile(Profile::bundled(), "profiles/h200x2.json")
                .unwrap_or_else(|e| panic!("the bundled profile is invalid: {e}"))
        })
    }
}

/// Costs of one NCCL-style protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProtoParams {
    /// Bytes on the wire per payload byte (LL: 2, flags double the traffic; LL128: 128/120).
    pub wire_factor: f64,
    /// Payload bytes per step (one connection slot); messages are cut into steps.
    pub step_bytes: u64,
    /// Fewest steps a ring message is cut into (NCCL's ring Simple cuts every chunk into
    /// CHUNKSTEPS = 4 steps, however small); a message is `max(ceil(payload/step_bytes),
    /// min_steps)` steps. Other algorithms use 1.
    #[serde(default = "one")]
    pub min_steps: u32,
    /// Fixed cost per step in µs (flag/fence, polling), paid by the op that runs the step.
    pub step_us: f64,
    /// Extra one-way latency per transfer in µs, on top of the route's link latencies.
    pub hop_us: f64,
    /// Throughput cap of one channel (one thread block) in GB/s of wire traffic.
    pub channel_gbps: f64,
}

impl ProtoParams {
    /// `min_steps` applies to ring all-reduce, all-gather and reduce-scatter only (NCCL's chunk
    /// steps are a ring Simple rule of those; broadcast and reduce chunks are one step).
    pub fn min_steps_for(&self, s: &Schedule) -> u32 {
        if s.algorithm == Algorithm::Ring
            && matches!(
                s.collective.kind,
                CollectiveKind::AllReduce
                    | CollectiveKind::AllGather
                    | CollectiveKind::ReduceScatter
            )
        {
            self.min_steps.max(1)
        } else {
            1
        }
    }
}

/// How `simulate` executes a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Detailed when the estimated event count is below `SimConfig::detailed_limit`, else
    /// aggregated when the schedule is symmetric and its programs keep lockstep (else, for a
    /// symmetric one, the line through two detailed runs), else detailed.
    Auto,
    /// Every step of every op is an event; links shared max-min fair.
    Detailed,
    /// Lockstep model of symmetric schedules (rings): one evaluation per compact op. See docs/sim.md.
    Aggregated,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Seed for the optional per-step jitter (the only randomness).
    pub seed: u64,
    /// Relative jitter of step costs, uniform in [0, jitter); 0 disables it.
    pub jitter: f64,
    /// Element size in bytes (nccl-tests uses float: 4).
    pub elem_bytes: u32,
    /// Host launch and kernel start before the first op, µs.
    pub launch_us: f64,
    /// LL, LL128, Simple.
    pub ll: ProtoParams,
    pub ll128: ProtoParams,
    pub simple: ProtoParams,
    /// Fraction of a link's nominal bandwidth that SM-driven peer traffic reaches.
    pub sm_link_efficiency: f64,
    /// Fraction of a link's bandwidth (as the topology loader models it: 2×H200 NVLink
    /// 18 × 20.6 = 370.8 GB/s per direction) that copy-engine traffic reaches. 1.0: copy engines
    /// measurably move 396 GB/s one way and 392 both ways on 2×H200 (of 478 nominal;
    /// `tests/data/measurements/h200x2/README.md`), more than the loaded link, so a cap below it
    /// is below what they do (`docs/fidelity.md`).
    pub ce_link_efficiency: f64,
    /// Copy-engine setup per transfer step, µs.
    pub ce_setup_us: f64,
    /// Extra cost per network step (proxy thread, NIC doorbell), µs.
    pub net_step_us: f64,
    /// Throughput cap of one channel doing local copies/reductions, GB/s.
    pub local_channel_gbps: f64,
    /// Whole-GPU peer throughput of topoplan's direct kernels (one-shot, two-shot, direct,
    /// copy-engine pipeline), GB/s; their channels split it. (2×H200: SM peer read 374.)
    #[serde(default = "direct_gbps")]
    pub direct_gbps: f64,
    /// Whole-GPU local copy/reduce throughput of direct kernels, GB/s (2×H200: ~1960).
    #[serde(default = "direct_local_gbps")]
    pub direct_local_gbps: f64,
    /// Senders store straight into the receiver's destination (NCCL's P2P direct mode within a
    /// process): `Recv` costs no local copy and `RecvCopySend` only reads what it forwards.
    #[serde(default = "yes")]
    pub direct_recv: bool,
    /// Model of topoplan's own SM executor for direct schedules (one-shot, two-shot, direct);
    /// `None` runs them like NCCL-style channels. See `ExecParams`.
    #[serde(default = "exec_default")]
    pub exec: Option<ExecParams>,
    pub mode: Mode,
    /// With at least `quantum_min_flows` concurrent flows, bandwidth shares are recomputed at
    /// most once per quantum: this many µs, or 1/16 of the mean remaining flow time if longer
    /// (0: always exactly). Flows still finish on time; a flow started meanwhile waits for the
    /// next recomputation unless every flow runs at its cap. Bounds the cost of large detailed
    /// runs.
    #[serde(default = "quantum")]
    pub rate_quantum_us: f64,
    #[serde(default = "quantum_min_flows")]
    pub quantum_min_flows: usize,
    /// Auto mode switches to the aggregated model above this many estimated events.
    pub detailed_limit: u64,
    /// Wire rate (GB/s) of an LL channel once its connection's slots are full: the receiver's
    /// flag-polling copy then paces the sender (`with_ll_channel_cap`). `None`: no such limit.
    #[serde(default)]
    pub ll_steady_gbps: Option<f64>,
    /// Auto mode refuses (`SimError::TooLarge`) asymmetric schedules above this many estimated
    /// events instead of running for minutes; `Mode::Detailed` runs them anyway.
    #[serde(default = "max_detailed_events")]
    pub max_detailed_events: u64,
    /// Record a trace (Chrome/Perfetto JSON) of the run (detailed mode only).
    pub trace: bool,
    /// [`SimParams::nccl_ramp_s0_bytes`], [`SimParams::nccl_ramp_a`].
    #[serde(default)]
    pub nccl_ramp_s0_bytes: f64,
    #[serde(default)]
    pub nccl_ramp_a: f64,
    /// [`SimParams::one_way_gain`].
    #[serde(default = "one_f64")]
    pub one_way_gain: f64,
}

impl Default for SimConfig {
    /// The bundled 2×H200 profile's parameters.
    fn default() -> Self {
        Self::from_params(SimParams::bundled())
    }
}

impl SimConfig {
    /// A configuration with `p`'s fitted parameters and default run settings (seed 0, no
    /// jitter, float elements, auto mode).
    pub fn from_params(p: &SimParams) -> Self {
        Self {
            seed: 0,
            jitter: 0.0,
            elem_bytes: planner::tuner::ENGINE_ELEM_BYTES as u32,
            launch_us: p.launch_us,
            ll: p.ll.clone(),
            ll128: p.ll128.clone(),
            simple: p.simple.clone(),
            sm_link_efficiency: p.sm_link_efficiency,
            ce_link_efficiency: p.ce_link_efficiency,
            ce_setup_us: p.ce_setup_us,
            net_step_us: p.net_step_us,
            local_channel_gbps: p.local_channel_gbps,
            direct_gbps: p.direct_gbps,
            direct_local_gbps: p.direct_local_gbps,
            direct_recv: true,
            exec: Some(p.exec.clone()),
            mode: Mode::Auto,
            rate_quantum_us: quantum(),
            quantum_min_flows: quantum_min_flows(),
            detailed_limit: 2_000_000,
            ll_steady_gbps: None,
            max_detailed_events: max_detailed_events(),
            trace: false,
            nccl_ramp_s0_bytes: p.nccl_ramp_s0_bytes,
            nccl_ramp_a: p.nccl_ramp_a,
            one_way_gain: p.one_way_gain,
        }
    }

    /// This configuration with every protocol's channel rate scaled by `one_way_gain` (a
    /// schedule whose GPUs each only send or only receive).
    pub fn one_way(&self) -> SimConfig {
        let mut c = self.clone();
        for p in [&mut c.ll, &mut c.ll128, &mut c.simple] {
            p.channel_gbps *= self.one_way_gain;
        }
        c
    }

    /// This configuration with an LL channel's steady rate held to `data_gbps` of payload:
    /// NCCL's LL ceiling (`llMaxBws`, the bus bandwidth its flag-polling copy loop sustains on a
    /// GPU) shared by the call's channels (`planner::tuner::nccl::ll_max_bw`). A channel's first
    /// `slots` steps land in empty slots at the channel's rate; after that each step waits for
    /// the receiver to consume one, at this rate.
    pub fn with_ll_channel_cap(&self, data_gbps: f64) -> SimConfig {
        let mut c = self.clone();
        c.ll_steady_gbps = Some(data_gbps * c.ll.wire_factor);
        c
    }

    /// This configuration with NCCL's Simple and LL128 channel rates scaled by the size ramp at
    /// `bytes` (see [`SimParams::nccl_ramp_s0_bytes`]).
    pub fn with_nccl_ramp(&self, bytes: u64) -> SimConfig {
        let mut c = self.clone();
        if self.nccl_ramp_s0_bytes > 0.0 && self.nccl_ramp_a > 0.0 {
            let f = planner::tuner::size_ramp(self.nccl_ramp_s0_bytes, self.nccl_ramp_a, bytes);
            c.simple.channel_gbps *= f;
            c.ll128.channel_gbps *= f;
        }
        c
    }

    /// This configuration with the size ramp read at `bytes` where `s` is NCCL's ring pattern
    /// (ring all-reduce, all-gather, reduce-scatter: the curves the ramp was fitted on), else
    /// unramped: broadcast and reduce (pipelines of one-step chunks along the ring) and trees
    /// fill in the engine step by step.
    pub fn with_ring_ramp(&self, s: &Schedule, bytes: u64) -> SimConfig {
        if planner::tuner::nccl::ring_chunked(&s.algorithm, s.collective.kind) {
            self.with_nccl_ramp(bytes)
        } else {
            self.clone()
        }
    }

    /// A configuration from profile `p`'s `sim` section (`file` names it in errors).
    pub fn from_profile(p: &Profile, file: &str) -> Result<Self, ProfileError> {
        Ok(Self::from_params(&SimParams::from_profile(p, file)?))
    }
}

fn direct_gbps() -> f64 {
    SimParams::bundled().direct_gbps
}

fn direct_local_gbps() -> f64 {
    SimParams::bundled().direct_local_gbps
}

fn exec_default() -> Option<ExecParams> {
    Some(ExecParams::default())
}

fn max_detailed_events() -> u64 {
    30_000_000
}

fn quantum() -> f64 {
    0.05
}

fn quantum_min_flows() -> usize {
    64
}

fn yes() -> bool {
    true
}

fn one_f64() -> f64 {
    1.0
}

fn one() -> u32 {
    1
}

impl SimConfig {
    /// Throughput caps (bytes/µs) of one channel of `s`: (sending, local work). NCCL-style
    /// algorithms (ring, tree, imported) run one thread block per channel; topoplan's direct
    /// kernels use the whole GPU, split among their channels.
    pub fn channel_caps(&self, s: &Schedule) -> (f64, f64) {
        match s.algorithm {
            Algorithm::OneShot
            | Algorithm::TwoShot
            | Algorithm::Direct
            | Algorithm::CopyEnginePipeline => {
                let c = s.channels.max(1) as f64;
                (self.direct_gbps * 1e3 / c, self.direct_local_gbps * 1e3 / c)
            }
            _ => (
                self.proto(s.protocol).channel_gbps * 1e3,
                self.local_channel_gbps * 1e3,
            ),
        }
    }

    /// Local memory passes (reads + writes) per payload byte an op of `kind` makes on its GPU.
    pub fn local_touches(&self, kind: OpKind) -> u32 {
        if self.direct_recv {
            match kind {
                OpKind::Recv => return 0,
                OpKind::RecvCopySend => return 1,
                _ => {}
            }
        }
        kind.needs_src() as u32
            + kind.receives() as u32
            + kind.needs_dst() as u32
            + (kind == OpKind::Reduce) as u32
    }

    pub fn proto(&self, p: Protocol) -> &ProtoParams {
        match p {
            Protocol::LL => &self.ll,
            Protocol::LL128 => &self.ll128,
            Protocol::Simple => &self.simple,
        }
    }
}
