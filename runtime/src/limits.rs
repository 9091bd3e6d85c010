//! Limits derived from the machine: how many ranks and how many bytes a call may ask for
//! before anything is allocated for them. Past a limit, the caller gets an error naming the
//! request and the limit, never an allocation that aborts the process or a wrapped size.

/// Bytes of memory the kernel says can be allocated now without swapping (`MemAvailable` of
/// `/proc/meminfo`); `None` where it cannot tell.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What one rank of a multi-process world costs rank 0 at most, and every rank in plans and
/// tables: a connection, its buffers and table entries (measured well under this).
pub const BYTES_PER_REMOTE_RANK: u64 = 256 << 10;
/// What a pair of thread ranks of `Communicator::init_all` costs once they have run a call:
/// their connections (agreement connects every pair), slots and bookkeeping. Measured: 256 ranks
/// and one all-reduce reach a 1.5 GB high-water mark, 23 KB per pair; twice that, rounded.
pub const BYTES_PER_LOCAL_PAIR: u64 = 48 << 10;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("{what}: {need} bytes needed, but only {available} bytes of memory are available (MemAvailable)")]
    Memory {
        what: String,
        need: u64,
        available: u64,
    },
    #[error("{what}: the size overflows a 64-bit byte count")]
    Overflow { what: String },
    #[error("{what}: {bytes} bytes is more than a buffer of this process can hold ({max})")]
    Address { what: String, bytes: u64, max: u64 },
}

/// Checks that `need` bytes (`None`: an overflow) fit the memory available now.
pub fn check_memory(what: impl Into<String>, need: Option<u64>) -> Result<(), LimitError> {
    let what = what.into();
    let need = need.ok_or_else(|| LimitError::Overflow { what: what.clone() })?;
    match memory_available() {
        Some(available) if need > available => Err(LimitError::Memory {
            what,
            need,
            available,
        }),
        _ => Ok(()),
    }
}

/// A world of `nranks` processes; `root`: this is rank 0, which holds a link to every rank.
pub fn check_world(nranks: u64, root: bool) -> Result<(), LimitError> {
    let per = if root {
        BYTES_PER_REMOTE_RANK
    } else {
        BYTES_PER_REMOTE_RANK / 4
    };
    check_memory(
        format!("a world of {nranks} ranks"),
        nranks.checked_mul(per),
    )
}

/// `n` ranks as threads of this process: every pair of them may get a connection.
pub fn check_threads(n: u64) -> Result<(), LimitError> {
    check_memory(
        format!("{n} ranks in this process"),
        n.checked_mul(n)
            .and_then(|p| p.checked_mul(BYTES_PER_LOCAL_PAIR)),
    )
}

/// A buffer of `bytes` that this process holds or is given (`None`: the count overflowed).
pub fn check_buffer(what: impl Into<String>, bytes: Option<u64>) -> Result<u64, LimitError> {
    let what = what.into();
    let bytes = bytes.ok_or_else(|| LimitError::Overflow { what: what.clone() })?;
    // No object of a process is larger than isize::MAX bytes (Rust's and C's rule).
    let max = isize::MAX as u64;
    if bytes > max {
        return Err(LimitError::Address { what, bytes, max });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_refuse_what_cannot_exist() {
        assert!(memory_available().is_some_and(|m| m > 0));
        let e = check_world(1 << 30, true).unwrap_err().to_string();
        assert!(
            e.contains("a world of 1073741824 ranks") && e.contains("MemAvailable"),
            "{e}"
        );
        assert!(check_world(8, true).is_ok());
        let e = check_threads(10_000).unwrap_err().to_string();
        assert!(e.contains("10000 ranks in this process"), "{e}");
        assert!(check_threads(8).is_ok());
        assert!(check_buffer("x", Some(1 << 40)).is_ok());
        let e = check_buffer("all-reduce", Some(u64::MAX - 3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than a buffer"), "{e}");
        let e = check_buffer("all-gather", None).unwrap_err().to_string();
        assert!(e.contains("overflows"), "{e}");
    }
}
