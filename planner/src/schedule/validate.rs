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
    #[error("rank {rank}: dependency cycle through channel {channel} op {index} (program order and `deps` must form no cycle)")]
    Cycle { rank: u32, channel: u32, index: u32 },
    #[error("{0}")]
    Unsupported(String),
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

/// Expanded programs larger than this get the per-connection message-count check only, through
/// multiset fingerprints (an exact search runs only when they differ).
pub const FULL_PAIRING_LIMIT: u64 = 1 << 22;

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
        for (i, o) in self.orders.iter().enumerate() {
            if o.is_empty() {
                return shape(format!("orders[{i}] is empty"));
            }
            if let Some(r) = o.iter().find(|r| **r >= self.nranks) {
                return shape(format!(
                    "orders[{i}] names rank {r}, not below nranks {}",
                    self.nranks
                ));
            }
        }
        // Largest block each order visits (checked once, not per walking op).
        let order_max: Vec<u32> = self
            .orders
            .iter()
            .map(|o| o.iter().copied().max().unwrap_or(0))
            .collect();
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
                    self.check_op(rp.rank, c as u32, j as u32, op, rp, &order_max)?;
                    expanded_total += op.repeat as u64;
                }
            }
            check_cycles(rp)?;
        }
        if expanded_total > FULL_PAIRING_LIMIT {
            return match self.fingerprint_mismatch() {
                // Something towards this rank is unmatched: find it exactly.
                Some(to) => self.check_pairing(false, Some(to)),
                None => Ok(()),
            };
        }
        self.check_pairing(true, None)
    }

    fn check_op(
        &self,
        rank: u32,
        channel: u32,
        index: u32,
        op: &Op,
        rp: &RankProgram,
        order_max: &[u32],
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
        if op.peer_stride != 0 {
            if op.send_to.is_none() && op.recv_from.is_none() {
                return err("peer_stride is set but the op has no peer".into());
            }
            for peer in [op.send_to, op.recv_from].into_iter().flatten() {
                if let Some(k) =
                    first_hit(peer, op.peer_stride as i64, rank, self.nranks, op.repeat)
                {
                    return err(format!(
                        "copy {k} of the repeated op talks to the rank itself (peer {peer} + {k} × peer_stride {})",
                        op.peer_stride
                    ));
                }
            }
        }
        if let Some(w) = op.walk {
            let Some(order) = self.orders.get(w.order as usize) else {
                return err(format!(
                    "walk names orders[{}] but the schedule has {} order(s)",
                    w.order,
                    self.orders.len()
                ));
            };
            if w.start as usize >= order.len() {
                return err(format!(
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
                return err(format!(
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
                return err(format!(
                    "walk is on the {:?} buffer, which the op does not use",
                    w.buffer
                ));
            }
            let cpb = self.chunks_per_block;
            for c in walked {
                if c.chunk / cpb != order[w.start as usize] {
                    return err(format!(
                        "chunk {} lies in block {}, but the walk starts at block {}",
                        c.chunk,
                        c.chunk / cpb,
                        order[w.start as usize]
                    ));
                }
                if c.chunk % cpb + c.count > cpb {
                    return err(format!(
                        "a walked chunk range must stay inside one block: chunks {}..{} cross a block of {cpb}",
                        c.chunk,
                        c.chunk + c.count
                    ));
                }
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
            if c.chunk >= total || c.chunk + c.count > total {
                return err(format!(
                    "chunks {}..{} of the {:?} buffer are out of range (it has {total})",
                    c.chunk,
                    c.chunk + c.count,
                    c.buffer
                ));
            }
            let walked = op.walk.is_some_and(|w| w.buffer == c.buffer);
            if let (Some(w), false) = (op.window, walked) {
                if w.len == 0 || w.start as u64 + w.len as u64 > total as u64 {
                    return err(format!(
                        "window {}..{} does not fit the {:?} buffer ({total} chunks)",
                        w.start,
                        w.start as u64 + w.len as u64,
                        c.buffer
                    ));
                }
                if c.chunk < w.start || c.chunk + c.count > w.start + w.len {
                    return err(format!(
                        "chunks {}..{} are outside the window {}..{}",
                        c.chunk,
                        c.chunk + c.count,
                        w.start,
                        w.start + w.len
                    ));
                }
                if op.chunk_stride != 0 && c.count > 1 {
                    for k in 1..op.repeat.min(w.len) {
                        let off = (c.chunk as i64 - w.start as i64
                            + k as i64 * op.chunk_stride as i64)
                            .rem_euclid(w.len as i64) as u32;
                        if off + c.count > w.len {
                            return err(format!(
                                "copy {k}: chunks wrap around the end of the window {}..{}",
                                w.start,
                                w.start + w.len
                            ));
                        }
                    }
                }
                continue;
            }
            // Repeated copies shift modulo the chunk count; a range of one chunk always stays in
            // bounds, longer ranges are checked copy by copy (they are rare and short).
            if !walked && op.chunk_stride != 0 && c.count > 1 {
                for k in 1..op.repeat.min(total) {
                    let first = (c.chunk as i64 + k as i64 * op.chunk_stride as i64)
                        .rem_euclid(total as i64) as u32;
                    if first + c.count > total {
                        return err(format!(
                            "copy {k}: chunks {}..{} of the {:?} buffer are out of range (it has {total})",
                            first,
                            first + c.count,
                            c.buffer
                        ));
                    }
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

    /// Large schedules: every (channel, from, to) message key must be sent as often as it is
    /// received. Compares, per receiving rank, 64-bit multiset hashes (sums of h and h²) of the keys
    /// sent to it and received by it, in O(ops) for plain ops and O(repeat) for peer-strided ones;
    /// returns a rank where they differ.
    fn fingerprint_mismatch(&self) -> Option<u32> {
        let n = self.nranks as i64;
        let skip = self.cancelled_strided();
        // [to][send|recv][hash a|hash b]
        let mut acc = vec![[[0u64; 2]; 2]; self.nranks as usize];
        for rp in &self.ranks {
            for (c, ch) in rp.channels.iter().enumerate() {
                for (i, op) in ch.ops.iter().enumerate() {
                    if skip.contains(&(rp.rank, c as u32, i as u32)) {
                        continue;
                    }
                    let (copies, each) = if op.peer_stride != 0 {
                        (op.repeat, 1u64)
                    } else {
                        (1, op.repeat as u64)
                    };
                    for k in 0..copies {
                        let sh = |p: u32| {
                            (p as i64 + k as i64 * op.peer_stride as i64).rem_euclid(n) as u32
                        };
                        if let Some(to) = op.send_to {
                            let key = (c as u32, rp.rank, sh(to));
                            let h = mix(key);
                            let a = &mut acc[key.2 as usize][0];
                            a[0] = a[0].wrapping_add(h.wrapping_mul(each));
                            a[1] = a[1].wrapping_add(h.wrapping_mul(h).wrapping_mul(each));
                        }
                        if let Some(from) = op.recv_from {
                            let key = (c as u32, sh(from), rp.rank);
                            let h = mix(key);
                            let a = &mut acc[key.2 as usize][1];
                            a[0] = a[0].wrapping_add(h.wrapping_mul(each));
                            a[1] = a[1].wrapping_add(h.wrapping_mul(h).wrapping_mul(each));
                        }
                    }
                }
            }
        }
        acc.iter().position(|a| a[0] != a[1]).map(|r| r as u32)
    }

    /// Peer-strided ops that pair up exactly without enumerating their copies: a group of send
    /// ops run by every rank once (same channel, peer offset, stride and repeat) sends rank a to
    /// a + d for every d of a set D; a group of receive ops run by every rank once whose offsets
    /// give the same multiset D takes exactly those messages. Returns (rank, channel, op) of the
    /// ops in such matched group pairs. Keeps direct all-to-all checks linear in ranks.
    fn cancelled_strided(&self) -> std::collections::HashSet<(u32, u32, u32)> {
        type GroupKey = (u32, bool, u32, u32, u32); // channel, sends, offset, stride, repeat
        let n = self.nranks as i64;
        let mut groups: HashMap<GroupKey, Vec<(u32, u32)>> = HashMap::new();
        for rp in &self.ranks {
            for (c, ch) in rp.channels.iter().enumerate() {
                for (i, op) in ch.ops.iter().enumerate() {
                    if op.peer_stride == 0 || op.send_to.is_some() == op.recv_from.is_some() {
                        continue;
                    }
                    let (sends, peer) = match (op.send_to, op.recv_from) {
                        (Some(t), _) => (true, t),
                        (_, Some(f)) => (false, f),
                        _ => continue,
                    };
                    let off = (peer as i64 - rp.rank as i64).rem_euclid(n) as u32;
                    let stride = (op.peer_stride as i64).rem_euclid(n) as u32;
                    groups
                        .entry((c as u32, sends, off, stride, op.repeat))
                        .or_default()
                        .push((rp.rank, i as u32));
                }
            }
        }
        let full = |v: &Vec<(u32, u32)>| {
            if v.len() != n as usize {
                return false;
            }
            let mut seen = vec![false; n as usize];
            v.iter()
                .all(|(r, _)| !std::mem::replace(&mut seen[*r as usize], true))
        };
        // Sender → receiver distances of a group's messages, sorted.
        let deltas = |k: &GroupKey| {
            let mut d: Vec<i64> = (0..k.4 as i64)
                .map(|j| {
                    let x = k.2 as i64 + j * k.3 as i64;
                    if k.1 {
                        x.rem_euclid(n)
                    } else {
                        (-x).rem_euclid(n)
                    }
                })
                .collect();
            d.sort_unstable();
            d
        };
        let mut keys: Vec<GroupKey> = groups
            .keys()
            .copied()
            .filter(|k| full(&groups[k]))
            .collect();
        keys.sort_unstable();
        let mut used = std::collections::HashSet::new();
        let mut out = std::collections::HashSet::new();
        for sk in keys.iter().filter(|k| k.1) {
            let ds = deltas(sk);
            let hit = keys.iter().find(|rk| {
                !rk.1 && rk.0 == sk.0 && rk.4 == sk.4 && !used.contains(*rk) && deltas(rk) == ds
            });
            if let Some(rk) = hit {
                used.insert(*rk);
                for k in [sk, rk] {
                    for &(r, i) in &groups[k] {
                        out.insert((r, k.0, i));
                    }
                }
            }
        }
        out
    }

    /// Exact pairing. `full`: every message's shape, in order, through a stable sort of
    /// (key, shape) records (program order survives within a key). Otherwise per-key counts only;
    /// `only_to` restricts them to messages towards one rank.
    fn check_pairing(&self, full: bool, only_to: Option<u32>) -> Result<(), ScheduleError> {
        type Key = (u32, u32, u32); // (channel, from, to)
        let cpb = self.chunks_per_block;
        let shape = |r: Option<ChunkRef>| r.map(|r| (r.count, r.chunk % cpb)).unwrap_or((0, 0));
        if full {
            let mut sends: Vec<(Key, (u32, u32))> = Vec::new();
            let mut recvs: Vec<(Key, (u32, u32))> = Vec::new();
            for rp in &self.ranks {
                for (c, ch) in rp.channels.iter().enumerate() {
                    for op in &ch.ops {
                        for k in 0..op.repeat.max(1) {
                            let o = self.op_copy(op, k);
                            // A message has the shape of what the op stores or reads.
                            let sh = shape(o.dst.or(o.src));
                            if let Some(to) = o.send_to {
                                sends.push(((c as u32, rp.rank, to), sh));
                            }
                            if let Some(from) = o.recv_from {
                                recvs.push(((c as u32, from, rp.rank), sh));
                            }
                        }
                    }
                }
            }
            sends.sort_by_key(|x| x.0); // stable: order within a key is program order
            recvs.sort_by_key(|x| x.0);
            let (mut i, mut j) = (0, 0);
            while i < sends.len() || j < recvs.len() {
                let key = match (sends.get(i), recvs.get(j)) {
                    (Some(a), Some(b)) => a.0.min(b.0),
                    (Some(a), None) => a.0,
                    (None, Some(b)) => b.0,
                    (None, None) => break,
                };
                let i0 = i;
                while i < sends.len() && sends[i].0 == key {
                    i += 1;
                }
                let j0 = j;
                while j < recvs.len() && recvs[j].0 == key {
                    j += 1;
                }
                let (channel, from, to) = key;
                if i - i0 != j - j0 {
                    return Err(ScheduleError::Unmatched {
                        channel,
                        from,
                        to,
                        sends: (i - i0) as u64,
                        recvs: (j - j0) as u64,
                    });
                }
                for (seq, (a, b)) in sends[i0..i].iter().zip(&recvs[j0..j]).enumerate() {
                    if a.1 != b.1 {
                        return Err(ScheduleError::SizeMismatch {
                            channel,
                            from,
                            to,
                            seq: seq as u64,
                            send_count: a.1 .0,
                            send_sub: a.1 .1,
                            recv_count: b.1 .0,
                            recv_sub: b.1 .1,
                        });
                    }
                }
            }
            return Ok(());
        }
        let mut send_n: HashMap<Key, u64> = HashMap::new();
        let mut recv_n: HashMap<Key, u64> = HashMap::new();
        let n = self.nranks as i64;
        for rp in &self.ranks {
            for (c, ch) in rp.channels.iter().enumerate() {
                let c = c as u32;
                for op in &ch.ops {
                    // Peer-strided copies talk to different peers: count each copy's peer.
                    let copies = if op.peer_stride != 0 { op.repeat } else { 1 };
                    let each = if op.peer_stride != 0 {
                        1
                    } else {
                        op.repeat as u64
                    };
                    for k in 0..copies {
                        let sh = |p: u32| {
                            (p as i64 + k as i64 * op.peer_stride as i64).rem_euclid(n) as u32
                        };
                        if let Some(to) = op.send_to {
                            let to = sh(to);
                            if only_to.is_none_or(|o| o == to) {
                                *send_n.entry((c, rp.rank, to)).or_default() += each;
                            }
                        }
                        if let Some(from) = op.recv_from {
                            if only_to.is_none_or(|o| o == rp.rank) {
                                *recv_n.entry((c, sh(from), rp.rank)).or_default() += each;
                            }
                        }
                    }
                }
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
        }
        Ok(())
    }
}

/// A 64-bit hash of a message key (chained SplitMix64 finalisers).
fn mix((c, a, b): (u32, u32, u32)) -> u64 {
    fn sm(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    sm(sm(((c as u64) << 32) | a as u64) ^ b as u64)
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

/// Program order plus `deps` must be acyclic within a rank (Kahn's algorithm over raw ops;
/// repeated copies are consecutive in program order, so raw ops suffice).
fn check_cycles(rp: &RankProgram) -> Result<(), ScheduleError> {
    if rp
        .channels
        .iter()
        .all(|ch| ch.ops.iter().all(|o| o.deps.is_empty()))
    {
        return Ok(()); // program order alone is a set of chains
    }
    let mut base = Vec::with_capacity(rp.channels.len());
    let mut total = 0usize;
    for ch in &rp.channels {
        base.push(total);
        total += ch.ops.len();
    }
    let id = |r: OpRef| base[r.channel as usize] + r.index as usize;
    let mut indeg = vec![0u32; total];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); total];
    for (c, ch) in rp.channels.iter().enumerate() {
        for (i, op) in ch.ops.iter().enumerate() {
            let me = base[c] + i;
            if i > 0 {
                out[me - 1].push(me);
                indeg[me] += 1;
            }
            for d in &op.deps {
                out[id(*d)].push(me);
                indeg[me] += 1;
            }
        }
    }
    let mut stack: Vec<usize> = (0..total).filter(|i| indeg[*i] == 0).collect();
    let mut done = 0;
    while let Some(v) = stack.pop() {
        done += 1;
        for &w in &out[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                stack.push(w);
            }
        }
    }
    if done == total {
        return Ok(());
    }
    let stuck = (0..total).find(|i| indeg[*i] > 0).unwrap_or(0);
    let channel = base.iter().rposition(|b| *b <= stuck).unwrap_or(0);
    Err(ScheduleError::Cycle {
        rank: rp.rank,
        channel: channel as u32,
        index: (stuck - base[channel]) as u32,
    })
}
