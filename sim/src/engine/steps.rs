//! A program's steps: preparing its current op, claiming it once it can start, starting the
//! step as a flow, and handing off its data and credit when it is done.

use super::work::StepWork;
use super::*;

impl Engine<'_> {
    /// Sets `nsub`/`payload` for the program's current op.
    pub(super) fn prepare_op(&mut self, p: u32) {
        let pr = &self.progs[p as usize];
        if pr.pc >= pr.total {
            return;
        }
        let len = pr.ops.len() as u64;
        let (iter, e) = (pr.pc / len, (pr.pc % len) as usize);
        let op = pr.ops[e].clone();
        let payload = self.op_payload(&op, iter);
        // The SM executor moves a message as one load, not in hand-off steps.
        let nsub = if self.exec.is_some() || self.exec_ce.is_some() {
            1
        } else if op.kind.sends() || op.kind.receives() {
            let pp = self.cfg.proto(self.s.protocol);
            let steps = payload.div_ceil(pp.step_bytes.max(1));
            steps
                .max(pp.min_steps_for(self.s) as u64)
                .min(payload.max(1)) as u32
        } else {
            1
        };
        let pr = &mut self.progs[p as usize];
        pr.payload = payload;
        pr.nsub = nsub;
        pr.sub = 0;
    }

    pub(super) fn try_start(&mut self, p: u32) {
        let Some((e, cin, cout)) = self.claim(p) else {
            return;
        };
        let pr = &self.progs[p as usize];
        let op = pr.ops[e].clone();
        let (sub, nsub, payload, rank) = (pr.sub, pr.nsub, pr.payload, pr.rank);
        let bytes = payload / nsub as u64 + u64::from((sub as u64) < payload % nsub as u64);
        let w = if let Some(x) = self.exec {
            self.exec_work(x, &op, cout, bytes, payload, rank)
        } else if let Some(co) = cout {
            self.send_work(&op, co, bytes, rank)
        } else {
            self.local_work(&op, cin, bytes, rank)
        };
        self.start_flow(p, w);
    }

    /// Takes the op at `p`'s program counter if it can start now (its dependencies done, its
    /// incoming message arrived, a slot free for its outgoing one), and claims its connections:
    /// (op index, incoming connection, outgoing connection).
    fn claim(&mut self, p: u32) -> Option<(usize, Option<u32>, Option<u32>)> {
        let pr = &self.progs[p as usize];
        if pr.busy || pr.pc >= pr.total {
            return None;
        }
        let len = pr.ops.len() as u64;
        let (iter, e) = (pr.pc / len, (pr.pc % len) as usize);
        let op = &pr.ops[e];
        let (cin, cout) = pr.conns[e];
        if pr.sub == 0 {
            let first = (pr.rank * self.s.channels) as usize;
            for d in &op.deps {
                let other = &self.progs[first + d.channel as usize];
                let need =
                    iter * other.ops.len() as u64 + other.last_copy[d.index as usize] as u64 + 1;
                if other.pc < need {
                    return None;
                }
            }
        }
        if let Some(ci) = cin {
            let c = &self.conns[ci as usize];
            if c.arrived <= c.recv_next {
                return None;
            }
        }
        if let Some(co) = cout {
            // A message holds one slot (IR semantics) from its first step until the receiver
            // has consumed its last step; its steps stream without further slot checks.
            let c = &self.conns[co as usize];
            if pr.sub == 0 && c.msgs_started >= c.credits + self.s.slots as u64 {
                return None;
            }
        }
        // Start the step.
        if let Some(ci) = cin {
            self.conns[ci as usize].recv_next += 1;
        }
        if let Some(co) = cout {
            if pr.sub == 0 {
                self.conns[co as usize].msgs_started += 1;
            }
        }
        Some((e, cin, cout))
    }

    /// Starts `p`'s step as a flow of `w` (or, with nothing to move, finishes it after its
    /// overhead).
    fn start_flow(&mut self, p: u32, w: StepWork) {
        let StepWork {
            volume,
            demand,
            unmetered,
            overhead_us,
        } = w;
        let overhead_ps = (overhead_us * self.jitter() * PS_PER_US).round() as u64;
        let now = self.now;
        let pr = &mut self.progs[p as usize];
        pr.busy = true;
        pr.step_start = now;
        if volume <= 0.0 {
            self.push(now + overhead_ps, Ev::StepDone(p));
            return;
        }
        // Incremental start: everything runs at its cap and this flow's cap fits too.
        let fits = self.all_at_cap
            && !self.dirty
            && demand.cap.is_finite()
            && demand.res.iter().all(|&(r, w)| {
                self.usage[r as usize] + demand.cap * w <= self.caps[r as usize] * (1.0 + 1e-9)
            });
        // Otherwise the flow waits for the next recomputation (at most one quantum when
        // quantised). Starting it early is optimistic against exact sharing: a provisional
        // equal share by 12% on congested fabrics; its cap, where that fits in what its route
        // has left, by 13-17% on 8-GPU NVSwitch rings (LL128, 1 GiB), the flows it overtakes
        // not getting the capacity freed since the last recomputation.
        let rate = if fits { demand.cap } else { 0.0 };
        if fits {
            for &(r, w) in &demand.res {
                self.usage[r as usize] += rate * w;
            }
        }
        let flow = Flow {
            prog: p,
            remaining: volume,
            since: now,
            volume,
            rate,
            demand,
            unmetered,
            overhead_ps,
        };
        let id = match self.free_flows.pop() {
            Some(id) => {
                self.flows[id as usize] = Some(flow);
                id
            }
            None => {
                self.flows.push(Some(flow));
                self.epoch.push(0);
                self.flows.len() as u32 - 1
            }
        };
        let pos = self.active.partition_point(|&x| x < id);
        self.active.insert(pos, id);
        if fits {
            let t = now + (volume / rate * PS_PER_US).ceil() as u64;
            let e = self.epoch[id as usize];
            self.push(t, Ev::FlowDone(id, e));
            self.sample();
        } else {
            self.dirty = true;
        }
    }

    pub(super) fn step_done(&mut self, p: u32) {
        let pr = &self.progs[p as usize];
        let len = pr.ops.len() as u64;
        let e = (pr.pc % len) as usize;
        let (cin, cout) = pr.conns[e];
        // The executor's only hand-off is the data (or its flag) crossing the route.
        let proto_hop = if self.exec.is_some() || self.exec_ce.is_some() {
            0.0
        } else {
            self.cfg.proto(self.s.protocol).hop_us
        };
        if let Some(tr) = self.trace.as_mut() {
            tr.steps.push(TraceStep {
                rank: pr.rank,
                channel: pr.ch,
                kind: pr.ops[e].kind,
                op: e as u32,
                iter: (pr.pc / len) as u32,
                sub: pr.sub,
                start_ps: pr.step_start,
                end_ps: self.now,
            });
        }
        let last_step = pr.sub + 1 >= pr.nsub;
        if let (Some(ci), true) = (cin, last_step) {
            let lat = self.routes[self.conns[ci as usize].route as usize].lat_us;
            let t = self.now + ((lat + proto_hop) * PS_PER_US).round() as u64;
            self.push(t, Ev::Credit(ci));
        }
        if let Some(co) = cout {
            let lat = self.routes[self.conns[co as usize].route as usize].lat_us;
            let t = self.now + ((lat + proto_hop) * PS_PER_US).round() as u64;
            self.push(t, Ev::Arrive(co));
        }
        let now = self.now;
        self.steps += 1;
        let pr = &mut self.progs[p as usize];
        pr.busy = false;
        pr.sub += 1;
        pr.finish = now;
        let mut op_done = false;
        if pr.sub >= pr.nsub {
            pr.pc += 1;
            op_done = true;
        }
        let (rank, nch) = (pr.rank, self.s.channels);
        if op_done {
            self.prepare_op(p);
        }
        self.try_start(p);
        if op_done && nch > 1 {
            let first = rank * nch;
            for q in first..first + nch {
                if q != p {
                    self.try_start(q);
                }
            }
        }
        let _ = self.iters;
    }
}
