//! Machine profiles: every number fitted on a machine, in one versioned JSON file stored with the
//! measurements it was fitted on (`profiles/`, schema in `docs/profile.md`). The tuner reads its
//! `tuner` section, the simulator its `sim` section (typed and checked by `sim`), the CUDA
//! runtime its `runtime` section. The 2×H200 profile is compiled in, so a binary works anywhere;
//! a machine no profile matches gets defaults derived from its topology, and says so.

use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;

mod check;
use check::{check_shape, check_values};

pub use super::engine_terms::{EngineTerms, ENGINE_ELEM_BYTES};

/// The profile format version this build reads and writes.
pub const PROFILE_VERSION: u32 = 1;

/// The bundled 2×H200 profile (`profiles/h200x2.json`), as text.
pub const BUNDLED_H200X2: &str = include_str!("../../../profiles/h200x2.json");

/// Where the fitted numbers of a profile came from, and when it applies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// GPU model as the topology loader names it (`h200-sxm`, `h100-sxm`, ...).
    pub gpu_model: String,
    /// Compute capability × 10.
    pub sm: u32,
    pub hosts: u32,
    pub gpus_per_host: u32,
    /// NVLink bandwidth of one GPU to all its peers, one direction, as the topology loader models
    /// it (GB/s); 0 where GPUs are not NVLink peers.
    pub nvlink_gbps_per_gpu: f64,
}

/// The tuner's fitted terms (`docs/tuner.md` says what each prices and how it was fitted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunerParams {
    /// Host-side cost of launching a collective, µs (NCCL's model omits it; nccl-tests' times
    /// include it).
    pub launch_us: f64,
    /// Achieved fraction of the ring's bus bandwidth per collective, in `CollectiveKind` order
    /// (all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all, send/recv).
    pub coll_eff: [f64; 7],
    /// Size ramp of ring/tree Simple and LL128: `1 / (1 + (ramp_s0/bytes)^ramp_a)`.
    pub ramp_s0: f64,
    pub ramp_a: f64,
    /// SM peer traffic to every peer at once, as a fraction of the NVLink bandwidth (the generic
    /// executor's all-to-all and send/recv).
    pub sm_peer_eff: f64,
    /// Simple one-shot senders' stores: fraction of the NVLink bandwidth.
    pub direct_peer_eff: f64,
    /// LL one-shot payload rate as a fraction of the Simple rate.
    pub direct_ll_fraction: f64,
    /// Fixed cost of a one-shot call on top of `launch_us` per protocol [LL, LL128, Simple], µs.
    pub direct_lat_us: [f64; 3],
    /// Size ramp of the Simple one-shot.
    pub direct_ramp_s0: f64,
    pub direct_ramp_a: f64,
    /// Per-rank sizes the runtime runs a one-shot all-reduce in pull mode (inclusive).
    pub pull_min_bytes: u64,
    pub pull_max_bytes: u64,
    /// Pull mode: fraction of the NVLink bandwidth; fixed cost on top of `launch_us`, µs.
    pub pull_eff: f64,
    pub pull_lat_us: f64,
    /// Smallest per-rank two-rank all-reduce the runtime runs as its hybrid.
    pub hybrid_min_bytes: u64,
    pub hybrid_eff: f64,
    pub hybrid_lat_us: f64,
    /// Copy-engine pair all-reduce: fraction of the NVLink bandwidth, cost per chunk, fixed cost
    /// on top of `launch_us`, the runtime's chunking (largest, smallest chunk).
    pub ce_eff: f64,
    pub ce_copy_overhead_us: f64,
    pub ce_launch_us: f64,
    pub ce_chunk_bytes: u64,
    pub ce_min_chunk_bytes: u64,
    /// Cross-GPU flag synchronisation of a direct pattern, µs.
    pub direct_sync_us: f64,
    /// Extra latency per additional peer of a direct pattern, µs (an estimate: only 2-GPU
    /// machines were measured).
    pub direct_peer_us: f64,
    /// Local device copy bandwidth, GB/s.
    pub local_copy_gbps: f64,
    /// The engine's terms the tuner reads too, taken from the profile's `sim` section when the
    /// profile is read (not a field of the file's `tuner` section).
    #[serde(skip)]
    pub engine: EngineTerms,
}

/// What the CUDA runtime's automatic choice reads besides the tuner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeParams {
    /// Up to this size (bytes per rank) `auto` runs two-rank direct schedules with LL: the
    /// measured crossover of the LL and Simple one-shot.
    pub ll_up_to_bytes: u64,
}

