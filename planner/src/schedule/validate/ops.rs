//! Per-op checks: fields that must be present for the op kind, chunk ranges inside their
//! buffers, peers in range (for peer-strided ops, every copy's peer), and dependencies.

use super::super::ir::*;
use super::ScheduleError;

impl Schedule {
    pub(super) fn check_op(
        &self,
        rank: u32,
        channel: u32,
        index: u32,
        op: &Op,
        rp: &RankProgram,
        order_max: &[u32],
    ) -> Result<(), ScheduleError> {
        self.check_op_parts(rank, channel, op, rp, order_max)
            .map_err(|what| ScheduleError::Op {
                rank,
                channel,
                index,
                kind: op.kind,
                what,
            })
    }

    /// The checks of [`Self::check_op`] in order; an error says what is wrong with the op.
    fn check_op_parts(
        &self,
        rank: u32,
        channel: u32,
        op: &Op,
        rp: &RankProgram,
        order_max: &[u32],
    ) -> Result<(), String> {
        self.check_fields(rank, op)?;
        if op.peer_stride != 0 {
            self.check_peer_stride(rank, op)?;
        }
        if let Some(w) = op.walk {
            self.check_walk(op, w, order_max)?;
        }
        for c in [op.src, op.dst].into_iter().flatten() {
            self.check_range(op, c)?;
        }
        check_deps(channel, op, rp)
    }

    /// Fields the op kind needs (and no others), peers in range, matching src and dst sizes.
    fn check_fields(&self, rank: u32, op: &Op) -> Result<(), String> {
        if op.repeat == 0 {
            return Err("repeat must be >= 1".into());
        }
        for (needed, present, name) in [
            (op.kind.needs_src(), op.src.is_some(), "src"),
            (op.kind.needs_dst(), op.dst.is_some(), "dst"),
            (op.kind.sends(), op.send_to.is_some(), "send_to"),
            (op.kind.receives(), op.recv_from.is_some(), "recv_from"),
        ] {
            if needed != present {
                return Err(if needed {
                    format!("needs `{name}`")
                } else {
                    format!("must not have `{name}`")
                });
            }
        }
        for peer in [op.send_to, op.recv_from].into_iter().flatten() {
            if peer >= self.nranks {
                return Err(format!(
                    "peer rank {peer} is not below nranks {}",
                    self.nranks
                ));
            }
            if peer == rank {
                return Err("peer is the rank itself".into());
            }
        }
        if let (Some(s), Some(d)) = (op.src, op.dst) {
            if s.count != d.count {
                return Err(format!(
                    "src has {} chunk(s) but dst has {}",
                    s.count, d.count
                ));
            }
        }
        Ok(())
    }

    /// A peer-strided op has a peer, and no copy of it talks to the rank itself.
    fn check_peer_stride(&self, rank: u32, op: &Op) -> Result<(), String> {
        if op.send_to.is_none() && op.recv_from.is_none() {
            return Err("peer_stride is set but the op has no peer".into());
        }
        for peer in [op.send_to, op.recv_from].into_iter().flatten() {
            if let Some(k) = first_hit(peer, op.peer_stride as i64, rank, self.nranks, op.repeat) {
                return Err(format!(
                    "copy {k} of the repeated op talks to the rank itself (peer {peer} + {k} × peer_stride {})",
                    op.peer_stride
                ));
            }
        }
        Ok(())
    }

    /// A walk names an order, starts inside it, visits only blocks of its buffer, and the
    /// op's ranges on that buffer start in the walk's first block and stay inside one block.
    fn check_walk(&self, op: &Op, w: BlockWalk, order_max: &[u32]) -> Result<(), String> {
        let Some(order) = self.orders.get(w.order as usize) else {
            return Err(format!(
                "walk names orders[{}] but the schedule has {} order(s)",
                w.order,
                self.orders.len()
            ));
        };
        if w.start as usize >= order.len() {
            return Err(format!(
                "walk start {} is beyond orders[{}] (length {})",
                w.start,
                w.order,
                order.len()
            ));
        }
        let (inb, outb) = self.collective.blocks(self.nranks);
        let blocks = match w.buffer {
            BufferKind::Input => inb,
            BufferKind::Output => outb,
            BufferKind::Scratch => self.scratch_blocks,
        };
        let max = order_max[w.order as usize];
        if max >= blocks {
            return Err(format!(
                "walk visits block {max} but the {:?} buffer has {blocks} block(s)",
                w.buffer
            ));
        }
        let walked: Vec<ChunkRef> = [op.src, op.dst]
            .into_iter()
            .flatten()
            .filter(|c| c.buffer == w.buffer)
            .collect();
        if walked.is_empty() {
            return Err(format!(
                "walk is on the {:?} buffer, which the op does not use",
                w.buffer
            ));
        }
        let cpb = self.chunks_per_block;
        for c in walked {
            if c.chunk / cpb != order[w.start as usize] {
                return Err(format!(
                    "chunk {} lies in block {}, but the walk starts at block {}",
                    c.chunk,
                    c.chunk / cpb,
                    order[w.start as usize]
                ));
            }
            if c.chunk % cpb + c.count > cpb {
                return Err(format!(
                    "a walked chunk range must stay inside one block: chunks {}..{} cross a block of {cpb}",
                    c.chunk,
                    c.chunk + c.count
                ));
            }
        }
        Ok(())
    }

