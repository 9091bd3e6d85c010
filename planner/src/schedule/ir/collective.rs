//! What a schedule computes: the collective (kind, root, buffer sizes in blocks), the algorithm
//! that built it and the protocol it runs under, with the names the CLI and JSON use.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    SendRecv,
}

impl CollectiveKind {
    pub const ALL: [CollectiveKind; 7] = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
        CollectiveKind::AllToAll,
        CollectiveKind::SendRecv,
    ];

    /// nccl-tests bus bandwidth factor for `n` ranks.
    pub fn busbw_factor(self, n: u32) -> f64 {
        let n = n.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll => (n - 1.0) / n,
            CollectiveKind::Broadcast | CollectiveKind::Reduce | CollectiveKind::SendRecv => 1.0,
        }
    }

    /// Name as used on the command line and in nccl-tests binaries (`all_reduce_perf`).
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all-reduce",
            CollectiveKind::AllGather => "all-gather",
            CollectiveKind::ReduceScatter => "reduce-scatter",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::AllToAll => "all-to-all",
            CollectiveKind::SendRecv => "sendrecv",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let norm: String = s
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        Self::ALL
            .into_iter()
            .find(|c| c.name().replace('-', "") == norm)
    }

    /// True when the collective combines data with a reduction operator.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter | CollectiveKind::Reduce
        )
    }
}

/// A collective with its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collective {
    pub kind: CollectiveKind,
    /// Root rank for broadcast and reduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<u32>,
    /// For send/recv: rank `i` sends to `peers[i]` (None: sends nothing). Receivers are implied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_peers: Vec<Option<u32>>,
}

impl Collective {
    pub fn new(kind: CollectiveKind) -> Self {
        Self {
            kind,
            root: None,
            send_peers: Vec::new(),
        }
    }
    pub fn rooted(kind: CollectiveKind, root: u32) -> Self {
        Self {
            kind,
            root: Some(root),
            send_peers: Vec::new(),
        }
    }

    /// `kind` on `n` ranks as nccl-tests runs it: broadcast and reduce rooted at `root`,
    /// send/recv with every rank sending to the next (`sendrecv_perf`), the rest as they are.
    pub fn as_nccl_tests(kind: CollectiveKind, n: u32, root: u32) -> Self {
        match kind {
            CollectiveKind::Broadcast | CollectiveKind::Reduce => Self::rooted(kind, root),
            CollectiveKind::SendRecv => Self {
                send_peers: (0..n).map(|i| Some((i + 1) % n.max(1))).collect(),
                ..Self::new(kind)
            },
            _ => Self::new(kind),
        }
    }

    /// Blocks of `count` elements in the (input, output) buffers for `n` ranks.
    /// `count` is the per-rank element count: the input of all-reduce, each rank's share of
    /// all-gather's output, each rank's share of reduce-scatter's input, one peer's block of
    /// all-to-all.
    pub fn blocks(&self, n: u32) -> (u32, u32) {
        match self.kind {
            CollectiveKind::AllReduce
            | CollectiveKind::Broadcast
            | CollectiveKind::Reduce
            | CollectiveKind::SendRecv => (1, 1),
            CollectiveKind::AllGather => (1, n),
            CollectiveKind::ReduceScatter => (n, 1),
            CollectiveKind::AllToAll => (n, n),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    Ring,
    Tree,
    /// Every rank reads every peer and reduces (all-reduce), or writes to every peer.
    OneShot,
    /// Direct reduce-scatter then direct all-gather.
    TwoShot,
    /// Two GPUs: chunked copy-engine peer copies overlapped with local reduce kernels.
    CopyEnginePipeline,
    /// Intra-node phase plus inter-node phase.
    Hierarchical,
    /// Point-to-point transfers straight to each peer (all-to-all, send/recv).
    Direct,
    /// Spanning trees packed to the topology's throughput bound (`planner::bound::pack`): every
    /// rank's shard broadcast (all-gather), reduced (reduce-scatter) or both (all-reduce) over
    /// trees of its own.
    Packed,
    /// Imported from an MSCCL-IR file; the string is its `name`.
    Msccl(String),
}

impl Algorithm {
    /// Every algorithm the planner builds itself (not `Msccl`), in the order lists show them.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::CopyEnginePipeline,
        Algorithm::Direct,
        Algorithm::Hierarchical,
        Algorithm::Packed,
    ];

    pub fn name(&self) -> String {
        match self {
            Algorithm::Msccl(n) => format!("msccl:{n}"),
            other => serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        }
    }

    /// Parses an algorithm name as `--algo` and `TOPOPLAN_ALGO` spell it: case, `-` and `_` are
    /// ignored (`one-shot`, `ONE_SHOT`, `oneshot`); `ce` is the copy-engine pipeline. NCCL names
    /// topoplan does not plan (NVLS, CollNet, PAT) get an error that says so.
    pub fn parse(s: &str) -> Result<Algorithm, String> {
        const KNOWN: &str = "ring, tree, one-shot, two-shot, ce, direct, hierarchical, packed";
        let n: String = s
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        Ok(match n.as_str() {
            "ring" => Algorithm::Ring,
            "tree" => Algorithm::Tree,
            "oneshot" => Algorithm::OneShot,
            "twoshot" => Algorithm::TwoShot,
            "ce" | "copyengine" | "copyenginepipeline" => Algorithm::CopyEnginePipeline,
            "direct" => Algorithm::Direct,
            "hierarchical" | "hier" => Algorithm::Hierarchical,
            "packed" => Algorithm::Packed,
            "nvls" | "nvlstree" | "collnetdirect" | "collnetchain" | "pat" => {
                return Err(format!(
                    "NCCL algorithm \"{s}\" is not planned by topoplan (no NVLink SHARP, CollNet or PAT); use {KNOWN}"
                ))
            }
            _ => return Err(format!("unknown algorithm \"{s}\" ({KNOWN})")),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// 8-byte stores carrying 4 bytes of data and a 4-byte flag.
    LL,
    /// 128-byte lines carrying 120 bytes of data and a flag.
    LL128,
    /// Bulk data with a separate flag per step.
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::LL, Protocol::LL128, Protocol::Simple];
    pub fn name(self) -> &'static str {
        match self {
            Protocol::LL => "LL",
            Protocol::LL128 => "LL128",
            Protocol::Simple => "Simple",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }
}

#[cfg(test)]
mod algorithm_name_tests {
    use super::Algorithm;

    #[test]
    fn every_spelling_parses_and_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(&a.name()), Ok(a.clone()), "{}", a.name());
            assert_eq!(
                Algorithm::parse(&a.name().to_uppercase().replace('-', "_")),
                Ok(a)
            );
        }
        assert_eq!(Algorithm::parse("ce"), Ok(Algorithm::CopyEnginePipeline));
        assert!(Algorithm::parse("nvls")
            .unwrap_err()
            .contains("not planned"));
        assert!(Algorithm::parse("ringg")
            .unwrap_err()
            .contains("unknown algorithm"));
    }
}
