//! Hierarchical all-reduce across hosts: reduce-scatter inside each host (ring over the host's
//! GPUs), all-reduce of each GPU's piece across hosts (ring over the GPUs with the same local
//! index: one rail per local GPU), all-gather inside each host. Inter-host traffic per GPU is
//! 2(H−1)/H of a 1/L piece, on every rail at once; steps are 2(L−1) + 2(H−1) instead of 2(LH−1).
//!
//! Layout, C channels, L GPUs per host, H hosts: `chunks_per_block = C·L·H`; channel c's piece j
//! (ring position j inside the host) is chunks `(c·L + j)·H .. +H`, and its sub-chunk h (owned,
//! during the inter-host phase, by host h) is chunk `(c·L + j)·H + h`. Windows keep every rotation
//! inside its channel (intra phases) or its piece (inter phase).

use super::{check_collective, empty, push, shape, unsupported};
use crate::schedule::ir::*;
use crate::schedule::validate::ScheduleError;

/// `hosts[h]`: host h's ranks by local index; `chains[c]`: channel c's ring order of local
/// indices, the same on every host.
pub fn hierarchical(
    coll: &Collective,
    hosts: &[Vec<u32>],
    chains: &[Vec<u32>],
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    if coll.kind != CollectiveKind::AllReduce {
        return Err(unsupported(format!(
            "hierarchical schedules are all-reduce only, not {}",
            coll.kind.name()
        )));
    }
    let h_n = hosts.len();
    let l_n = hosts.first().map_or(0, |h| h.len());
    if h_n == 0 || l_n == 0 || chains.is_empty() {
        return Err(shape(
            "hierarchical: needs hosts with GPUs and at least one chain".into(),
        ));
    }
    let n = (h_n * l_n) as u32;
    check_collective(coll, n)?;
    check_hosts_and_chains(hosts, chains, l_n, n)?;
    let (hh, ll, nc) = (h_n as u32, l_n as u32, chains.len() as u32);
    let mut s = empty(coll, Algorithm::Hierarchical, proto, n, nc, nc * ll * hh);
    let li = ll as i64;
    for (c, chain) in chains.iter().enumerate() {
        let geo = Geometry {
            hosts: hh,
            local: ll,
            channel: c as u32,
        };
        for (h, g) in hosts.iter().enumerate() {
            for p in 0..li {
                let at = |q: i64| g[chain[q.rem_euclid(li) as usize] as usize];
                let (rank, next, prev) = (at(p), at(p + 1), at(p - 1));
                let local = chain[p as usize] as usize;
                let mut ops = Vec::new();
                // 1. Reduce-scatter inside the host: position p ends with piece p reduced.
                geo.reduce_scatter_in_host(&mut ops, p, next, prev);
                // 2. All-reduce of piece p across hosts, on this GPU's rail.
                if hh > 1 {
                    let rail_next = hosts[(h + 1) % h_n][local];
                    let rail_prev = hosts[(h + h_n - 1) % h_n][local];
                    geo.all_reduce_across_hosts(&mut ops, p, h as i64, rail_next, rail_prev);
                }
                // 3. All-gather inside the host.
                geo.all_gather_in_host(&mut ops, p, next, prev);
                for op in ops {
                    push(&mut s, rank, geo.channel, op);
                }
            }
        }
    }
    s.validate()?;
    Ok(s)
}

/// Every host has `l_n` distinct ranks below `n`, and every chain orders `0..l_n`.
fn check_hosts_and_chains(
    hosts: &[Vec<u32>],
    chains: &[Vec<u32>],
    l_n: usize,
    n: u32,
) -> Result<(), ScheduleError> {
    let mut seen = vec![false; n as usize];
    for (h, g) in hosts.iter().enumerate() {
        if g.len() != l_n {
            return Err(shape(format!(
                "hierarchical: host {h} has {} ranks, host 0 has {l_n}",
                g.len()
            )));
        }
        for &r in g {
            if r >= n || std::mem::replace(&mut seen[r as usize], true) {
                return Err(shape(format!(
                    "hierarchical: rank {r} is out of range or listed twice"
                )));
            }
        }
    }
    for (c, ch) in chains.iter().enumerate() {
        let mut s = ch.clone();
        s.sort_unstable();
        if s != (0..l_n as u32).collect::<Vec<_>>() {
            return Err(shape(format!(
                "hierarchical: chain {c} is not a permutation of 0..{l_n}"
            )));
        }
    }
    Ok(())
}

