//! Transfers as the engine runs them: each a flow over its route's links, starting once the
//! transfers it waits for landed, flows sharing the links max-min fairly ([`dag_time`]). For
//! point-to-point messages every rank sends one after another (program order), and ranks are not
//! held in step: a rank whose message ran over a fast link starts its next one early, where it
//! may share a link with another rank's message that a lock-step schedule would keep apart (on a
//! PCIe host, an all-to-all's messages into one GPU).

/// The time the ranks' messages take, every message of one unit of volume: `msgs[r]` is rank
/// r's messages in order, each its links (indices into `caps`, the links' rates); no flow runs
/// faster than `flow_cap`. The result is in units of volume over units of rate.
pub fn sequential_sends_time(msgs: &[Vec<Vec<usize>>], caps: &[f64], flow_cap: f64) -> f64 {
    let mut flows = Vec::new();
    for m in msgs {
        for (i, links) in m.iter().enumerate() {
            let deps = if i == 0 {
                vec![]
            } else {
                vec![flows.len() - 1]
            };
            flows.push(DagFlow {
                links: links.clone(),
                deps,
                delay: 0.0,
            });
        }
    }
    dag_time(&flows, caps, flow_cap, 1.0, 0.0)
}

/// A point-to-point collective's messages as the engine runs them: each rank's in program order,
/// each its links (indices into `caps`, the links' rates, GB/s) and the step its sender pays
/// after it before the next (µs: the network's, across hosts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankMessages {
    pub msgs: Vec<Vec<(Vec<usize>, f64)>>,
    pub caps: Vec<f64>,
}

impl RankMessages {
    /// How long the ranks take to send messages of `bytes` each, µs: one after another, a step
    /// after each, flows sharing the links max-min fairly and none above `flow_cap` GB/s
    /// ([`dag_time`]); the landing of the last is not included. A rank's step leaves its links to
    /// the others' messages, where adding every step to the transfers would not.
    pub fn time_us(&self, bytes: u64, flow_cap: f64) -> f64 {
        let mut flows = Vec::new();
        for m in &self.msgs {
            for (i, (links, step)) in m.iter().enumerate() {
                flows.push(DagFlow {
                    links: links.clone(),
                    deps: if i == 0 {
                        vec![]
                    } else {
                        vec![flows.len() - 1]
                    },
                    delay: *step,
                });
            }
        }
        dag_time(&flows, &self.caps, flow_cap, bytes as f64 / 1000.0, 0.0)
    }
}

/// A transfer over `links` (indices into a list of link rates), which starts once every flow of
/// `deps` ended and its `delay` passed (its route's latency: the data then lands).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DagFlow {
    pub links: Vec<usize>,
    pub deps: Vec<usize>,
    #[serde(default)]
    pub delay: f64,
}

/// The time until every flow ended and landed: every flow moves `volume`, starting as soon as its
/// dependencies landed (each flow's `delay` plus `extra_delay` after it ends), flows sharing
/// links (rates `caps`) max-min fairly, none above `flow_cap`. Times are volume over rate.
pub fn dag_time(
    flows: &[DagFlow],
    caps: &[f64],
    flow_cap: f64,
    volume: f64,
    extra_delay: f64,
) -> f64 {
    let ops: Vec<DagOp> = flows
        .iter()
        .map(|f| DagOp {
            links: f.links.clone(),
            volume,
            cap: flow_cap,
            post: 0.0,
            copies: 1,
        })
        .collect();
    let mut then = vec![Vec::new(); flows.len()];
    for (f, flow) in flows.iter().enumerate() {
        for &d in &flow.deps {
            then[d].push((f, flows[d].delay + extra_delay));
        }
    }
    op_dag_ends(&ops, &then, caps)
        .iter()
        .zip(flows)
        .map(|(end, f)| end + f.delay + extra_delay)
        .fold(0.0, f64::max)
}

