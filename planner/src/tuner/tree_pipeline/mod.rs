//! A tree all-reduce as the engine runs `schedule::build::tree`'s layout: every tree carries one
//! step of its share per loop iteration, up (reduce) and down (broadcast) on two programs of
//! each rank, which the iterations pipeline through.
//!
//! - Up, a rank takes its children one op after another: each op waits for that child's data,
//!   then reduces it (a local pass at the channel's local rate), the last op also sending the
//!   sum to the parent (a transfer instead). A leaf only sends.
//! - Down, the root starts after its last reduction; a rank forwards to its first child in the
//!   op that receives, then sends to the others in turn, one transfer each; a leaf's receive is
//!   a step.
//! - A transfer moves at the channel's rate or its links' share, whichever is lower. Each op
//!   costs the protocol's step after it (and the network's step on a route across hosts); data
//!   lands the route's latency and the protocol's hop after.
//!
//! The first iteration is the pipeline's fill, its slowest leaf, a link shared only by the sends
//! of the same wave step. The second follows it one op behind in every program. The later ones
//! take the busiest program's ops of one iteration, or the busiest link's bytes, a link shared
//! by the programs that send over it as often as they do (one program's sends never overlap).
//! The halves run apart: where a link carries both (into an interior host's GPU, a child host's
//! send up and the parent host's send down), the faster half runs ahead sharing it with the
//! slower until it is done, and the slower then runs its remaining iterations alone. LL past
//! its connection's slots is paced (`SimConfig::with_ll_channel_cap`): the leaves run their
//! unpaced iterations ahead, the first paced one crosses the trees at the paced rate, waiting
//! at every rank behind the unpaced iterations still queued there (`paced`), and each after it
//! takes a paced period.

use super::chain_costs::engine_path;
use super::nccl::{self, proto_idx};
use super::TunerParams;
use crate::schedule::build::TreeChannel;
use crate::schedule::Protocol;
use std::collections::HashMap;
use steady::{period, rates, Halves, Loads, Sharing};

mod paced;
mod steady;

#[cfg(test)]
mod tests;
mod windows;

/// Loop iterations a call on many trees runs before it settles into its steady period: the
/// trees' programs drift apart over the first ones, meeting on the links in a changing mix, so a
/// period read earlier is up to 12 % short (packed LL reduce-scatter on eight A100s). A slope is
/// read from two runs of at least this many iterations: by the engine's pricer
/// (`sim::price::extrapolate`) and by the tuner's line through its op-by-op runs.
pub const STEADY_ITERS: u32 = 16;

/// One send of a tree's iteration: to whom, its route's latency (µs), its links (index,
/// GB/s), and what a step over it costs its sender beyond the protocol's (µs: the network's
/// step across hosts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeSend {
    pub to: u32,
    pub lat_us: f64,
    pub links: Vec<(usize, f64)>,
    pub send_us: f64,
}

/// A tree's sends: each rank's to its parent (`None` at the root) and to its children, in the
/// builder's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeSends {
    pub root: u32,
    pub up: Vec<Option<TreeSend>>,
    pub down: Vec<Vec<TreeSend>>,
}

impl TreeSends {
    /// The sends of `t`, `route(a, b)` the route from rank a to rank b: (latency, links, the
    /// sender's step cost). `None` without a root.
    pub fn of(
        t: &TreeChannel,
        route: &impl Fn(u32, u32) -> (f64, Vec<(usize, f64)>, f64),
    ) -> Option<Self> {
        let root = t.parent.iter().position(Option::is_none)? as u32;
        let send = |a: u32, b: u32| {
            let (lat_us, links, send_us) = route(a, b);
            TreeSend {
                to: b,
                lat_us,
                links,
                send_us,
            }
        };
        let up = (0..t.parent.len() as u32)
            .map(|v| t.parent[v as usize].map(|p| send(v, p)))
            .collect();
        let down = (0..t.parent.len() as u32)
            .map(|v| t.children[v as usize].iter().map(|&k| send(v, k)).collect())
            .collect();
        Some(TreeSends { root, up, down })
    }

    /// Every send of the tree, up and down.
    fn sends(&self) -> impl Iterator<Item = &TreeSend> {
        self.up.iter().flatten().chain(self.down.iter().flatten())
    }

    fn kids(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.down[v as usize].iter().map(|s| s.to)
    }

    /// The ranks parents first (breadth first from the root).
    fn order(&self) -> Vec<u32> {
        let mut order = vec![self.root];
        let mut i = 0;
        while i < order.len() {
            let v = order[i];
            order.extend(self.kids(v));
            i += 1;
        }
        order
    }

