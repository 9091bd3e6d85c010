//! `Schedule::validate`: structural checks every schedule must pass before anyone executes it.
//! Semantic checks (right result, no deadlock) are the simulator's job (`sim::verify`).

use super::ir::*;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error(
        "schedule IR version {0} is not supported (this build reads version {SCHEDULE_IR_VERSION})"
    )]
    Version(u32),
    #[error("{0}")]
    Shape(String),
    #[error("rank {rank} channel {channel} op {index} ({kind:?}): {what}")]
    Op {
        rank: u32,
        channel: u32,
        index: u32,
        kind: OpKind,
        what: String,
    },
    #[error("channel {channel}: rank {from} sends {sends} message(s) to rank {to}, which receives {recvs} from it")]
    Unmatched {
        channel: u32,
        from: u32,
        to: u32,
        sends: u64,
        recvs: u64,
    },
    #[error("channel {channel}: message {seq} from rank {from} to rank {to} sends {send_count} chunk(s) at sub-chunk {send_sub}, but the receive takes {recv_count} at sub-chunk {recv_sub}")]
    SizeMismatch {
        channel: u32,
        from: u32,
        to: u32,
        seq: u64,
        send_count: u32,
        send_sub: u32,
        recv_count: u32,
        recv_sub: u32,
    },
}

/// Expanded programs larger than this get the per-connection message-count check only.
pub const FULL_PAIRING_LIMIT: u64 = 1 << 24;

