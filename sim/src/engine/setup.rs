//! Building the engine: one program per (rank, channel) with its expanded ops, the connections
//! and routes they use, and the resources of the network.

use super::*;
use std::collections::HashMap;

/// Most channels of one rank that send. The executor's grid is shared by the channels that move
/// data (a channel that only receives costs its rank no SM time: the sender's CTAs store into its
/// buffer).
fn send_channels(s: &Schedule) -> u32 {
    let nch = s.channels;
    (0..s.nranks)
        .map(|r| {
            (0..nch)
                .filter(|&c| {
                    s.ranks[r as usize].channels[c as usize]
                        .ops
                        .iter()
                        .any(|o| o.kind.sends())
                })
                .count() as u32
        })
        .max()
        .unwrap_or(nch)
        .max(1)
}

/// The connections and routes the programs use, each made once.
#[derive(Default)]
struct Wiring {
    conn_ids: HashMap<(u32, u32, u32), u32>,
    conns: Vec<Conn>,
    /// Per connection, its (channel, from, to).
    keys: Vec<(u32, u32, u32)>,
    route_ids: HashMap<(u32, u32, usize), u32>,
    routes: Vec<RouteInfo>,
}

impl Wiring {
    /// The connection `(channel, from, to)`, made on first use, with program `me` as its sender
    /// or receiver. Its route is set by [`Wiring::route_all`].
    fn conn(&mut self, key: (u32, u32, u32), me: u32, sender: bool) -> u32 {
        let id = match self.conn_ids.get(&key) {
            Some(&id) => id,
            None => {
                self.conns.push(Conn {
                    route: u32::MAX,
                    from_prog: u32::MAX,
                    to_prog: u32::MAX,
                    arrived: 0,
                    recv_next: 0,
                    msgs_started: 0,
                    credits: 0,
                });
                self.keys.push(key);
                self.conn_ids.insert(key, self.conns.len() as u32 - 1);
                self.conns.len() as u32 - 1
            }
        };
        let cn = &mut self.conns[id as usize];
        if sender {
            cn.from_prog = me;
        } else {
            cn.to_prog = me;
        }
        id
    }

    /// Routes every connection, each route made once, a channel entering a GPU from another host
    /// through the NIC [`crate::net::entry_spreads`] gives it.
    fn route_all(&mut self, net: &mut Net) -> Result<(), SimError> {
        let spread = crate::net::entry_spreads(net.topo, self.keys.iter().copied());
        for i in 0..self.keys.len() {
            let (c, from, to) = self.keys[i];
            let sp = spread.get(&(c, to)).copied().unwrap_or(0);
            let rkey = (from, to, net.spread(from, to, sp));
            let rid = match self.route_ids.get(&rkey) {
                Some(&x) => x,
                None => {
                    let rt = net.route(from, to, sp)?;
                    self.routes.push(RouteInfo {
                        res: rt.res.clone(),
                        lat_us: rt.lat_us,
                        network: rt.network,
                    });
                    self.route_ids.insert(rkey, self.routes.len() as u32 - 1);
                    self.routes.len() as u32 - 1
                }
            };
            self.conns[i].route = rid;
        }
        Ok(())
    }
}

/// The program of rank `r`'s channel `c` (program index `me`), its connections made in `w`.
fn program(s: &Schedule, r: u32, c: u32, count: u64, me: u32, w: &mut Wiring) -> Prog {
    let ops = s.expanded_ops(r, c);
    let compact = &s.ranks[r as usize].channels[c as usize].ops;
    let mut last_copy = Vec::with_capacity(compact.len());
    let mut acc = 0u32;
    for op in compact {
        acc += op.repeat.max(1);
        last_copy.push(acc - 1);
    }
    let mut pc = Vec::with_capacity(ops.len());
    for op in &ops {
        let i = op.recv_from.map(|f| w.conn((c, f, r), me, false));
        let o = op.send_to.map(|t| w.conn((c, r, t), me, true));
        pc.push((i, o));
    }
    let iters = s.loop_iterations(count);
    Prog {
        rank: r,
        ch: c,
        total: ops.len() as u64 * iters,
        ops,
        conns: pc,
        last_copy,
        pc: 0,
        sub: 0,
        nsub: 0,
        payload: 0,
        busy: false,
        step_start: 0,
        finish: 0,
    }
}

