//! Packed-tree schedules: `copies` out-trees per root rank (a packing from
//! `planner::bound::pack`), tree `r·copies + j` on IR channel `r·copies + j` carrying chunk `j` of
//! root r's share.
//!
//! - all-gather: root r copies its input chunk j to output block r and sends it down the tree;
//!   every rank stores what it receives in block r and forwards it to its children;
//! - reduce-scatter: the tree run backwards: every rank adds its children's partial sums of
//!   input block r's chunk j to its own (in scratch block r) and sends the sum to its parent;
//!   root r ends with the total in its output;
//! - all-reduce: both at once, reduce-scatter's half up on one channel per tree and
//!   all-gather's down, each tree carrying one chunk.
//!
//! Going down, a GPU forwards each chunk to each child on a channel of its own (the tree's
//! *lanes*, as many as its widest node has children): on one channel it would send to them one
//! after another, so a tree would move at its channel's rate over its out-degree, below what the
//! packing's link loads allow. The child receives on its parent's lane and forwards to its first
//! child on the same lane; its other children's sends wait for that receive (a cross-channel
//! dependency).

use super::*;

/// A packed schedule; `trees[r * copies + j]` must be rooted at rank r.
pub fn packed(
    coll: &Collective,
    trees: &[TreeChannel],
    copies: u32,
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    let Some(first) = trees.first() else {
        return Err(shape("packed: at least one tree is needed".into()));
    };
    let n = first.parent.len() as u32;
    check_collective(coll, n)?;
    if copies == 0 || trees.len() != (n * copies) as usize {
        return Err(shape(format!(
            "packed: {} trees for {n} ranks x {copies} copies",
            trees.len()
        )));
    }
    for (i, t) in trees.iter().enumerate() {
        let root = t
            .check(n)
            .map_err(|e| shape(format!("packed tree {i}: {e}")))?;
        if root != i as u32 / copies {
            return Err(shape(format!(
                "packed tree {i} is rooted at {root}, not at {}",
                i as u32 / copies
            )));
        }
    }
    let mut s = match coll.kind {
        CollectiveKind::AllReduce => all_reduce(coll, trees, proto),
        CollectiveKind::AllGather => all_gather(coll, trees, copies, proto),
        CollectiveKind::ReduceScatter => reduce_scatter(coll, trees, copies, proto),
        k => {
            return Err(unsupported(format!(
                "packed: {} has no packed schedule (all-reduce, all-gather, reduce-scatter)",
                k.name()
            )))
        }
    };
    s.algorithm = Algorithm::Packed;
    s.validate()?;
    Ok(s)
}

/// A tree's down lanes: how many (its widest node's out-degree) and, per rank, the lane of the
/// edge from its parent (`None` at the root). A node's first child keeps the node's own lane,
/// its other children take the other lanes in order.
pub fn lanes(t: &TreeChannel) -> (u32, Vec<Option<u32>>) {
    let d = t.children.iter().map(Vec::len).max().unwrap_or(0).max(1) as u32;
    let mut lane = vec![None; t.parent.len()];
    let mut todo: Vec<usize> = t
        .parent
        .iter()
        .position(Option::is_none)
        .into_iter()
        .collect();
    while let Some(v) = todo.pop() {
        let own = lane[v];
        let mut free = (0..d).filter(|&l| Some(l) != own);
        for (i, &k) in t.children[v].iter().enumerate() {
            lane[k as usize] = match own {
                Some(l) if i == 0 => Some(l),
                _ => free.next(),
            };
            todo.push(k as usize);
        }
    }
    (d, lane)
}

/// The down half at rank `v` of a tree whose lanes start at IR channel `base`: (channel, op)
/// pairs. The root sends `src` to every child, each send waiting for `root_dep` if any; others
/// receive into `out` from their parent and pass it on.
fn down(
    t: &TreeChannel,
    lane: &[Option<u32>],
    base: u32,
    v: u32,
    (src, root_dep): (ChunkRef, Option<OpRef>),
    out: ChunkRef,
) -> Vec<(u32, Op)> {
    let kids = &t.children[v as usize];
    let ch = |k: u32| base + lane[k as usize].expect("every child has a lane");
    let Some(p) = t.parent[v as usize] else {
        return kids
            .iter()
            .map(|&k| {
                let mut op = Op::send(src, k);
                op.deps.extend(root_dep);
                (ch(k), op)
            })
            .collect();
    };
    let own = ch(v);
    let Some((&k0, rest)) = kids.split_first() else {
        return vec![(own, Op::recv(out, p))];
    };
    let mut ops = vec![(own, Op::recv_copy_send(out, p, k0))];
    for &k in rest {
        let mut op = Op::send(out, k);
        op.deps.push(OpRef {
            channel: own,
            index: 0,
        });
        ops.push((ch(k), op));
    }
    ops
}

