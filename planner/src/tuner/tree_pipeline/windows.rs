//! A tree all-reduce op by op, as the engine runs it, where its ops are few enough
//! ([`WINDOW_OPS`]): every rank's up and down programs run their ops in order, an op starting
//! once its program reached it, its data landed and, sending, its receiver freed one of the
//! connection's slots; the transfers running at once share the links max-min fairly
//! (`drift::op_dag_ends`). Each send thus shares a link only with the sends whose time windows
//! overlap its own: the later iterations' sends up meet the first iteration's on the way, and
//! the up half runs ahead while the first sums come down, which the closed form's fill, second
//! iteration and steady period price apart.

use super::{reduce_us, IterTerms, TreeSend, TreeSends};
use crate::tuner::drift::{op_dag_ends, DagOp};

/// The most ops (every tree's, every iteration's) a call is run op by op with; past them the
/// closed form prices it. A call of this many ops takes a few milliseconds.
pub(super) const WINDOW_OPS: usize = 1 << 15;

/// How many ops one iteration of `trees` runs: a rank's up program one per child (a leaf one
/// send), its down program one per child (a leaf one receive).
pub(super) fn ops_per_iteration(trees: &[TreeSends]) -> usize {
    trees
        .iter()
        .flat_map(|t| &t.down)
        .map(|kids| 2 * kids.len().max(1))
        .sum()
}

/// Ops and the edges between them, built one program at a time.
#[derive(Default)]
struct Dag {
    ops: Vec<DagOp>,
    then: Vec<Vec<(usize, f64)>>,
}

impl Dag {
    /// A new op after `prev` in its program (none: the program's first).
    fn push(&mut self, op: DagOp, prev: Option<usize>) -> usize {
        let id = self.ops.len();
        self.ops.push(op);
        self.then.push(Vec::new());
        if let Some(p) = prev {
            self.edge(p, id, 0.0);
        }
        id
    }

