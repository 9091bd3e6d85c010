//! Foreign MSCCL files: which IR channel each threadblock gets, and what a wait on a `nop` means.

use super::import::Tb;
use std::collections::HashMap;

/// The real steps a wait on (tb, step) stands for: the step itself, or for a nop the last real
/// step before it in its tb plus the nop's own wait.
pub(super) fn resolve(
    tbs: &[Tb],
    pos: &[Vec<Option<(u32, u32)>>],
    (t, k): (usize, usize),
    depth: u32,
) -> Vec<(u32, u32)> {
    if depth > 64 {
        return Vec::new();
    }
    if let Some(p) = pos[t][k] {
        return vec![p];
    }
    let mut v = Vec::new();
    if let Some(p) = (0..k).rev().find_map(|j| pos[t][j]) {
        v.push(p);
    }
    if let Some(d) = tbs[t].steps[k].dep {
        v.extend(resolve(tbs, pos, d, depth + 1));
    }
    v
}

/// Foreign files: threadblocks joined by a connection (same MSCCL channel, one's send peer is the
/// other's rank and vice versa) must share an IR channel index. Components get the smallest index
/// free on every rank they touch.
pub(super) fn color_components(g: &[&Vec<Tb>]) -> Vec<Vec<u32>> {
    let mut base = Vec::with_capacity(g.len());
    let mut total = 0usize;
    for tbs in g {
        base.push(total);
        total += tbs.len();
    }
    let mut parent: Vec<usize> = (0..total).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let nx = p[y];
            p[y] = r;
            y = nx;
        }
        r
    }
    // Receiver tb of each (from, to, chan).
    let mut recv_tb: HashMap<(u32, u32, u32), usize> = HashMap::new();
    for (r, tbs) in g.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            if let Some(from) = tb.recv {
                recv_tb.insert((from, r as u32, tb.chan), base[r] + t);
            }
        }
    }
    for (r, tbs) in g.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            if let Some(to) = tb.send {
                if let Some(&o) = recv_tb.get(&(r as u32, to, tb.chan)) {
                    let (a, b) = (find(&mut parent, base[r] + t), find(&mut parent, o));
                    parent[a] = b;
                }
            }
        }
    }
    let mut members: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    let mut order = Vec::new();
    for (r, tbs) in g.iter().enumerate() {
        for t in 0..tbs.len() {
            let root = find(&mut parent, base[r] + t);
            let e = members.entry(root).or_default();
            if e.is_empty() {
                order.push(root);
            }
            e.push((r, t));
        }
    }
    let mut used: Vec<Vec<u32>> = vec![Vec::new(); g.len()];
    let mut out: Vec<Vec<u32>> = g.iter().map(|tbs| vec![0; tbs.len()]).collect();
    for root in order {
        let m = &members[&root];
        let mut c = 0u32;
        while m.iter().any(|(r, _)| used[*r].contains(&c)) {
            c += 1;
        }
        for &(r, t) in m {
            used[r].push(c);
            out[r][t] = c;
        }
    }
    out
}
