//! Direct patterns: one-shot, two-shot, point-to-point (all-to-all, send/recv) and the two-GPU
//! copy-engine pipeline.

use super::{check_collective, empty, in_ref, out_ref, push, unsupported};
use crate::schedule::ir::*;
use crate::schedule::validate::ScheduleError;

/// `dst` = the fold, in rank order 0..n, of every rank's contribution (ours is `own`, peers' come
/// in as messages). A fixed order makes every rank's result bit-identical.
fn fold_in_rank_order(r: u32, n: u32, own: ChunkRef, dst: ChunkRef) -> Vec<Op> {
    let mut v = Vec::new();
    if r == 0 {
        v.push(Op::copy(own, dst));
    } else {
        v.push(Op::recv(dst, 0));
        if r > 1 {
            v.push(
                Op::recv_reduce_copy(dst, dst, 1)
                    .repeated(r - 1, 0)
                    .peer_strided(1),
            );
        }
        v.push(Op::reduce(own, dst));
    }
    if r + 1 < n {
        v.push(
            Op::recv_reduce_copy(dst, dst, r + 1)
                .repeated(n - 1 - r, 0)
                .peer_strided(1),
        );
    }
    v
}

/// One-shot direct schedules on one channel: every rank sends its data straight to every rank
/// that needs it (receivers read it over P2P), and reductions fold in rank order. All-reduce,
/// all-gather, reduce-scatter, broadcast and reduce.
pub fn one_shot(
    coll: &Collective,
    nranks: u32,
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    one_shot_channels(coll, nranks, proto, 1)
}

/// [`one_shot`] with the data split over `channels` channels.
pub fn one_shot_channels(
    coll: &Collective,
    n: u32,
    proto: Protocol,
    channels: u32,
) -> Result<Schedule, ScheduleError> {
    check_collective(coll, n)?;
    let nc = channels.max(1);
    let mut s = empty(coll, Algorithm::OneShot, proto, n, nc, nc);
    let load = Transport::P2pLoad;
    for c in 0..nc {
        for r in 0..n {
            let mut v = Vec::new();
            let all_peers = |src: ChunkRef, stride: i32| {
                Op::send(src, (r + 1) % n)
                    .repeated(n - 1, stride)
                    .peer_strided(1)
                    .with_transport(load)
            };
            match coll.kind {
                CollectiveKind::AllReduce => {
                    if n > 1 {
                        v.push(all_peers(in_ref(c), 0));
                    }
                    v.extend(fold_in_rank_order(r, n, in_ref(c), out_ref(c)));
                }
                CollectiveKind::AllGather => {
                    v.push(Op::copy(in_ref(c), out_ref(r * nc + c)));
                    if n > 1 {
                        v.push(all_peers(in_ref(c), 0));
                        let from = (r + n - 1) % n;
                        v.push(
                            Op::recv(out_ref(from * nc + c), from)
                                .repeated(n - 1, -(nc as i32))
                                .peer_strided(-1),
                        );
                    }
                }
                CollectiveKind::ReduceScatter => {
                    if n > 1 {
                        v.push(all_peers(in_ref(((r + 1) % n) * nc + c), nc as i32));
                    }
                    v.extend(fold_in_rank_order(r, n, in_ref(r * nc + c), out_ref(c)));
                }
                CollectiveKind::Broadcast => {
                    let root = coll.root.unwrap_or(0);
                    if r == root {
                        v.push(Op::copy(in_ref(c), out_ref(c)));
                        if n > 1 {
                            v.push(all_peers(in_ref(c), 0));
                        }
                    } else {
                        v.push(Op::recv(out_ref(c), root));
                    }
                }
                CollectiveKind::Reduce => {
                    let root = coll.root.unwrap_or(0);
                    if r == root {
                        // Fold all contributions in rank order, ours at our place.
                        v.extend(fold_in_rank_order(r, n, in_ref(c), out_ref(c)));
                    } else {
                        v.push(Op::send(in_ref(c), root).with_transport(load));
                    }
                }
                CollectiveKind::AllToAll | CollectiveKind::SendRecv => {
                    return Err(unsupported(format!(
                        "one-shot: {} is built by `direct`",
                        coll.kind.name()
                    )))
                }
            }
            for op in v {
                push(&mut s, r, c, op);
            }
        }
    }
    s.validate()?;
    Ok(s)
}