impl<'a> Engine<'a> {
    pub(super) fn new(
        topo: &planner::topology::Topology,
        s: &'a Schedule,
        bytes: u64,
        cfg: &'a SimConfig,
    ) -> Result<Self, SimError> {
        let (inb, _) = s.collective.blocks(s.nranks);
        // `bytes` is the nccl-tests size: the per-rank count follows from the input buffer.
        let count = crate::count_for_bytes(s, bytes, cfg.elem_bytes);
        let exec = cfg.exec.as_ref().filter(|_| ExecParams::applies(s));
        // Pull mode's and the hybrid's rules are on the bytes of each rank's input (the
        // runtime's `bytes`). The runtime checks the hybrid first.
        let rank_bytes = count * inb as u64 * cfg.elem_bytes as u64;
        let hybrid = exec.is_some_and(|x| x.runs_hybrid(s, rank_bytes));
        let pull = !hybrid && exec.is_some_and(|x| x.pulls(s, rank_bytes));
        let mut net = Net::new(topo, s.nranks, cfg.sm_link_efficiency)?;
        let nch = s.channels;
        let send_channels = send_channels(s);
        let mut w = Wiring::default();
        let mut progs = Vec::with_capacity((s.nranks * nch) as usize);
        for r in 0..s.nranks {
            for c in 0..nch {
                let me = progs.len() as u32;
                progs.push(program(s, r, c, count, me, &mut w));
            }
        }
        // Every program's conns are known now (unmatched conns are rejected by validate, so
        // both ends exist): route them.
        w.route_all(&mut net)?;
        let caps: Vec<f64> = net.res.iter().map(|r| r.cap).collect();
        let res_names = net.res.iter().map(|r| r.name.clone()).collect();
        let nres = caps.len();
        let quantum = (quantum_us(s, cfg) * PS_PER_US).round() as u64;
        Ok(Self {
            s,
            cfg,
            exec,
            exec_ce: cfg.exec.as_ref().filter(|_| ExecParams::applies_ce(s)),
            pull,
            hybrid,
            send_channels,
            count,
            iters: s.loop_iterations(count),
            caps,
            res_names,
            mem: net.mem.clone(),
            ce: net.ce.clone(),
            routes: w.routes,
            progs,
            conns: w.conns,
            flows: Vec::new(),
            free_flows: Vec::new(),
            active: Vec::new(),
            alloc: Allocator::default(),
            rates: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            dirty: false,
            epoch: Vec::new(),
            all_at_cap: true,
            usage: vec![0.0; nres],
            recompute_pending: false,
            tick_version: 0,
            finish_queue: Vec::new(),
            last_recompute: 0,
            recomputes: 0,
            recompute_flows: 0,
            quantum_dyn: quantum,
            quantum_ps: quantum,
            events: 0,
            steps: 0,
            load_bytes: vec![0.0; nres],
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            trace: cfg.trace.then(Trace::default),
        })
    }
}

/// The rate quantum `s` runs under, µs: the configured one, but none for point-to-point
/// (all-to-all, send/recv) and hierarchical calls. There every rank sends its messages one after
/// another, each a short flow that a quantised sharing holds back until the next recomputation
/// or starts early: quantised, a 128 MiB all-to-all on 512 ranks takes 3.7× its time under
/// exact sharing, on 128 ranks 1.2–1.5×; a hierarchical call's one-step rail messages, on two
/// 4×A6000 hosts LL at 128 MiB, 10 % less, on 32 such hosts LL128 at 2 MiB 9 % more.
fn quantum_us(s: &Schedule, cfg: &SimConfig) -> f64 {
    match (s.collective.kind, &s.algorithm) {
        (CollectiveKind::AllToAll | CollectiveKind::SendRecv, _) => 0.0,
        (_, Algorithm::Hierarchical) => 0.0,
        _ => cfg.rate_quantum_us,
    }
}
