//! The tuner's candidates, one family at a time: rings, hierarchical rings, trees, direct
//! patterns on an all-NVLink host, and point-to-point elsewhere.

use super::chain_costs::{
    chain_fill, engine_path, hier_path, hier_rates, ll128_channel, ll_bus, ll_channel, messages,
    ring_share, ring_steps_us, set_share, step_costs,
};
use super::packed_fill::packed_fill;
use super::packed_paths::packed_lat;
use super::tree_pipeline;
use super::*;

/// What every family reads.
struct Vars<'a> {
    m: &'a SystemModel,
    kind: CollectiveKind,
    bytes: u64,
    c: &'a TunerParams,
    n: u32,
    b: f64,
    nnodes: u32,
    ppn: u32,
    busf: f64,
    llmax: f64,
    cc: usize,
    ni: usize,
}

/// Candidates being collected for one collective and size.
pub(super) struct Cands<'a> {
    m: &'a SystemModel,
    kind: CollectiveKind,
    /// Broadcast's and reduce's root.
    root: u32,
    bytes: u64,
    f: &'a Filter,
    pub(super) out: Vec<Estimate>,
}

impl<'a> Cands<'a> {
    pub(super) fn new(
        m: &'a SystemModel,
        kind: CollectiveKind,
        root: u32,
        bytes: u64,
        f: &'a Filter,
    ) -> Self {
        Cands {
            m,
            kind,
            root,
            bytes,
            f,
            out: Vec::new(),
        }
    }

