//! Bandwidth sharing: weighted max-min fairness by progressive filling.
//!
//! Each flow crosses resources (directional links, a GPU's memory, a copy engine) with a weight
//! (bytes it puts on that resource per byte it moves) and may have its own rate cap (a channel's
//! thread block cannot push more than `channel_gbps`). All unfrozen flows grow at the same rate
//! until a resource saturates or a flow reaches its cap; those flows freeze and the rest keep
//! growing. The result is the unique weighted max-min fair allocation, recomputed whenever the
//! set of active flows changes.

use std::collections::BinaryHeap;

/// One flow's demand, as seen by the allocator.
#[derive(Clone, Debug)]
pub struct Demand {
    /// (resource index, weight)
    pub res: Vec<(u32, f64)>,
    /// Rate cap in bytes/µs (f64::INFINITY: none).
    pub cap: f64,
}

/// Scratch space reused across allocations (keeps recomputation allocation-free).
#[derive(Default)]
pub struct Allocator {
    rem: Vec<f64>,
    wsum: Vec<f64>,
    touched: Vec<u32>,
    frozen: Vec<bool>,
    // Heap algorithm scratch: per resource version and CSR adjacency (resource -> flows).
    version: Vec<u32>,
    start: Vec<u32>,
    adj: Vec<(u32, f64)>,
    order: Vec<u32>,
}

/// Min-heap entry: (level, resource, version) ordered by level then resource.
#[derive(PartialEq)]
struct Level(f64, u32, u32);
impl Eq for Level {}
impl PartialOrd for Level {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Level {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// Rate given to a flow with no resource and no cap (a zero-cost local step).
pub const UNBOUNDED: f64 = 1e12;

impl Allocator {
    /// Fast path: every flow capped and all caps fit together; then every flow runs at its cap.
    fn all_caps_fit<'a, I>(&mut self, caps: &[f64], flows: &I, n: usize, rates: &mut [f64]) -> bool
    where
        I: Fn(usize) -> &'a Demand,
    {
        let mut fits = true;
        for i in 0..n {
            if !flows(i).cap.is_finite() {
                fits = false;
                break;
            }
        }
        if fits {
            for &r in &self.touched {
                self.rem[r as usize] = 0.0;
            }
            for i in 0..n {
                let f = flows(i);
                for &(r, w) in &f.res {
                    self.rem[r as usize] += w * f.cap;
                }
            }
            fits = self
                .touched
                .iter()
                .all(|&r| self.rem[r as usize] <= caps[r as usize]);
            if fits {
                for (i, rate) in rates.iter_mut().enumerate() {
                    *rate = flows(i).cap;
                }
                return true;
            }
            for &r in &self.touched {
                self.rem[r as usize] = caps[r as usize];
            }
        }
        false
    }

    /// The flows crossing each resource, by resource (CSR: `start`, `adj`).
    fn build_csr<'a, I>(&mut self, flows: &I, n: usize, nr: usize)
    where
        I: Fn(usize) -> &'a Demand,
    {
        for k in 1..=nr {
            self.start[k] += self.start[k - 1];
        }
        self.adj.clear();
        self.adj.resize(self.start[nr] as usize, (0, 0.0));
        {
            let mut fill = self.start.clone();
            for i in 0..n {
                for &(r, w) in &flows(i).res {
                    let at = &mut fill[r as usize];
                    self.adj[*at as usize] = (i as u32, w);
                    *at += 1;
                }
            }
        }
    }

    /// Fills `rates` (bytes/µs) for `flows` given resource capacities `caps` (bytes/µs): the
    /// weighted max-min fair allocation, by bottleneck order. All unfrozen flows share one level
    /// `L`; resource `r` saturates at `L_r = (cap_r − frozen use_r) / Σ unfrozen weights_r`; the
    /// smallest `L_r` or flow cap freezes its flows next, updating the levels of the resources
    /// they cross (a lazy heap). Cost O(E log R) for E flow-resource pairs.
    pub fn allocate_heap<'a, I>(&mut self, caps: &[f64], flows: I, n: usize, rates: &mut Vec<f64>)
    where
        I: Fn(usize) -> &'a Demand,
    {
        rates.clear();
        rates.resize(n, 0.0);
        let nr = caps.len();
        self.count_weights(caps, &flows, n, nr);
        if self.all_caps_fit(caps, &flows, n, rates) {
            return;
        }
        self.build_csr(&flows, n, nr);
        let mut heap = self.heap_start(&flows, n);
        self.fill_by_levels(&flows, n, rates, &mut heap);
    }

