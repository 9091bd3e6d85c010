//! The families that send directly: one-shot, two-shot and copy-engine patterns on an
//! all-NVLink host, topoplan's generic executor, and point-to-point.

use super::Cands;
use super::Vars;
use crate::tuner::*;

impl Cands<'_> {
    /// Direct patterns on an all-NVLink host.
    pub(super) fn direct(&mut self) {
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
                        // loads its peers' inputs, behind two per-CTA handshakes; where the
                        // profile has the engine's pull terms, as the engine runs it: its fixed
                        // cost, and the peers' inputs read one after another at the pull rate
                        // within the GPU's links.
                        let e = &c.engine;
                        let (lat, rate) = match e.pull_gbps > 0.0 && e.pull_launch_us > 0.0 {
                            true => (
                                e.pull_launch_us - c.launch_us + e.route_lat_us,
                                e.pull_gbps.min(gbw * e.link_eff.max(1e-9)),
                            ),
                            false => (c.pull_lat_us, gbw * c.pull_eff),
                        };
                        self.push(algo.clone(), p, 1, lat + extra, rate / (nf - 1.0), 1.0);
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
    pub(super) fn p2p(&mut self) {
        let Vars {
            m,
            kind,
            c,
            n,
            nnodes,
            ppn,
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
            // steps and its landing included), else the slowest path, NCCL's network hop and
            // the network's step a rank pays after each message to a peer off its host, one
            // after another (an all-to-all past the ranks whose messages the planner routes).
            let remote = match kind {
                CollectiveKind::AllToAll => n.saturating_sub(ppn.max(1)),
                _ => 0,
            };
            let (link, net, route_lat) = match &m.p2p {
                Some(p) => (p.gbps, 0.0, p.lat_us),
                None if nnodes > 1 => (
                    m.direct_gbps,
                    hw_lat(Hw::Net, 1, Protocol::Simple)
                        + m.net_lat_us
                        + remote as f64 * c.engine.net_step_us,
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
pub(super) fn exec_msg_us(e: &EngineTerms, p: Protocol, m: u64, link_gbps: f64) -> f64 {
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
