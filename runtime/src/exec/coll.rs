//! One rank's execution of a schedule: a [`Task`] whose channels advance independently.

// A piece list with a single range is the normal case for contiguous message data.
#![allow(clippy::single_range_in_vec_init)]

use super::pieces::{push_merged, total, zip2, zip3};
use super::{Blocked, Ctx, Task};
use crate::element::reduce_to;
use crate::error::CommError;
use crate::protocol::Header;
use crate::transport::{RecvPort, SendPort};
use crate::types::{DataType, ReduceOp};
use planner::schedule::{chunk_range, BufferKind, ChunkRef, Op, OpKind, Schedule};
use std::ops::Range;
use std::sync::Arc;

/// Where the executor gets connection ends (the communicator caches them).
pub trait PortSource {
    fn send(&mut self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError>;
    fn recv(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError>;
}

/// The loop-slice length (elements per block per iteration) the runtime executes `sched` with.
///
/// The IR's loop iterations are independent runs of the program on disjoint slices of every
/// block, so any slice length gives the same result; the runtime picks the schedule's own
/// `loop_elems`, cut down until the largest message fits one slot (`cap` payload bytes). All
/// ranks compute the same value from the same schedule, so message sequences still match.
pub fn slice_elems(
    sched: &Schedule,
    count: u64,
    esize: usize,
    cap: usize,
) -> Result<u64, CommError> {
    let max_chunks = sched
        .ranks
        .iter()
        .flat_map(|r| r.channels.iter())
        .flat_map(|c| c.ops.iter())
        .map(|o| o.chunk_count() as u64)
        .max()
        .unwrap_or(1)
        .max(1);
    // Elements per chunk allowed so that max_chunks chunks fit the slot.
    let per_chunk = cap as u64 / (max_chunks * esize as u64);
    if per_chunk == 0 {
        return Err(CommError::Config(format!(
            "slots of {cap} bytes cannot hold one element of each of the {max_chunks} chunks a message of this schedule carries; raise TOPOPLAN_SLOT_BYTES"
        )));
    }
    let want = sched.loop_elems.filter(|&l| l > 0).unwrap_or(count);
    Ok(want
        .min(per_chunk * sched.chunks_per_block as u64)
        .min(count)
        .max(1))
}

/// The connection ends an op sends on and receives from.
type OpPorts = (Option<Arc<dyn SendPort>>, Option<Arc<dyn RecvPort>>);

/// A 32-bit fingerprint of a schedule's JSON form.
pub fn schedule_fingerprint(s: &Schedule) -> u64 {
    let json = serde_json::to_vec(s).unwrap_or_default();
    crate::config::fnv1a(&json) & 0xFFFF_FFFF
}

struct Chan {
    ops: Vec<Op>,
    ports: Vec<OpPorts>,
    /// Expanded index one past the last copy of each written op (for deps).
    end_of: Vec<usize>,
    iter: u64,
    pc: usize,
}

/// One rank's part of one collective.
pub struct CollTask<'a> {
    ctx: Ctx,
    tag: u64,
    dtype: DataType,
    op: ReduceOp,
    esize: usize,
    count: u64,
    cpb: u32,
    slice: u64,
    iters: u64,
    chans: Vec<Chan>,
    input: &'a [u8],
    output: &'a mut [u8],
    scratch: Vec<u8>,
    tmp: Vec<u8>,
}

impl<'a> CollTask<'a> {
    /// `fingerprint` is [`schedule_fingerprint`] of `sched` (cached by the caller).
    /// `op` must not be `Avg` (the caller reduces with `Sum` and divides afterwards).
    /// Buffer lengths must match the schedule's blocks × `count` (checked by the caller).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: Ctx,
        sched: &Schedule,
        count: u64,
        dtype: DataType,
        op: ReduceOp,
        input: &'a [u8],
        output: &'a mut [u8],
        cap: usize,
        fingerprint: u64,
        mut scratch: Vec<u8>,
        ports: &mut dyn PortSource,
    ) -> Result<Self, CommError> {
        let rank = ctx.rank;
        let esize = dtype.size();
        let slice = slice_elems(sched, count, esize, cap)?;
        let iters = if count == 0 { 0 } else { count.div_ceil(slice) };
        let mut chans = Vec::with_capacity(sched.channels as usize);
        for c in 0..sched.channels {
            let ops = sched.expanded_ops(rank, c);
            let mut end_of = Vec::new();
            let mut acc = 0usize;
            for o in &sched.ranks[rank as usize].channels[c as usize].ops {
                acc += o.repeat.max(1) as usize;
                end_of.push(acc);
            }
            let mut p = Vec::with_capacity(ops.len());
            for o in &ops {
                let s = o.send_to.map(|to| ports.send(c, to)).transpose()?;
                let r = o.recv_from.map(|from| ports.recv(c, from)).transpose()?;
                p.push((s, r));
            }
            chans.push(Chan {
                ops,
                ports: p,
                end_of,
                iter: 0,
                pc: 0,
            });
        }
        scratch.clear();
        let need = (sched.scratch_blocks as usize)
            .checked_mul(count as usize)
            .and_then(|b| b.checked_mul(esize))
            .ok_or_else(|| {
                CommError::InvalidArgument("schedule scratch: the size overflows".into())
            })?;
        crate::comm::reserve(&mut scratch, need, "the schedule's scratch buffer")?;
        scratch.resize(need, 0);
        Ok(CollTask {
            // Low half: the collective's sequence number; high half: a fingerprint of the
            // schedule, so ranks that planned differently fail with a mismatch, not garbage.
            tag: (ctx.seq & 0xFFFF_FFFF) | (fingerprint << 32),
            ctx,
            dtype,
            op,
            esize,
            count,
            cpb: sched.chunks_per_block,
            slice,
            iters,
            chans,
            input,
            output,
            scratch,
            tmp: Vec::new(),
        })
    }