    /// Each resource's capacity left and summed weight, and how many flows cross it (the CSR
    /// counts [`Allocator::build_csr`] sums); the resources touched.
    fn count_weights<'a, I>(&mut self, caps: &[f64], flows: &I, n: usize, nr: usize)
    where
        I: Fn(usize) -> &'a Demand,
    {
        if self.rem.len() < nr {
            self.rem.resize(nr, 0.0);
            self.wsum.resize(nr, 0.0);
            self.version.resize(nr, 0);
        }
        self.start.clear();
        self.start.resize(nr + 1, 0);
        self.touched.clear();
        // Weights and adjacency (CSR by resource).
        for i in 0..n {
            for &(r, w) in &flows(i).res {
                if self.start[r as usize + 1] == 0 {
                    self.touched.push(r);
                    self.rem[r as usize] = caps[r as usize];
                    self.wsum[r as usize] = 0.0;
                }
                self.start[r as usize + 1] += 1;
                self.wsum[r as usize] += w;
            }
        }
    }

    /// Unfreezes the flows, orders them by cap and starts the heap of resource levels.
    fn heap_start<'a, I>(&mut self, flows: &I, n: usize) -> BinaryHeap<Level>
    where
        I: Fn(usize) -> &'a Demand,
    {
        self.frozen.clear();
        self.frozen.resize(n, false);
        // Flows by cap, ascending (ties by index: deterministic).
        self.order.clear();
        self.order.extend(0..n as u32);
        self.order.sort_by(|&a, &b| {
            flows(a as usize)
                .cap
                .total_cmp(&flows(b as usize).cap)
                .then(a.cmp(&b))
        });
        let mut heap = BinaryHeap::new();
        for &r in &self.touched {
            self.version[r as usize] = 0;
            let w = self.wsum[r as usize];
            if w > 0.0 {
                heap.push(Level(self.rem[r as usize].max(0.0) / w, r, 0));
            }
        }
        heap
    }

    /// Freezes flows bottleneck by bottleneck, the lower of the next flow cap and the next
    /// resource level first, until none is live.
    fn fill_by_levels<'a, I>(
        &mut self,
        flows: &I,
        n: usize,
        rates: &mut [f64],
        heap: &mut BinaryHeap<Level>,
    ) where
        I: Fn(usize) -> &'a Demand,
    {
        let mut live = n;
        let mut next_cap = 0usize;
        let mut level = 0.0f64;
        while live > 0 {
            while next_cap < n && self.frozen[self.order[next_cap] as usize] {
                next_cap += 1;
            }
            let cap_level = if next_cap < n {
                flows(self.order[next_cap] as usize).cap
            } else {
                f64::INFINITY
            };
            // Top of the heap, skipping stale entries.
            let mut res_level = f64::INFINITY;
            while let Some(Level(l, r, v)) = heap.peek() {
                if *v != self.version[*r as usize] || self.wsum[*r as usize] <= 0.0 {
                    heap.pop();
                    continue;
                }
                res_level = *l;
                break;
            }
            if !cap_level.is_finite() && !res_level.is_finite() {
                // Flows with neither a cap nor a resource.
                for i in 0..n {
                    if !self.frozen[i] {
                        rates[i] = UNBOUNDED;
                    }
                }
                break;
            }
            let mut to_freeze: Vec<u32> = Vec::new();
            if cap_level <= res_level {
                level = level.max(cap_level);
                to_freeze.push(self.order[next_cap]);
            } else {
                let Some(Level(_, r, _)) = heap.pop() else {
                    break;
                };
                level = level.max(res_level);
                let (a, b) = (self.start[r as usize], self.start[r as usize + 1]);
                for k in a..b {
                    let f = self.adj[k as usize].0;
                    if !self.frozen[f as usize] {
                        to_freeze.push(f);
                    }
                }
                // The resource is full: nothing else may grow through it.
                self.wsum[r as usize] = 0.0;
            }
            for f in to_freeze {
                if !self.frozen[f as usize] {
                    live -= 1;
                    self.freeze(f, level, flows, rates, heap);
                }
            }
        }
    }