    /// Each rank's depth below the root and height above its deepest leaf.
    fn levels(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.up.len();
        let order = self.order();
        let mut depth = vec![0u32; n];
        for &v in &order {
            for k in self.kids(v) {
                depth[k as usize] = depth[v as usize] + 1;
            }
        }
        let mut height = vec![0u32; n];
        for &v in order.iter().rev() {
            height[v as usize] = self
                .kids(v)
                .map(|k| height[k as usize] + 1)
                .max()
                .unwrap_or(0);
        }
        (depth, height)
    }
}

/// The engine's terms of one protocol that a tree's iteration reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterTerms {
    /// Payload bytes each tree carries per iteration.
    pub chunk: f64,
    /// Wire bytes per payload byte.
    pub wire: f64,
    /// One channel's transfer rate and, past the connection's slots, its paced rate (GB/s of
    /// wire; equal where the protocol is not paced).
    pub channel_gbps: f64,
    pub paced_gbps: f64,
    /// The rate of a local reduction (GB/s), and the fraction of a link's rate transfers reach.
    pub local_gbps: f64,
    pub link_eff: f64,
    /// The protocol's cost of a step and its one-way hop (µs), and the connection's slots.
    pub step_us: f64,
    pub hop_us: f64,
    pub slots: u32,
}

/// Each send's rate (GB/s of wire) per tree and rank: (up, down in order).
type SendRates = Vec<Vec<(f64, Vec<f64>)>>;

/// How long `trees` take to all-reduce `iters` iterations (at least 1; the last may be partial:
/// fractional), µs from the first op, and the period of the last iterations. Op by op as the
/// engine runs them where the call's ops are few (`windows`), else in closed form
/// ([`closed_form_us`]). `None` without trees.
pub fn all_reduce_us(
    trees: &[TreeSends],
    x: &IterTerms,
    iters: f64,
    memo: &Memo,
) -> Option<(f64, f64)> {
    let (closed, period) = closed_form_us(trees, x, iters, memo)?;
    let whole = iters.max(1.0).ceil();
    let per = windows::ops_per_iteration(trees).max(1);
    let affordable = (windows::WINDOW_OPS / per) as f64;
    if affordable < 1.0 {
        return Some((closed, period));
    }
    if whole <= affordable {
        let last = iters.max(1.0) - (whole - 1.0);
        return Some((windows::all_reduce_us(trees, x, whole as u32, last), period));
    }
    // The first iterations op by op, then the rest. Past its slots LL runs at its paced
    // rate, whose period the closed form prices: it adds them. An unpaced protocol's period is
    // its sends' sharing of the links, read off the op-by-op runs once both are past the
    // trees' settling (`STEADY_ITERS`, where the runs fit in `LINE_OPS`) and have their
    // connections' slots full: the line through the most iterations affordable, or twice
    // `STEADY_ITERS`, and half as many. A line read earlier, or across LL's first paced
    // iterations, misses the steady period by up to 16 % on 128 ranks (p5 ×16, LL128 at 1 GiB,
    // read over 8 to 16 iterations).
    let unpaced = x.paced_gbps >= x.channel_gbps;
    let settled = f64::from(2 * STEADY_ITERS);
    let k = match unpaced && settled * per as f64 <= windows::LINE_OPS as f64 {
        true => affordable.max(settled),
        false => affordable,
    };
    let half = (k / 2.0).floor();
    let by_line = unpaced && half >= f64::from(x.slots.max(1));
    let head = match by_line {
        true => None,
        false => Some(closed_form_us(trees, x, k, memo)?.0),
    };
    let key = (trees.len(), x.key());
    let run = |k: f64| Some(windows::all_reduce_us(trees, x, k as u32, 1.0));
    let wk = memo.window(key, false, || run(k))?;
    let us = match head {
        Some(head) => wk + closed - head,
        None => line(k, wk, half, memo.window(key, true, || run(half))?, iters),
    };
    Some((us, period))
}

/// [`all_reduce_us`] in closed form: the first iteration's slowest leaf, then a period per
/// iteration. The stages that do not depend on `iters` are kept in `memo` (the memo of the
/// trees `trees` are the first of).
fn closed_form_us(
    trees: &[TreeSends],
    x: &IterTerms,
    iters: f64,
    memo: &Memo,
) -> Option<(f64, f64)> {
    trees.first()?;
    let key = (trees.len(), x.key());
    let mut stages = memo.get(&key);
    let us = stages_us(trees, x, iters, &mut stages);
    memo.put(key, stages);
    Some(us)
}

