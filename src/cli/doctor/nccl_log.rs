//! The `NCCL_DEBUG=INFO` log parser (NCCL 2.28 wording; older and newer versions degrade to
//! "not understood" lines). Each recognised record keeps its 1-based line number so that a
//! finding can cite `file:line`. Lines NCCL prints that carry nothing a check needs are
//! recognised as informational; lines of other programs mixed in are counted apart.

use super::input::Text;
use crate::cli::error::CliError;
use serde::Serialize;

/// Where a log record came from: `host:pid:tid [dev]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Origin {
    pub line: usize,
    pub host: String,
    pub pid: String,
}

/// How one channel connects two ranks ("via P2P/CUMEM", "via SHM/direct/direct", "via NET/Socket/0").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransportLine {
    pub at: Origin,
    pub channel: u32,
    pub from: u32,
    pub to: u32,
    /// `P2P`, `SHM`, `NET` or `COLLNET` (upper case), then what follows it.
    pub transport: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Graph {
    pub line: usize,
    pub pattern: u32,
    pub nchannels: u32,
    pub bw_intra: f64,
    pub bw_inter: f64,
    pub type_intra: String,
    pub type_inter: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Init {
    pub at: Origin,
    pub rank: u32,
    pub nranks: u32,
    pub cuda_dev: Option<u32>,
    pub busid: Option<String>,
    pub comm_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommSummary {
    pub line: usize,
    pub rank: u32,
    pub nranks: u32,
    pub nnodes: u32,
    pub local_ranks: u32,
}

/// One cell of NCCL's tuning table: latency (µs) and bandwidth (GB/s) per function, algorithm, protocol.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunerCell {
    pub line: usize,
    pub func: String,
    pub algo: String,
    pub proto: String,
    pub lat_us: f64,
    pub bw_gbps: f64,
}

/// "AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgoChoice {
    pub line: usize,
    pub func: String,
    pub bytes: u64,
    pub algo: String,
    pub proto: String,
    pub channels: u32,
}

/// A GPU-to-GPU path NCCL printed: "GPU/0-60 ... GPU/0-70 (2/370.8/NVL)".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuPath {
    pub line: usize,
    pub from: String,
    pub to: String,
    pub bw_gbps: f64,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iface {
    pub line: usize,
    pub name: String,
    pub addr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Noted {
    pub line: usize,
    pub text: String,
}

/// Everything a check reads from a log.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NcclLog {
    pub file: String,
    pub lines: usize,
    pub version: Option<Noted>,
    /// `NCCL_X set by environment to V` echoes.
    pub env: Vec<(String, String, usize)>,
    pub transports: Vec<TransportLine>,
    pub ib_no_device: Option<usize>,
    /// RDMA devices NCCL's IB plugin listed ("NET/IB : Using [0]mlx5_0:1/IB ...").
    pub ib_devices: Vec<Noted>,
    /// "Using network Socket" / "Using network IB".
    pub network: Vec<Noted>,
    pub socket_ifaces: Vec<Iface>,
    pub bootstrap_ifaces: Vec<Iface>,
    /// (collective channels, p2p channels, line) from the channel summary.
    pub coll_channels: Vec<(u32, u32, usize)>,
    pub graphs: Vec<Graph>,
    pub duplicate_gpu: Vec<Noted>,
    pub inits: Vec<Init>,
    pub comms: Vec<CommSummary>,
    pub tuner: Vec<TunerCell>,
    pub choices: Vec<AlgoChoice>,
    pub gpu_paths: Vec<GpuPath>,
    /// GPU-to-NIC paths NCCL printed ("GPU/0-60 ... NET/0-0 (3/1.2/PHB)").
    pub net_paths: Vec<GpuPath>,
    pub rings: usize,
    pub trees: usize,
    /// NVLinks in NCCL's system print ("+ NVL[370.8] - NVS/0-0"): (GB/s, line).
    pub nvl_links: Vec<(f64, usize)>,
    /// `isAllCudaP2p` from "Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1": (value, line).
    pub all_cuda_p2p: Option<(u32, usize)>,
    /// (maxBw, totalBw, line) from "=== System : maxBw 370.8 totalBw 370.8 ===".
    pub system_bw: Option<(f64, f64, usize)>,
    /// (rank, total seconds, line) from "Init timings".
    pub init_timings: Vec<(u32, f64, usize)>,
    pub warnings: Vec<Noted>,
    /// NCCL lines recognised (used by a check or known to be informational).
    pub understood: usize,
    /// NCCL lines this parser does not know: line numbers (all) and the first few texts.
    pub not_understood: Vec<usize>,
    pub not_understood_samples: Vec<Noted>,
    /// Lines that are not NCCL's (the application's own output).
    pub other: usize,
}

