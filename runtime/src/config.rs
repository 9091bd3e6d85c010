//! Runtime configuration, from code or from `TOPOPLAN_*` environment variables.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `TOPOPLAN_TIMEOUT` | how long a collective (or the bootstrap) may wait without progress: `600`, `30s`, `500ms`, `10m` | 10 min |
//! | `TOPOPLAN_ALGO` | force an algorithm (`ring`, `tree`, `one-shot`, `two-shot`, `direct`, ...) | planner's choice |
//! | `TOPOPLAN_PROTO` | force a protocol (`Simple`, `LL128`, `LL`) | planner's choice |
//! | `TOPOPLAN_CHANNELS` | force the channel count | planner's choice |
//! | `TOPOPLAN_PLAN` | a plan file: JSON schedule IR (one schedule or an array); used for the collectives it covers | none |
//! | `TOPOPLAN_SLOT_BYTES` | payload bytes per slot (one message) | 256 KiB |
//! | `TOPOPLAN_TRANSPORT` | `auto` (shared memory on one host, TCP across), `shm`, `tcp` | auto |
//! | `TOPOPLAN_SHM_DIR` | where shared-memory segments are created | `/dev/shm` |

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
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, "s"),
    };
    let v: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" | "" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

impl Config {
    /// Defaults overridden by `TOPOPLAN_*` variables (see the module docs).
    pub fn from_env() -> Result<Self, CommError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`Config::from_env`] with an arbitrary variable source (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, CommError> {
        let mut c = Config::default();
        let bad =
            |k: &str, v: &str, want: &str| CommError::Config(format!("{k}={v:?}: expected {want}"));
        if let Some(v) = get("TOPOPLAN_TIMEOUT") {
            c.timeout = parse_duration(&v).ok_or_else(|| {
                bad(
                    "TOPOPLAN_TIMEOUT",
                    &v,
                    "a duration like 600, 30s, 500ms or 10m",
                )
            })?;
        }
        if let Some(v) = get("TOPOPLAN_ALGO").filter(|v| !v.is_empty()) {
            c.algorithm = Some(v.to_ascii_lowercase());
        }
        if let Some(v) = get("TOPOPLAN_PROTO").filter(|v| !v.is_empty()) {
            c.protocol = Some(
                Protocol::parse(&v)
                    .ok_or_else(|| bad("TOPOPLAN_PROTO", &v, "Simple, LL128 or LL"))?,
            );
        }
        if let Some(v) = get("TOPOPLAN_CHANNELS").filter(|v| !v.is_empty()) {
            c.channels = Some(
                v.parse()
                    .ok()
                    .filter(|&n: &u32| n >= 1)
                    .ok_or_else(|| bad("TOPOPLAN_CHANNELS", &v, "a count >= 1"))?,
            );
        }
        if let Some(v) = get("TOPOPLAN_PLAN").filter(|v| !v.is_empty()) {
            c.plan_file = Some(PathBuf::from(v));
        }
        if let Some(v) = get("TOPOPLAN_SLOT_BYTES") {
            c.slot_bytes = v
                .parse()
                .ok()
                .filter(|&n: &usize| (64..=(1 << 30)).contains(&n))
                .ok_or_else(|| {
                    bad(
                        "TOPOPLAN_SLOT_BYTES",
                        &v,
                        "a byte count between 64 and 1 GiB",
                    )
                })?;
        }
        if let Some(v) = get("TOPOPLAN_TRANSPORT") {
            c.transport = match v.to_ascii_lowercase().as_str() {
                "" | "auto" => TransportChoice::Auto,
                "shm" => TransportChoice::Shm,
                "tcp" => TransportChoice::Tcp,
                _ => return Err(bad("TOPOPLAN_TRANSPORT", &v, "auto, shm or tcp")),
            };
        }
        if let Some(v) = get("TOPOPLAN_SHM_DIR").filter(|v| !v.is_empty()) {
            c.shm_dir = PathBuf::from(v);
        }
        Ok(c)
    }

    /// A fingerprint of everything that must agree across ranks (plan overrides and slot
    /// geometry); the bootstrap refuses ranks whose fingerprints differ.
    pub fn fingerprint(&self) -> u64 {
        let plan = self
            .plan_file
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
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
    }
}
