//! NCCL-style double binary trees over hosts (NCCL's `src/graph/trees.cc`, `ncclGetBtree` and `ncclGetDtree`, re-derived): tree 0 is a
//! binary tree built on the lowest set bit of the host index; tree 1 is its mirror image (even
//! host counts) or its shift by one (odd), so every host is a leaf in one tree and interior in the
//! other. Inside a host the GPUs hang below the host's head as a chain.

use crate::schedule::TreeChannel;

/// Binary tree over `n` nodes: `(parent, child0, child1)` of `rank`.
pub fn btree(n: u32, rank: u32) -> (Option<u32>, Option<u32>, Option<u32>) {
    let mut bit = 1u32;
    while bit < n {
        if bit & rank != 0 {
            break;
        }
        bit <<= 1;
    }
    if rank == 0 {
        return (None, None, (n > 1).then_some(bit >> 1));
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let low = bit >> 1;
    let d0 = (low > 0).then(|| rank - low);
    let mut lb = low;
    while lb > 0 && rank + lb >= n {
        lb >>= 1;
    }
    let d1 = (lb > 0).then_some(rank + lb);
    (Some(up), d0, d1)
}

/// The two trees of NCCL's double binary tree: `which` 0 or 1; returns the parent of `rank`.
pub fn dtree(n: u32, rank: u32, which: u32) -> Option<u32> {
    if which == 0 || n <= 1 {
        return btree(n, rank).0;
    }
    if n.is_multiple_of(2) {
        btree(n, n - 1 - rank).0.map(|p| n - 1 - p)
    } else {
        btree(n, (rank + n - 1) % n).0.map(|p| (p + 1) % n)
    }
}

/// A tree over all ranks: hosts joined by tree `which` of the double binary tree, each host's
/// GPUs chained in `chain` order (local indices) below its head `chain[0]`.
pub fn host_tree(hosts: &[Vec<u32>], chain: &[u32], which: u32) -> TreeChannel {
    let nh = hosts.len() as u32;
    let n: usize = hosts.iter().map(|h| h.len()).sum();
    let mut parent = vec![None; n];
    for (h, g) in hosts.iter().enumerate() {
        let head = g[chain[0] as usize];
        parent[head as usize] =
            dtree(nh, h as u32, which).map(|ph| hosts[ph as usize][chain[0] as usize]);
        for w in chain.windows(2) {
            parent[g[w[1] as usize] as usize] = Some(g[w[0] as usize]);
        }
    }
    // The shape is a tree by construction (checked in tests); build children directly.
    let mut children = vec![Vec::new(); n];
    for (r, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            children[*p as usize].push(r as u32);
        }
    }
    TreeChannel { parent, children }
}