/// A tree's place among the IR channels: the lane of the edge into every rank, and the tree's
/// first channel.
struct Placed {
    lane: Vec<Option<u32>>,
    base: u32,
}

/// Every tree placed, `extra` channels ahead of its lanes, and the channels in all.
fn layout(trees: &[TreeChannel], extra: u32) -> (Vec<Placed>, u32) {
    let mut next = 0;
    let out = trees
        .iter()
        .map(|t| {
            let (d, lane) = lanes(t);
            let base = next;
            next += extra + d;
            Placed { lane, base }
        })
        .collect();
    (out, next)
}

fn all_gather(coll: &Collective, trees: &[TreeChannel], copies: u32, proto: Protocol) -> Schedule {
    let n = trees[0].parent.len() as u32;
    let (layout, channels) = layout(trees, 0);
    let mut s = empty(coll, Algorithm::Packed, proto, n, channels, copies);
    for (i, (t, Placed { lane, base })) in trees.iter().zip(&layout).enumerate() {
        let (c, j) = (i as u32, i as u32 % copies);
        let out = out_ref(c);
        for v in 0..n {
            if t.parent[v as usize].is_none() {
                push(&mut s, v, *base, Op::copy(in_ref(j), out));
            }
            for (ch, op) in down(t, lane, *base, v, (in_ref(j), None), out) {
                push(&mut s, v, ch, op);
            }
        }
    }
    s
}

/// Reduce-scatter's half up each tree on its first channel (the tree builder's upward half),
/// all-gather's half down its lanes, the root's sends after its last reduction.
fn all_reduce(coll: &Collective, trees: &[TreeChannel], proto: Protocol) -> Schedule {
    let n = trees[0].parent.len() as u32;
    let (layout, channels) = layout(trees, 1);
    let mut s = empty(
        coll,
        Algorithm::Packed,
        proto,
        n,
        channels,
        trees.len() as u32,
    );
    for (i, (t, Placed { lane, base })) in trees.iter().zip(&layout).enumerate() {
        let (inp, out) = (in_ref(i as u32), out_ref(i as u32));
        for v in 0..n {
            let up = tree_up(t.parent[v as usize], &t.children[v as usize], inp, out);
            let last = OpRef {
                channel: *base,
                index: up.len() as u32 - 1,
            };
            for op in up {
                push(&mut s, v, *base, op);
            }
            for (ch, op) in down(t, lane, base + 1, v, (out, Some(last)), out) {
                push(&mut s, v, ch, op);
            }
        }
    }
    s
}

fn reduce_scatter(
    coll: &Collective,
    trees: &[TreeChannel],
    copies: u32,
    proto: Protocol,
) -> Schedule {
    let n = trees[0].parent.len() as u32;
    let mut s = empty(coll, Algorithm::Packed, proto, n, n * copies, copies);
    s.scratch_blocks = n;
    for (i, t) in trees.iter().enumerate() {
        let (c, j) = (i as u32, i as u32 % copies);
        let inp = in_ref(c);
        for v in 0..n {
            let kids = &t.children[v as usize];
            // The root sums into its output; others into scratch, then pass it up.
            let acc = match t.parent[v as usize] {
                None => out_ref(j),
                Some(_) => ChunkRef::new(BufferKind::Scratch, c, 1),
            };
            let mut ops = Vec::new();
            match (t.parent[v as usize], kids.len()) {
                (None, 0) => ops.push(Op::copy(inp, acc)),
                (Some(p), 0) => ops.push(Op::send(inp, p)),
                (parent, k) => {
                    for (x, &kid) in kids.iter().enumerate() {
                        let src = if x == 0 { inp } else { acc };
                        match parent {
                            Some(p) if x == k - 1 => ops.push(Op::recv_reduce_send(src, kid, p)),
                            _ => ops.push(Op::recv_reduce_copy(src, acc, kid)),
                        }
                    }
                }
            }
            for op in ops {
                push(&mut s, v, c, op);
            }
        }
    }
    s
}