    /// Gives the scratch buffer back for reuse.
    pub fn into_scratch(self) -> Vec<u8> {
        self.scratch
    }

    /// Byte pieces of a chunk range in loop iteration `iter`.
    fn pieces(&self, c: ChunkRef, iter: u64) -> Vec<Range<usize>> {
        let lo = (iter * self.slice).min(self.count);
        let len = self.slice.min(self.count - lo);
        let mut v = Vec::with_capacity(1);
        for k in c.chunk..c.chunk + c.count {
            let (block, sub) = ((k / self.cpb) as u64, k % self.cpb);
            let r = chunk_range(len, self.cpb, sub);
            let base = block * self.count + lo;
            push_merged(
                &mut v,
                ((base + r.start) as usize * self.esize)..((base + r.end) as usize * self.esize),
            );
        }
        v
    }

    /// Tries to run the next op of channel `ci`; returns whether it ran.
    fn try_op(&mut self, ci: usize) -> Result<bool, CommError> {
        let ch = &self.chans[ci];
        if ch.iter >= self.iters || ch.ops.is_empty() {
            return Ok(false);
        }
        let (iter, pc) = (ch.iter, ch.pc);
        let op = &ch.ops[pc];
        for d in &op.deps {
            let o = &self.chans[d.channel as usize];
            let end = o.end_of[d.index as usize];
            if !(o.iter >= self.iters || (o.iter, o.pc) >= (iter, end)) {
                return Ok(false);
            }
        }
        let (sp, rp) = &ch.ports[pc];
        let gone = |peer: Option<u32>, e| self.ctx.gone(peer.unwrap_or(u32::MAX), e);
        if let Some(r) = rp {
            if !r.ready().map_err(|e| gone(op.recv_from, e))? {
                return Ok(false);
            }
        }
        if let Some(s) = sp {
            if !s.ready().map_err(|e| gone(op.send_to, e))? {
                return Ok(false);
            }
        }
        let (op, sp, rp) = (op.clone(), sp.clone(), rp.clone());
        self.run_op(&op, iter, sp.as_deref(), rp.as_deref())?;
        let ch = &mut self.chans[ci];
        ch.pc += 1;
        if ch.pc == ch.ops.len() {
            ch.pc = 0;
            ch.iter += 1;
        }
        Ok(true)
    }

