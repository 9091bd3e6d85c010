//! Bandwidth sharing: weighted max-min fairness by progressive filling.
//!
//! Each flow crosses resources (directional links, a GPU's memory, a copy engine) with a weight
//! (bytes it puts on that resource per byte it moves) and may have its own rate cap (a channel's
//! thread block cannot push more than `channel_gbps`). All unfrozen flows grow at the same rate
//! until a resource saturates or a flow reaches its cap; those flows freeze and the rest keep
//! growing. The result is the unique weighted max-min fair allocation, recomputed whenever the
//! set of active flows changes.

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
}

/// Rate given to a flow with no resource and no cap (a zero-cost local step).
pub const UNBOUNDED: f64 = 1e12;

impl Allocator {
    /// Fills `rates` (bytes/µs) for `flows` given resource capacities `caps` (bytes/µs).
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
                    live -= 1;
                }
            }
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