    fn vars(&self) -> Vars<'a> {
        let m = self.m;
        let n = m.nranks.max(1);
        let nnodes = m.nnodes.max(1);
        Vars {
            m,
            kind: self.kind,
            bytes: self.bytes,
            c: &m.calib,
            n,
            b: self.bytes as f64,
            nnodes,
            ppn: n.div_ceil(nnodes),
            busf: self.kind.busbw_factor(n),
            llmax: ll_max_bw(m.sm, nnodes),
            cc: cc_idx(m.sm),
            ni: nodes_idx(nnodes),
        }
    }

    /// Adds a candidate the filter allows: launch, latency, then the bytes at `algbw × ramp`.
    fn push(
        &mut self,
        algorithm: Algorithm,
        protocol: Protocol,
        channels: u32,
        lat: f64,
        algbw: f64,
        ramp: f64,
    ) {
        let c = &self.m.calib;
        if algbw > 0.0 && self.f.allows(&algorithm, protocol) {
            self.out.push(Estimate {
                time_us: c.launch_us + lat + self.bytes as f64 / 1000.0 / (algbw * ramp),
                lat_us: c.launch_us + lat,
                algorithm,
                protocol,
                channels,
                peak_algbw_gbps: algbw,
            });
        }
    }

    /// Adds a candidate of topoplan's executor. The fitted two-GPU form (`lat`, `algbw`,
    /// `ramp`) prices one message to one peer; a rank's further messages go out one after
    /// another on its channel (program order), each at the executor's grid rate for its size
    /// (`exec_msg_us`, the engine's terms), except a one-shot reduce's, which come from
    /// different senders at once and share the root's links.
    fn push_exec(
        &mut self,
        algorithm: Algorithm,
        protocol: Protocol,
        lat: f64,
        algbw: f64,
        ramp: f64,
        link_gbps: f64,
    ) {
        let (n, b) = (self.m.nranks.max(1) as u64, self.bytes);
        let (msgs, m) = match (&algorithm, self.kind) {
            (Algorithm::TwoShot, _) => (2 * (n - 1), b / n),
            (_, CollectiveKind::SendRecv) => (1, b),
            (_, CollectiveKind::AllReduce | CollectiveKind::Broadcast) => (n - 1, b),
            (_, CollectiveKind::Reduce) => (n - 1, b),
            _ => (n - 1, b / n),
        };
        let e = &self.m.calib.engine;
        // The generic executor (all-to-all, send/recv) has no fitted two-GPU form: every
        // message is priced by the grid.
        let generic = algorithm == Algorithm::Direct && e.cta_gbps > 0.0;
        if (msgs <= 1 && !generic) || algbw <= 0.0 {
            return self.push(algorithm, protocol, 1, lat, algbw, ramp);
        }
        let next = if self.kind == CollectiveKind::Reduce && algorithm == Algorithm::OneShot {
            let wire = match protocol {
                Protocol::LL if e.ll_wire > 0.0 => e.ll_wire,
                _ => 1.0,
            };
            m as f64 * wire / 1000.0 / link_gbps.max(1e-9)
        } else {
            exec_msg_us(e, protocol, m, link_gbps)
        };
        let first = if generic {
            next
        } else {
            b as f64 / 1000.0 / (algbw * ramp) / msgs as f64
        };
        let transfer = first + (msgs - 1) as f64 * next;
        self.push(
            algorithm,
            protocol,
            1,
            lat,
            b as f64 / 1000.0 / transfer.max(1e-12),
            1.0,
        );
    }

    /// Every family in turn.
    pub(super) fn all(&mut self) {
        self.ring();
        self.hierarchical();
        self.tree();
        self.packed();
        self.direct();
        self.p2p();
    }

    /// Rings: every collective but all-to-all and send/recv.
    fn ring(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            c,
            n,
            nnodes,
            busf,
            llmax,
            cc,
            ni,
            ..
        } = self.vars();
        // Ring: every collective but all-to-all and send/recv.
        if let Some(r) = &m.ring {
            if !matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
                let nsteps = match kind {
                    CollectiveKind::AllReduce => 2 * (n - 1),
                    _ => n - 1,
                };
                let ninter = if nnodes == 1 {
                    0
                } else if kind == CollectiveKind::AllReduce {
                    2 * (nnodes - 1)
                } else {
                    nnodes - 1
                };
                for p in Protocol::ALL {
                    let nc = channels_for(m, &Algorithm::Ring, r, p, bytes);
                    let eff = c.coll_eff[coll_idx(kind)];
                    let mut bus = nc as f64 * r.bw_gbps * eff;
                    // The size ramp is the ring pattern's (all-reduce, all-gather,
                    // reduce-scatter), where it was fitted; broadcast and reduce pipeline
                    // one-step chunks, as the engine runs them.
                    let ramped = nccl::ring_chunked(&Algorithm::Ring, kind);
                    let mut rmp = if ramped { ramp(c, p, bytes) } else { 1.0 };
                    bus = match p {
                        Protocol::LL => match ll_channel(&c.engine, ring_share(&c.engine, r, nc)) {
                            Some(x) => ll_bus(
                                nc as f64 * x * eff,
                                llmax,
                                messages(&Algorithm::Ring, kind, p, n, nc, bytes),
                            ),
                            None => llmax.min(bus * LL_BW_FACTOR),
                        },
                        Protocol::LL128 => {
                            match ll128_channel(
                                &c.engine,
                                ring_share(&c.engine, r, nc),
                                ramped.then_some(bytes),
                            ) {
                                Some(x) => {
                                    rmp = 1.0;
                                    nc as f64 * x * eff
                                }
                                None => (bus * LL128_BW_FACTOR)
                                    .min(nc as f64 * PER_CH_RING_LL128[cc][ni]),
                            }
                        }
                        // A ring channel moves no faster than its share of the links it
                        // crosses where the planner measured them (an oversubscribed fabric's
                        // uplinks, shared by every ring that crosses them).
                        Protocol::Simple => match c.engine.paths.hop_gbps(nc) {
                            Some(_) => bus.min(nc as f64 * ring_share(&c.engine, r, nc) * eff),
                            None => bus,
                        },
                    };
                    let algbw = bus / busf.max(1e-9);
                    // LL128 calls of one-step messages: every message's step as the engine runs it.
                    let steps = (p == Protocol::LL128)
                        .then(|| ring_steps_us(m, c, kind, nc, bytes))
                        .flatten();
                    if let Some(total) = steps {
                        self.push(
                            Algorithm::Ring,
                            p,
                            nc,
                            total - bytes as f64 / 1000.0 / algbw,
                            algbw,
                            rmp,
                        );
                        continue;
                    }
                    let (e, i) = (&c.engine, proto_idx(p));
                    let path = e
                        .paths
                        .ring_us(kind, self.root, nc, e.hop_us[i], e.step_us[i]);
                    let lat = match engine_path(c, path) {
                        Some(x) => x,
                        None => {
                            let intra = hw_lat(r.intra, 1, p);
                            let inter = hw_lat(Hw::Net, 1, p) + m.net_lat_us;
                            BASE_LAT[1][proto_idx(p)]
                                + (nsteps - ninter) as f64 * intra
                                + ninter as f64 * inter
                        }
                    } + chain_fill(m, kind, self.root, p, bytes, r, nc, algbw)
                        + step_costs(m, kind, self.root, p, nc, bytes).unwrap_or(0.0);
                    self.push(Algorithm::Ring, p, nc, lat, algbw, rmp);
                }
            }
        }
    }

    /// Hierarchical all-reduce across hosts.
    fn hierarchical(&mut self) {
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
        // Hierarchical all-reduce: ring reduce-scatter in each host, ring all-reduce of each GPU's
        // 1/L piece across hosts on its own rail, ring all-gather in each host; phases in sequence.
        if let Some(r) = &m.ring {
            if kind == CollectiveKind::AllReduce && nnodes > 1 && m.nic_gbps_per_gpu > 0.0 {
                let (l, h) = (ppn as f64, nnodes as f64);
                for p in Protocol::ALL {
                    let nc = channels_for(m, &Algorithm::Hierarchical, r, p, bytes);
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
                    let per_byte =
                        2.0 * (l - 1.0) / l / intra_bw + 2.0 * (h - 1.0) / h / (l * inter_bw);
                    let mut algbw = 1.0 / per_byte;
                    if p == Protocol::LL && engine.is_none() {
                        algbw = algbw.min(llmax);
                    }
                    let lat =
                        engine_path(c, hier_path(&c.engine, p, nc, ppn)).unwrap_or_else(|| {
                            BASE_LAT[1][proto_idx(p)]
                                + 2.0 * (l - 1.0) * hw_lat(r.intra, 1, p)
                                + 2.0 * (h - 1.0) * (hw_lat(Hw::Net, 1, p) + m.net_lat_us)
                        });
                    self.push(
                        Algorithm::Hierarchical,
                        p,
                        nc,
                        lat,
                        algbw,
                        if engine.is_some() {
                            1.0
                        } else {
                            ramp(c, p, bytes)
                        },
                    );
                }
            }
        }
    }

    /// Trees: all-reduce.
    fn tree(&mut self) {
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
                    let nc = channels_for(m, &Algorithm::Tree, t, p, bytes);
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
    fn packed(&mut self) {
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
            let lat = packed_lat(pk, &c.engine, c.launch_us, kind, p)
                + packed_fill(pk, &c.engine, kind, p, bytes, algbw * rmp);
            self.push(Algorithm::Packed, p, pk.trees, lat, algbw, rmp);
        }
    }

    /// Direct patterns on an all-NVLink host.
    fn direct(&mut self) {
        let Vars {
            m,
            kind,
            bytes,
            c,
            n,
            llmax,
            ..
        } = self.vars();
        // Direct patterns on an all-NVLink host: what topoplan's direct-push executor measured
        // (the profile's `direct_*` terms), and its copy-engine pair all-reduce (`ce_*`).
        if let Some(gbw) = m.all_peers_nvlink_gbps {
            let peer = gbw * c.direct_peer_eff; // what the senders' stores achieve, all peers at once
            let extra = c.direct_peer_us * (n as f64 - 2.0).max(0.0);
            let nf = n as f64;
            // One-shot: every rank pushes its block to every peer; AR/RS reduce on the receiver.
            let (one_algbw, ok) = match kind {
                CollectiveKind::AllReduce => (peer / (nf - 1.0), true),
                CollectiveKind::AllGather => (peer * nf / (nf - 1.0), true),
                CollectiveKind::ReduceScatter => (peer * nf / (nf - 1.0), true),
                CollectiveKind::Broadcast => (peer / (nf - 1.0), true),
                CollectiveKind::Reduce => (peer / (nf - 1.0), true),
                CollectiveKind::AllToAll => (gbw * c.sm_peer_eff * nf / (nf - 1.0), true),
                CollectiveKind::SendRecv => (gbw * c.sm_peer_eff, true),
            };
            if ok {
                let algo = match kind {
                    CollectiveKind::AllToAll | CollectiveKind::SendRecv => Algorithm::Direct,
                    _ => Algorithm::OneShot,
                };
                for p in [Protocol::LL, Protocol::Simple] {
                    if algo == Algorithm::Direct {
                        // All-to-all and send/recv run on the generic executor: probe rates,
                        // and the executor's fixed cost of a call as the engine reads it (else
                        // an estimated flag round). Its schedule is built in Simple only
                        // (`build::direct` takes no protocol), so that is the one candidate.
                        if p == Protocol::Simple {
                            let fixed = match c.engine.exec_launch_us {
                                x if x > 0.0 => x - c.launch_us + c.engine.route_lat_us,
                                _ => c.direct_sync_us + BASE_LAT[1][2] * 0.5,
                            };
                            self.push_exec(algo.clone(), p, fixed + extra, one_algbw, 1.0, gbw);
                        }
                        continue;
                    }
                    if p == Protocol::Simple
                        && kind == CollectiveKind::AllReduce
                        && (c.pull_min_bytes..=c.pull_max_bytes).contains(&bytes)
                    {
                        // The runtime runs this one-shot in pull mode (in one process): every rank
                        // loads its peers' inputs, behind two per-CTA handshakes.
                        let bw = gbw * c.pull_eff / (nf - 1.0);
                        self.push(algo.clone(), p, 1, c.pull_lat_us + extra, bw, 1.0);
                        continue;
                    }
                    if p == Protocol::Simple
                        && n == 2
                        && kind == CollectiveKind::AllReduce
                        && bytes >= c.hybrid_min_bytes
                    {
                        // The runtime runs this one-shot as its hybrid (half on the copy engines).
                        self.push(algo.clone(), p, 1, c.hybrid_lat_us, gbw * c.hybrid_eff, 1.0);
                        continue;
                    }
                    // LL's cap bounds what one GPU sends; a collective's algorithm bandwidth is
                    // `one_algbw / peer` times that.
                    let bw = if p == Protocol::LL {
                        one_algbw * c.direct_ll_fraction.min(llmax / peer.max(1e-9))
                    } else {
                        one_algbw
                    };
                    let lat = c.direct_lat_us[proto_idx(p)] + extra;
                    self.push_exec(algo.clone(), p, lat, bw, direct_ramp(c, p, bytes), gbw);
                }
            }
            if kind == CollectiveKind::AllReduce {
                self.two_shot_and_copy_engines(gbw, peer, extra);
            }
        }
    }

    /// All-reduce's two-shot, and on two GPUs the copy-engine pair: `peer` is what the senders'
    /// stores achieve, `extra` the latency of peers beyond two.
    fn two_shot_and_copy_engines(&mut self, gbw: f64, peer: f64, extra: f64) {
        let Vars { c, n, b, bytes, .. } = self.vars();
        let nf = n as f64;
        // Two-shot: reduce-scatter then all-gather, each moving (n−1)/n of the data.
        let bw = peer * nf / (2.0 * (nf - 1.0));
        self.push_exec(
            Algorithm::TwoShot,
            Protocol::Simple,
            2.0 * (c.direct_lat_us[2] + extra),
            bw,
            direct_ramp(c, Protocol::Simple, bytes),
            gbw,
        );
        if n == 2 {
            // Chunked peer copies as the runtime cuts them: a fixed cost per chunk, the
            // last (smallest) chunk's reduce exposed.
            let ce = gbw * c.ce_eff;
            let chunks = ce_chunks(c, bytes) as f64;
            let time = chunks * c.ce_copy_overhead_us + b / 1000.0 / ce;
            let tail = bytes.min(c.ce_min_chunk_bytes) as f64 * 3.0 / 1000.0 / c.local_copy_gbps;
            self.push(
                Algorithm::CopyEnginePipeline,
                Protocol::Simple,
                2,
                c.ce_launch_us + tail,
                b / 1000.0 / time.max(1e-9),
                1.0,
            );
        }
    }

    /// Point-to-point without all-peer NVLink: the generic executor's messages over the
    /// slowest path (for all-to-all, the planner's rate with shared links counted), its fixed
    /// cost of a call as the engine reads it, the network's hop across hosts.
    fn p2p(&mut self) {
        let Vars {
            m,
            kind,
            c,
            n,
            nnodes,
            ..
        } = self.vars();
        if m.all_peers_nvlink_gbps.is_none()
            && matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv)
        {
            let nf = n as f64;
            let fixed = match c.engine.exec_launch_us {
                x if x > 0.0 => x - c.launch_us,
                _ => c.direct_sync_us + BASE_LAT[1][2] * 0.5,
            };
            // The communicator's messages run at this size where the planner measured them.
            if let Some((p, msgs)) = m.p2p.as_ref().and_then(|p| Some((p, p.messages.as_ref()?))) {
                if c.engine.cta_gbps > 0.0 {
                    let (b, per) = (
                        self.bytes,
                        if kind == CollectiveKind::AllToAll {
                            n as u64
                        } else {
                            1
                        },
                    );
                    let msg = b / per;
                    let t = msgs.time_us(msg, exec_rate(&c.engine, Protocol::Simple, msg));
                    let algbw = b as f64 / 1000.0 / t.max(1e-12);
                    return self.push(
                        Algorithm::Direct,
                        Protocol::Simple,
                        1,
                        fixed + p.landing_us,
                        algbw,
                        1.0,
                    );
                }
            }
            // Measured over the communicator's paths where the planner did (the network's
            // steps and its landing included), else the slowest path and NCCL's network hop.
            let (link, net, route_lat) = match &m.p2p {
                Some(p) => (p.gbps, 0.0, p.lat_us),
                None if nnodes > 1 => (
                    m.direct_gbps,
                    hw_lat(Hw::Net, 1, Protocol::Simple) + m.net_lat_us,
                    c.engine.route_lat_us,
                ),
                None => (m.direct_gbps, 0.0, c.engine.route_lat_us),
            };
            let bw = link * c.sm_peer_eff;
            let algbw = if kind == CollectiveKind::AllToAll {
                bw * nf / (nf - 1.0)
            } else {
                bw
            };
            let fixed = fixed
                + if c.engine.exec_launch_us > 0.0 {
                    route_lat
                } else {
                    0.0
                };
            let extra = c.direct_peer_us * (n as f64 - 2.0).max(0.0);
            self.push_exec(
                Algorithm::Direct,
                Protocol::Simple,
                fixed + extra + net,
                algbw,
                1.0,
                link,
            );
        }
    }
}