    /// Chunk range `c` of the op (and every repeated copy of it) lies inside its buffer, and
    /// inside the op's window unless a walk moves it.
    fn check_range(&self, op: &Op, c: ChunkRef) -> Result<(), String> {
        let total = self.buffer_chunks(c.buffer);
        if c.count == 0 {
            return Err("a chunk range must hold at least one chunk".into());
        }
        if total == 0 {
            return Err(format!(
                "{:?} buffer has no chunks (scratch_blocks = 0?)",
                c.buffer
            ));
        }
        if c.chunk >= total || c.chunk + c.count > total {
            return Err(format!(
                "chunks {}..{} of the {:?} buffer are out of range (it has {total})",
                c.chunk,
                c.chunk + c.count,
                c.buffer
            ));
        }
        let walked = op.walk.is_some_and(|w| w.buffer == c.buffer);
        if let (Some(w), false) = (op.window, walked) {
            return check_window(op, c, w, total);
        }
        // Repeated copies shift modulo the chunk count; a range of one chunk always stays in
        // bounds, longer ranges are checked copy by copy (they are rare and short).
        if !walked && op.chunk_stride != 0 && c.count > 1 {
            for k in 1..op.repeat.min(total) {
                let first = (c.chunk as i64 + k as i64 * op.chunk_stride as i64)
                    .rem_euclid(total as i64) as u32;
                if first + c.count > total {
                    return Err(format!(
                        "copy {k}: chunks {}..{} of the {:?} buffer are out of range (it has {total})",
                        first,
                        first + c.count,
                        c.buffer
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Window `w` fits the buffer of `total` chunks and holds range `c` in every copy.
fn check_window(op: &Op, c: ChunkRef, w: ChunkWindow, total: u32) -> Result<(), String> {
    if w.len == 0 || w.start as u64 + w.len as u64 > total as u64 {
        return Err(format!(
            "window {}..{} does not fit the {:?} buffer ({total} chunks)",
            w.start,
            w.start as u64 + w.len as u64,
            c.buffer
        ));
    }
    if c.chunk < w.start || c.chunk + c.count > w.start + w.len {
        return Err(format!(
            "chunks {}..{} are outside the window {}..{}",
            c.chunk,
            c.chunk + c.count,
            w.start,
            w.start + w.len
        ));
    }
    if op.chunk_stride != 0 && c.count > 1 {
        for k in 1..op.repeat.min(w.len) {
            let off = (c.chunk as i64 - w.start as i64 + k as i64 * op.chunk_stride as i64)
                .rem_euclid(w.len as i64) as u32;
            if off + c.count > w.len {
                return Err(format!(
                    "copy {k}: chunks wrap around the end of the window {}..{}",
                    w.start,
                    w.start + w.len
                ));
            }
        }
    }
    Ok(())
}

/// Dependencies name existing ops of the rank's other channels.
fn check_deps(channel: u32, op: &Op, rp: &RankProgram) -> Result<(), String> {
    for d in &op.deps {
        if d.channel == channel {
            return Err("a dependency on the op's own channel is implied by program order; name other channels only".into());
        }
        let ok = rp
            .channels
            .get(d.channel as usize)
            .is_some_and(|ch| (d.index as usize) < ch.ops.len());
        if !ok {
            return Err(format!(
                "dependency on channel {} op {} which does not exist",
                d.channel, d.index
            ));
        }
    }
    Ok(())
}

/// Smallest `k < repeat` with `(peer + k*stride) mod n == target`, if any.
fn first_hit(peer: u32, stride: i64, target: u32, n: u32, repeat: u32) -> Option<u32> {
    let n = n as i64;
    let s = stride.rem_euclid(n);
    let d = (target as i64 - peer as i64).rem_euclid(n);
    if d == 0 {
        return Some(0);
    }
    let g = gcd(s, n);
    if s == 0 || d % g != 0 {
        return None;
    }
    let (m, s1, d1) = (n / g, s / g, d / g);
    let k = (d1 * mod_inverse(s1, m)).rem_euclid(m);
    (k < repeat as i64).then_some(k as u32)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Inverse of `a` modulo `m` (`a` and `m` coprime, `m >= 1`).
fn mod_inverse(a: i64, m: i64) -> i64 {
    let (mut old_r, mut r) = (a.rem_euclid(m), m);
    let (mut old_s, mut s) = (1i64, 0i64);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(m.max(1))
}
