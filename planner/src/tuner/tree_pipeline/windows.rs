//! A tree call op by op, as the engine runs it, where its ops are few enough ([`WINDOW_OPS`]):
//! every rank's programs run their ops in order, an op starting once its program reached it,
//! its data landed and, sending, its receiver freed one of the connection's slots; the transfers
//! running at once share the links max-min fairly (`drift::op_dag_ends`). Each send thus shares
//! a link only with the sends whose time windows overlap its own: the later iterations' sends up
//! meet the first iteration's on the way, and the up half runs ahead while the first sums come
//! down, which the closed form's fill, second iteration and steady period price apart.
//!
//! NCCL's trees ([`all_reduce_us`]) run both halves, a rank sending down to its children one
//! after another; packed trees ([`packed_us`], `schedule::build::packed`) run the half their
//! collective needs, a rank sending down to each child on a program (lane) of its own.

use super::{reduce_us, IterTerms, TreeSend, TreeSends};
use crate::schedule::CollectiveKind;
use crate::tuner::drift::{DagOp, OpDag};
use std::collections::HashMap;

/// The most ops (every tree's, every iteration's) a call is run op by op with; past them the
/// closed form prices it. A call of this many ops takes a few milliseconds.
pub(super) const WINDOW_OPS: usize = 1 << 15;

/// The most ops the longer of the two runs whose line prices a long tree call may take to
/// reach twice [`super::STEADY_ITERS`] iterations (at 128 ranks, NCCL's trees on p5 ×16: 32
/// iterations of 8 trees' 2048 ops, about 2 s for a protocol).
pub(super) const LINE_OPS: usize = 1 << 17;

/// The same for packed trees, whose calls keep many more transfers running at once (every
/// rank roots trees, each sending on several lanes), as ops times the trees' ranks times the
/// links a send crosses: sharing the links among the running transfers costs in proportion to
/// how many run and how many links each crosses (8 NVSwitch GPUs: about 16 000 ops; 16 GPUs
/// behind PCIe switches, about 6 000).
pub(super) const PACKED_WINDOW_WORK: usize = 1 << 23;

/// The mean count of links a send of `trees` crosses (at least 1).
pub(super) fn links_per_send(trees: &[TreeSends]) -> f64 {
    let sends = trees.iter().flat_map(TreeSends::sends);
    let (n, links) = sends.fold((0usize, 0usize), |(n, l), s| (n + 1, l + s.links.len()));
    (links as f64 / n.max(1) as f64).max(1.0)
}

/// How many ops one iteration of `trees` runs, a tree repeated counted once ([`distinct`]): a
/// rank's up program one per child (a leaf one send), its down program one per child (a leaf
/// one receive).
pub(super) fn ops_per_iteration(trees: &[TreeSends]) -> usize {
    distinct(trees, |_| None)
        .into_iter()
        .flat_map(|(ti, _)| &trees[ti].down)
        .map(|kids| 2 * kids.len().max(1))
        .sum()
}

/// The ops of one tree's iteration `i` that other ops wait for, per rank: its send up, its
/// receive of each child's data (up), its receive from its parent (its first op down; the
/// root's first send) and its sends down.
#[derive(Clone, Default)]
struct RankOps {
    send_up: Option<usize>,
    take_kid: Vec<usize>,
    first_down: usize,
    sends_down: Vec<usize>,
}

/// Which halves a call runs and how a rank sends down.
#[derive(Clone, Copy)]
struct Shape<'a> {
    up: bool,
    down: Down<'a>,
}

/// A call's down half: none, a rank's sends to its children in turn on one program (NCCL's
/// tree), or each on the lane of the edge into the child (a packed tree's lanes, per tree and
/// rank; the root copies its input first where it has no up half).
#[derive(Clone, Copy)]
enum Down<'a> {
    None,
    InTurn,
    Lanes(&'a [Vec<Option<u32>>]),
}

/// The engine's time for `trees` to all-reduce `iters` iterations (at least 1), the last
/// carrying `last` (0 to 1] of a chunk: µs from the first op to the last leaf's last receive.
pub(super) fn all_reduce_us(trees: &[TreeSends], x: &IterTerms, iters: u32, last: f64) -> f64 {
    let shape = Shape {
        up: true,
        down: Down::InTurn,
    };
    run_us(trees, x, iters, last, shape)
}

/// The engine's time for the packed trees `trees` (their down lanes `lanes`, per tree and rank
/// the lane of the edge from its parent) to run `kind` (all-reduce, all-gather or
/// reduce-scatter) in `iters` iterations, the last carrying `last` of a chunk. `None` for
/// another collective.
pub(super) fn packed_us(
    trees: &[TreeSends],
    lanes: &[Vec<Option<u32>>],
    kind: CollectiveKind,
    x: &IterTerms,
    iters: u32,
    last: f64,
) -> Option<f64> {
    let shape = match kind {
        CollectiveKind::AllReduce => Shape {
            up: true,
            down: Down::Lanes(lanes),
        },
        CollectiveKind::AllGather => Shape {
            up: false,
            down: Down::Lanes(lanes),
        },
        CollectiveKind::ReduceScatter => Shape {
            up: true,
            down: Down::None,
        },
        _ => return None,
    };
    Some(run_us(trees, x, iters, last, shape))
}