    /// Runs one op of loop iteration `iter` (its message arrived and its slot is free).
    fn run_op(
        &mut self,
        op: &Op,
        iter: u64,
        sp: Option<&dyn SendPort>,
        rp: Option<&dyn RecvPort>,
    ) -> Result<(), CommError> {
        let sp_pieces = op.src.map(|c| self.pieces(c, iter));
        let dp_pieces = op.dst.map(|c| self.pieces(c, iter));
        let len = sp_pieces
            .as_deref()
            .or(dp_pieces.as_deref())
            .map(total)
            .unwrap_or(0);
        if op.dst.is_some_and(|d| d.buffer == BufferKind::Input) {
            return Err(CommError::Plan(format!(
                "{}: the schedule writes rank {}'s input buffer",
                self.ctx.what, self.ctx.rank
            )));
        }
        let CollTask {
            input,
            output,
            scratch,
            tmp,
            ctx,
            tag,
            dtype,
            op: rop,
            ..
        } = self;
        let mut src_pieces = sp_pieces.unwrap_or_default();
        let (src, dst) = operands(op, input, output, scratch, tmp, &mut src_pieces);
        let mut io = Operands {
            src,
            src_pieces,
            dst,
            dst_pieces: dp_pieces.unwrap_or_default(),
            whole: [0..len],
        };
        let wire = Wire {
            ctx,
            tag: *tag,
            len,
        };
        let (dtype, rop) = (*dtype, *rop);
        match op.kind {
            OpKind::Send => {
                let sp = sp.expect("ports resolved for sends");
                wire.post(sp, op.send_to, &mut |slot| io.gather_src(slot))?;
            }
            OpKind::Copy => zip2(&io.src_pieces, &io.dst_pieces, |a, b| {
                io.dst[b].copy_from_slice(&io.src[a])
            }),
            OpKind::Reduce => zip2(&io.src_pieces, &io.dst_pieces, |a, b| {
                crate::element::reduce_into(dtype, rop, &mut io.dst[b], &io.src[a])
            }),
            _ => run_receive(op, wire, (dtype, rop), &mut io, sp, rp)?,
        }
        Ok(())
    }
}

/// The byte slices an op reads (`src`) and writes (`dst`), taken apart from the task's
/// buffers. A src in the same buffer as dst is gathered into `tmp` first (and `src_pieces`
/// rewritten to match), so that the source can be read while the destination is written.
fn operands<'b>(
    op: &Op,
    input: &'b [u8],
    output: &'b mut [u8],
    scratch: &'b mut [u8],
    tmp: &'b mut Vec<u8>,
    src_pieces: &mut Vec<Range<usize>>,
) -> (&'b [u8], &'b mut [u8]) {
    let (src, dst) = (op.src.map(|s| s.buffer), op.dst.map(|d| d.buffer));
    if matches!((src, dst), (Some(s), Some(d)) if s == d) {
        let b: &[u8] = match src {
            Some(BufferKind::Input) => input,
            Some(BufferKind::Scratch) => scratch,
            _ => output,
        };
        tmp.clear();
        for r in src_pieces.iter() {
            tmp.extend_from_slice(&b[r.clone()]);
        }
        *src_pieces = vec![0..tmp.len()];
        return match dst {
            Some(BufferKind::Scratch) => (tmp, scratch),
            _ => (tmp, output),
        };
    }
    match (src, dst) {
        (Some(BufferKind::Input), Some(BufferKind::Scratch)) => (input, scratch),
        (Some(BufferKind::Input), _) => (input, output),
        (Some(BufferKind::Output), Some(BufferKind::Scratch)) => (output, scratch),
        (Some(BufferKind::Output), _) => (output, &mut []),
        (Some(BufferKind::Scratch), Some(BufferKind::Output)) => (scratch, output),
        (Some(BufferKind::Scratch), _) => (scratch, &mut []),
        (None, Some(BufferKind::Scratch)) => (&[], scratch),
        (None, _) => (&[], output),
    }
}

/// One op's operands in one loop iteration: byte pieces of the slices it reads and writes.
struct Operands<'b> {
    src: &'b [u8],
    src_pieces: Vec<Range<usize>>,
    dst: &'b mut [u8],
    dst_pieces: Vec<Range<usize>>,
    /// The message as one piece.
    whole: [Range<usize>; 1],
}

impl Operands<'_> {
    /// Copies the source pieces into an outgoing slot.
    fn gather_src(&self, slot: &mut [u8]) {
        zip2(&self.src_pieces, &self.whole, |a, b| {
            slot[b].copy_from_slice(&self.src[a])
        });
    }
}

/// What the messages of one op carry: the collective's tag and the op's length.
#[derive(Clone, Copy)]
struct Wire<'c> {
    ctx: &'c Ctx,
    tag: u64,
    len: usize,
}

