//! Message pairing: every (channel, from, to) message must be received as often as it is sent
//! and, when the program is small enough to enumerate, with the same shape in the same order.

use super::super::ir::*;
use super::ScheduleError;
use std::collections::HashMap;

impl Schedule {
    /// Large schedules: every (channel, from, to) message key must be sent as often as it is
    /// received. Compares, per receiving rank, 64-bit multiset hashes (sums of h and h²) of the keys
    /// sent to it and received by it, in O(ops) for plain ops and O(repeat) for peer-strided ones;
    /// returns a rank where they differ.
    pub(super) fn fingerprint_mismatch(&self) -> Option<u32> {
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
    pub(super) fn cancelled_strided(&self) -> std::collections::HashSet<(u32, u32, u32)> {
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
    pub(super) fn check_pairing(
        &self,
        full: bool,
        only_to: Option<u32>,
    ) -> Result<(), ScheduleError> {
        if full {
            let (sends, recvs) = self.message_records();
            match_message_records(&sends, &recvs)
        } else {
            self.check_message_counts(only_to)
        }
    }

    /// Every expanded send and receive as a (key, shape) record, sorted by key with program
    /// order kept within a key.
    fn message_records(&self) -> (Vec<MessageRecord>, Vec<MessageRecord>) {
        let cpb = self.chunks_per_block;
        let shape = |r: Option<ChunkRef>| r.map(|r| (r.count, r.chunk % cpb)).unwrap_or((0, 0));
        let mut sends: Vec<MessageRecord> = Vec::new();
        let mut recvs: Vec<MessageRecord> = Vec::new();
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
        (sends, recvs)
    }

    /// Per-key message counts (of messages towards `only_to`, if given) must match.
    fn check_message_counts(&self, only_to: Option<u32>) -> Result<(), ScheduleError> {
        let mut send_n: HashMap<MessageKey, u64> = HashMap::new();
        let mut recv_n: HashMap<MessageKey, u64> = HashMap::new();
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
        let mut keys: Vec<MessageKey> = send_n.keys().chain(recv_n.keys()).copied().collect();
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

/// (channel, from, to).
type MessageKey = (u32, u32, u32);

/// A message's key and shape (chunk count, sub-chunk within its block).
type MessageRecord = (MessageKey, (u32, u32));

/// Walks key-sorted sends and receives key by key: equal counts, and equal shapes in order.
fn match_message_records(
    sends: &[MessageRecord],
    recvs: &[MessageRecord],
) -> Result<(), ScheduleError> {
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
    Ok(())
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
