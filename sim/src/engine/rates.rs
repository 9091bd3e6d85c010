//! Bandwidth sharing of the active flows: max-min recomputation (exact or quantised), the
//! incremental bookkeeping while every flow runs at its cap, flow completion, trace samples.

use super::*;

impl Engine<'_> {
    /// Records the resources' current load in the trace.
    pub(super) fn sample(&mut self) {
        if let Some(tr) = self.trace.as_mut() {
            let mut per_res: Vec<(u32, f64)> = Vec::new();
            for &id in &self.active {
                let f = self.flows[id as usize].as_ref().expect("active flow");
                for &(r, w) in f.demand.res.iter().chain(&f.unmetered) {
                    per_res.push((r, f.rate * w));
                }
            }
            tr.sample(self.now, per_res);
        }
    }

    /// Moves the clock; flows' progress is computed lazily from (remaining, since, rate).
    pub(super) fn advance(&mut self, t: u64) {
        self.now = self.now.max(t);
    }

    pub(super) fn recompute(&mut self) {
        self.dirty = false;
        self.last_recompute = self.now;
        self.recomputes += 1;
        self.recompute_flows += self.active.len() as u64;
        let now = self.now;
        for &id in &self.active {
            let f = self.flows[id as usize].as_mut().expect("active flow");
            f.remaining -= f.rate * (now - f.since) as f64 / PS_PER_US;
            f.since = now;
        }
        let flows = &self.flows;
        let active = &self.active;
        self.alloc.allocate(
            &self.caps,
            |i| {
                &flows[active[i] as usize]
                    .as_ref()
                    .expect("active flow")
                    .demand
            },
            active.len(),
            &mut self.rates,
        );
        self.all_at_cap = true;
        for u in self.usage.iter_mut() {
            *u = 0.0;
        }
        for i in 0..self.active.len() {
            let id = self.active[i];
            let f = self.flows[id as usize].as_mut().expect("active flow");
            f.rate = self.rates[i];
            self.all_at_cap &= f.rate >= f.demand.cap * (1.0 - 1e-12);
            for &(r, w) in &f.demand.res {
                self.usage[r as usize] += f.rate * w;
            }
            self.epoch[id as usize] += 1;
        }
        // Uncongested: one finish event per flow (later changes are incremental). Congested:
        // the finishes due before the next recomputation can come (the earliest one, or, while
        // sharing is quantised, those within a quantum of it) are queued, one tick at a time.
        self.tick_version += 1;
        self.finish_queue.clear();
        let mut finishes = Vec::with_capacity(if self.all_at_cap {
            0
        } else {
            self.active.len()
        });
        let mut sum_dur = 0.0;
        for i in 0..self.active.len() {
            let id = self.active[i];
            let f = self.flows[id as usize].as_ref().expect("active flow");
            let dur = (f.remaining.max(0.0) / f.rate * PS_PER_US).ceil();
            sum_dur += dur;
            let t = now.saturating_add(dur as u64);
            let e = self.epoch[id as usize];
            if self.all_at_cap {
                self.push(t, Ev::FlowDone(id, e));
            } else {
                finishes.push((t, id, e));
            }
        }
        if !self.active.is_empty() {
            let mean = sum_dur / self.active.len() as f64;
            self.quantum_dyn = self.quantum_ps.max((mean / 16.0) as u64);
        }
        if let Some(first) = finishes.iter().map(|&(t, _, _)| t).min() {
            let window = if self.quantised() {
                self.quantum_dyn
            } else {
                0
            };
            let last = first.saturating_add(window);
            finishes.retain(|&(t, _, _)| t <= last);
            // Latest first: the queue pops the earliest.
            finishes.sort_unstable_by(|a, b| b.cmp(a));
            self.finish_queue = finishes;
            let v = self.tick_version;
            self.push(first, Ev::FlowTick(v));
        }
        self.sample();
    }

    pub(super) fn finish_flow(&mut self, id: u32) {
        let f = self.flows[id as usize].take().expect("current flow event");
        self.epoch[id as usize] += 1;
        for &(r, w) in f.demand.res.iter().chain(&f.unmetered) {
            self.load_bytes[r as usize] += f.volume * w;
        }
        self.free_flows.push(id);
        let pos = self.active.partition_point(|&x| x < id);
        self.active.remove(pos);
        if self.all_at_cap && !self.dirty {
            // Capped flows keep their caps when another leaves.
            for &(r, w) in &f.demand.res {
                self.usage[r as usize] -= f.rate * w;
            }
            self.sample();
        } else {
            self.dirty = true;
        }
        let t = self.now + f.overhead_ps;
        self.push(t, Ev::StepDone(f.prog));
    }
}
