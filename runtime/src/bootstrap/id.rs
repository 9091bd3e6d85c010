//! The unique id every rank of a job shares, and this host's name.

use super::BootstrapError;
use std::io::Read;

/// What every rank needs to join: rank 0's address and the job's secret.
/// Text form: `topoplan1:<32 hex digits>@<host:port>`.
#[derive(Clone, PartialEq, Eq)]
pub struct UniqueId {
    pub addr: String,
    pub secret: [u8; 16],
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret in logs.
        write!(f, "UniqueId({}, secret …)", self.addr)
    }
}

impl std::fmt::Display for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "topoplan1:{}@{}", hex(&self.secret), self.addr)
    }
}

impl std::str::FromStr for UniqueId {
    type Err = BootstrapError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BootstrapError::BadId(s.to_string());
        let rest = s.strip_prefix("topoplan1:").ok_or_else(bad)?;
        let (sec, addr) = rest.split_once('@').ok_or_else(bad)?;
        // Byte length alone would let multi-byte characters through to the slicing below.
        if sec.len() != 32 || !sec.bytes().all(|b| b.is_ascii_hexdigit()) || addr.is_empty() {
            return Err(bad());
        }
        let mut secret = [0u8; 16];
        for (i, b) in secret.iter_mut().enumerate() {
            *b = u8::from_str_radix(&sec[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(UniqueId {
            addr: addr.to_string(),
            secret,
        })
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl UniqueId {
    /// A new id for a rendezvous at `addr` (`host:port`) with a fresh random secret.
    pub fn new(addr: impl Into<String>) -> Self {
        UniqueId {
            addr: addr.into(),
            secret: random_secret(),
        }
    }
    /// An id derived from values every rank of a job shares (torchrun's environment). The
    /// secret is then only as private as those values: it keeps other jobs' connections out,
    /// not an attacker. Set `TOPOPLAN_UNIQUE_ID` for a random one.
    pub fn derived(addr: impl Into<String>, shared: &str) -> Self {
        let addr = addr.into();
        let a = crate::config::fnv1a(format!("{addr}|{shared}").as_bytes());
        let b = crate::config::fnv1a(format!("{shared}|{addr}|topoplan").as_bytes());
        let mut secret = [0u8; 16];
        secret[..8].copy_from_slice(&a.to_le_bytes());
        secret[8..].copy_from_slice(&b.to_le_bytes());
        UniqueId { addr, secret }
    }
    /// The port of `addr`, if it ends in one.
    pub fn port(&self) -> Option<u16> {
        self.addr.rsplit_once(':')?.1.parse().ok()
    }
    /// Short, non-secret name for files of this job (shared-memory segments).
    pub fn job_tag(&self) -> String {
        hex(&crate::config::fnv1a(&self.secret).to_le_bytes())
    }
}

/// 128 random bits from the OS (`/dev/urandom`), mixed with time and pid if it is unavailable.
pub(super) fn random_secret() -> [u8; 16] {
    let mut s = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut s))
        .is_ok()
    {
        return s;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = format!("{t}|{}|{:p}", std::process::id(), &s);
    s[..8].copy_from_slice(&crate::config::fnv1a(seed.as_bytes()).to_le_bytes());
    s[8..].copy_from_slice(&crate::config::fnv1a(format!("x{seed}").as_bytes()).to_le_bytes());
    s
}

/// This host's name (for "same host" decisions): `/etc/hostname`-style, or `HOSTNAME`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_id_round_trip() {
        let id = UniqueId::new("127.0.0.1:29500");
        let s = id.to_string();
        assert_eq!(s.parse::<UniqueId>().unwrap(), id);
        assert!(
            !format!("{id:?}").contains(&hex(&id.secret)),
            "Debug must not leak the secret"
        );
        assert!("topoplan1:zz@h:1".parse::<UniqueId>().is_err());
        assert!("nccl:00@h:1".parse::<UniqueId>().is_err());
        // 32 bytes, but multi-byte characters: refused, not a panic.
        let wide = format!("topoplan1:{}@h:1", "é".repeat(16));
        assert!(wide.parse::<UniqueId>().is_err());
        assert_ne!(UniqueId::new("a:1").secret, UniqueId::new("a:1").secret);
    }
}
