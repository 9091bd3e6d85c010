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
    let (hh, ll, nc) = (h_n as u32, l_n as u32, chains.len() as u32);
    let mut s = empty(coll, Algorithm::Hierarchical, proto, n, nc, nc * ll * hh);
    let (li, hi) = (ll as i64, hh as i64);
    for (c, chain) in chains.iter().enumerate() {
        let c32 = c as u32;
        let all = (c32 * ll * hh, ll * hh); // channel c's window
        let piece =
            |b: BufferKind, j: i64| ChunkRef::new(b, (c32 * ll + j.rem_euclid(li) as u32) * hh, hh);
        for (h, g) in hosts.iter().enumerate() {
            for p in 0..li {
                let at = |q: i64| g[chain[q.rem_euclid(li) as usize] as usize];
                let (rank, next, prev) = (at(p), at(p + 1), at(p - 1));
                let local = chain[p as usize] as usize;
                let mut ops = Vec::new();
                // 1. Reduce-scatter inside the host: position p ends with piece p reduced.
                if ll > 1 {
                    ops.push(Op::send(piece(BufferKind::Input, p - 1), next));
                    if ll > 2 {
                        ops.push(
                            Op::recv_reduce_send(piece(BufferKind::Input, p - 2), prev, next)
                                .repeated(ll - 2, -(hh as i32))
                                .windowed(all.0, all.1),
                        );
                    }
                    ops.push(Op::recv_reduce_copy(
                        piece(BufferKind::Input, p),
                        piece(BufferKind::Output, p),
                        prev,
                    ));
                } else {
                    ops.push(Op::copy(
                        piece(BufferKind::Input, 0),
                        piece(BufferKind::Output, 0),
                    ));
                }
                // 2. All-reduce of piece p across hosts, on this GPU's rail.
                if hh > 1 {
                    let base = (c32 * ll + p as u32) * hh;
                    let sub = |k: i64| {
                        ChunkRef::new(BufferKind::Output, base + k.rem_euclid(hi) as u32, 1)
                    };
                    let (hn, hp) = (
                        hosts[(h + 1) % h_n][local],
                        hosts[(h + h_n - 1) % h_n][local],
                    );
                    let hk = h as i64;
                    ops.push(Op::send(sub(hk - 1), hn));
                    if hh > 2 {
                        ops.push(
                            Op::recv_reduce_send(sub(hk - 2), hp, hn)
                                .repeated(hh - 2, -1)
                                .windowed(base, hh),
                        );
                    }
                    ops.push(Op::recv_reduce_copy_send(sub(hk), sub(hk), hp, hn));
                    if hh > 2 {
                        ops.push(
                            Op::recv_copy_send(sub(hk - 1), hp, hn)
                                .repeated(hh - 2, -1)
                                .windowed(base, hh),
                        );
                    }
                    ops.push(Op::recv(sub(hk + 1), hp));
                }
                // 3. All-gather inside the host.
                if ll > 1 {
                    ops.push(Op::send(piece(BufferKind::Output, p), next));
                    if ll > 2 {
                        ops.push(
                            Op::recv_copy_send(piece(BufferKind::Output, p - 1), prev, next)
                                .repeated(ll - 2, -(hh as i32))
                                .windowed(all.0, all.1),
                        );
                    }
                    ops.push(Op::recv(piece(BufferKind::Output, p + 1), prev));
                }
                for op in ops {
                    push(&mut s, rank, c32, op);
                }
            }
        }
    }
    s.validate()?;
    Ok(s)
}
