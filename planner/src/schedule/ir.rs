//! The schedule IR: the one format the planner emits and both the simulator and the runtime execute.
//! Specified in `docs/schedule-ir.md`; keep the two in step.
//!
//! A schedule is size-independent geometry plus, per rank and channel, an ordered list of [`Op`]s.
//!
//! **Buffers and chunks.** Each rank has an input, an output and (optionally) a scratch buffer.
//! A buffer is a sequence of *blocks* of `count` elements each (`count` = the per-rank element
//! count the caller passes; see [`Collective::blocks`] for how many blocks each buffer has), and
//! each block is cut into `chunks_per_block` chunks by [`chunk_range`]. Chunk `c` of a buffer is
//! chunk `c % chunks_per_block` of block `c / chunks_per_block`. Uneven counts are handled by
//! the even split (chunks differ by at most one element; a chunk may be empty).
//!
//! **Pipelining.** When `loop_elems` is set, the program runs once per *loop iteration* on the
//! slice `[k*loop_elems, min((k+1)*loop_elems, count))` of every block, and chunk geometry applies
//! to that slice. Connections and their slots persist across iterations.
//!
//! **Transfers.** A sending op (`Send`, `*Send`) on rank `a` to peer `b` is matched with the
//! receiving op (`Recv*`) on rank `b` from peer `a` on the *same channel*, in program order: the
//! i-th message `a → b` on channel `c` is the i-th receive of `b` from `a` on `c`. The connection
//! has `slots` buffer slots (NCCL's steps); message i uses slot `i % slots`, and a sender blocks
//! while its slot still holds an unread message. A matched pair moves `chunks.count` chunks.
//!
//! **Order.** Ops of one (rank, channel) run in order. `deps` add edges to ops of other channels of
//! the same rank (the op may not start before they complete). `repeat` expands an op into
//! `repeat` consecutive copies, copy k shifting every chunk index by `k * chunk_stride` modulo the
//! buffer's chunk count; it keeps ring programs linear in ranks × channels. Two more per-copy
//! shifts keep the other patterns linear too:
//! - `peer_stride`: copy k talks to `(peer + k * peer_stride) mod nranks` (both `send_to` and
//!   `recv_from`); direct patterns (one-shot, all-to-all) are one repeated op per direction.
//! - `walk`: copy k's chunk range on buffer `walk.buffer` lies in block
//!   `orders[walk.order][(walk.start + k * walk.step) mod len]` (same chunk offset inside the
//!   block). Ring all-gather and reduce-scatter visit blocks in ring order, which is any
//!   permutation of the ranks; `Schedule::orders` holds those permutations once per schedule.
//! - `window {start, len}`: `chunk_stride` shifts wrap inside chunks `start .. start+len` instead
//!   of the whole buffer (hierarchical schedules rotate one host's or one channel's pieces).
//!
//! **Dependencies and loops.** A dependency names an op of another channel of the same rank *in
//! the same loop iteration*; on a repeated op it binds the first copy. Program order and deps must
//! form no cycle (`validate` checks); send/recv waits are the simulator's deadlock check.
//!
//! **Consumers** should read programs through [`Schedule::expanded_ops`], which applies
//! `repeat`, `chunk_stride`, `peer_stride` and `walk`, so every expanded op is a plain op.

use serde::{Deserialize, Serialize};

/// Version of the IR's JSON form. Bump on any incompatible change.
pub const SCHEDULE_IR_VERSION: u32 = 1;

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
    /// Imported from an MSCCL-IR file; the string is its `name`.
    Msccl(String),
}

impl Algorithm {
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
        const KNOWN: &str = "ring, tree, one-shot, two-shot, ce, direct, hierarchical";
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

/// How bytes cross between two ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Receiver's SMs load from the sender's buffer over NVLink/PCIe P2P.
    P2pLoad,
    /// Sender's SMs store into the receiver's buffer over NVLink/PCIe P2P.
    P2pStore,
    /// A copy engine moves the data (cudaMemcpyPeerAsync).
    CopyEngine,
    /// Staged through host shared memory (NCCL's SHM transport).
    HostStaged,
    /// Across hosts through NICs.
    Network,
    /// Same process, same device or host memory (CPU backend threads).
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferKind {
    Input,
    Output,
    Scratch,
}

/// A contiguous range of chunks of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    pub buffer: BufferKind,
    /// First chunk index in the buffer's chunk numbering.
    pub chunk: u32,
    /// Number of consecutive chunks (>= 1).
    pub count: u32,
}