/// Two-shot all-reduce on one channel: direct reduce-scatter (rank q folds chunk q from every
/// rank) then direct all-gather of the reduced chunks.
pub fn two_shot(
    coll: &Collective,
    nranks: u32,
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    two_shot_channels(coll, nranks, proto, 1)
}

/// [`two_shot`] with the data split over `channels` channels.
pub fn two_shot_channels(
    coll: &Collective,
    n: u32,
    proto: Protocol,
    channels: u32,
) -> Result<Schedule, ScheduleError> {
    check_collective(coll, n)?;
    if coll.kind != CollectiveKind::AllReduce {
        return Err(unsupported(format!(
            "two-shot is an all-reduce pattern; {} uses one-shot (its direct half)",
            coll.kind.name()
        )));
    }
    let nc = channels.max(1);
    let mut s = empty(coll, Algorithm::TwoShot, proto, n, nc, n * nc);
    for c in 0..nc {
        for r in 0..n {
            let mine = r * nc + c;
            let mut v = Vec::new();
            if n > 1 {
                v.push(
                    Op::send(in_ref(((r + 1) % n) * nc + c), (r + 1) % n)
                        .repeated(n - 1, nc as i32)
                        .peer_strided(1),
                );
            }
            v.extend(fold_in_rank_order(r, n, in_ref(mine), out_ref(mine)));
            if n > 1 {
                v.push(
                    Op::send(out_ref(mine), (r + 1) % n)
                        .repeated(n - 1, 0)
                        .peer_strided(1),
                );
                let from = (r + n - 1) % n;
                v.push(
                    Op::recv(out_ref(from * nc + c), from)
                        .repeated(n - 1, -(nc as i32))
                        .peer_strided(-1),
                );
            }
            for op in v {
                push(&mut s, r, c, op);
            }
        }
    }
    s.validate()?;
    Ok(s)
}

/// Direct point-to-point schedules: all-to-all on one channel (rank r sends block q of its input
/// to rank q, which stores it as block r of its output), send/recv (`Collective::send_peers`) with
/// each sender's transfer on channel `sender mod 2`.
pub fn direct(coll: &Collective, nranks: u32) -> Result<Schedule, ScheduleError> {
    let n = nranks;
    check_collective(coll, n)?;
    let mut s = empty(coll, Algorithm::Direct, Protocol::Simple, n, 1, 1);
    match coll.kind {
        CollectiveKind::AllToAll => {
            for r in 0..n {
                push(&mut s, r, 0, Op::copy(in_ref(r), out_ref(r)));
                if n > 1 {
                    let (to, from) = ((r + 1) % n, (r + n - 1) % n);
                    push(
                        &mut s,
                        r,
                        0,
                        Op::send(in_ref(to), to).repeated(n - 1, 1).peer_strided(1),
                    );
                    push(
                        &mut s,
                        r,
                        0,
                        Op::recv(out_ref(from), from)
                            .repeated(n - 1, -1)
                            .peer_strided(-1),
                    );
                }
            }
        }
        CollectiveKind::SendRecv => {
            // A rank's send and its receive run at once (NCCL runs a group's send and receive on
            // separate warps): the transfer from rank i runs on channel i mod 2, so in a shift
            // (i to i+1) every rank sends on one channel and receives on the other, where one
            // program would make a ring of sends wait for each other's receives one by one.
            s = empty(
                coll,
                Algorithm::Direct,
                Protocol::Simple,
                n,
                n.clamp(1, 2),
                1,
            );
            for (i, p) in coll.send_peers.iter().enumerate() {
                let i = i as u32;
                let c = i % s.channels;
                match *p {
                    Some(p) if p == i => push(&mut s, i, c, Op::copy(in_ref(0), out_ref(0))),
                    Some(p) => {
                        push(&mut s, i, c, Op::send(in_ref(0), p));
                        push(&mut s, p, c, Op::recv(out_ref(0), i));
                    }
                    None => {}
                }
            }
        }
        k => {
            return Err(unsupported(format!(
                "direct: {} uses one-shot / two-shot / ring / tree builders",
                k.name()
            )))
        }
    }
    s.validate()?;
    Ok(s)
}

