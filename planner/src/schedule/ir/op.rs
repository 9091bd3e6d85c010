//! Ops: what each op kind does, the chunks it addresses, how it reaches its peer, and the
//! per-copy shifts (`repeat`, `peer_stride`, `walk`, `window`) that keep programs linear.

use serde::{Deserialize, Serialize};

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
    /// An op of `kind` with no operands, peers or per-copy shifts (every field at its default).
    pub(in crate::schedule) fn base(kind: OpKind) -> Self {
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
