//! What one step moves and what limits it: the executor's steps, an NCCL-style schedule's
//! sending steps, and steps that only touch local memory.

use super::*;

/// What one step moves and what limits it.
pub(super) struct StepWork {
    pub(super) volume: f64,
    pub(super) demand: Demand,
    pub(super) unmetered: Vec<(u32, f64)>,
    pub(super) overhead_us: f64,
}

impl Engine<'_> {
    /// A step of topoplan's executor: the receiver's CTAs load the message and fold it in
    /// registers, so the transfer is the only cost; receives, copies and reductions are fused
    /// into it. (Push: the sender's CTAs store it into the receiver's slots; pull: the
    /// receiver's CTAs read the sender's input; hybrid: both, the SM path and the copy engines on
    /// disjoint ranges. Either way one flow over the route, timed at the mode's rate.)
    pub(super) fn exec_work(
        &self,
        x: &ExecParams,
        op: &Op,
        cout: Option<u32>,
        bytes: u64,
        payload: u64,
        rank: u32,
    ) -> StepWork {
        let mut demand = Demand {
            res: Vec::new(),
            cap: f64::INFINITY,
        };
        let mut unmetered = Vec::new();
        let mut overhead_us = 0.0;
        let mem = self.mem[rank as usize];
        // The receiver's CTAs load the message and fold it in registers: the transfer is the
        // only cost; receives, copies and reductions are fused into it. (Push: the sender's
        // CTAs store it into the receiver's slots; pull: the receiver's CTAs read the
        // sender's input; hybrid: both, the SM path and the copy engines on disjoint ranges.
        // Either way one flow over the route, timed at the mode's rate.)
        let volume = match cout {
            Some(_) => bytes as f64 * x.wire_factor(self.s.protocol),
            None => 0.0,
        };
        if let Some(co) = cout {
            let wire = x.wire_factor(self.s.protocol);
            let route = &self.routes[self.conns[co as usize].route as usize];
            let peer = op.send_to.expect("sending op has a peer");
            let on_route = route.res.iter().map(|&r| (r, 1.0));
            if self.hybrid {
                // Its fitted rate is above the link as loaded (SM traffic's figure): the
                // links carry its bytes but do not cap it (`ExecParams` docs).
                unmetered.extend(on_route);
            } else {
                demand.res.extend(on_route);
            }
            demand.res.push((mem, 1.0 / wire));
            demand.res.push((self.mem[peer as usize], 1.0 / wire));
            demand.cap = if self.hybrid {
                // Unmetered by the links, but never above `hybrid_link_factor` times the
                // slowest of them (so slower or failed links slow it down).
                let link = route
                    .res
                    .iter()
                    .map(|&r| self.caps[r as usize])
                    .fold(f64::INFINITY, f64::min);
                let by_link = x.hybrid_link_factor * link / self.s.channels.max(1) as f64;
                x.hybrid_channel_cap(self.s.channels).min(by_link)
            } else if self.pull {
                x.pull_channel_cap(self.s.channels)
            } else {
                x.channel_cap(self.s.protocol, payload, self.send_channels)
            };
            if route.network {
                overhead_us += self.cfg.net_step_us;
            }
        }
        StepWork {
            volume,
            demand,
            unmetered,
            overhead_us,
        }
    }

    /// A sending step of an NCCL-style schedule: the route's links, both GPUs' memory, the
    /// channel's cap (LL paced once its slots are full), a copy engine where the op uses one.
    pub(super) fn send_work(&self, op: &Op, co: u32, bytes: u64, rank: u32) -> StepWork {
        let proto = self.cfg.proto(self.s.protocol);
        let mut demand = Demand {
            res: Vec::new(),
            cap: f64::INFINITY,
        };
        let mut overhead_us = 0.0;
        let mem = self.mem[rank as usize];
        let local_touches = self.cfg.local_touches(op.kind);
        let wire = proto.wire_factor;
        let volume = bytes as f64 * wire;
        let route = &self.routes[self.conns[co as usize].route as usize];
        let peer = op.send_to.expect("sending op has a peer");
        let ce = op.transport == Transport::CopyEngine;
        let link_w = if ce {
            self.cfg.sm_link_efficiency / self.cfg.ce_link_efficiency
        } else {
            1.0
        };
        demand.res.extend(route.res.iter().map(|&r| (r, link_w)));
        demand.res.push((mem, local_touches as f64 / wire));
        demand.res.push((self.mem[peer as usize], 1.0 / wire));
        if ce {
            demand.res.push((self.ce[rank as usize], 1.0));
            overhead_us += self.cfg.ce_setup_us;
            if let Some(x) = self.exec_ce {
                demand.cap = x.ce_gbps * 1e3;
            }
        } else {
            demand.cap = self.cfg.channel_caps(self.s).0;
            // LL past its slots: the receiver's consumption paces the sender.
            if let (Protocol::LL, Some(steady)) = (self.s.protocol, self.cfg.ll_steady_gbps) {
                if self.conns[co as usize].msgs_started > self.s.slots as u64 {
                    demand.cap = demand.cap.min(steady * 1e3);
                }
            }
            overhead_us += proto.step_us;
        }
        if route.network {
            overhead_us += self.cfg.net_step_us;
        }
        StepWork {
            volume,
            demand,
            unmetered: Vec::new(),
            overhead_us,
        }
    }

    /// A step that sends nothing: its local memory passes.
    pub(super) fn local_work(&self, op: &Op, cin: Option<u32>, bytes: u64, rank: u32) -> StepWork {
        let proto = self.cfg.proto(self.s.protocol);
        let mut demand = Demand {
            res: Vec::new(),
            cap: f64::INFINITY,
        };
        let mut overhead_us = 0.0;
        let mem = self.mem[rank as usize];
        let local_touches = self.cfg.local_touches(op.kind);
        let volume = if local_touches > 0 { bytes as f64 } else { 0.0 };
        demand.res.push((mem, local_touches as f64));
        demand.cap = self.cfg.channel_caps(self.s).1;
        // The executor's copies land in scratch themselves: a receive costs nothing.
        if cin.is_some() && self.exec_ce.is_none() {
            overhead_us += proto.step_us;
        }
        StepWork {
            volume,
            demand,
            unmetered: Vec::new(),
            overhead_us,
        }
    }
}