/// A call's stages that do not depend on how many iterations it runs (µs), each computed when a
/// call first needs it: a plan prices many sizes whose chunk is the protocol's whole step, and
/// at thousands of ranks each stage walks every program.
#[derive(Clone, Copy, Default)]
struct Stages {
    fill: Option<f64>,
    fast: Option<f64>,
    second: Option<f64>,
    at_channel: Option<Halves>,
    at_paced: Option<Halves>,
    /// When the first paced iteration reaches the slowest leaf (`paced::iterations_us`).
    refill: Option<f64>,
    paced: Option<f64>,
    /// The most whole iterations run op by op (`windows`) and half as many, for calls of more.
    window: Option<f64>,
    window_half: Option<f64>,
}

/// [`Stages`] kept across calls for the trees they were computed on, by the count of trees used
/// and the protocol's terms. Clones share it (the planner clones its tuner's terms for each
/// question, and the trees they hold do not change), and any two compare equal: a memo is no
/// part of the value that holds it.
#[derive(Default)]
pub struct Memo(std::sync::Arc<std::sync::Mutex<MemoMap>>);

/// A memo's stages by (trees used, the protocol's terms bit for bit).
type MemoMap = HashMap<(usize, [u64; 9]), Stages>;

impl Memo {
    fn get(&self, key: &(usize, [u64; 9])) -> Stages {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key).copied().unwrap_or_default()
    }

    fn put(&self, key: (usize, [u64; 9]), stages: Stages) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(key, stages);
    }

    /// The op-by-op run of a call's most affordable whole iterations (`half`: of half as many)
    /// kept under `key`, `run` the first time.
    fn window(
        &self,
        key: (usize, [u64; 9]),
        half: bool,
        run: impl FnOnce() -> Option<f64>,
    ) -> Option<f64> {
        let mut stages = self.get(&key);
        let kept = match half {
            true => &mut stages.window_half,
            false => &mut stages.window,
        };
        let us = match *kept {
            Some(us) => us,
            None => run()?,
        };
        *kept = Some(us);
        self.put(key, stages);
        Some(us)
    }
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo(std::sync::Arc::clone(&self.0))
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

impl IterTerms {
    /// The engine's terms of protocol `p` for iterations of `chunk` payload bytes, past `slots`
    /// paced at `paced_gbps` of wire.
    fn of(e: &super::EngineTerms, p: Protocol, chunk: f64, paced_gbps: f64, slots: u32) -> Self {
        let i = proto_idx(p);
        IterTerms {
            chunk,
            wire: e.wire_factor[i].max(1.0),
            channel_gbps: e.channel_gbps[i],
            paced_gbps,
            local_gbps: e.local_channel_gbps,
            link_eff: if e.link_eff > 0.0 { e.link_eff } else { 1.0 },
            step_us: e.step_us[i],
            hop_us: e.hop_us[i],
            slots,
        }
    }

    /// The terms, bit for bit, as a memo's key.
    fn key(&self) -> [u64; 9] {
        [
            self.chunk.to_bits(),
            self.wire.to_bits(),
            self.channel_gbps.to_bits(),
            self.paced_gbps.to_bits(),
            self.local_gbps.to_bits(),
            self.link_eff.to_bits(),
            self.step_us.to_bits(),
            self.hop_us.to_bits(),
            u64::from(self.slots),
        ]
    }
}