impl ChunkRef {
    pub fn new(buffer: BufferKind, chunk: u32, count: u32) -> Self {
        Self {
            buffer,
            chunk,
            count,
        }
    }
}

/// What an op does. "recv" is the data arriving from `recv_from`; "local" is `src`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// Send `src` to `send_to`.
    Send,
    /// `dst = recv`.
    Recv,
    /// `dst = recv`, then send `dst` on.
    RecvCopySend,
    /// Send `recv ⊕ src` on, without storing it.
    RecvReduceSend,
    /// `dst = recv ⊕ src`.
    RecvReduceCopy,
    /// `dst = recv ⊕ src`, then send `dst` on.
    RecvReduceCopySend,
    /// Local `dst = src`.
    Copy,
    /// Local `dst = dst ⊕ src`.
    Reduce,
}

impl OpKind {
    pub fn sends(self) -> bool {
        matches!(
            self,
            OpKind::Send
                | OpKind::RecvCopySend
                | OpKind::RecvReduceSend
                | OpKind::RecvReduceCopySend
        )
    }
    pub fn receives(self) -> bool {
        matches!(
            self,
            OpKind::Recv
                | OpKind::RecvCopySend
                | OpKind::RecvReduceSend
                | OpKind::RecvReduceCopy
                | OpKind::RecvReduceCopySend
        )
    }
    pub fn reduces(self) -> bool {
        matches!(
            self,
            OpKind::RecvReduceSend
                | OpKind::RecvReduceCopy
                | OpKind::RecvReduceCopySend
                | OpKind::Reduce
        )
    }
    /// Whether the op reads a local `src`.
    pub fn needs_src(self) -> bool {
        matches!(
            self,
            OpKind::Send
                | OpKind::RecvReduceSend
                | OpKind::RecvReduceCopy
                | OpKind::RecvReduceCopySend
                | OpKind::Copy
                | OpKind::Reduce
        )
    }
    /// Whether the op writes a local `dst`.
    pub fn needs_dst(self) -> bool {
        matches!(
            self,
            OpKind::Recv
                | OpKind::RecvCopySend
                | OpKind::RecvReduceCopy
                | OpKind::RecvReduceCopySend
                | OpKind::Copy
                | OpKind::Reduce
        )
    }
}

/// Names an op of the same rank: `(channel, index in that channel's op list)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpRef {
    pub channel: u32,
    pub index: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub kind: OpKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<ChunkRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<ChunkRef>,
    /// Number of chunks moved or computed; equals the `count` of `src`/`dst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_to: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_from: Option<u32>,
    /// How the outgoing transfer travels (for sending ops); receivers follow the sender's choice.
    #[serde(default = "default_transport")]
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<OpRef>,
    /// Expand into this many copies (>= 1); see module docs.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub repeat: u32,
    /// Chunk index shift between copies, applied modulo the buffer's chunk count.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunk_stride: i32,
    /// Peer shift between copies, applied modulo `nranks` to `send_to` and `recv_from`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peer_stride: i32,
    /// Block walk of the copies' chunk ranges on one buffer; see module docs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<BlockWalk>,
    /// `chunk_stride` wraps inside this window instead of the whole buffer; see module docs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<ChunkWindow>,
}

/// Chunks `start .. start + len` of every buffer the op names: copy k's chunk is
/// `start + (chunk − start + k·chunk_stride) mod len`. Lets one channel's chunks (or one host's
/// piece of them) rotate without spilling into another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkWindow {
    pub start: u32,
    pub len: u32,
}

/// Copy k of a repeated op uses block `orders[order][(start + k*step) mod len]` of `buffer`
/// (keeping the chunk offset within the block). Copy 0's chunk must already lie in that block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockWalk {
    pub buffer: BufferKind,
    /// Index into `Schedule::orders`.
    pub order: u32,
    pub start: u32,
    pub step: i32,
}

