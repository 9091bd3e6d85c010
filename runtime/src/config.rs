//! Runtime configuration, from code or from `TOPOPLAN_*` environment variables.
//!
//! The variables read here (`TOPOPLAN_TIMEOUT`, `_ALGO`, `_PROTO`, `_CHANNELS`, `_PLAN`,
//! `_SLOT_BYTES`, `_TRANSPORT`, `_SHM_DIR`) are declared, with their types, ranges and defaults,
//! in the `params` registry; `topoplan env` and `docs/environment.md` list them.

use crate::error::CommError;
use planner::schedule::Protocol;
use std::path::PathBuf;
use std::time::Duration;

/// How processes reach each other (threads of one process always share memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory between processes of one host, TCP between hosts.
    Auto,
    /// Shared memory only (every rank must be on this host).
    Shm,
    /// TCP between every pair of processes, even on one host.
    Tcp,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub timeout: Duration,
    pub algorithm: Option<String>,
    pub protocol: Option<Protocol>,
    pub channels: Option<u32>,
    pub plan_file: Option<PathBuf>,
    /// Payload bytes per slot: the largest message.
    pub slot_bytes: usize,
    /// Physical slots per connection; schedules asking for more are refused.
    pub slots: u32,
    pub transport: TransportChoice,
    pub shm_dir: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeout: Duration::from_secs(600),
            algorithm: None,
            protocol: None,
            channels: None,
            plan_file: None,
            slot_bytes: 256 * 1024,
            slots: 8,
            transport: TransportChoice::Auto,
            shm_dir: PathBuf::from("/dev/shm"),
        }
    }
}

/// Parses `600`, `30s`, `500ms`, `10m`, `1h` (a bare number is seconds).
pub use params::parse_duration;

impl Config {
    /// Defaults overridden by `TOPOPLAN_*` variables (see the module docs). Warns once on
    /// stderr about `TOPOPLAN_*` variables that are set but not declared (misspellings).
    pub fn from_env() -> Result<Self, CommError> {
        params::warn_unknown_once();
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`Config::from_env`] with an arbitrary variable source (tests). Every value is
    /// validated by its declaration in the `params` registry; an empty value counts as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, CommError> {
        let get: params::Lookup = &get;
        let bad = |e: params::ParamError| CommError::Config(e.to_string());
        let mut c = Config::default();
        if let Some(t) = params::TIMEOUT.duration_from(get).map_err(bad)? {
            c.timeout = t;
        }
        c.algorithm = params::ALGO
            .string_from(get)
            .map_err(bad)?
            .map(|v| v.to_ascii_lowercase());
        if let Some(p) = params::PROTO.choice_from(get).map_err(bad)? {
            // The registry's choices are exactly the spellings `Protocol::parse` accepts.
            c.protocol = Some(Protocol::parse(p).ok_or_else(|| {
                CommError::Config(format!("TOPOPLAN_PROTO={p:?}: not a protocol"))
            })?);
        }
        c.channels = params::CHANNELS.u32_from(get).map_err(bad)?;
        c.plan_file = params::PLAN.path_from(get).map_err(bad)?;
        if let Some(b) = params::SLOT_BYTES.bytes_from(get).map_err(bad)? {
            c.slot_bytes = b as usize;
        }
        c.transport = match params::TRANSPORT.choice_from(get).map_err(bad)? {
            Some("shm") => TransportChoice::Shm,
            Some("tcp") => TransportChoice::Tcp,
            _ => TransportChoice::Auto,
        };
        if let Some(d) = params::SHM_DIR.path_from(get).map_err(bad)? {
            c.shm_dir = d;
        }
        Ok(c)
    }

    /// A fingerprint of everything that must agree across ranks (plan overrides and slot
    /// geometry); the bootstrap refuses ranks whose fingerprints differ.
    pub fn fingerprint(&self) -> u64 {
        let plan = self
            .plan_file
            .as_ref()
            .and_then(|p| planner::input::read_bytes(p).ok())
            .unwrap_or_default();
        let s = format!(
            "{:?}|{:?}|{:?}|{}|{}",
            self.algorithm, self.protocol, self.channels, self.slot_bytes, self.slots
        );
        fnv1a(s.as_bytes()) ^ fnv1a(&plan).rotate_left(17)
    }
}

/// FNV-1a, a stable 64-bit hash (std's hasher is not stable across builds).
pub fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_env() {
        assert_eq!(parse_duration("600"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
        let c = Config::from_lookup(|k| match k {
            "TOPOPLAN_TIMEOUT" => Some("3s".into()),
            "TOPOPLAN_PROTO" => Some("ll128".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.protocol, Some(Protocol::LL128));
        let e = Config::from_lookup(|k| (k == "TOPOPLAN_TIMEOUT").then(|| "forever".into()))
            .unwrap_err();
        assert!(e.to_string().contains("TOPOPLAN_TIMEOUT"), "{e}");
        // Out of range and unknown choices are errors naming the variable and the value.
        let e =
            Config::from_lookup(|k| (k == "TOPOPLAN_SLOT_BYTES").then(|| "8".into())).unwrap_err();
        assert!(
            e.to_string()
                .contains("TOPOPLAN_SLOT_BYTES=\"8\" is out of range"),
            "{e}"
        );
        let e = Config::from_lookup(|k| (k == "TOPOPLAN_TRANSPORT").then(|| "rdma".into()))
            .unwrap_err();
        assert!(e.to_string().contains("auto, shm, tcp"), "{e}");
        // Empty values are unset; defaults match `Config::default`.
        let c = Config::from_lookup(|_| Some(String::new())).unwrap();
        let d = Config::default();
        assert_eq!(
            (c.timeout, c.slot_bytes, c.transport),
            (d.timeout, d.slot_bytes, d.transport)
        );
        assert_eq!(
            (c.algorithm, c.channels, c.shm_dir),
            (None, None, d.shm_dir)
        );
        let c = Config::from_lookup(|k| (k == "TOPOPLAN_TRANSPORT").then(|| "TCP".into())).unwrap();
        assert_eq!(c.transport, TransportChoice::Tcp);
    }
}