/// One machine profile (`docs/profile.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub machine: Machine,
    /// The measurement files the numbers were fitted on (paths relative to the repository).
    pub measurements: Vec<String>,
    pub tuner: TunerParams,
    /// The simulator's parameters; `sim` types and checks them.
    pub sim: Value,
    pub runtime: RuntimeParams,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProfileError {
    #[error("{file}: {msg}")]
    Read { file: String, msg: String },
    #[error("{file}: not JSON: {msg}")]
    Json { file: String, msg: String },
    #[error("{file}: field `{field}`: {msg}")]
    Field {
        file: String,
        field: String,
        msg: String,
    },
}

/// How a profile was chosen, for the outputs that must say so.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ProfileSource {
    /// Compiled in, and the topology matches its machine.
    Bundled { name: String },
    /// Read from a file (`--profile`).
    File { path: String },
    /// No profile matches this topology: defaults derived from it.
    Derived { reason: String },
}

/// A profile and how it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileChoice {
    pub profile: Profile,
    pub source: ProfileSource,
}

impl ProfileChoice {
    /// One line for the outputs: which profile prices this run.
    pub fn note(&self) -> String {
        match &self.source {
            ProfileSource::Bundled { name } => {
                format!("profile: bundled `{name}` (the topology matches its machine)")
            }
            ProfileSource::File { path } => {
                format!("profile: `{}` from {path}", self.profile.name)
            }
            ProfileSource::Derived { reason } => format!(
                "profile: none matches this machine ({reason}); using defaults derived from its topology (NCCL's tables for its GPU generation and link kinds, fitted terms of the bundled `h200x2` profile), uncalibrated"
            ),
        }
    }
}

/// The facts of a topology a profile is matched on.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineFacts {
    pub gpu_model: Option<String>,
    pub sm: u32,
    pub hosts: u32,
    pub gpus_per_host: u32,
    pub nvlink_gbps_per_gpu: Option<f64>,
    /// NCCL's own per-channel ring bandwidth as it runs (searched bandwidth over run channels,
    /// GB/s): what NCCL's tuner expects one channel to move; 0 if unknown.
    pub ring_gbps_per_run_channel: f64,
}

impl MachineFacts {
    /// `nvlink_gbps_per_gpu`: the search's per-GPU NVLink bandwidth to all peers, if every pair
    /// is NVLinked (`search::Channels::all_peers_nvlink_gbps`).
    pub fn of(t: &Topology, nvlink_gbps_per_gpu: Option<f64>) -> Self {
        let hosts = t.n_hosts.max(1);
        MachineFacts {
            gpu_model: t.gpus().next().and_then(|(_, g)| g.model.clone()),
            sm: t.gpus().map(|(_, g)| g.sm).min().unwrap_or(0),
            hosts,
            gpus_per_host: (t.n_ranks() as u32).div_ceil(hosts),
            nvlink_gbps_per_gpu,
            ring_gbps_per_run_channel: 0.0,
        }
    }
}

fn bundled_value() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| serde_json::from_str(BUNDLED_H200X2).unwrap_or(Value::Null))
}