    fn edge(&mut self, from: usize, to: usize, delay: f64) {
        self.then[from].push((to, delay));
    }
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

/// The engine's time for `trees` to all-reduce `iters` iterations (at least 1), the last
/// carrying `last` (0 to 1] of a chunk: µs from the first op to the last leaf's last receive.
pub(super) fn all_reduce_us(trees: &[TreeSends], x: &IterTerms, iters: u32, last: f64) -> f64 {
    let caps = link_caps(trees, x.link_eff);
    let mut dag = Dag::default();
    for t in trees {
        // Each program's last op and each rank's ops of the iteration `slots` back (credits).
        let n = t.up.len();
        let (mut up_prev, mut down_prev) = (vec![None; n], vec![None; n]);
        let mut past: Vec<Vec<RankOps>> = Vec::new();
        for i in 0..iters.max(1) {
            let share = if i + 1 == iters.max(1) { last } else { 1.0 };
            let xi = IterTerms {
                chunk: x.chunk * share.clamp(0.0, 1.0),
                ..*x
            };
            let paced = i >= x.slots.max(1);
            let ops = iteration(&mut dag, t, &xi, paced, &mut up_prev, &mut down_prev);
            if let Some(back) = (i as usize)
                .checked_sub(x.slots.max(1) as usize)
                .map(|b| &past[b])
            {
                credits(&mut dag, t, x, back, &ops);
            }
            past.push(ops);
        }
    }
    op_dag_ends(&dag.ops, &dag.then, &caps)
        .into_iter()
        .fold(0.0, f64::max)
}

/// Every link's rate (GB/s) as transfers reach it, by index.
fn link_caps(trees: &[TreeSends], link_eff: f64) -> Vec<f64> {
    let mut caps = Vec::new();
    let sends = trees
        .iter()
        .flat_map(|t| t.up.iter().flatten().chain(t.down.iter().flatten()));
    for &(l, gbps) in sends.flat_map(|s| &s.links) {
        if caps.len() <= l {
            caps.resize(l + 1, f64::INFINITY);
        }
        caps[l] = gbps * link_eff;
    }
    caps
}

/// One iteration of tree `t`: every rank's ops up (children first) and down (parents first),
/// each after its program's previous op, with the edges its data waits on.
fn iteration(
    dag: &mut Dag,
    t: &TreeSends,
    x: &IterTerms,
    paced: bool,
    up_prev: &mut [Option<usize>],
    down_prev: &mut [Option<usize>],
) -> Vec<RankOps> {
    let order = t.order();
    let mut ops = vec![RankOps::default(); t.up.len()];
    let lands = |s: &TreeSend| s.lat_us + x.hop_us;
    for &v in order.iter().rev() {
        let v = v as usize;
        let kids = &t.down[v];
        for (j, k) in kids.iter().enumerate() {
            let sends_up = j + 1 == kids.len() && t.up[v].is_some();
            let op = match (&t.up[v], sends_up) {
                (Some(s), true) => send(x, s, paced),
                _ => local(reduce_us(x)),
            };
            let id = dag.push(op, up_prev[v]);
            up_prev[v] = Some(id);
            let kid = &ops[k.to as usize];
            let from = t.up[k.to as usize].as_ref().expect("a child sends up");
            dag.edge(kid.send_up.expect("sent up"), id, lands(from));
            ops[v].take_kid.push(id);
        }
        if let (Some(s), true) = (&t.up[v], kids.is_empty()) {
            up_prev[v] = Some(dag.push(send(x, s, paced), up_prev[v]));
        }
        if t.up[v].is_some() {
            ops[v].send_up = up_prev[v];
        }
    }
    for &v in &order {
        let v = v as usize;
        let sends = &t.down[v];
        for s in sends {
            let id = dag.push(send(x, s, paced), down_prev[v]);
            down_prev[v] = Some(id);
            ops[v].sends_down.push(id);
        }
        if sends.is_empty() {
            down_prev[v] = Some(dag.push(local(x.step_us), down_prev[v]));
        }
        let first = ops[v].sends_down.first().copied().or(down_prev[v]);
        ops[v].first_down = first.expect("every rank has an op down");
        // The root's first send waits for its last reduction.
        if let (None, Some(last_up)) = (&t.up[v], up_prev[v]) {
            dag.edge(last_up, ops[v].first_down, 0.0);
        }
    }
    // Down: each child's first op receives its parent's send to it.
    for &v in &order {
        for (k, s) in t.down[v as usize].iter().enumerate() {
            let from = ops[v as usize].sends_down[k];
            dag.edge(from, ops[s.to as usize].first_down, lands(s));
        }
    }
    ops
}

/// A connection's credit: a send waits for its receiver to have consumed the message `slots`
/// back (`back`), the credit crossing the route back.
fn credits(dag: &mut Dag, t: &TreeSends, x: &IterTerms, back: &[RankOps], now: &[RankOps]) {
    for (v, sends) in t.down.iter().enumerate() {
        for (k, s) in sends.iter().enumerate() {
            let lat = s.lat_us + x.hop_us;
            let kid = s.to as usize;
            dag.edge(back[kid].first_down, now[v].sends_down[k], lat);
            let up = t.up[kid].as_ref().expect("a child sends up");
            let taken = back[v].take_kid[k];
            dag.edge(
                taken,
                now[kid].send_up.expect("sent up"),
                up.lat_us + x.hop_us,
            );
        }
    }
}

/// A send's op: its transfer (kB of wire over its links, at most the channel's rate, LL's paced
/// rate past the connection's slots), then the protocol's step and the route's.
fn send(x: &IterTerms, s: &TreeSend, paced: bool) -> DagOp {
    DagOp {
        links: s.links.iter().map(|l| l.0).collect(),
        volume: x.chunk * x.wire / 1000.0,
        cap: if paced {
            x.paced_gbps.min(x.channel_gbps)
        } else {
            x.channel_gbps
        },
        post: x.step_us + s.send_us,
    }
}

/// An op that moves nothing over a link: only its fixed cost (µs).
fn local(us: f64) -> DagOp {
    DagOp {
        post: us,
        ..DagOp::default()
    }
}