impl Schedule {
    /// Checks the structure: shape, op fields, chunk bounds, dependencies, and that every message
    /// has a receiver of the same size. See `docs/schedule-ir.md`.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        if self.version != SCHEDULE_IR_VERSION {
            return Err(ScheduleError::Version(self.version));
        }
        let shape = |s: String| Err(ScheduleError::Shape(s));
        if self.nranks == 0 {
            return shape("nranks must be >= 1".into());
        }
        if self.ranks.len() != self.nranks as usize {
            return shape(format!(
                "nranks is {} but {} rank programs are given",
                self.nranks,
                self.ranks.len()
            ));
        }
        if self.chunks_per_block == 0 {
            return shape("chunks_per_block must be >= 1".into());
        }
        if self.slots == 0 {
            return shape("slots must be >= 1".into());
        }
        if self.loop_elems == Some(0) {
            return shape("loop_elems must be >= 1 when given".into());
        }
        if matches!(
            self.collective.kind,
            CollectiveKind::Broadcast | CollectiveKind::Reduce
        ) {
            match self.collective.root {
                Some(r) if r < self.nranks => {}
                _ => {
                    return shape(format!(
                        "{} needs a root rank below {}",
                        self.collective.kind.name(),
                        self.nranks
                    ))
                }
            }
        }
        let mut expanded_total: u64 = 0;
        for (i, rp) in self.ranks.iter().enumerate() {
            if rp.rank != i as u32 {
                return shape(format!("rank program {i} is labelled rank {}", rp.rank));
            }
            if rp.channels.len() != self.channels as usize {
                return shape(format!(
                    "rank {i} has {} channel programs, schedule has {} channels",
                    rp.channels.len(),
                    self.channels
                ));
            }
            for (c, ch) in rp.channels.iter().enumerate() {
                for (j, op) in ch.ops.iter().enumerate() {
                    self.check_op(rp.rank, c as u32, j as u32, op, rp)?;
                    expanded_total += op.repeat as u64;
                }
            }
        }
        self.check_pairing(expanded_total <= FULL_PAIRING_LIMIT)
    }

    fn check_op(
        &self,
        rank: u32,
        channel: u32,
        index: u32,
        op: &Op,
        rp: &RankProgram,
    ) -> Result<(), ScheduleError> {
        let err = |what: String| {
            Err(ScheduleError::Op {
                rank,
                channel,
                index,
                kind: op.kind,
                what,
            })
        };
        if op.repeat == 0 {
            return err("repeat must be >= 1".into());
        }
        for (needed, present, name) in [
            (op.kind.needs_src(), op.src.is_some(), "src"),
            (op.kind.needs_dst(), op.dst.is_some(), "dst"),
            (op.kind.sends(), op.send_to.is_some(), "send_to"),
            (op.kind.receives(), op.recv_from.is_some(), "recv_from"),
        ] {
            if needed != present {
                return err(if needed {
                    format!("needs `{name}`")
                } else {
                    format!("must not have `{name}`")
                });
            }
        }
        for peer in [op.send_to, op.recv_from].into_iter().flatten() {
            if peer >= self.nranks {
                return err(format!(
                    "peer rank {peer} is not below nranks {}",
                    self.nranks
                ));
            }
            if peer == rank {
                return err("peer is the rank itself".into());
            }
        }
        if let (Some(s), Some(d)) = (op.src, op.dst) {
            if s.count != d.count {
                return err(format!(
                    "src has {} chunk(s) but dst has {}",
                    s.count, d.count
                ));
            }
        }
        for c in [op.src, op.dst].into_iter().flatten() {
            let total = self.buffer_chunks(c.buffer);
            if c.count == 0 {
                return err("a chunk range must hold at least one chunk".into());
            }
            if total == 0 {
                return err(format!(
                    "{:?} buffer has no chunks (scratch_blocks = 0?)",
                    c.buffer
                ));
            }
            // Every repeated copy must stay in bounds; shifts wrap modulo the buffer's chunk count.
            for k in 0..op.repeat.min(total.max(1)) {
                let first = (c.chunk as i64 + k as i64 * op.chunk_stride as i64)
                    .rem_euclid(total as i64) as u32;
                if k == 0 && c.chunk >= total || first + c.count > total {
                    return err(format!(
                        "chunks {}..{} of the {:?} buffer are out of range (it has {total})",
                        first,
                        first + c.count,
                        c.buffer
                    ));
                }
                if op.chunk_stride == 0 {
                    break;
                }
            }
        }
        for d in &op.deps {
            if d.channel == channel {
                return err("a dependency on the op's own channel is implied by program order; name other channels only".into());
            }
            let ok = rp
                .channels
                .get(d.channel as usize)
                .is_some_and(|ch| (d.index as usize) < ch.ops.len());
            if !ok {
                return err(format!(
                    "dependency on channel {} op {} which does not exist",
                    d.channel, d.index
                ));
            }
        }
        Ok(())
    }

    fn check_pairing(&self, full: bool) -> Result<(), ScheduleError> {
        // (channel, from, to) -> message sizes in order, or just counts.
        type Key = (u32, u32, u32);
        let mut sends: HashMap<Key, Vec<(u32, u32)>> = HashMap::new();
        let mut recvs: HashMap<Key, Vec<(u32, u32)>> = HashMap::new();
        let mut send_n: HashMap<Key, u64> = HashMap::new();
        let mut recv_n: HashMap<Key, u64> = HashMap::new();
        let cpb = self.chunks_per_block;
        for rp in &self.ranks {
            for c in 0..self.channels {
                if full {
                    for op in self.expanded_ops(rp.rank, c) {
                        let size = op
                            .src
                            .or(op.dst)
                            .map(|r| (r.count, r.chunk % cpb))
                            .unwrap_or((0, 0));
                        if let Some(to) = op.send_to {
                            // The message a forwarding op sends has the shape of what it received/stored.
                            let s = op
                                .dst
                                .or(op.src)
                                .map(|r| (r.count, r.chunk % cpb))
                                .unwrap_or(size);
                            sends.entry((c, rp.rank, to)).or_default().push(s);
                        }
                        if let Some(from) = op.recv_from {
                            let r = op
                                .dst
                                .or(op.src)
                                .map(|r| (r.count, r.chunk % cpb))
                                .unwrap_or(size);
                            recvs.entry((c, from, rp.rank)).or_default().push(r);
                        }
                    }
                } else {
                    for op in &rp.channels[c as usize].ops {
                        if let Some(to) = op.send_to {
                            *send_n.entry((c, rp.rank, to)).or_default() += op.repeat as u64;
                        }
                        if let Some(from) = op.recv_from {
                            *recv_n.entry((c, from, rp.rank)).or_default() += op.repeat as u64;
                        }
                    }
                }
            }
        }
        if full {
            for (k, v) in &sends {
                send_n.insert(*k, v.len() as u64);
            }
            for (k, v) in &recvs {
                recv_n.insert(*k, v.len() as u64);
            }
        }
        let mut keys: Vec<Key> = send_n.keys().chain(recv_n.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        for k @ (channel, from, to) in keys {
            let (s, r) = (
                send_n.get(&k).copied().unwrap_or(0),
                recv_n.get(&k).copied().unwrap_or(0),
            );
            if s != r {
                return Err(ScheduleError::Unmatched {
                    channel,
                    from,
                    to,
                    sends: s,
                    recvs: r,
                });
            }
            if full {
                let (sv, rv) = (&sends[&k], &recvs[&k]);
                for (seq, (a, b)) in sv.iter().zip(rv).enumerate() {
                    if a != b {
                        return Err(ScheduleError::SizeMismatch {
                            channel,
                            from,
                            to,
                            seq: seq as u64,
                            send_count: a.0,
                            send_sub: a.1,
                            recv_count: b.0,
                            recv_sub: b.1,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
