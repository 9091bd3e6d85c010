//! A chunk-level symbolic check of a schedule: every input chunk starts as the set
//! `{(rank, chunk)}`, transfers move sets, reductions take multiset unions, and at the end every
//! output chunk must hold exactly the contributions the collective defines. It runs one loop
//! iteration with unbounded connection buffers (slots are the simulator's business), so it proves
//! data flow, not timing or slot safety. The planner's tests run it on every builder's output;
//! the simulator's verifier (`sim::verify`) is the full check.

use super::ir::*;
use std::collections::{HashMap, VecDeque};

/// Contributions held by one chunk: sorted `(rank, input chunk)` pairs.
pub type Contrib = Vec<(u32, u32)>;

/// Runs the schedule symbolically and compares every output chunk with the collective's
/// definition. Errors name rank, channel and op.
pub fn check(s: &Schedule) -> Result<(), String> {
    s.validate().map_err(|e| e.to_string())?;
    let n = s.nranks;
    let cpb = s.chunks_per_block;
    let mut bufs: Vec<[Vec<Option<Contrib>>; 3]> = (0..n)
        .map(|r| {
            let input = (0..s.buffer_chunks(BufferKind::Input))
                .map(|i| Some(vec![(r, i)]))
                .collect();
            [
                input,
                vec![None; s.buffer_chunks(BufferKind::Output) as usize],
                vec![None; s.buffer_chunks(BufferKind::Scratch) as usize],
            ]
        })
        .collect();
    // Expanded programs and, per raw op, the index of its last copy (deps wait for all copies).
    let mut progs: Vec<Vec<Vec<Op>>> = Vec::new();
    let mut last_copy: Vec<Vec<Vec<usize>>> = Vec::new();
    for r in 0..n {
        let mut pr = Vec::new();
        let mut lr = Vec::new();
        for c in 0..s.channels {
            let mut acc = 0usize;
            let mut l = Vec::new();
            for op in &s.ranks[r as usize].channels[c as usize].ops {
                acc += op.repeat.max(1) as usize;
                l.push(acc - 1);
            }
            pr.push(s.expanded_ops(r, c));
            lr.push(l);
        }
        progs.push(pr);
        last_copy.push(lr);
    }
    let mut pc = vec![vec![0usize; s.channels as usize]; n as usize];
    let mut queues: HashMap<(u32, u32, u32), VecDeque<Vec<Contrib>>> = HashMap::new();
    let bi = |b: BufferKind| match b {
        BufferKind::Input => 0,
        BufferKind::Output => 1,
        BufferKind::Scratch => 2,
    };
    loop {
        let mut progress = false;
        for r in 0..n as usize {
            for c in 0..s.channels as usize {
                while pc[r][c] < progs[r][c].len() {
                    let op = &progs[r][c][pc[r][c]];
                    let where_ = format!("rank {r} channel {c} op {} ({:?})", pc[r][c], op.kind);
                    let deps_done = op.deps.iter().all(|d| {
                        pc[r][d.channel as usize]
                            > last_copy[r][d.channel as usize][d.index as usize]
                    });
                    if !deps_done {
                        break;
                    }
                    let recv = match op.recv_from {
                        Some(from) => match queues
                            .get_mut(&(c as u32, from, r as u32))
                            .and_then(|q| q.pop_front())
                        {
                            Some(v) => Some(v),
                            None => break,
                        },
                        None => None,
                    };
                    let read = |bufs: &Vec<[Vec<Option<Contrib>>; 3]>, cr: ChunkRef| {
                        (cr.chunk..cr.chunk + cr.count)
                            .map(|i| {
                                bufs[r][bi(cr.buffer)][i as usize].clone().ok_or_else(|| {
                                    format!("{where_}: reads {:?} chunk {i} before anything was written there", cr.buffer)
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()
                    };
                    let src = match op.src {
                        Some(cr) => Some(read(&bufs, cr)?),
                        None => None,
                    };
                    let value: Vec<Contrib> = match op.kind {
                        OpKind::Send => src.clone().unwrap_or_default(),
                        OpKind::Recv | OpKind::RecvCopySend => recv.clone().unwrap_or_default(),
                        OpKind::RecvReduceSend
                        | OpKind::RecvReduceCopy
                        | OpKind::RecvReduceCopySend => {
                            merge_all(recv.as_ref().unwrap(), src.as_ref().unwrap(), &where_)?
                        }
                        OpKind::Copy => src.clone().unwrap_or_default(),
                        OpKind::Reduce => {
                            let dst = read(&bufs, op.dst.unwrap())?;
                            merge_all(&dst, src.as_ref().unwrap(), &where_)?
                        }
                    };
                    if let (Some(rv), Some(cr)) = (&recv, op.src.or(op.dst)) {
                        if rv.len() != cr.count as usize {
                            return Err(format!(
                                "{where_}: message of {} chunk(s) into a range of {}",
                                rv.len(),
                                cr.count
                            ));
                        }
                    }
                    if let Some(d) = op.dst {
                        for (k, v) in value.iter().enumerate() {
                            bufs[r][bi(d.buffer)][d.chunk as usize + k] = Some(v.clone());
                        }
                    }
                    if let Some(to) = op.send_to {
                        queues
                            .entry((c as u32, r as u32, to))
                            .or_default()
                            .push_back(value);
                    }
                    pc[r][c] += 1;
                    progress = true;
                }
            }
        }
        if !progress {
            break;
        }
    }
    for r in 0..n as usize {
        for c in 0..s.channels as usize {
            if pc[r][c] < progs[r][c].len() {
                return Err(format!(
                    "deadlock even with unbounded buffers: rank {r} channel {c} is stuck at op {} ({:?})",
                    pc[r][c], progs[r][c][pc[r][c]].kind
                ));
            }
        }
    }
    if let Some((k, q)) = queues.iter().find(|(_, q)| !q.is_empty()) {
        return Err(format!(
            "channel {} rank {} -> {}: {} message(s) never received",
            k.0,
            k.1,
            k.2,
            q.len()
        ));
    }
    let all = |chunk: u32| -> Contrib { (0..n).map(|q| (q, chunk)).collect() };
    for r in 0..n {
        let out = &bufs[r as usize][1];
        for (i, got) in out.iter().enumerate() {
            let i = i as u32;
            let (b, sub) = (i / cpb, i % cpb);
            let want: Option<Contrib> = match s.collective.kind {
                CollectiveKind::AllReduce => Some(all(i)),
                CollectiveKind::AllGather => Some(vec![(b, sub)]),
                CollectiveKind::ReduceScatter => Some(all(r * cpb + sub)),
                CollectiveKind::Broadcast => Some(vec![(s.collective.root.unwrap_or(0), i)]),
                CollectiveKind::Reduce => (Some(r) == s.collective.root).then(|| all(i)),
                CollectiveKind::AllToAll => Some(vec![(b, r * cpb + sub)]),
                CollectiveKind::SendRecv => s
                    .collective
                    .send_peers
                    .iter()
                    .position(|p| *p == Some(r))
                    .map(|from| vec![(from as u32, i)]),
            };
            if let Some(w) = want {
                if got.as_ref() != Some(&w) {
                    return Err(format!(
                        "rank {r} output chunk {i}: holds {got:?}, the {} needs {w:?}",
                        s.collective.kind.name()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn merge_all(a: &[Contrib], b: &[Contrib], where_: &str) -> Result<Vec<Contrib>, String> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let mut m: Contrib = x.iter().chain(y).copied().collect();
            m.sort_unstable();
            if let Some(w) = m.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!(
                    "{where_}: contribution {:?} is counted twice",
                    w[0]
                ));
            }
            Ok(m)
        })
        .collect()
}