impl Profile {
    /// The bundled 2×H200 profile. It is checked like any file by a test
    /// (`bundled_profile_is_valid`); were it broken, every build's tests would fail.
    pub fn bundled() -> &'static Profile {
        static P: OnceLock<Profile> = OnceLock::new();
        P.get_or_init(|| {
            Profile::parse(BUNDLED_H200X2, "profiles/h200x2.json")
                .unwrap_or_else(|e| panic!("the bundled profile is invalid: {e}"))
        })
    }

    /// Reads and checks a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = crate::input::read_text(path).map_err(|e| ProfileError::Read {
            file: file.clone(),
            msg: e.reason(),
        })?;
        Profile::parse(&text, &file)
    }

    /// Parses and checks a profile's text; errors name `file` and the field.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        let v: Value = serde_json::from_str(text).map_err(|e| ProfileError::Json {
            file: file.into(),
            msg: e.to_string(),
        })?;
        let field = |field: &str, msg: String| ProfileError::Field {
            file: file.into(),
            field: field.into(),
            msg,
        };
        match v.get("version") {
            Some(Value::Number(n)) if n.as_u64() == Some(PROFILE_VERSION as u64) => {}
            Some(x) => {
                return Err(field(
                    "version",
                    format!("{x} is not a version this build reads ({PROFILE_VERSION})"),
                ))
            }
            None => return Err(field("version", "missing".into())),
        }
        check_shape(&v, bundled_value(), "").map_err(|(f, m)| field(&f, m))?;
        check_values(&v, "").map_err(|(f, m)| field(&f, m))?;
        let mut p: Profile =
            serde_json::from_value(v).map_err(|e| field("(profile)", e.to_string()))?;
        p.tuner.engine = EngineTerms::of(&p.sim);
        if p.tuner.pull_min_bytes > p.tuner.pull_max_bytes {
            return Err(field(
                "tuner.pull_min_bytes",
                "above tuner.pull_max_bytes".into(),
            ));
        }
        if p.tuner.ce_min_chunk_bytes == 0 || p.tuner.ce_min_chunk_bytes > p.tuner.ce_chunk_bytes {
            return Err(field(
                "tuner.ce_min_chunk_bytes",
                "must be in 1..=tuner.ce_chunk_bytes".into(),
            ));
        }
        Ok(p)
    }

    /// The profile as JSON (what `--profile` reads back).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Whether this profile's machine is `f`'s: same GPU generation, GPUs per host and hosts,
    /// and NVLink within 1 %.
    pub fn matches(&self, f: &MachineFacts) -> bool {
        let m = &self.machine;
        let nvl_ok = match f.nvlink_gbps_per_gpu {
            Some(x) => {
                m.nvlink_gbps_per_gpu > 0.0 && (x / m.nvlink_gbps_per_gpu - 1.0).abs() < 0.01
            }
            None => m.nvlink_gbps_per_gpu == 0.0,
        };
        m.sm == f.sm && m.hosts == f.hosts && m.gpus_per_host == f.gpus_per_host && nvl_ok
    }

    /// Defaults for a machine no profile matches: NCCL's own tables (in code, by GPU generation
    /// and link kind) do the topology-dependent part. A Simple channel of NCCL's moves what
    /// NCCL's tuner expects of it (`f.ring_gbps_per_run_channel`), without the size ramp and the
    /// per-collective efficiencies fitted on the bundled machine (properties of that machine),
    /// in the simulator and in the tuner alike: both then price a ring from the searched
    /// channels, and the engine's steps, slots and pipeline fill are what remains between them
    /// (`docs/fidelity.md`, "Agreement"). Every other fitted term is the bundled profile's,
    /// unscaled. The machine block is `f`'s.
    pub fn derived(f: &MachineFacts) -> Profile {
        let mut p = Profile::bundled().clone();
        if f.ring_gbps_per_run_channel > 0.0 {
            p.sim["simple"]["channel_gbps"] = Value::from(f.ring_gbps_per_run_channel);
            p.sim["nccl_ramp_s0_bytes"] = Value::from(0.0);
            p.sim["nccl_ramp_a"] = Value::from(0.0);
            // `ramp` is 1 at every size when `ramp_s0` is 0.
            p.tuner.ramp_s0 = 0.0;
            p.tuner.coll_eff = [1.0; 7];
            p.tuner.engine = EngineTerms::of(&p.sim);
        }
        p.name = "derived".into();
        p.description = "defaults derived from the topology; not calibrated on this machine".into();
        p.machine = Machine {
            gpu_model: f.gpu_model.clone().unwrap_or_default(),
            sm: f.sm,
            hosts: f.hosts,
            gpus_per_host: f.gpus_per_host,
            nvlink_gbps_per_gpu: f.nvlink_gbps_per_gpu.unwrap_or(0.0),
        };
        p.measurements.clear();
        p
    }

    /// The profile for `f`: `given` if any (a `--profile` file, whatever its machine), else the
    /// bundled one where it matches, else derived defaults.
    pub fn choose(f: &MachineFacts, given: Option<(Profile, String)>) -> ProfileChoice {
        if let Some((profile, path)) = given {
            return ProfileChoice {
                profile,
                source: ProfileSource::File { path },
            };
        }
        let b = Profile::bundled();
        if b.matches(f) {
            return ProfileChoice {
                profile: b.clone(),
                source: ProfileSource::Bundled {
                    name: b.name.clone(),
                },
            };
        }
        let reason = format!(
            "{} x {} GPU(s), sm{}{}",
            f.hosts,
            f.gpus_per_host,
            f.sm,
            match f.nvlink_gbps_per_gpu {
                Some(x) => format!(", NVLink {x:.1} GB/s per GPU"),
                None => String::new(),
            }
        );
        ProfileChoice {
            profile: Profile::derived(f),
            source: ProfileSource::Derived { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bundled_profile_is_valid() {
        let p = Profile::parse(BUNDLED_H200X2, "profiles/h200x2.json").unwrap();
        assert_eq!(p.version, PROFILE_VERSION);
        assert_eq!(p.machine.gpus_per_host, 2);
        assert!(!p.measurements.is_empty());
    }

    fn bad(edit: impl FnOnce(&mut Value)) -> ProfileError {
        let mut v: Value = serde_json::from_str(BUNDLED_H200X2).unwrap();
        edit(&mut v);
        Profile::parse(&v.to_string(), "x.json").unwrap_err()
    }

    fn field_of(e: ProfileError) -> String {
        match e {
            ProfileError::Field { file, field, .. } => {
                assert_eq!(file, "x.json");
                field
            }
            e => panic!("not a field error: {e}"),
        }
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        assert_eq!(
            field_of(bad(|v| v["tuner"]["launch_us"] = Value::from("fast"))),
            "tuner.launch_us"
        );
        assert_eq!(
            field_of(bad(|v| v["sim"]["simple"]["step_bytes"] = Value::from(-1))),
            "sim.simple.step_bytes"
        );
        assert_eq!(
            field_of(bad(|v| v["sim"]["ll"]["channel_gbps"] = Value::from(0.0))),
            "sim.ll.channel_gbps"
        );
        assert_eq!(
            field_of(bad(|v| {
                v["tuner"].as_object_mut().unwrap().remove("ramp_a");
            })),
            "tuner.ramp_a"
        );
        assert_eq!(
            field_of(bad(|v| v["tuner"]["typo"] = Value::from(1.0))),
            "tuner.typo"
        );
        assert_eq!(
            field_of(bad(
                |v| v["tuner"]["coll_eff"] = serde_json::json!([1.0, 0.8])
            )),
            "tuner.coll_eff"
        );
        assert_eq!(field_of(bad(|v| v["version"] = Value::from(99))), "version");
        assert_eq!(
            field_of(bad(
                |v| v["tuner"]["pull_min_bytes"] = Value::from(1u64 << 40)
            )),
            "tuner.pull_min_bytes"
        );
        let e = Profile::parse("{", "y.json").unwrap_err();
        assert!(e.to_string().starts_with("y.json: not JSON"), "{e}");
    }

    #[test]
    fn the_bundled_profile_matches_only_its_machine() {
        let f = MachineFacts {
            gpu_model: Some("h200-sxm".into()),
            sm: 90,
            hosts: 1,
            gpus_per_host: 2,
            nvlink_gbps_per_gpu: Some(370.8),
            ring_gbps_per_run_channel: 15.0,
        };
        let c = Profile::choose(&f, None);
        assert!(matches!(c.source, ProfileSource::Bundled { .. }));
        let f8 = MachineFacts {
            gpus_per_host: 8,
            ..f
        };
        let c = Profile::choose(&f8, None);
        assert!(matches!(c.source, ProfileSource::Derived { .. }));
        assert!(c.note().contains("derived"), "{}", c.note());
        assert_eq!(c.profile.machine.gpus_per_host, 8);
        assert_eq!(c.profile.sim["simple"]["channel_gbps"], 15.0);
        // The tuner drops the bundled machine's ramp and efficiencies as the simulator does.
        assert_eq!(c.profile.sim["nccl_ramp_s0_bytes"], 0.0);
        let t = &c.profile.tuner;
        assert_eq!(
            super::super::ramp(t, crate::schedule::Protocol::Simple, 1 << 20),
            1.0
        );
        assert!(t.coll_eff.iter().all(|&e| e == 1.0), "{:?}", t.coll_eff);
        // What is derived is a valid profile.
        Profile::parse(&c.profile.to_json(), "x.json").unwrap();
    }

    /// Positive numbers with at most three decimals (every such number prints and parses back
    /// exactly).
    fn milli(max: u32) -> impl Strategy<Value = f64> {
        (1..max).prop_map(|k| k as f64 / 1000.0)
    }

    proptest! {
        /// Any valid profile written out reads back equal.
        #[test]
        fn round_trip(launch in milli(100_000), eff in milli(2_000), ll in 0u64..(1 << 30),
                      name in "[a-z0-9-]{1,12}", gpus in 1u32..1024, step in 1u64..(1 << 24),
                      ch in milli(500_000)) {
            let mut p = Profile::bundled().clone();
            p.name = name;
            p.tuner.launch_us = launch;
            p.tuner.coll_eff[2] = eff;
            p.runtime.ll_up_to_bytes = ll;
            p.machine.gpus_per_host = gpus;
            p.sim["simple"]["step_bytes"] = Value::from(step);
            p.sim["ll"]["channel_gbps"] = Value::from(ch);
            // The tuner's copy of the engine's terms follows the `sim` section.
            p.tuner.engine = EngineTerms::of(&p.sim);
            let back = Profile::parse(&p.to_json(), "p.json").unwrap();
            prop_assert_eq!(back, p);
        }
    }
}