fn run_us(trees: &[TreeSends], x: &IterTerms, iters: u32, last: f64, shape: Shape) -> f64 {
    let caps = link_caps(trees, x.link_eff);
    let lanes_of = |ti: usize| match shape.down {
        Down::Lanes(l) => l.get(ti).map(Vec::as_slice),
        _ => None,
    };
    let mut dag = OpDag::default();
    for (ti, copies) in distinct(trees, lanes_of) {
        let (t, lanes) = (&trees[ti], lanes_of(ti));
        // Each program's last op and each rank's ops of the iteration `slots` back (credits).
        let mut prev = Programs {
            up: vec![None; t.up.len()],
            down: HashMap::new(),
        };
        let mut past: Vec<Vec<RankOps>> = Vec::new();
        for i in 0..iters.max(1) {
            let share = if i + 1 == iters.max(1) { last } else { 1.0 };
            let xi = IterTerms {
                chunk: x.chunk * share.clamp(0.0, 1.0),
                ..*x
            };
            let paced = i >= x.slots.max(1);
            let it = Iteration {
                t,
                x: &xi,
                paced,
                shape,
                lanes,
                copies,
            };
            let ops = it.add(&mut dag, &mut prev);
            if let Some(back) = (i as usize)
                .checked_sub(x.slots.max(1) as usize)
                .map(|b| &past[b])
            {
                credits(&mut dag, t, x, back, &ops);
            }
            past.push(ops);
        }
    }
    dag.ends(&caps).into_iter().fold(0.0, f64::max)
}

/// The trees of `trees` that differ (their lanes `lanes_of(index)` too), each by its first
/// index, and how many of `trees` are that tree: identical trees run in lockstep, their ops at
/// the same moments at the same rates, so the run builds one and counts it on its links as
/// many times (NCCL's channels repeat their trees: 32 on p5 ×16 are 8 trees four times).
fn distinct<'a>(
    trees: &'a [TreeSends],
    lanes_of: impl Fn(usize) -> Option<&'a [Option<u32>]>,
) -> Vec<(usize, u32)> {
    let mut out: Vec<(usize, u32)> = Vec::new();
    for (ti, t) in trees.iter().enumerate() {
        let same = |&&mut (first, _): &&mut (usize, u32)| {
            trees[first] == *t && lanes_of(first) == lanes_of(ti)
        };
        match out.iter_mut().find(same) {
            Some(d) => d.1 += 1,
            None => out.push((ti, 1)),
        }
    }
    out
}

/// Each program's last op so far: a rank's up program, and its down programs by lane.
struct Programs {
    up: Vec<Option<usize>>,
    down: HashMap<(usize, u32), usize>,
}

/// Every link's rate (GB/s) as transfers reach it, by index.
fn link_caps(trees: &[TreeSends], link_eff: f64) -> Vec<f64> {
    let mut caps = Vec::new();
    let sends = trees.iter().flat_map(TreeSends::sends);
    for &(l, gbps) in sends.flat_map(|s| &s.links) {
        if caps.len() <= l {
            caps.resize(l + 1, f64::INFINITY);
        }
        caps[l] = gbps * link_eff;
    }
    caps
}

/// One iteration of one tree.
struct Iteration<'a> {
    t: &'a TreeSends,
    x: &'a IterTerms,
    paced: bool,
    shape: Shape<'a>,
    lanes: Option<&'a [Option<u32>]>,
    /// Identical trees this one stands for.
    copies: u32,
}