/// One channel's chunk layout: `hosts` (H) hosts of `local` (L) GPUs.
#[derive(Clone, Copy)]
struct Geometry {
    hosts: u32,
    local: u32,
    channel: u32,
}

impl Geometry {
    /// Piece `j` (ring position inside the host, taken mod L) of this channel: H chunks.
    fn piece(self, b: BufferKind, j: i64) -> ChunkRef {
        let j = j.rem_euclid(self.local as i64) as u32;
        ChunkRef::new(b, (self.channel * self.local + j) * self.hosts, self.hosts)
    }

    /// This channel's chunks (start, count), the window of the intra-host rotations.
    fn window(self) -> (u32, u32) {
        let ll_hh = self.local * self.hosts;
        (self.channel * ll_hh, ll_hh)
    }

    /// Phase 1 at ring position `p`: a ring reduce-scatter of the pieces inside the host.
    fn reduce_scatter_in_host(self, ops: &mut Vec<Op>, p: i64, next: u32, prev: u32) {
        let (ll, all) = (self.local, self.window());
        if ll > 1 {
            ops.push(Op::send(self.piece(BufferKind::Input, p - 1), next));
            if ll > 2 {
                ops.push(
                    Op::recv_reduce_send(self.piece(BufferKind::Input, p - 2), prev, next)
                        .repeated(ll - 2, -(self.hosts as i32))
                        .windowed(all.0, all.1),
                );
            }
            ops.push(Op::recv_reduce_copy(
                self.piece(BufferKind::Input, p),
                self.piece(BufferKind::Output, p),
                prev,
            ));
        } else {
            ops.push(Op::copy(
                self.piece(BufferKind::Input, 0),
                self.piece(BufferKind::Output, 0),
            ));
        }
    }

    /// Phase 2 on host `h`: a ring all-reduce of piece `p` over the rail (`rail_next`,
    /// `rail_prev`), sub-chunk k owned by host k.
    fn all_reduce_across_hosts(
        self,
        ops: &mut Vec<Op>,
        p: i64,
        h: i64,
        rail_next: u32,
        rail_prev: u32,
    ) {
        let hh = self.hosts;
        let base = (self.channel * self.local + p as u32) * hh;
        let sub =
            |k: i64| ChunkRef::new(BufferKind::Output, base + k.rem_euclid(hh as i64) as u32, 1);
        let (hn, hp) = (rail_next, rail_prev);
        ops.push(Op::send(sub(h - 1), hn));
        if hh > 2 {
            ops.push(
                Op::recv_reduce_send(sub(h - 2), hp, hn)
                    .repeated(hh - 2, -1)
                    .windowed(base, hh),
            );
        }
        ops.push(Op::recv_reduce_copy_send(sub(h), sub(h), hp, hn));
        if hh > 2 {
            ops.push(
                Op::recv_copy_send(sub(h - 1), hp, hn)
                    .repeated(hh - 2, -1)
                    .windowed(base, hh),
            );
        }
        ops.push(Op::recv(sub(h + 1), hp));
    }

    /// Phase 3 at ring position `p`: a ring all-gather of the reduced pieces inside the host.
    fn all_gather_in_host(self, ops: &mut Vec<Op>, p: i64, next: u32, prev: u32) {
        let (ll, all) = (self.local, self.window());
        if ll > 1 {
            ops.push(Op::send(self.piece(BufferKind::Output, p), next));
            if ll > 2 {
                ops.push(
                    Op::recv_copy_send(self.piece(BufferKind::Output, p - 1), prev, next)
                        .repeated(ll - 2, -(self.hosts as i32))
                        .windowed(all.0, all.1),
                );
            }
            ops.push(Op::recv(self.piece(BufferKind::Output, p + 1), prev));
        }
    }
}