    /// Freezes flow `f` at `level`: what it uses leaves its resources, whose levels rise.
    fn freeze<'a, I>(
        &mut self,
        f: u32,
        level: f64,
        flows: &I,
        rates: &mut [f64],
        heap: &mut std::collections::BinaryHeap<Level>,
    ) where
        I: Fn(usize) -> &'a Demand,
    {
        self.frozen[f as usize] = true;
        rates[f as usize] = level;
        for &(r, w) in &flows(f as usize).res {
            let ri = r as usize;
            self.rem[ri] -= level * w;
            if self.wsum[ri] > 0.0 {
                self.wsum[ri] -= w;
                self.version[ri] += 1;
                if self.wsum[ri] > 1e-12 {
                    let l = (self.rem[ri].max(0.0) / self.wsum[ri]).max(level);
                    heap.push(Level(l, r, self.version[ri]));
                } else {
                    self.wsum[ri] = 0.0;
                }
            }
        }
    }

    /// Freezes every live flow at its cap or crossing a full resource; how many it froze.
    fn freeze_full<'a, I>(&mut self, caps: &[f64], flows: &I, n: usize, rates: &[f64]) -> usize
    where
        I: Fn(usize) -> &'a Demand,
    {
        let mut frozen = 0;
        for i in 0..n {
            if self.frozen[i] {
                continue;
            }
            let f = flows(i);
            let at_cap = rates[i] >= f.cap * (1.0 - 1e-12);
            let saturated = f
                .res
                .iter()
                .any(|&(r, w)| w > 0.0 && self.rem[r as usize] <= caps[r as usize] * 1e-12);
            if at_cap || saturated {
                self.frozen[i] = true;
                frozen += 1;
            }
        }
        frozen
    }

