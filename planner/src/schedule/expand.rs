//! Geometry helpers of a schedule (chunk counts and element ranges) and the expansion of
//! repeated ops (`expanded_ops`, `op_copy`, `expanded`).

use super::ir::*;

impl Schedule {
    /// The schedule with `repeat`, strides and walks applied: every op is plain, `orders` is
    /// empty, and deps are re-pointed at the last copy of the op they named (a dependency waits
    /// for all copies). Executes exactly like the original; used by MSCCL export and tests.
    pub fn expanded(&self) -> Schedule {
        let mut out = self.clone();
        out.orders.clear();
        for rp in &mut out.ranks {
            let src = &self.ranks[rp.rank as usize];
            // Last expanded index of every raw op, per channel.
            let last: Vec<Vec<u32>> = src
                .channels
                .iter()
                .map(|ch| {
                    let mut acc = 0u32;
                    ch.ops
                        .iter()
                        .map(|o| {
                            acc += o.repeat.max(1);
                            acc - 1
                        })
                        .collect()
                })
                .collect();
            for (c, ch) in rp.channels.iter_mut().enumerate() {
                let mut ops = self.expanded_ops(rp.rank, c as u32);
                for op in &mut ops {
                    for d in &mut op.deps {
                        d.index = last[d.channel as usize][d.index as usize];
                    }
                }
                ch.ops = ops;
            }
        }
        out
    }
}

impl Schedule {
    /// Chunk count of a buffer of this schedule.
    pub fn buffer_chunks(&self, buffer: BufferKind) -> u32 {
        let (inb, outb) = self.collective.blocks(self.nranks);
        let blocks = match buffer {
            BufferKind::Input => inb,
            BufferKind::Output => outb,
            BufferKind::Scratch => self.scratch_blocks,
        };
        blocks * self.chunks_per_block
    }

    /// Element range, within a buffer, of chunk `c` for per-rank count `count` in loop
    /// iteration `iter` (0 when not pipelined).
    pub fn chunk_elems(&self, count: u64, iter: u64, c: u32) -> std::ops::Range<u64> {
        let block = c / self.chunks_per_block;
        let sub = c % self.chunks_per_block;
        let (lo, len) = match self.loop_elems {
            Some(l) if l > 0 => {
                let lo = (iter * l).min(count);
                (lo, (lo + l).min(count) - lo)
            }
            _ => (0, count),
        };
        let r = chunk_range(len, self.chunks_per_block, sub);
        let base = block as u64 * count + lo;
        (base + r.start)..(base + r.end)
    }

    /// Number of loop iterations for per-rank count `count` (at least 1).
    pub fn loop_iterations(&self, count: u64) -> u64 {
        match self.loop_elems {
            Some(l) if l > 0 && count > 0 => count.div_ceil(l),
            _ => 1,
        }
    }

    /// How many ops every rank's channels hold with `repeat` expanded (what [`Self::expanded_ops`]
    /// returns, summed over ranks and channels): the size the engine and the verifier refuse
    /// past their budgets.
    pub fn expanded_op_count(&self) -> u64 {
        self.ranks
            .iter()
            .flat_map(|r| r.channels.iter())
            .flat_map(|c| c.ops.iter())
            .map(|o| o.repeat.max(1) as u64)
            .sum()
    }

    /// The ops of a rank's channel with `repeat` expanded, in execution order: every returned op
    /// has `repeat == 1` and no strides or walk. Copies after the first carry no deps.
    pub fn expanded_ops(&self, rank: u32, channel: u32) -> Vec<Op> {
        let ops = &self.ranks[rank as usize].channels[channel as usize].ops;
        let mut out = Vec::with_capacity(ops.iter().map(|o| o.repeat.max(1) as usize).sum());
        for op in ops {
            for k in 0..op.repeat.max(1) {
                out.push(self.op_copy(op, k));
            }
        }
        out
    }

    /// Copy `k` of a (possibly repeated) op as a plain op.
    pub fn op_copy(&self, op: &Op, k: u32) -> Op {
        let mut o = op.clone();
        o.repeat = 1;
        o.chunk_stride = 0;
        o.peer_stride = 0;
        o.walk = None;
        o.window = None;
        if k == 0 {
            return o;
        }
        o.deps.clear(); // deps bind the first copy only
        let shift = |c: Option<ChunkRef>| {
            c.map(|mut c| {
                match op.walk {
                    Some(w) if w.buffer == c.buffer => {
                        let order = &self.orders[w.order as usize];
                        let len = order.len().max(1) as i64;
                        let idx = (w.start as i64 + k as i64 * w.step as i64).rem_euclid(len);
                        let block = order[idx as usize];
                        c.chunk = block * self.chunks_per_block + c.chunk % self.chunks_per_block;
                    }
                    _ => {
                        let (start, len) = match op.window {
                            Some(w) => (w.start as i64, w.len.max(1) as i64),
                            None => (0, self.buffer_chunks(c.buffer).max(1) as i64),
                        };
                        let idx = start
                            + (c.chunk as i64 - start + k as i64 * op.chunk_stride as i64)
                                .rem_euclid(len);
                        c.chunk = idx as u32;
                    }
                }
                c
            })
        };
        o.src = shift(o.src);
        o.dst = shift(o.dst);
        if op.peer_stride != 0 {
            let n = self.nranks.max(1) as i64;
            let shift_peer =
                |p: u32| (p as i64 + k as i64 * op.peer_stride as i64).rem_euclid(n) as u32;
            o.send_to = o.send_to.map(shift_peer);
            o.recv_from = o.recv_from.map(shift_peer);
        }
        o
    }
}