/// One message of `m` payload bytes through topoplan's executor, µs: its grid has one CTA per
/// `cta_bytes` of the message (up to `max_ctas`), each at `cta_gbps`, within the GPU's rate and
/// the link's; LL carries its flags on the wire (`sim.exec`, the terms the engine reads).
fn exec_msg_us(e: &EngineTerms, p: Protocol, m: u64, link_gbps: f64) -> f64 {
    let wire = match p {
        Protocol::LL if e.ll_wire > 0.0 => e.ll_wire,
        _ => 1.0,
    };
    m as f64 * wire / 1000.0 / exec_rate(e, p, m).min(link_gbps).max(1e-9)
}

/// The rate of one message of `m` payload bytes on topoplan's executor grid, GB/s of wire: one
/// CTA per `cta_bytes` (up to `max_ctas`), each at `cta_gbps`, within the GPU's rate (unbounded
/// where the profile has no grid).
fn exec_rate(e: &EngineTerms, p: Protocol, m: u64) -> f64 {
    let i = usize::from(p == Protocol::LL);
    let ctas = match e.cta_bytes[i] {
        0 => e.max_ctas[i].max(1) as u64,
        per => m.div_ceil(per).clamp(1, e.max_ctas[i].max(1) as u64),
    };
    let mut rate = f64::INFINITY;
    if e.cta_gbps > 0.0 {
        rate = rate.min(ctas as f64 * e.cta_gbps);
    }
    if e.gpu_gbps[i] > 0.0 {
        rate = rate.min(e.gpu_gbps[i]);
    }
    rate
}