/// One op of a DAG: a transfer of `volume` over `links` (indices into a list of link rates), no
/// faster than `cap`, then `post` of fixed cost off the links (with no volume, only that).
/// `copies` identical ops run in lockstep with it (0 and 1: itself alone): each of its links
/// carries it that many times, so one op stands for the same op of identical trees.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DagOp {
    pub links: Vec<usize>,
    pub volume: f64,
    pub cap: f64,
    pub post: f64,
    pub copies: u32,
}

impl DagOp {
    /// An op that moves nothing over a link: only its fixed cost (µs).
    pub fn local(us: f64) -> Self {
        Self {
            post: us,
            ..Self::default()
        }
    }
}

/// Ops and the edges between them, built one program at a time; [`op_dag_ends`] runs them.
#[derive(Default)]
pub struct OpDag {
    ops: Vec<DagOp>,
    then: Vec<Vec<(usize, f64)>>,
}

impl OpDag {
    /// A new op after `prev` in its program (none: the program's first).
    pub fn push(&mut self, op: DagOp, prev: Option<usize>) -> usize {
        let id = self.ops.len();
        self.ops.push(op);
        self.then.push(Vec::new());
        if let Some(p) = prev {
            self.edge(p, id, 0.0);
        }
        id
    }

    /// Op `to` starts no sooner than `delay` after op `from` ends.
    pub fn edge(&mut self, from: usize, to: usize, delay: f64) {
        self.then[from].push((to, delay));
    }

    /// When every op ends, the links' rates `caps`.
    pub fn ends(&self, caps: &[f64]) -> Vec<f64> {
        op_dag_ends(&self.ops, &self.then, caps)
    }
}

/// When every op ends: op g starts once every op f with (g, delay) in `then[f]` ended and that
/// delay passed, the running transfers sharing the links (rates `caps`) max-min fairly, each
/// within its cap. Times are volume over rate.
///
/// Event by event: ops wait in a queue ordered by when their last dependency allows them, and
/// only the running transfers and their links are shared at each event, so a chain of thousands
/// of hops (a 1024-rank ring's fill) costs its events times the transfers running at once.
pub fn op_dag_ends(ops: &[DagOp], then: &[Vec<(usize, f64)>], caps: &[f64]) -> Vec<f64> {
    use std::cmp::Reverse;
    assert_eq!(ops.len(), then.len(), "one list of dependents per op");
    let n = ops.len();
    let mut waiting = vec![0u32; n];
    for &(g, _) in then.iter().flatten() {
        waiting[g] += 1;
    }
    // When each op may start: the latest of its dependencies' ends and delays so far.
    let mut ready = vec![0.0f64; n];
    let mut queue: std::collections::BinaryHeap<Reverse<(OrdF64, usize)>> = (0..n)
        .filter(|&f| waiting[f] == 0)
        .map(|f| Reverse((OrdF64(0.0), f)))
        .collect();
    let mut end = vec![f64::NAN; n];
    let mut left: Vec<f64> = ops.iter().map(|o| o.volume).collect();
    let mut active: Vec<usize> = Vec::new();
    let mut sharing = LinkSharing::new(caps);
    let mut t = 0.0f64;
    let mut finish = |f: usize, at: f64, queue: &mut std::collections::BinaryHeap<_>| {
        end[f] = at + ops[f].post;
        for &(g, delay) in &then[f] {
            ready[g] = ready[g].max(end[f] + delay);
            waiting[g] -= 1;
            if waiting[g] == 0 {
                queue.push(Reverse((OrdF64(ready[g]), g)));
            }
        }
    };
    loop {
        while let Some(&Reverse((OrdF64(r), f))) = queue.peek() {
            if r > t + 1e-12 {
                break;
            }
            queue.pop();
            if ops[f].volume > 0.0 {
                active.push(f);
            } else {
                finish(f, t, &mut queue);
            }
        }
        let next_ready = queue.peek().map_or(f64::INFINITY, |Reverse((r, _))| r.0);
        if active.is_empty() {
            if next_ready.is_finite() {
                t = next_ready;
                continue;
            }
            return end;
        }
        let rates = sharing.max_min(
            active
                .iter()
                .map(|&f| (&ops[f].links[..], ops[f].cap, ops[f].copies.max(1))),
        );
        let dt = active
            .iter()
            .zip(&rates)
            .map(|(&f, &x)| left[f] / x.max(1e-12))
            .fold(next_ready - t, f64::min);
        t += dt;
        let mut still = Vec::with_capacity(active.len());
        for (&f, &x) in active.iter().zip(&rates) {
            left[f] -= x * dt;
            if left[f] > 1e-9 * ops[f].volume {
                still.push(f);
                continue;
            }
            finish(f, t, &mut queue);
        }
        active = still;
    }
}

