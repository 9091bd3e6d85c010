//! The families that run along chains: rings, hierarchical rings, trees and packed trees.

use super::Cands;
use super::Vars;
use crate::tuner::chain_costs::{
    chain_fill, engine_path, engine_ramp, ll128_channel, ll_bus, ll_channel, lockstep_us, messages,
    ring_message_steps, ring_share, ring_steps_us, rooted_steps_us, set_share, simple_channel,
    step_costs,
};
use crate::tuner::hier_costs::{hier_path, hier_rates, hier_steps_us};
use crate::tuner::hier_ops::{hier_ops_us, rails_in_view};
use crate::tuner::packed_fill::packed_fill;
use crate::tuner::packed_paths::packed_lat;
use crate::tuner::tree_pipeline;
use crate::tuner::*;

impl Cands<'_> {
    /// Rings: every collective but all-to-all and send/recv.
    pub(super) fn ring(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            c,
            busf,
            ..
        } = self.vars();
        let Some(r) = &m.ring else { return };
        if matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
            return;
        }
        for p in Protocol::ALL {
            let nc = self.channels(&Algorithm::Ring, r, p);
            let (bus, rmp) = self.ring_bus(r, p, nc);
            let algbw = bus / busf.max(1e-9);
            // LL and LL128 calls of one-step messages (LL: within its slots): every message's
            // step as the engine runs it; LL broadcast and reduce past their slots, a tandem.
            let steps = match p {
                Protocol::Simple => None,
                _ => ring_steps_us(m, c, (kind, p), nc, bytes)
                    .or_else(|| rooted_steps_us(m, c, (kind, self.root), p, nc, bytes)),
            };
            let lat = match steps {
                Some(total) => total - bytes as f64 / 1000.0 / algbw,
                None => self.ring_lat(r, p, nc, (algbw, rmp)),
            };
            self.push(Algorithm::Ring, p, nc, lat, algbw, rmp);
        }
    }

    /// A ring call's bus bandwidth on `nc` channels in protocol `p`, GB/s, and the size ramp
    /// the bandwidth term still takes.
    fn ring_bus(&self, r: &ChannelSet, p: Protocol, nc: u32) -> (f64, f64) {
        let Vars {
            kind,
            bytes,
            c,
            n,
            llmax,
            cc,
            ni,
            ..
        } = self.vars();
        let eff = c.coll_eff[coll_idx(kind)];
        let bus = nc as f64 * r.bw_gbps * eff;
        // The size ramp is the ring pattern's (all-reduce, all-gather, reduce-scatter), where
        // it was fitted; broadcast and reduce pipeline one-step chunks, as the engine runs them.
        let ramped = nccl::ring_chunked(&Algorithm::Ring, kind);
        let rmp = if ramped { ramp(c, p, bytes) } else { 1.0 };
        let share = ring_share(&c.engine, r, nc);
        match p {
            Protocol::LL => match ll_channel(&c.engine, share) {
                Some(x) => {
                    let msgs = messages(&Algorithm::Ring, kind, p, n, nc, bytes);
                    (ll_bus(nc as f64 * x * eff, llmax, msgs), rmp)
                }
                None => (llmax.min(bus * LL_BW_FACTOR), rmp),
            },
            Protocol::LL128 => match ll128_channel(&c.engine, share, ramped.then_some(bytes)) {
                Some(x) => (nc as f64 * x * eff, 1.0),
                None => (
                    (bus * LL128_BW_FACTOR).min(nc as f64 * PER_CH_RING_LL128[cc][ni]),
                    rmp,
                ),
            },
            // Where the planner measured the rings, a channel runs as the engine runs it: at the
            // engine's channel rate, ramped with the size on the ring pattern, and no faster
            // than its share of the links it crosses (an oversubscribed fabric's uplinks, shared
            // by every ring that crosses them).
            Protocol::Simple => match (c.engine.paths.hop_gbps(nc), simple_channel(&c.engine)) {
                (Some(_), Some(rate)) => {
                    let f = engine_ramp(&c.engine, ramped.then_some(bytes));
                    (nc as f64 * (rate * f).min(share) * eff, 1.0)
                }
                (Some(_), None) => (bus.min(nc as f64 * share * eff), rmp),
                _ => (bus, rmp),
            },
        }
    }

    /// A ring call's latency on `nc` channels in protocol `p`, µs: its slowest path as the
    /// engine runs it (NCCL's latency table where the paths were not measured), a rooted
    /// chain's fill and the steps that cost more than their transfers.
    fn ring_lat(&self, r: &ChannelSet, p: Protocol, nc: u32, (algbw, rmp): (f64, f64)) -> f64 {
        let Vars {
            m,
            kind,
            bytes,
            c,
            n,
            nnodes,
            busf,
            ..
        } = self.vars();
        let (e, i) = (&c.engine, proto_idx(p));
        let terms = (e.hop_us[i], e.step_us[i]);
        // Simple's ring pattern: messages of several steps, two to a connection's slots, each
        // step its transfer at the channel's rate; a message of few bytes is cut into at most
        // its bytes' steps, an empty one into one.
        let a = Algorithm::Ring;
        let steps = match nccl::ring_chunked(&a, kind) {
            true => e.min_steps[i].max(1),
            false => 1,
        };
        let slots = nccl::slots(&a, kind, p);
        // One channel's payload rate, as the bandwidth term bills it.
        let channel_gbps = (algbw * rmp * busf.max(1e-9) / nc.max(1) as f64).max(1e-9);
        let credits = (steps > 1)
            .then(|| {
                let of = |ring: usize, pos: usize, j: usize| {
                    let at = (ring as u32, pos as u32, j as u32);
                    let (steps, payload) = ring_message_steps(e, (kind, p), (n, nc), bytes, at);
                    let x = payload as f64 / steps.max(1) as f64 / 1000.0 / channel_gbps;
                    (steps, x)
                };
                e.paths.ring_credits_us(kind, nc, terms, (of, slots))
            })
            .flatten();
        let path_steps = if credits.is_some() { steps as u64 } else { 1 };
        let path = credits.or_else(|| e.paths.ring_us(kind, self.root, nc, terms.0, terms.1));
        let lat = engine_path(c, path).unwrap_or_else(|| {
            let nsteps = match kind {
                CollectiveKind::AllReduce => 2 * (n - 1),
                _ => n - 1,
            };
            let ninter = match (nnodes, kind) {
                (1, _) => 0,
                (_, CollectiveKind::AllReduce) => 2 * (nnodes - 1),
                _ => nnodes - 1,
            };
            let intra = hw_lat(r.intra, 1, p);
            let inter = hw_lat(Hw::Net, 1, p) + m.net_lat_us;
            BASE_LAT[1][proto_idx(p)] + (nsteps - ninter) as f64 * intra + ninter as f64 * inter
        });
        lat + chain_fill(m, kind, self.root, p, bytes, r, nc, algbw)
            + step_costs(m, (kind, self.root), p, nc, bytes, path_steps).unwrap_or(0.0)
            + self.lockstep(r, p, nc)
    }

    /// What an LL or LL128 ring call's later messages cost beyond their bandwidth term, µs
    /// (`lockstep_us`): a transfer at the channel's rate (LL's paced, LL128's ramped with the
    /// size), billed at the rate the bandwidth term gives a channel.
    fn lockstep(&self, r: &ChannelSet, p: Protocol, nc: u32) -> f64 {
        let Vars {
            m,
            kind,
            bytes,
            c,
            llmax,
            ..
        } = self.vars();
        let e = &c.engine;
        let eff = c.coll_eff[coll_idx(kind)];
        let share = ring_share(e, r, nc);
        let rates = match p {
            Protocol::LL => ll_channel(e, share).map(|x| {
                let paced = llmax / nc.max(1) as f64;
                let cap = e.channel_gbps[0].min(paced * e.wire_factor[0]);
                (cap, (x * eff).min(paced))
            }),
            Protocol::LL128 => {
                let ramped = ll128_channel(e, f64::INFINITY, Some(bytes));
                let x = ll128_channel(e, share, Some(bytes));
                ramped
                    .zip(x)
                    .map(|(cap, x)| (cap * e.wire_factor[1], x * eff))
            }
            Protocol::Simple => None,
        };
        rates
            .and_then(|rates| lockstep_us(m, (kind, p), nc, bytes, rates))
            .unwrap_or(0.0)
    }

    /// Hierarchical all-reduce across hosts: ring reduce-scatter in each host, ring all-reduce
    /// of each GPU's 1/L piece across hosts on its own rail, ring all-gather in each host; phases
    /// in sequence.
    pub(super) fn hierarchical(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            c,
            nnodes,
            ppn,
            llmax,
            ..
        } = self.vars();
        let Some(r) = &m.ring else { return };
        if kind != CollectiveKind::AllReduce || nnodes < 2 || m.nic_gbps_per_gpu <= 0.0 {
            return;
        }
        let (l, h) = (ppn as f64, nnodes as f64);
        // Where the first host's rails stand for every host's, the whole call runs op by op.
        let by_ops = rails_in_view(&c.engine, ppn);
        for p in Protocol::ALL {
            let nc = self.channels(&Algorithm::Hierarchical, r, p);
            let eff = match p {
                Protocol::LL => LL_BW_FACTOR,
                Protocol::LL128 => LL128_BW_FACTOR,
                Protocol::Simple => 1.0,
            };
            // NCCL's form where the engine's rates were not measured.
            let engine = hier_rates(&c.engine, p, nc, ppn);
            let (intra_bw, inter_bw) = engine.unwrap_or((
                nc as f64 * r.bw_gbps * eff,
                (nc as f64 * r.bw_gbps).min(m.nic_gbps_per_gpu) * eff,
            ));
            // Seconds per byte of S, as an algorithm bandwidth.
            let per_byte = 2.0 * (l - 1.0) / l / intra_bw + 2.0 * (h - 1.0) / h / (l * inter_bw);
            let mut algbw = 1.0 / per_byte;
            if p == Protocol::LL && engine.is_none() {
                algbw = algbw.min(llmax);
            }
            // The whole call op by op, or one loop iteration of one-step rail messages: as the
            // engine runs them.
            let geo = (nc, ppn, nnodes);
            let steps = by_ops
                .then(|| hier_ops_us(c, p, geo, bytes))
                .flatten()
                .or_else(|| engine.and_then(|(intra, _)| hier_steps_us(c, p, geo, bytes, intra)));
            let (lat, rmp) = match steps {
                Some(total) => (total - bytes as f64 / 1000.0 / algbw, 1.0),
                None => {
                    let lat =
                        engine_path(c, hier_path(&c.engine, p, nc, ppn)).unwrap_or_else(|| {
                            BASE_LAT[1][proto_idx(p)]
                                + 2.0 * (l - 1.0) * hw_lat(r.intra, 1, p)
                                + 2.0 * (h - 1.0) * (hw_lat(Hw::Net, 1, p) + m.net_lat_us)
                        });
                    (
                        lat,
                        if engine.is_some() {
                            1.0
                        } else {
                            ramp(c, p, bytes)
                        },
                    )
                }
            };
            self.push(Algorithm::Hierarchical, p, nc, lat, algbw, rmp);
        }
    }

    /// Trees: all-reduce.
    pub(super) fn tree(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            n,
            c,
            nnodes,
            ppn,
            llmax,
            cc,
            ni,
            ..
        } = self.vars();
        // Tree: all-reduce (reduce up, broadcast down; each link carries the data once each way).
        if let Some(t) = &m.tree {
            if kind == CollectiveKind::AllReduce {
                for p in Protocol::ALL {
                    let nc = self.channels(&Algorithm::Tree, t, p);
                    // The trees measured: pipelined as the engine runs them. Otherwise (past
                    // `plan::CHAIN_PATH_RANKS`, or without the engine's terms) NCCL's form.
                    if let Some((lat, bw)) = tree_pipeline::priced(c, p, nc, bytes, llmax) {
                        self.push(Algorithm::Tree, p, nc, lat, bw, 1.0);
                        continue;
                    }
                    // One host: a chain carries the data once each way per link. Across hosts a
                    // double binary tree's interior host forwards to two children and a parent, so
                    // its NICs carry twice the data (`src/graph/trees.cc`, `ncclGetDtree`).
                    let fanout = if nnodes > 1 { 0.5 } else { 1.0 };
                    let mut bw = nc as f64 * t.bw_gbps * LL128_BW_FACTOR * fanout;
                    bw = bw.min(nc as f64 * PER_CH_TREE[cc][ni]);
                    bw = match p {
                        Protocol::LL => match ll_channel(&c.engine, set_share(t, nc)) {
                            Some(x) => ll_bus(
                                nc as f64 * x * fanout,
                                llmax,
                                messages(&Algorithm::Tree, kind, p, n, nc, bytes),
                            ),
                            None => llmax.min(bw / TREE_LL_DIVISOR),
                        },
                        Protocol::LL128 => match ll128_channel(&c.engine, set_share(t, nc), None) {
                            Some(x) => nc as f64 * x * fanout,
                            None => (bw
                                * if nnodes == 1 {
                                    TREE_LL128_INTRA
                                } else {
                                    TREE_LL128_INTER
                                })
                            .min(nc as f64 * PER_CH_TREE_LL128[cc][ni]),
                        },
                        Protocol::Simple => bw,
                    };
                    let intra = hw_lat(t.intra, 0, p);
                    let inter = hw_lat(Hw::Net, 0, p) + m.net_lat_us;
                    let lat = BASE_LAT[0][proto_idx(p)]
                        + 2.0 * ((ppn - 1) as f64 * intra + log2i(nnodes) as f64 * inter);
                    // Trees run one-step chunks: no ring ramp (as the engine).
                    self.push(Algorithm::Tree, p, nc, lat, bw, 1.0);
                }
            }
        }
    }

    /// Packed trees: the busbw their link loads allow, with the protocols' efficiencies as for
    /// rings; the latency is the trees' slowest path as the engine runs it ([`packed_lat`]).
    pub(super) fn packed(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            c,
            busf,
            llmax,
            ..
        } = self.vars();
        let Some(pk) = &m.packed else {
            return;
        };
        let bus = match kind {
            CollectiveKind::AllGather => pk.ag_busbw_gbps,
            CollectiveKind::ReduceScatter => pk.rs_busbw_gbps,
            CollectiveKind::AllReduce => pk.ar_busbw_gbps,
            _ => 0.0,
        };
        for p in Protocol::ALL {
            let b = bus * c.coll_eff[coll_idx(kind)];
            let b = match p {
                Protocol::LL => llmax.min(b * 0.5),
                Protocol::LL128 => b * 0.92,
                Protocol::Simple => b,
            };
            let (algbw, rmp) = (b / busf.max(1e-9), ramp(c, p, bytes));
            // A call of few ops as the engine runs it (`tree_pipeline::packed_us`); otherwise
            // the packing's bound, its fill and its slowest path.
            let by_ops = tree_pipeline::packed_us(c, pk, kind, p, bytes)
                .and_then(|us| engine_path(c, Some(us)));
            let lat = match by_ops {
                Some(us) => us - bytes as f64 / 1000.0 / (algbw * rmp),
                None => {
                    packed_lat(pk, &c.engine, c.launch_us, kind, p)
                        + packed_fill(pk, &c.engine, kind, p, bytes, algbw * rmp)
                }
            };
            self.push(Algorithm::Packed, p, pk.trees, lat, algbw, rmp);
        }
    }
}