/// [`all_reduce_us`] from `st`, filling in the stages it needs that `st` lacks.
fn stages_us(trees: &[TreeSends], x: &IterTerms, iters: f64, st: &mut Stages) -> (f64, f64) {
    let (programs, wave) = (std::cell::OnceCell::new(), std::cell::OnceCell::new());
    let programs = || programs.get_or_init(|| Loads::of(trees, Sharing::Programs));
    let wave = || wave.get_or_init(|| Loads::of(trees, Sharing::Wave));
    let fill_at = |gbps: f64| {
        let r = rates(trees, wave(), gbps, x.link_eff);
        trees
            .iter()
            .zip(&r)
            .map(|(t, r)| first_iteration(t, r, x))
            .fold(0.0, f64::max)
    };
    let per = |gbps: f64, loads: &Loads, links| {
        period(trees, &rates(trees, loads, gbps, x.link_eff), x, links)
    };
    let fill = *st.fill.get_or_insert_with(|| fill_at(x.channel_gbps));
    let fast = *st
        .fast
        .get_or_insert_with(|| per(x.channel_gbps, programs(), true));
    let iters = iters.max(1.0);
    let slots = x.slots.max(1) as f64;
    let mut us = fill;
    if iters > 1.0 {
        // The second iteration follows the first one op behind in every program, its sends
        // meeting the first's on the links only at the same wave step; from the third on every
        // program is busy and the links carry every send.
        let second = *st
            .second
            .get_or_insert_with(|| per(x.channel_gbps, wave(), false).min(fast));
        us += (iters - 1.0).min(1.0) * second;
    }
    if iters > 2.0 {
        let at = st
            .at_channel
            .get_or_insert_with(|| Halves::at(trees, x, x.channel_gbps, programs()));
        us += at.us(iters.min(slots) - 2.0);
    }
    if iters <= slots {
        return (us, fast);
    }
    let at_paced = *st
        .at_paced
        .get_or_insert_with(|| Halves::at(trees, x, x.paced_gbps.min(x.channel_gbps), programs()));
    us += at_paced.us(iters - slots);
    if x.paced_gbps < x.channel_gbps {
        // The leaves send their first `slots` iterations unpaced and run ahead; the first paced
        // one then crosses the whole tree at the paced rate, behind each rank's queued ones.
        let queued = *st.refill.get_or_insert_with(|| {
            let first = rates(trees, wave(), x.channel_gbps, x.link_eff);
            let steady = rates(trees, programs(), x.channel_gbps, x.link_eff);
            let slow = rates(trees, wave(), x.paced_gbps, x.link_eff);
            let last = x.slots.max(1) + 1;
            let at = |t: usize, i: u32| -> &[(f64, Vec<f64>)] {
                match i {
                    1 => &first[t],
                    i if i < last => &steady[t],
                    _ => &slow[t],
                }
            };
            (0..trees.len())
                .map(|t| paced::iterations_us(&trees[t], x, last, |i| at(t, i)))
                .fold(0.0, f64::max)
        });
        let refill = queued + at_paced.us(iters - slots - 1.0);
        us = us.max(refill);
    }
    let paced = *st
        .paced
        .get_or_insert_with(|| per(x.paced_gbps, programs(), true));
    (us, paced)
}

/// A tree all-reduce of `bytes` on the first `nc` of the engine's measured trees, as the tuner
/// prices it: its latency beyond the tuner's launch and its bandwidth (GB/s), so that the two
/// give the pipeline's time. `llmax` is NCCL's LL bound for the call's channels together.
/// `None` where the trees were not measured or the engine's terms are missing.
pub(super) fn priced(
    c: &TunerParams,
    p: Protocol,
    nc: u32,
    bytes: u64,
    llmax: f64,
) -> Option<(f64, f64)> {
    let e = &c.engine;
    let all = &e.paths.tree_sends;
    let used = &all[..(nc.max(1) as usize).min(all.len())];
    let i = proto_idx(p);
    if used.is_empty() || e.channel_gbps[i] <= 0.0 || e.step_bytes[i] == 0 {
        return None;
    }
    let share = bytes.max(1) as f64 / used.len() as f64;
    let chunk = (e.step_bytes[i] as f64).min(share);
    let channel = e.channel_gbps[i];
    let paced = match p {
        Protocol::LL => (llmax / used.len() as f64 * e.wire_factor[i]).min(channel),
        _ => channel,
    };
    let x = IterTerms::of(e, p, chunk, paced, nccl::STEPS);
    let (us, period) = all_reduce_us(used, &x, share / chunk, &e.paths.tree_memo)?;
    let algbw = used.len() as f64 * chunk / 1000.0 / period.max(1e-9);
    let lat = engine_path(c, Some(us))? - bytes as f64 / 1000.0 / algbw;
    Some((lat, algbw))
}