/// A time ordered by `f64::total_cmp`, for the queue of flows waiting to start.
#[derive(Clone, Copy, PartialEq)]
struct OrdF64(f64);

impl Eq for OrdF64 {}

impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Scratch space for sharing links among the running flows, sized once for every link and
/// touched only at the links those flows cross.
struct LinkSharing<'a> {
    caps: &'a [f64],
    residual: Vec<f64>,
    count: Vec<u32>,
    used: Vec<usize>,
    /// The running flows that cross each used link.
    on: Vec<Vec<u32>>,
}

impl<'a> LinkSharing<'a> {
    fn new(caps: &'a [f64]) -> Self {
        LinkSharing {
            caps,
            residual: caps.to_vec(),
            count: vec![0; caps.len()],
            used: Vec::new(),
            on: vec![Vec::new(); caps.len()],
        }
    }

    /// Max-min fair rates of `flows` (each its links, its cap and how many identical flows it
    /// stands for; progressive filling: the most constrained link or cap fixes its flows' share
    /// first). Each round visits the used links and only the flows it fixes, so that many flows
    /// over few links cost little.
    fn max_min<'f>(&mut self, flows: impl Iterator<Item = (&'f [usize], f64, u32)>) -> Vec<f64> {
        let mut copies = Vec::new();
        let (flows, flow_caps): (Vec<&[usize]>, Vec<f64>) = flows
            .map(|(links, cap, n)| {
                copies.push(n);
                (links, cap)
            })
            .unzip();
        self.used.clear();
        for (f, links) in flows.iter().enumerate() {
            for &l in links.iter() {
                if self.count[l] == 0 {
                    self.residual[l] = self.caps[l];
                    self.used.push(l);
                    self.on[l].clear();
                }
                self.count[l] += copies[f];
                self.on[l].push(f as u32);
            }
        }
        // Flows by cap, lowest first: the unfixed one with the lowest cap bounds every share.
        let mut by_cap: Vec<usize> = (0..flows.len()).collect();
        by_cap.sort_by(|&a, &b| flow_caps[a].total_cmp(&flow_caps[b]));
        let mut next_cap = 0;
        let mut rate = vec![None; flows.len()];
        let mut fixed = Vec::new();
        loop {
            while next_cap < by_cap.len() && rate[by_cap[next_cap]].is_some() {
                next_cap += 1;
            }
            let share = |s: &Self, l: usize| s.residual[l] / s.count[l] as f64;
            let lowest_cap = by_cap
                .get(next_cap)
                .map_or(f64::INFINITY, |&f| flow_caps[f]);
            let s = self
                .used
                .iter()
                .filter(|&&l| self.count[l] > 0)
                .map(|&l| share(self, l))
                .fold(lowest_cap, f64::min);
            fixed.clear();
            fixed.extend(
                by_cap[next_cap..]
                    .iter()
                    .take_while(|&&f| flow_caps[f] <= s)
                    .filter(|&&f| rate[f].is_none()),
            );
            for &l in &self.used {
                if self.count[l] > 0 && share(self, l) <= s * (1.0 + 1e-12) {
                    let unfixed = self.on[l].iter().map(|&f| f as usize);
                    fixed.extend(unfixed.filter(|&f| rate[f].is_none()));
                }
            }
            if fixed.is_empty() {
                for &l in &self.used {
                    self.count[l] = 0;
                }
                return rate.into_iter().map(|r| r.unwrap_or(s)).collect();
            }
            fixed.sort_unstable();
            fixed.dedup();
            for &f in &fixed {
                rate[f] = Some(s);
                for &l in flows[f] {
                    self.residual[l] -= s * f64::from(copies[f]);
                    self.count[l] -= copies[f];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_out_of_step_share_the_link_a_lock_step_keeps_apart() {
        // Links 0 and 1 (rate 1) into two receivers; link 2 a fast one (rate 1000). Rank 0
        // sends over the fast link, then into receiver 0; rank 1 into receiver 0, then into
        // receiver 1. In lock step each step takes 1; here rank 0's second message shares
        // receiver 0's link with rank 1's first: both at 1/2 until rank 1's ends at about 2,
        // then rank 0's rest alone.
        let msgs = vec![vec![vec![2], vec![0]], vec![vec![0], vec![1]]];
        let t = sequential_sends_time(&msgs, &[1.0, 1.0, 1000.0], f64::INFINITY);
        assert!((t - 3.0).abs() < 0.01, "{t}");
        // A flow cap below the links' share paces every message.
        let one = vec![vec![vec![0]], vec![vec![1]]];
        assert!((sequential_sends_time(&one, &[1.0, 1.0], 0.5) - 2.0).abs() < 1e-9);
    }

    /// An op standing for copies of itself counts that many times on its links: one op of two
    /// copies ends when two identical ops would, beside a third op that shares their link.
    #[test]
    fn an_op_of_copies_shares_its_links_as_that_many_ops() {
        let op = |links: Vec<usize>, copies| DagOp {
            links,
            volume: 10.0,
            cap: f64::INFINITY,
            post: 0.0,
            copies,
        };
        let none = vec![Vec::new(); 3];
        // Link 0 at 30: three flows of 10 end together at 1; link 1 at 10 alone for the third.
        let three = op_dag_ends(
            &[op(vec![0], 1), op(vec![0], 1), op(vec![0, 1], 1)],
            &none,
            &[30.0, 10.0],
        );
        let two = op_dag_ends(
            &[op(vec![0], 2), op(vec![0, 1], 1)],
            &none[..2],
            &[30.0, 10.0],
        );
        assert!((three[0] - 1.0).abs() < 1e-9 && (three[2] - 1.0).abs() < 1e-9);
        assert!((two[0] - three[0]).abs() < 1e-9 && (two[1] - three[2]).abs() < 1e-9);
        // The third's own link at 5 caps it: the copies take the rest of link 0, 12.5 each.
        let capped = op_dag_ends(
            &[op(vec![0], 2), op(vec![0, 1], 1)],
            &none[..2],
            &[30.0, 5.0],
        );
        assert!((capped[0] - 0.8).abs() < 1e-9 && (capped[1] - 2.0).abs() < 1e-9);
    }

    /// A rank's step after a message leaves the link to the others: B's message runs alone
    /// while A pays its step, and A's next message starts only after it.
    #[test]
    fn a_ranks_step_comes_after_its_message_and_frees_its_link() {
        // One 10 GB/s link; A sends two messages with a 1 µs step after each, B one.
        let m = RankMessages {
            msgs: vec![vec![(vec![0], 1.0), (vec![0], 1.0)], vec![(vec![0], 0.0)]],
            caps: vec![10.0],
        };
        // 10 kB each: A's and B's first share the link (2 µs), A's step (to 3 µs), its second
        // alone (to 4 µs), its step (to 5 µs).
        assert!((m.time_us(10_000, f64::INFINITY) - 5.0).abs() < 1e-9);
        // Capped at 2.5 GB/s, the link is never full: 4 µs, 1 µs step, 4 µs, 1 µs step.
        assert!((m.time_us(10_000, 2.5) - 10.0).abs() < 1e-9);
    }
}