fn default_transport() -> Transport {
    Transport::P2pStore
}
fn one() -> u32 {
    1
}
fn is_one(v: &u32) -> bool {
    *v == 1
}
fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Op {
    fn base(kind: OpKind) -> Self {
        Op {
            kind,
            src: None,
            dst: None,
            send_to: None,
            recv_from: None,
            transport: Transport::P2pStore,
            deps: Vec::new(),
            repeat: 1,
            chunk_stride: 0,
            peer_stride: 0,
            walk: None,
            window: None,
        }
    }
    pub fn send(src: ChunkRef, to: u32) -> Self {
        Op {
            src: Some(src),
            send_to: Some(to),
            ..Self::base(OpKind::Send)
        }
    }
    pub fn recv(dst: ChunkRef, from: u32) -> Self {
        Op {
            dst: Some(dst),
            recv_from: Some(from),
            ..Self::base(OpKind::Recv)
        }
    }
    pub fn recv_copy_send(dst: ChunkRef, from: u32, to: u32) -> Self {
        Op {
            dst: Some(dst),
            recv_from: Some(from),
            send_to: Some(to),
            ..Self::base(OpKind::RecvCopySend)
        }
    }
    pub fn recv_reduce_send(src: ChunkRef, from: u32, to: u32) -> Self {
        Op {
            src: Some(src),
            recv_from: Some(from),
            send_to: Some(to),
            ..Self::base(OpKind::RecvReduceSend)
        }
    }
    pub fn recv_reduce_copy(src: ChunkRef, dst: ChunkRef, from: u32) -> Self {
        Op {
            src: Some(src),
            dst: Some(dst),
            recv_from: Some(from),
            ..Self::base(OpKind::RecvReduceCopy)
        }
    }
    pub fn recv_reduce_copy_send(src: ChunkRef, dst: ChunkRef, from: u32, to: u32) -> Self {
        Op {
            src: Some(src),
            dst: Some(dst),
            recv_from: Some(from),
            send_to: Some(to),
            ..Self::base(OpKind::RecvReduceCopySend)
        }
    }
    pub fn copy(src: ChunkRef, dst: ChunkRef) -> Self {
        Op {
            src: Some(src),
            dst: Some(dst),
            ..Self::base(OpKind::Copy)
        }
    }
    pub fn reduce(src: ChunkRef, dst: ChunkRef) -> Self {
        Op {
            src: Some(src),
            dst: Some(dst),
            ..Self::base(OpKind::Reduce)
        }
    }
    pub fn with_transport(mut self, t: Transport) -> Self {
        self.transport = t;
        self
    }
    pub fn with_deps(mut self, deps: Vec<OpRef>) -> Self {
        self.deps = deps;
        self
    }
    pub fn repeated(mut self, repeat: u32, chunk_stride: i32) -> Self {
        self.repeat = repeat;
        self.chunk_stride = chunk_stride;
        self
    }
    /// Sets the peer shift between repeated copies (see module docs).
    pub fn peer_strided(mut self, peer_stride: i32) -> Self {
        self.peer_stride = peer_stride;
        self
    }
    /// Sets the block walk of repeated copies (see module docs).
    pub fn walking(mut self, walk: BlockWalk) -> Self {
        self.walk = Some(walk);
        self
    }
    /// Makes `chunk_stride` wrap inside `start .. start + len` (see module docs).
    pub fn windowed(mut self, start: u32, len: u32) -> Self {
        self.window = Some(ChunkWindow { start, len });
        self
    }
    /// Number of chunks this op moves or computes.
    pub fn chunk_count(&self) -> u32 {
        self.src.or(self.dst).map(|c| c.count).unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelProgram {
    pub ops: Vec<Op>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankProgram {
    pub rank: u32,
    /// Indexed by channel; every rank has `Schedule::channels` entries (possibly empty).
    pub channels: Vec<ChannelProgram>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub version: u32,
    pub collective: Collective,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub nranks: u32,
    pub channels: u32,
    pub chunks_per_block: u32,
    /// Scratch buffer size in blocks (0: no scratch).
    #[serde(default)]
    pub scratch_blocks: u32,
    /// Buffer slots per connection (NCCL_STEPS is 8).
    pub slots: u32,
    /// Elements per block per loop iteration; `None`: one iteration over the whole buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_elems: Option<u64>,
    /// Rank permutations referenced by ops' `walk` (e.g. one ring order per channel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<Vec<u32>>,
    pub ranks: Vec<RankProgram>,
}

/// Element range of chunk `i` when `total` elements are cut into `n` chunks: an even split whose
/// chunk sizes differ by at most one element.
pub fn chunk_range(total: u64, n: u32, i: u32) -> std::ops::Range<u64> {
    debug_assert!(n > 0 && i < n);
    let n = n as u64;
    let i = i as u64;
    (i * total / n)..((i + 1) * total / n)
}

#[cfg(test)]
mod algorithm_name_tests {
    use super::Algorithm;

    #[test]
    fn every_spelling_parses_and_names_round_trip() {
        for a in [
            Algorithm::Ring,
            Algorithm::Tree,
            Algorithm::OneShot,
            Algorithm::TwoShot,
            Algorithm::CopyEnginePipeline,
            Algorithm::Hierarchical,
            Algorithm::Direct,
        ] {
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