const SAMPLES: usize = 5;

mod records;

impl NcclLog {
    /// Nodes in the job as NCCL counted them (largest `nNodes` seen), if it said.
    pub fn nnodes(&self) -> Option<u32> {
        self.comms.iter().map(|c| c.nnodes).max()
    }
    /// Ranks in the job as NCCL's init lines say.
    pub fn nranks(&self) -> Option<u32> {
        self.inits
            .iter()
            .map(|i| i.nranks)
            .chain(self.comms.iter().map(|c| c.nranks))
            .max()
    }
    pub fn cite(&self, line: usize) -> String {
        format!("{}:{line}", self.file)
    }
    pub fn env_value(&self, key: &str) -> Option<(&str, usize)> {
        self.env
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, l)| (v.as_str(), *l))
    }
}

/// Parses a log. Bad input (no NCCL lines, a cut last line) is an error naming file and line.
pub fn parse(t: &Text) -> Result<NcclLog, CliError> {
    let mut log = NcclLog {
        file: t.name.clone(),
        ..Default::default()
    };
    let mut algos: Vec<String> = Vec::new();
    let mut last_nccl_ok = true;
    let mut last_line = 0;
    for (i, raw) in t.body.lines().enumerate() {
        let n = i + 1;
        last_line = n;
        log.lines = n;
        let Some((origin, level, msg)) = split_line(raw, n) else {
            log.other += 1;
            last_nccl_ok = true;
            continue;
        };
        let ok = if level == "WARN" {
            if msg.contains("Duplicate GPU detected") {
                log.duplicate_gpu.push(noted(n, msg));
            }
            log.warnings.push(noted(n, msg));
            true
        } else {
            records::record(&mut log, &mut algos, origin, msg.trim())
        };
        last_nccl_ok = ok;
        if ok {
            log.understood += 1;
        } else {
            log.not_understood.push(n);
            if log.not_understood_samples.len() < SAMPLES {
                log.not_understood_samples.push(noted(n, msg.trim()));
            }
        }
    }
    if log.understood + log.not_understood.len() == 0 {
        return Err(CliError::input(format!(
            "{}: no NCCL lines (\"host:pid:tid [dev] NCCL INFO ...\"): run the job with NCCL_DEBUG=INFO and pass its output",
            t.name
        )));
    }
    if t.cut && !last_nccl_ok {
        return Err(CliError::input(format!(
            "{}:{last_line}: the log ends inside an NCCL line (truncated while being written?)",
            t.name
        )));
    }
    Ok(log)
}

fn noted(line: usize, text: &str) -> Noted {
    Noted {
        line,
        text: text.trim().to_string(),
    }
}

/// Splits "host:pid:tid [dev] NCCL INFO msg" (or "... file.cc:12 NCCL WARN msg"), launcher
/// prefixes like "[1,0]<stdout>:" allowed. `None`: not an NCCL line.
fn split_line(raw: &str, line: usize) -> Option<(Origin, &'static str, &str)> {
    let (pos, level, len) = ["NCCL INFO ", "NCCL WARN "]
        .iter()
        .filter_map(|k| raw.find(k).map(|p| (p, &k[5..9], k.len())))
        .min_by_key(|x| x.0)?;
    let level: &'static str = if level == "WARN" { "WARN" } else { "INFO" };
    let head = &raw[..pos];
    let msg = &raw[pos + len..];
    // The token before the last "[dev]" is host:pid:tid (or host:pid); without one (a
    // launcher that strips it, a "[rank 0]" prefix) the origin stays unknown.
    let words: Vec<&str> = head.split_whitespace().collect();
    let is_dev = |w: &str| {
        w.len() > 2
            && w.starts_with('[')
            && w.ends_with(']')
            && w[1..w.len() - 1].bytes().all(|b| b.is_ascii_digit())
    };
    let token = words
        .iter()
        .rposition(|w| is_dev(w))
        .and_then(|k| k.checked_sub(1))
        .map(|k| words[k])
        .filter(|w| w.contains(':'))
        .unwrap_or("");
    let token = token.rsplit(">:").next().unwrap_or(token);
    let parts: Vec<&str> = token.split(':').collect();
    let (host, pid) = match parts.len() {
        0 | 1 => (String::new(), String::new()),
        2 => (parts[0].to_string(), parts[1].to_string()),
        n => (parts[..n - 2].join(":"), parts[n - 2].to_string()),
    };
    Some((Origin { line, host, pid }, level, msg))
}

#[cfg(test)]
mod tests;