/// Two-GPU all-reduce over copy engines: channel 0 copies our input, chunk by chunk, into the
/// peer's scratch (`cudaMemcpyPeerAsync`) and waits for the peer's copies into ours; channel 1
/// reduces each landed chunk as soon as it is there, overlapping reduction with later copies.
///
/// Channel 0 interleaves the two directions, send j then receive j (send 0, recv 0, send 1,
/// recv 1, …), as the runtime's copy-engine pair (`cuda::ce_pair`) runs them: receive j
/// completes, and reduce j (channel 1, which depends on it) may start, while the copies of later
/// chunks are still to come. Every chunk has its own scratch slot (`slots` = k), so no send waits
/// for a credit and the symmetric order cannot deadlock.
pub fn copy_engine_pipeline(coll: &Collective, nchunks: u32) -> Result<Schedule, ScheduleError> {
    if coll.kind != CollectiveKind::AllReduce {
        return Err(unsupported(format!(
            "the copy-engine pipeline is an all-reduce of two ranks, not {}",
            coll.kind.name()
        )));
    }
    let k = nchunks.max(1);
    let mut s = empty(
        coll,
        Algorithm::CopyEnginePipeline,
        Protocol::Simple,
        2,
        2,
        k,
    );
    s.scratch_blocks = 1;
    s.slots = k; // every chunk has its own landing place in scratch
    s.loop_elems = None;
    for r in 0..2u32 {
        let q = 1 - r;
        for j in 0..k {
            push(
                &mut s,
                r,
                0,
                Op::send(in_ref(j), q).with_transport(Transport::CopyEngine),
            );
            push(
                &mut s,
                r,
                0,
                Op::recv(ChunkRef::new(BufferKind::Scratch, j, 1), q),
            );
        }
        push(
            &mut s,
            r,
            1,
            Op::copy(
                ChunkRef::new(BufferKind::Input, 0, k),
                ChunkRef::new(BufferKind::Output, 0, k),
            ),
        );
        for j in 0..k {
            push(
                &mut s,
                r,
                1,
                Op::reduce(ChunkRef::new(BufferKind::Scratch, j, 1), out_ref(j)).with_deps(vec![
                    OpRef {
                        channel: 0,
                        index: 2 * j + 1,
                    },
                ]),
            );
        }
    }
    s.validate()?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::symbolic;

    /// Channel 0 interleaves send j and receive j, and reduce j waits for receive j only: the
    /// order that lets a simulator overlap reduce j with the copies of later chunks.
    #[test]
    fn copy_engine_pipeline_interleaves_sends_and_receives() {
        let coll = Collective::new(CollectiveKind::AllReduce);
        for k in [1, 2, 3, 8] {
            let s = copy_engine_pipeline(&coll, k).unwrap();
            symbolic::check(&s).unwrap();
            for rp in &s.ranks {
                let q = 1 - rp.rank;
                let ch0 = &rp.channels[0].ops;
                assert_eq!(ch0.len(), 2 * k as usize);
                for (j, pair) in ch0.chunks(2).enumerate() {
                    let (send, recv) = (&pair[0], &pair[1]);
                    assert_eq!(send.kind, OpKind::Send);
                    assert_eq!(send.send_to, Some(q));
                    assert_eq!(send.transport, Transport::CopyEngine);
                    assert_eq!(send.repeat, 1);
                    assert_eq!(send.src, Some(in_ref(j as u32)));
                    assert_eq!(recv.kind, OpKind::Recv);
                    assert_eq!(recv.recv_from, Some(q));
                    assert_eq!(
                        recv.dst,
                        Some(ChunkRef::new(BufferKind::Scratch, j as u32, 1))
                    );
                }
                let ch1 = &rp.channels[1].ops;
                assert_eq!(ch1.len(), 1 + k as usize);
                assert_eq!(ch1[0].kind, OpKind::Copy);
                for (j, red) in ch1[1..].iter().enumerate() {
                    assert_eq!(red.kind, OpKind::Reduce);
                    assert_eq!(
                        red.src,
                        Some(ChunkRef::new(BufferKind::Scratch, j as u32, 1))
                    );
                    assert_eq!(
                        red.deps,
                        vec![OpRef {
                            channel: 0,
                            index: 2 * j as u32 + 1
                        }]
                    );
                }
            }
        }
    }
}