    /// Progressive filling in rounds over all flows (each round freezes one bottleneck level);
    /// with the few levels real topologies have this beats [`Allocator::allocate_heap`], which
    /// it is tested against.
    pub fn allocate<'a, I>(&mut self, caps: &[f64], flows: I, n: usize, rates: &mut Vec<f64>)
    where
        I: Fn(usize) -> &'a Demand,
    {
        rates.clear();
        rates.resize(n, 0.0);
        if self.rem.len() < caps.len() {
            self.rem.resize(caps.len(), 0.0);
            self.wsum.resize(caps.len(), 0.0);
        }
        self.touched.clear();
        for i in 0..n {
            for &(r, _) in &flows(i).res {
                if self.wsum[r as usize] >= 0.0 {
                    self.rem[r as usize] = caps[r as usize];
                    self.wsum[r as usize] = -1.0; // mark touched
                    self.touched.push(r);
                }
            }
        }
        // Fast path: when every flow is capped and all caps fit, every flow runs at its cap.
        let mut fits = true;
        for &r in &self.touched {
            self.wsum[r as usize] = 0.0;
        }
        for i in 0..n {
            let f = flows(i);
            if !f.cap.is_finite() {
                fits = false;
                break;
            }
            for &(r, w) in &f.res {
                self.wsum[r as usize] += w * f.cap;
            }
        }
        if fits
            && self
                .touched
                .iter()
                .all(|&r| self.wsum[r as usize] <= caps[r as usize])
        {
            for i in 0..n {
                rates[i] = flows(i).cap;
            }
            for &r in &self.touched {
                self.wsum[r as usize] = 0.0;
            }
            return;
        }
        self.frozen.clear();
        self.frozen.resize(n, false);
        let mut live = n;
        while live > 0 {
            for &r in &self.touched {
                self.wsum[r as usize] = 0.0;
            }
            for i in 0..n {
                if !self.frozen[i] {
                    for &(r, w) in &flows(i).res {
                        self.wsum[r as usize] += w;
                    }
                }
            }
            let mut delta = f64::INFINITY;
            for &r in &self.touched {
                let w = self.wsum[r as usize];
                if w > 0.0 {
                    delta = delta.min(self.rem[r as usize].max(0.0) / w);
                }
            }
            for i in 0..n {
                if !self.frozen[i] {
                    delta = delta.min(flows(i).cap - rates[i]);
                }
            }
            if !delta.is_finite() {
                for i in 0..n {
                    if !self.frozen[i] {
                        rates[i] = UNBOUNDED;
                    }
                }
                break;
            }
            let delta = delta.max(0.0);
            for i in 0..n {
                if !self.frozen[i] {
                    rates[i] += delta;
                    for &(r, w) in &flows(i).res {
                        self.rem[r as usize] -= delta * w;
                    }
                }
            }
            live -= self.freeze_full(caps, &flows, n, rates);
        }
        for &r in &self.touched {
            self.wsum[r as usize] = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_allocation_equals_progressive_filling() {
        // Random instances (seeded): both algorithms give the same max-min allocation.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..300 {
            let nr = 1 + rnd(8) as usize;
            let caps: Vec<f64> = (0..nr).map(|_| 1.0 + rnd(100) as f64).collect();
            let n = 1 + rnd(12) as usize;
            let f: Vec<Demand> = (0..n)
                .map(|_| {
                    let k = rnd(4) as usize;
                    let mut res: Vec<(u32, f64)> = Vec::new();
                    for _ in 0..k {
                        let r = rnd(nr as u64) as u32;
                        if res.iter().all(|x| x.0 != r) {
                            res.push((r, [0.5, 1.0, 2.0][rnd(3) as usize]));
                        }
                    }
                    let cap = if rnd(3) == 0 {
                        f64::INFINITY
                    } else {
                        1.0 + rnd(50) as f64
                    };
                    Demand { res, cap }
                })
                .collect();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            Allocator::default().allocate_heap(&caps, |i| &f[i], n, &mut a);
            Allocator::default().allocate(&caps, |i| &f[i], n, &mut b);
            for i in 0..n {
                let tol = 1e-6 * b[i].abs().max(1.0);
                assert!(
                    (a[i] - b[i]).abs() <= tol,
                    "case {case} flow {i}: {a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn max_min_shares_bottleneck_and_gives_rest_to_others() {
        // Two flows share link 0 (cap 10); flow 1 also crosses link 1 (cap 2).
        let caps = vec![10.0, 2.0];
        let f = [
            Demand {
                res: vec![(0, 1.0)],
                cap: f64::INFINITY,
            },
            Demand {
                res: vec![(0, 1.0), (1, 1.0)],
                cap: f64::INFINITY,
            },
        ];
        let mut a = Allocator::default();
        let mut rates = Vec::new();
        a.allocate(&caps, |i| &f[i], 2, &mut rates);
        assert!((rates[1] - 2.0).abs() < 1e-9, "{rates:?}");
        assert!((rates[0] - 8.0).abs() < 1e-9, "{rates:?}");
    }

    #[test]
    fn caps_and_weights_are_honoured() {
        let caps = vec![12.0];
        let f = [
            Demand {
                res: vec![(0, 2.0)],
                cap: f64::INFINITY,
            },
            Demand {
                res: vec![(0, 1.0)],
                cap: 1.0,
            },
        ];
        let mut a = Allocator::default();
        let mut rates = Vec::new();
        a.allocate(&caps, |i| &f[i], 2, &mut rates);
        assert!((rates[1] - 1.0).abs() < 1e-9);
        assert!((rates[0] - 5.5).abs() < 1e-9, "{rates:?}");
    }
}