/// A packed `kind` call of `bytes` on the trees of `pk` as the engine runs it, op by op (µs from
/// the first op): every tree carries `bytes / trees` (all-reduce: its chunk of the buffer;
/// all-gather and reduce-scatter: its chunk of its root's block) one IR step a loop iteration,
/// unramped and unpaced, as the engine runs packed schedules. `None` where the trees' sends
/// were not measured, the engine's terms are missing, or the call has more ops than
/// `windows::PACKED_WINDOW_WORK` allows and too few of its iterations fit in them to fill the slots.
pub(super) fn packed_us(
    c: &TunerParams,
    pk: &super::PackedSet,
    kind: crate::schedule::CollectiveKind,
    p: Protocol,
    bytes: u64,
) -> Option<f64> {
    let e = &c.engine;
    let i = proto_idx(p);
    let trees = pk.sends.len();
    if trees == 0 || pk.lanes.len() != trees || e.channel_gbps[i] <= 0.0 {
        return None;
    }
    let elem = super::ENGINE_ELEM_BYTES as f64;
    let share = ((bytes as f64 / trees as f64) / elem).floor().max(1.0) * elem;
    let step = (crate::schedule::build::step_elems(p) as f64 * elem).min(share);
    let iters = share / step;
    let whole = iters.ceil();
    let per_iteration = windows::ops_per_iteration(&pk.sends).max(1);
    let ranks: usize = pk.sends.iter().map(|t| t.up.len()).sum();
    let work = ranks.max(1) as f64 * windows::links_per_send(&pk.sends);
    let budget = windows::WINDOW_OPS.min((windows::PACKED_WINDOW_WORK as f64 / work) as usize);
    let affordable = (budget / per_iteration) as f64;
    let slots = crate::schedule::build::DEFAULT_SLOTS;
    let x = IterTerms::of(e, p, step, e.channel_gbps[i], slots);
    let run =
        |k: f64, last: f64| windows::packed_us(&pk.sends, &pk.lanes, kind, &x, k as u32, last);
    if whole <= affordable {
        return run(whole, iters - (whole - 1.0));
    }
    // Longer: the line through the most iterations affordable and half as many, both past the
    // trees' settling (`STEADY_ITERS`, as the engine's pricer reads its slope) and with their
    // connections' slots full (each size's chunk is the protocol's whole step, so the two runs
    // are kept across sizes).
    let k = affordable.max(f64::from(2 * STEADY_ITERS));
    let half = (k / 2.0).floor();
    if half < f64::from(x.slots) {
        return None;
    }
    let key = (kind as usize, x.key());
    let wk = pk.memo.window(key, false, || run(k, 1.0))?;
    let wh = pk.memo.window(key, true, || run(half, 1.0))?;
    Some(line(k, wk, half, wh, iters))
}

/// The line through a call's op-by-op times `wk` of `k` whole iterations and `wh` of `half`,
/// read at `iters`.
fn line(k: f64, wk: f64, half: f64, wh: f64, iters: f64) -> f64 {
    wk + (iters - k) * (wk - wh) / (k - half)
}

/// A send's op: its transfer, the protocol's step and the sender's step over the route (µs).
fn send_us(x: &IterTerms, s: &TreeSend, gbps: f64) -> f64 {
    x.chunk * x.wire / 1000.0 / gbps.max(1e-9) + x.step_us + s.send_us
}

/// A reduction's op: the local pass and the protocol's step (µs).
fn reduce_us(x: &IterTerms) -> f64 {
    x.chunk / 1000.0 / x.local_gbps.max(1e-9) + x.step_us
}

/// The first iteration of one tree: up from the leaves, the root's last reduction, down to the
/// slowest leaf's receive (µs from the first op).
fn first_iteration(t: &TreeSends, r: &[(f64, Vec<f64>)], x: &IterTerms) -> f64 {
    let n = t.up.len();
    // Parents first, so that children come before their parent in reverse.
    let order = t.order();
    let lands = |s: &TreeSend| s.lat_us + x.hop_us;
    let mut up_end = vec![0.0; n];
    for &v in order.iter().rev() {
        let kids: Vec<u32> = t.kids(v).collect();
        let mut at = 0.0f64;
        for (i, &k) in kids.iter().enumerate() {
            let from = t.up[k as usize].as_ref().expect("a child sends up");
            at = at.max(up_end[k as usize] + lands(from));
            let sends_up = i + 1 == kids.len() && t.up[v as usize].is_some();
            if !sends_up {
                at += reduce_us(x);
            }
        }
        if let Some(s) = &t.up[v as usize] {
            at += send_us(x, s, r[v as usize].0);
        }
        up_end[v as usize] = at;
    }
    // Down: a rank's data lands, then it sends to its children in turn.
    let mut landed = vec![0.0; n];
    landed[t.root as usize] = up_end[t.root as usize];
    let mut last = 0.0f64;
    for &v in &order {
        let mut at = landed[v as usize];
        let sends = &t.down[v as usize];
        if sends.is_empty() {
            last = last.max(at + x.step_us);
        }
        for (s, &g) in sends.iter().zip(&r[v as usize].1) {
            at += send_us(x, s, g);
            landed[s.to as usize] = at + lands(s);
        }
    }
    last
}
