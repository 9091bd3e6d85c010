//! Packed-tree schedules: `copies` out-trees per root rank (a packing from
//! `planner::bound::pack`), tree `r·copies + j` on IR channel `r·copies + j` carrying chunk `j` of
//! root r's share.
//!
//! - all-gather: root r copies its input chunk j to output block r and sends it down the tree;
//!   every rank stores what it receives in block r and forwards it to its children;
//! - reduce-scatter: the tree run backwards: every rank adds its children's partial sums of
//!   input block r's chunk j to its own (in scratch block r) and sends the sum to its parent;
//!   root r ends with the total in its output;
//! - all-reduce: both at once on two channels per tree, reduce-scatter's half up and
//!   all-gather's down (the tree builder's split tree, each tree carrying one chunk).

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
        CollectiveKind::AllReduce => tree(coll, trees, proto)?,
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

fn all_gather(coll: &Collective, trees: &[TreeChannel], copies: u32, proto: Protocol) -> Schedule {
    let n = trees[0].parent.len() as u32;
    let mut s = empty(coll, Algorithm::Packed, proto, n, n * copies, copies);
    for (i, t) in trees.iter().enumerate() {
        let (c, j) = (i as u32, i as u32 % copies);
        let out = out_ref(c);
        for v in 0..n {
            let kids = &t.children[v as usize];
            let mut ops = Vec::new();
            match (t.parent[v as usize], kids.split_first()) {
                (None, _) => {
                    ops.push(Op::copy(in_ref(j), out));
                    ops.extend(kids.iter().map(|&k| Op::send(in_ref(j), k)));
                }
                (Some(p), None) => ops.push(Op::recv(out, p)),
                (Some(p), Some((k0, rest))) => {
                    ops.push(Op::recv_copy_send(out, p, *k0));
                    ops.extend(rest.iter().map(|&k| Op::send(out, k)));
                }
            }
            for op in ops {
                push(&mut s, v, c, op);
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
