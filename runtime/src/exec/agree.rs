//! Agreement on every collective: every rank tells every other rank what it runs (the call's
//! kind, count, type, operation, root, and for a send/recv collective its peers), ahead of the
//! call's first message, and checks what each of them says against its own; the call returns
//! only once every peer agreed. The terms run alongside the collective (a round trip less than
//! agreeing first); gather and scatter, made of sends and receives, agree before theirs move.
//!
//! Why: a message sits in a slot until it is read, so without this a call can complete on one
//! rank whatever the others do. Ranks that each name themselves the root of a broadcast would
//! all return with their own data, a scatter whose ranks disagree on the root would leave its
//! blocks for the next receive, and rooted calls with different roots would wait for the
//! timeout. With it, such ranks fail at once, each naming the call and the two ranks' versions
//! of it; what the call sent before that is never read (the communicator is unusable).
//!
//! The terms travel as ordinary messages on the point-to-point channel, tagged [`TERMS_TAG`]
//! (point-to-point data has its own tags, see `exec::p2p_tag`), so the step protocol itself is
//! unchanged. Gather and scatter, made of sends and receives, take part through
//! `Group::agree`.

use super::{Blocked, Ctx, Task};
use crate::error::CommError;
use crate::protocol::Header;
use crate::transport::{RecvPort, SendPort};
use std::sync::Arc;

/// Tag of an agreement message (point-to-point data is tagged `u64::MAX`).
pub const TERMS_TAG: u64 = u64::MAX - 1;

/// One collective (or rooted exchange) as the agreement sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Call {
    /// The call's name, as the runtime spells it (`broadcast`), cut to 16 bytes.
    pub name: [u8; 16],
    pub count: u64,
    /// `DataType` and `ReduceOp` as numbers; 0xff where they do not apply.
    pub dtype: u8,
    pub op: u8,
    /// `u32::MAX`: no root.
    pub root: u32,
    /// Anything else all ranks must share (the peers of a send/recv collective), hashed.
    pub extra: u64,
}

impl Call {
    pub fn new(name: &str, count: u64, dtype: u8, op: u8, root: Option<u32>, extra: u64) -> Call {
        let mut n = [0u8; 16];
        let b = name.as_bytes();
        n[..b.len().min(16)].copy_from_slice(&b[..b.len().min(16)]);
        Call {
            name: n,
            count,
            dtype,
            op,
            root: root.unwrap_or(u32::MAX),
            extra,
        }
    }

    pub fn name(&self) -> String {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }

    fn describe(&self) -> String {
        let mut s = format!("{} of {}", self.name(), self.count);
        if let Some(t) = crate::types::DataType::ALL.get(self.dtype as usize) {
            s += &format!(" x {}", t.nccl_name());
        }
        if let Some(o) = crate::types::ReduceOp::ALL.get(self.op as usize) {
            s += &format!(" ({})", o.name());
        }
        if self.root != u32::MAX {
            s += &format!(" root {}", self.root);
        }
        s
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&[self.dtype, self.op]);
        out.extend_from_slice(&self.root.to_le_bytes());
        out.extend_from_slice(&self.extra.to_le_bytes());
    }
}

/// Bytes of an encoded [`Call`].
pub const CALL_BYTES: usize = 16 + 8 + 2 + 4 + 8;

impl Call {
    pub fn encode_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(CALL_BYTES);
        self.encode(&mut b);
        b
    }

    pub fn decode(b: &[u8]) -> Option<Call> {
        if b.len() != CALL_BYTES {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
        Some(Call {
            name: b[..16].try_into().expect("16"),
            count: u64_at(16),
            dtype: b[24],
            op: b[25],
            root: u32_at(26),
            extra: u64_at(30),
        })
    }

    /// Why this rank's call (`self`) and `peer`'s cannot run together.
    pub fn disagreement(&self, theirs: &Call, rank: u32, peer: u32) -> Option<String> {
        (self != theirs).then(|| {
            let more = if self.describe() == theirs.describe() {
                " (their send/recv peers differ)"
            } else {
                ""
            };
            format!(
                "rank {rank} calls {}, rank {peer} calls {}{more}",
                self.describe(),
                theirs.describe()
            )
        })
    }

    /// The call of a collective of the runtime.
    pub(crate) fn of(c: &crate::group::CollWork<'_>) -> Call {
        let extra = crate::config::fnv1a(format!("{:?}", c.coll.send_peers).as_bytes());
        Call::new(
            c.coll.kind.name(),
            c.count as u64,
            code(&crate::types::DataType::ALL, c.dtype),
            // Data movement carries no operation worth agreeing on (or naming).
            if c.coll.kind.reduces() {
                code(&crate::types::ReduceOp::ALL, c.op)
            } else {
                0xff
            },
            c.coll.root,
            extra,
        )
    }
}