impl Iteration<'_> {
    /// Every rank's ops of the iteration, up (children first) and down (parents first), each
    /// after its program's previous op, with the edges its data waits on.
    fn add(&self, dag: &mut OpDag, prev: &mut Programs) -> Vec<RankOps> {
        let mut ops = vec![RankOps::default(); self.t.up.len()];
        if self.shape.up {
            self.up(dag, &mut prev.up, &mut ops);
        }
        if !matches!(self.shape.down, Down::None) {
            self.down(dag, prev, &mut ops);
        }
        ops
    }

    fn up(&self, dag: &mut OpDag, up_prev: &mut [Option<usize>], ops: &mut [RankOps]) {
        let (t, x) = (self.t, self.x);
        for &v in t.order().iter().rev() {
            let v = v as usize;
            let kids = &t.down[v];
            for (j, k) in kids.iter().enumerate() {
                let sends_up = j + 1 == kids.len() && t.up[v].is_some();
                let op = match (&t.up[v], sends_up) {
                    (Some(s), true) => send(x, s, self.paced, self.copies),
                    _ => DagOp::local(reduce_us(x)),
                };
                let id = dag.push(op, up_prev[v]);
                up_prev[v] = Some(id);
                let from = t.up[k.to as usize].as_ref().expect("a child sends up");
                let sent = ops[k.to as usize].send_up.expect("sent up");
                dag.edge(sent, id, from.lat_us + x.hop_us);
                ops[v].take_kid.push(id);
            }
            if let (Some(s), true) = (&t.up[v], kids.is_empty()) {
                up_prev[v] = Some(dag.push(send(x, s, self.paced, self.copies), up_prev[v]));
            }
            if t.up[v].is_some() {
                ops[v].send_up = up_prev[v];
            }
        }
    }

    /// The lane of the edge into rank `v` (0 on one program, and at the root).
    fn lane(&self, v: usize) -> u32 {
        self.lanes
            .and_then(|l| l.get(v).copied().flatten())
            .unwrap_or(0)
    }

    fn down(&self, dag: &mut OpDag, prev: &mut Programs, ops: &mut [RankOps]) {
        let (t, x) = (self.t, self.x);
        let lanes = matches!(self.shape.down, Down::Lanes(_));
        let order = t.order();
        let on = |dag: &mut OpDag, down: &mut HashMap<(usize, u32), usize>, v, lane, op| {
            let id = dag.push(op, down.get(&(v, lane)).copied());
            down.insert((v, lane), id);
            id
        };
        for &v in &order {
            let v = v as usize;
            let root = t.up[v].is_none();
            // The root's sends wait for its last reduction; with no up half, a packed root
            // copies its input on its first lane first.
            let last_up = prev.up[v].filter(|_| root && self.shape.up);
            if root && lanes && !self.shape.up {
                on(
                    dag,
                    &mut prev.down,
                    v,
                    0,
                    DagOp::local(x.chunk / 1000.0 / x.local_gbps.max(1e-9)),
                );
            }
            for (k, s) in t.down[v].iter().enumerate() {
                let lane = if lanes { self.lane(s.to as usize) } else { 0 };
                let id = on(
                    dag,
                    &mut prev.down,
                    v,
                    lane,
                    send(x, s, self.paced, self.copies),
                );
                ops[v].sends_down.push(id);
                if let Some(u) = last_up.filter(|_| lanes || k == 0) {
                    dag.edge(u, id, 0.0);
                }
            }
            if t.down[v].is_empty() {
                on(
                    dag,
                    &mut prev.down,
                    v,
                    self.lane(v),
                    DagOp::local(x.step_us),
                );
            }
            let own = prev.down.get(&(v, if lanes { self.lane(v) } else { 0 }));
            let first = match (lanes && !root, ops[v].sends_down.first()) {
                (false, Some(&f)) => f,
                _ => *own.expect("every rank but a lone root has an op down"),
            };
            ops[v].first_down = first;
            // A packed rank's other sends wait for its receive on its own lane.
            if lanes && !root {
                for &id in ops[v].sends_down.iter().skip(1) {
                    dag.edge(first, id, 0.0);
                }
            }
        }
        // Each child's first op receives its parent's send to it.
        for &v in &order {
            for (k, s) in t.down[v as usize].iter().enumerate() {
                let from = ops[v as usize].sends_down[k];
                dag.edge(from, ops[s.to as usize].first_down, s.lat_us + x.hop_us);
            }
        }
    }
}

/// A connection's credit: a send waits for its receiver to have consumed the message `slots`
/// back (`back`), the credit crossing the route back.
fn credits(dag: &mut OpDag, t: &TreeSends, x: &IterTerms, back: &[RankOps], now: &[RankOps]) {
    for (v, sends) in t.down.iter().enumerate() {
        for (k, s) in sends.iter().enumerate() {
            let kid = s.to as usize;
            if let Some(&id) = now[v].sends_down.get(k) {
                dag.edge(back[kid].first_down, id, s.lat_us + x.hop_us);
            }
            if let (Some(&taken), Some(sent)) = (back[v].take_kid.get(k), now[kid].send_up) {
                let up = t.up[kid].as_ref().expect("a child sends up");
                dag.edge(taken, sent, up.lat_us + x.hop_us);
            }
        }
    }
}

/// A send's op: its transfer (kB of wire over its links, at most the channel's rate, LL's paced
/// rate past the connection's slots), then the protocol's step and the route's.
fn send(x: &IterTerms, s: &TreeSend, paced: bool, copies: u32) -> DagOp {
    DagOp {
        links: s.links.iter().map(|l| l.0).collect(),
        volume: x.chunk * x.wire / 1000.0,
        cap: if paced {
            x.paced_gbps.min(x.channel_gbps)
        } else {
            x.channel_gbps
        },
        post: x.step_us + s.send_us,
        copies,
    }
}
