//! The library's settings, read through the `params` registry (`topoplan env` lists them).

use std::sync::OnceLock;

/// `TOPOPLAN_NCCL_LIB`: the real NCCL's path, if given.
pub fn nccl_lib() -> Option<String> {
    params::NCCL_LIB.string().ok().flatten()
}

/// How much `TOPOPLAN_DEBUG` asks to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Warn,
    Info,
}

pub fn level() -> Level {
    static L: OnceLock<Level> = OnceLock::new();
    *L.get_or_init(|| match params::DEBUG.choice_or_warn() {
        Some("NONE") => Level::None,
        Some("INFO") => Level::Info,
        _ => Level::Warn,
    })
}

/// Prints one `NCCL_DEBUG`-style line on stderr when `TOPOPLAN_DEBUG` is at least `at`.
pub fn log(at: Level, msg: &str) {
    if level() >= at {
        let tag = if at == Level::Info { "INFO" } else { "WARN" };
        // One write per line, so ranks sharing a terminal do not interleave mid-line.
        let line = format!(
            "{}:{}:{} [topoplan] NCCL {tag} {msg}\n",
            runtime::bootstrap::hostname(),
            std::process::id(),
            thread_id()
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }
}

fn thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}