impl Wire<'_> {
    /// Posts a message that `fill` writes to peer `to`.
    fn post(
        self,
        sp: &dyn SendPort,
        to: Option<u32>,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), CommError> {
        sp.post(self.tag, self.len, fill)
            .map_err(|e| self.ctx.gone(to.unwrap_or(u32::MAX), e))
    }

    /// Checks that a message from `peer` is the one this op expects.
    fn check(self, h: Header, peer: Option<u32>) -> Result<(), CommError> {
        let (tag, len) = (self.tag, self.len);
        if h.tag != tag || h.len as usize != len {
            return Err(self.ctx.mismatch(
                peer.unwrap_or(u32::MAX),
                format!(
                    "expected a {len}-byte message of collective #{} (schedule {:08x}), got {} bytes of #{} (schedule {:08x})",
                    tag & 0xFFFF_FFFF,
                    tag >> 32,
                    h.len,
                    h.tag & 0xFFFF_FFFF,
                    h.tag >> 32),
            ));
        }
        Ok(())
    }
}

/// Runs an op that receives: takes its message, checks it, and copies or reduces it into the
/// destination, forwarding it (or the reduction) where the op also sends.
fn run_receive(
    op: &Op,
    wire: Wire,
    (dtype, rop): (DataType, ReduceOp),
    io: &mut Operands,
    sp: Option<&dyn SendPort>,
    rp: Option<&dyn RecvPort>,
) -> Result<(), CommError> {
    let Operands {
        src,
        src_pieces,
        dst,
        dst_pieces,
        whole,
    } = io;
    let post = |fill: &mut dyn FnMut(&mut [u8])| {
        wire.post(sp.expect("ports resolved for sends"), op.send_to, fill)
    };
    let rp = rp.expect("ports resolved for receives");
    rp.consume(&mut |h, data| {
        wire.check(h, op.recv_from)?;
        match op.kind {
            OpKind::Recv => zip2(whole, dst_pieces, |a, b| dst[b].copy_from_slice(&data[a])),
            OpKind::RecvCopySend => {
                zip2(whole, dst_pieces, |a, b| dst[b].copy_from_slice(&data[a]));
                post(&mut |slot| slot.copy_from_slice(data))?;
            }
            OpKind::RecvReduceSend => post(&mut |slot| {
                zip3(whole, src_pieces, whole, |a, b, o| {
                    reduce_to(dtype, rop, &mut slot[o], &data[a], &src[b])
                })
            })?,
            OpKind::RecvReduceCopy | OpKind::RecvReduceCopySend => {
                zip3(whole, src_pieces, dst_pieces, |a, b, o| {
                    reduce_to(dtype, rop, &mut dst[o], &data[a], &src[b])
                });
                if op.kind == OpKind::RecvReduceCopySend {
                    post(&mut |slot| {
                        zip2(dst_pieces, whole, |a, b| slot[b].copy_from_slice(&dst[a]))
                    })?;
                }
            }
            _ => unreachable!("sending/local kinds handled above"),
        }
        Ok(())
    })
}

impl Task for CollTask<'_> {
    fn step(&mut self) -> Result<bool, CommError> {
        let mut moved = false;
        for ci in 0..self.chans.len() {
            while self.try_op(ci)? {
                moved = true;
            }
        }
        Ok(moved)
    }
    fn done(&self) -> bool {
        self.chans
            .iter()
            .all(|c| c.iter >= self.iters || c.ops.is_empty())
    }
    fn blocked(&self) -> Blocked {
        for (ci, ch) in self.chans.iter().enumerate() {
            if ch.iter >= self.iters || ch.ops.is_empty() {
                continue;
            }
            let op = &ch.ops[ch.pc];
            let at = format!(
                "channel {ci} op {} ({:?}) of loop iteration {}",
                ch.pc, op.kind, ch.iter
            );
            if let (Some(from), Some((_, Some(r)))) = (op.recv_from, ch.ports.get(ch.pc)) {
                if !r.ready().unwrap_or(false) {
                    return Blocked {
                        peer: Some(from),
                        what: format!("a message from rank {from} at {at}"),
                    };
                }
            }
            if let (Some(to), Some((Some(s), _))) = (op.send_to, ch.ports.get(ch.pc)) {
                if !s.ready().unwrap_or(false) {
                    return Blocked {
                        peer: Some(to),
                        what: format!("rank {to} to free a slot at {at}"),
                    };
                }
            }
            if !op.deps.is_empty() {
                continue; // waits on another channel, which is reported in turn
            }
        }
        Blocked {
            peer: None,
            what: "a dependency between channels".into(),
        }
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}
