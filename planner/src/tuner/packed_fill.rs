//! The packed trees' pipeline fill: a tree's chunk travels in messages of one protocol step that
//! each GPU receives whole before it forwards them (the packed builder's ops), so the first
//! message reaches the deepest GPU only after a message's time over every hop on the way, while
//! the other trees' messages share the links. The engine runs those transfers as flows sharing
//! links max-min fairly, each landing its route's latency and the protocol's hop and step cost
//! after it ends; so does [`packed_fill`], one message per tree ([`PackedWave`]).

use super::drift::{dag_time, DagFlow};
use super::nccl::proto_idx;
use super::{EngineTerms, PackedSet};
use crate::schedule::build::TreeChannel;
use crate::schedule::{CollectiveKind, Protocol};
use serde::{Deserialize, Serialize};

/// One message per packed tree: the transfers per collective [all-gather (down), reduce-scatter
/// (up), all-reduce (up, then down from the root)], each over its route's links (indices into
/// `caps`, the links' rates for SM traffic, GB/s) with its route's latency (µs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PackedWave {
    pub flows: [Vec<DagFlow>; 3],
    pub caps: Vec<f64>,
}

/// The transfers of [`PackedWave`]: `route(a, b)` is the links (indices) from rank a to rank b
/// and the route's latency. A GPU sends up once its children's sums landed, and down once its
/// parent's message did.
pub fn wave_flows(
    trees: &[TreeChannel],
    mut route: impl FnMut(u32, u32) -> (Vec<usize>, f64),
) -> [Vec<DagFlow>; 3] {
    let mut out: [Vec<DagFlow>; 3] = Default::default();
    for t in trees {
        let Some(root) = t.parent.iter().position(Option::is_none) else {
            continue;
        };
        let up = tree_flows(t, root, &mut route, true);
        let down = tree_flows(t, root, &mut route, false);
        append(&mut out[0], &down, None);
        append(&mut out[1], &up, None);
        // All-reduce: the root's sends down wait for its children's sums.
        let base = out[2].len();
        let into_root: Vec<usize> = t.children[root]
            .iter()
            .filter_map(|&k| up.iter().position(|f| f.0 == k))
            .map(|i| base + i)
            .collect();
        append(&mut out[2], &up, None);
        append(&mut out[2], &down, Some(&into_root));
    }
    out
}

/// One tree's transfers, each (the rank whose edge it is, the flow) with dependencies indexed
/// within the tree: the edge from v to its parent (`up`) or from its parent to v.
fn tree_flows(
    t: &TreeChannel,
    root: usize,
    route: &mut impl FnMut(u32, u32) -> (Vec<usize>, f64),
    up: bool,
) -> Vec<(u32, DagFlow)> {
    let ranks: Vec<u32> = (0..t.parent.len() as u32)
        .filter(|&v| v as usize != root)
        .collect();
    let at = |v: u32| ranks.iter().position(|&x| x == v);
    ranks
        .iter()
        .map(|&v| {
            let p = t.parent[v as usize].expect("not the root");
            let ((links, delay), deps) = if up {
                let kids = t.children[v as usize].iter().filter_map(|&k| at(k));
                (route(v, p), kids.collect())
            } else {
                (route(p, v), at(p).into_iter().collect())
            };
            (v, DagFlow { links, deps, delay })
        })
        .collect()
}

/// Appends a tree's flows, shifting their dependencies; `root_deps` (already shifted) go to the
/// flows out of the root.
fn append(out: &mut Vec<DagFlow>, tree: &[(u32, DagFlow)], root_deps: Option<&[usize]>) {
    let base = out.len();
    for (_, f) in tree {
        let mut deps: Vec<usize> = f.deps.iter().map(|d| base + d).collect();
        if f.deps.is_empty() {
            deps.extend(root_deps.into_iter().flatten());
        }
        out.push(DagFlow {
            links: f.links.clone(),
            deps,
            delay: f.delay,
        });
    }
}

/// A packed call's fill beyond its latency and bandwidth terms, µs: a tree's chunk of `bytes`
/// moves in messages of one step; the first reaches every GPU after its wave, run as the engine
/// runs it (flows sharing links, each landing its route's latency and the protocol's hop and
/// step cost after it ends), less the wave of empty messages (the latency term's path) and one
/// message at the call's rate (`algbw`, GB/s; the bandwidth term pays it for every message).
/// 0 without the wave or the engine's terms.
pub(super) fn packed_fill(
    pk: &PackedSet,
    e: &EngineTerms,
    kind: CollectiveKind,
    p: Protocol,
    bytes: u64,
    algbw: f64,
) -> f64 {
    let flows = match kind {
        CollectiveKind::AllGather => &pk.wave.flows[0],
        CollectiveKind::ReduceScatter => &pk.wave.flows[1],
        _ => &pk.wave.flows[2],
    };
    let i = proto_idx(p);
    let (cap, step) = (e.channel_gbps[i], e.step_bytes[i] as f64);
    if flows.is_empty() || cap <= 0.0 || step <= 0.0 || algbw <= 0.0 {
        return 0.0;
    }
    let wire = if e.wire_factor[i] > 0.0 {
        e.wire_factor[i]
    } else {
        1.0
    };
    let chunk = bytes as f64 / pk.trees.max(1) as f64;
    let msgs = (chunk / step).ceil().max(1.0);
    let extra = e.hop_us[i] + e.step_us[i];
    let wave = |kb: f64| dag_time(flows, &pk.wave.caps, cap, kb, extra);
    let fill = wave(chunk.min(step) * wire / 1000.0) - wave(0.0);
    (fill - bytes as f64 / 1000.0 / algbw / msgs).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_forwarded_whole_and_lands_after_its_route() {
        // One chain 0 -> 1 -> 2, links 0 (0 to 1) and 1 (1 to 2), 0.5 µs each; a second tree
        // rooted at 2: 2 -> 1 -> 0 over links 2 and 3.
        let a = TreeChannel::from_parents(vec![None, Some(0), Some(1)]).unwrap();
        let b = TreeChannel::from_parents(vec![Some(1), Some(2), None]).unwrap();
        let route = |x: u32, y: u32| match (x, y) {
            (0, 1) => (vec![0], 0.5),
            (1, 2) => (vec![1], 0.5),
            (2, 1) => (vec![2], 0.5),
            _ => (vec![3], 0.5),
        };
        let caps = [1.0; 4];
        let [ag, rs, ar] = wave_flows(std::slice::from_ref(&a), route);
        assert_eq!(rs.len(), 2);
        // Down: two hops one after the other, each 1 of volume at rate 1 and 0.5 µs (+ 0.25).
        assert_eq!(dag_time(&ag, &caps, 10.0, 1.0, 0.25), 3.5);
        assert_eq!(dag_time(&ag, &caps, 10.0, 0.0, 0.25), 1.5);
        // All-reduce: up over links 3 then 2, then down: four hops.
        assert_eq!(dag_time(&ar, &caps, 10.0, 1.0, 0.0), 6.0);
        // Both trees down: tree b's transfers take links of their own.
        let [both, _, _] = wave_flows(&[a, b], route);
        assert_eq!(dag_time(&both, &caps, 10.0, 1.0, 0.0), 3.0);
        // A flow cap below the link's rate paces every hop.
        assert_eq!(dag_time(&both, &caps, 0.5, 1.0, 0.0), 5.0);
    }
}