fn code<T: PartialEq>(all: &[T], v: T) -> u8 {
    all.iter().position(|x| *x == v).map_or(0xff, |i| i as u8)
}

/// Sends this rank's terms to one peer.
pub struct SendTerms {
    pub ctx: Ctx,
    pub port: Arc<dyn SendPort>,
    pub peer: u32,
    pub bytes: Vec<u8>,
    pub off: usize,
}

impl Task for SendTerms {
    fn step(&mut self) -> Result<bool, CommError> {
        let mut moved = false;
        let cap = self.port.capacity().max(1);
        while self.off < self.bytes.len() {
            if !self.port.ready().map_err(|e| self.ctx.gone(self.peer, e))? {
                break;
            }
            let n = cap.min(self.bytes.len() - self.off);
            let src = &self.bytes[self.off..self.off + n];
            self.port
                .post(TERMS_TAG, n, &mut |slot| slot.copy_from_slice(src))
                .map_err(|e| self.ctx.gone(self.peer, e))?;
            self.off += n;
            moved = true;
        }
        Ok(moved)
    }
    fn done(&self) -> bool {
        self.off >= self.bytes.len()
    }
    fn blocked(&self) -> Blocked {
        Blocked {
            peer: Some(self.peer),
            what: format!("a free slot to tell rank {} what this rank runs", self.peer),
        }
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

/// Receives one peer's terms and checks them against this rank's.
pub struct RecvTerms {
    pub ctx: Ctx,
    pub port: Arc<dyn RecvPort>,
    pub peer: u32,
    pub mine: Call,
    pub bytes: Vec<u8>,
}

impl Task for RecvTerms {
    fn step(&mut self) -> Result<bool, CommError> {
        let mut moved = false;
        while self.bytes.len() < CALL_BYTES {
            if !self.port.ready().map_err(|e| self.ctx.gone(self.peer, e))? {
                return Ok(moved);
            }
            let want = CALL_BYTES - self.bytes.len();
            let (ctx, peer, buf) = (&self.ctx, self.peer, &mut self.bytes);
            self.port.consume(&mut |h: Header, b: &[u8]| {
                if h.tag != TERMS_TAG || b.len() > want {
                    return Err(ctx.mismatch(
                        peer,
                        format!(
                            "expected what rank {peer} runs next, got a {}-byte message tagged {:#x} (rank {peer} is running something else: a send this rank does not receive?)",
                            h.len, h.tag
                        ),
                    ));
                }
                buf.extend_from_slice(b);
                Ok(())
            })?;
            moved = true;
        }
        let theirs = Call::decode(&self.bytes)
            .ok_or_else(|| self.ctx.mismatch(self.peer, "garbled terms".into()))?;
        if let Some(why) = self.mine.disagreement(&theirs, self.ctx.rank, self.peer) {
            return Err(self.ctx.mismatch(self.peer, why));
        }
        Ok(moved)
    }
    fn done(&self) -> bool {
        self.bytes.len() >= CALL_BYTES
    }
    fn blocked(&self) -> Blocked {
        Blocked {
            peer: Some(self.peer),
            what: format!(
                "rank {} to say what it runs (has it called this group?)",
                self.peer
            ),
        }
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_round_trip_and_name_what_differs() {
        let a = Call::new("broadcast", 1024, 6, 0xff, Some(0), 0);
        assert_eq!(Call::decode(&a.encode_bytes()), Some(a));
        let b = Call::new("broadcast", 1024, 6, 0xff, Some(1), 0);
        let why = a.disagreement(&b, 0, 1).unwrap();
        assert!(
            why.contains("rank 0 calls broadcast of 1024 x uint8 root 0"),
            "{why}"
        );
        assert!(
            why.contains("rank 1 calls broadcast of 1024 x uint8 root 1"),
            "{why}"
        );
        assert_eq!(a.disagreement(&a, 0, 1), None);
        let peers = Call::new("broadcast", 1024, 6, 0xff, Some(0), 9);
        assert!(a
            .disagreement(&peers, 0, 1)
            .unwrap()
            .contains("peers differ"));
    }
}
