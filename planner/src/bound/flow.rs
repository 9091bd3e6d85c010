//! Dinic's max-flow on real capacities, with the minimum cut read off the residual graph.
//!
//! The planner's graphs are small inside a host (tens of nodes) and at most a few tens of
//! thousands of nodes for 1024-host clusters, so a plain adjacency-list Dinic is enough. Capacities
//! are GB/s; a residual below `eps` (relative to the largest capacity) counts as saturated so
//! rounding never leaves a phantom augmenting path.

/// A flow network: edges in pairs (forward, reverse) so `e ^ 1` is the partner.
#[derive(Clone, Debug)]
pub(crate) struct Net {
    head: Vec<Vec<u32>>,
    to: Vec<u32>,
    cap: Vec<f64>,
    orig: Vec<f64>,
    eps: f64,
}

impl Net {
    pub fn new(nodes: usize) -> Self {
        Net {
            head: vec![Vec::new(); nodes],
            to: Vec::new(),
            cap: Vec::new(),
            orig: Vec::new(),
            eps: 0.0,
        }
    }

    pub fn nodes(&self) -> usize {
        self.head.len()
    }

    /// Adds a directed edge; returns its index (for [`Net::set_cap`]).
    pub fn add_edge(&mut self, u: usize, v: usize, c: f64) -> usize {
        let e = self.to.len();
        self.head[u].push(e as u32);
        self.to.push(v as u32);
        self.cap.push(c);
        self.orig.push(c);
        self.head[v].push(e as u32 + 1);
        self.to.push(u as u32);
        self.cap.push(0.0);
        self.orig.push(0.0);
        self.eps = self.eps.max(c * 1e-12);
        e
    }

    /// Changes an edge's capacity (takes effect at the next [`Net::max_flow`]).
    pub fn set_cap(&mut self, e: usize, c: f64) {
        self.orig[e] = c;
        self.eps = self.eps.max(c * 1e-12);
    }

    /// The largest flow from `s` to `t`, starting from zero flow.
    pub fn max_flow(&mut self, s: usize, t: usize) -> f64 {
        self.cap.copy_from_slice(&self.orig);
        if s == t {
            return f64::INFINITY;
        }
        let n = self.nodes();
        let mut level = vec![u32::MAX; n];
        let mut it = vec![0usize; n];
        let mut total = 0.0;
        while self.levels(s, t, &mut level) {
            it.iter_mut().for_each(|x| *x = 0);
            loop {
                let f = self.push(s, t, f64::INFINITY, &level, &mut it);
                if f <= self.eps {
                    break;
                }
                total += f;
            }
        }
        total
    }

    fn levels(&self, s: usize, t: usize, level: &mut [u32]) -> bool {
        level.iter_mut().for_each(|x| *x = u32::MAX);
        level[s] = 0;
        let mut q = std::collections::VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for &e in &self.head[u] {
                let v = self.to[e as usize] as usize;
                if self.cap[e as usize] > self.eps && level[v] == u32::MAX {
                    level[v] = level[u] + 1;
                    q.push_back(v);
                }
            }
        }
        level[t] != u32::MAX
    }

    /// One augmenting path in the level graph, iteratively (deep graphs must not overflow the
    /// stack): returns the amount pushed.
    fn push(&mut self, s: usize, t: usize, limit: f64, level: &[u32], it: &mut [usize]) -> f64 {
        let mut path: Vec<u32> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let f = path
                    .iter()
                    .map(|&e| self.cap[e as usize])
                    .fold(limit, f64::min);
                for &e in &path {
                    self.cap[e as usize] -= f;
                    self.cap[e as usize ^ 1] += f;
                }
                return f;
            }
            let mut advanced = false;
            while it[u] < self.head[u].len() {
                let e = self.head[u][it[u]];
                let v = self.to[e as usize] as usize;
                if self.cap[e as usize] > self.eps && level[v] == level[u] + 1 {
                    path.push(e);
                    u = v;
                    advanced = true;
                    break;
                }
                it[u] += 1;
            }
            if !advanced {
                // Dead end: retreat and skip the edge that led here.
                match path.pop() {
                    None => return 0.0,
                    Some(e) => {
                        u = self.to[e as usize ^ 1] as usize;
                        it[u] += 1;
                    }
                }
            }
        }
    }

    /// After [`Net::max_flow`]: the nodes still reachable from `s` in the residual graph (the
    /// source side of a minimum cut).
    pub fn source_side(&self, s: usize) -> Vec<bool> {
        let mut seen = vec![false; self.nodes()];
        seen[s] = true;
        let mut stack = vec![s];
        while let Some(u) = stack.pop() {
            for &e in &self.head[u] {
                let v = self.to[e as usize] as usize;
                if self.cap[e as usize] > self.eps && !seen[v] {
                    seen[v] = true;
                    stack.push(v);
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_example() {
        // CLRS figure 26.1: max flow 23.
        let mut n = Net::new(6);
        for (u, v, c) in [
            (0, 1, 16.0),
            (0, 2, 13.0),
            (2, 1, 4.0),
            (1, 3, 12.0),
            (3, 2, 9.0),
            (2, 4, 14.0),
            (4, 3, 7.0),
            (3, 5, 20.0),
            (4, 5, 4.0),
        ] {
            n.add_edge(u, v, c);
        }
        assert!((n.max_flow(0, 5) - 23.0).abs() < 1e-9);
        let side = n.source_side(0);
        assert!(side[0] && !side[5]);
        // Run twice: the flow restarts from zero.
        assert!((n.max_flow(0, 5) - 23.0).abs() < 1e-9);
        assert!((n.max_flow(5, 0)).abs() < 1e-9);
    }
}
