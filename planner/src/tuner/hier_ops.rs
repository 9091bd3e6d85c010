//! A hierarchical all-reduce op by op, as the engine runs it. Its phases overlap: a GPU that
//! finishes its rail early starts the host's all-gather while the others still send on their
//! rails, and the rail's one-step messages hand off one after another, so no sum of phases
//! prices the call (on PCIe hosts with every NIC on one CPU the all-gather then crosses the
//! slow GPUs' path to their NICs: summed, up to 11 % fast; NCv4 hosts' LL at 32 KiB: 17 % slow).
//!
//! Every program (a channel of a GPU of the first host) runs its steps in order, a step
//! starting once its program reached it, its data landed and, sending a message's first step,
//! its receiver freed one of the connection's slots; the transfers running at once share the
//! links max-min fairly (`drift::op_dag_ends`). Hosts run alike (every rail is a ring over the
//! same GPU of each host, and the schedule rotates the chunks by host), so a rail message comes
//! from the same GPU's program on the previous host, whose step ends when this program's does:
//! a rail step waits for this program's own matching send, and its transfer crosses both its
//! route out of the host and the route in from the previous host. That holds where every
//! host's rail hops are alike and no other hosts' rail traffic crosses those links
//! ([`rails_in_view`]): a switch's or a rail fabric's own ports, not a fat tree's hops between
//! leaves beside those inside one, nor its shared uplinks.

use super::chain_costs::{engine_path, link_eff};
use super::chain_paths::{ChainPaths, RingHop};
use super::drift::{DagOp, OpDag};
use super::*;

/// The most steps a call is run with op by op; past them a line through two shorter runs
/// prices it. A call of this many steps takes a few tens of milliseconds.
const HIER_OPS: usize = 1 << 15;

/// Whether every host runs as the first one does, so that the first host's programs stand for
/// every host's: each rail's hops are alike (latency, network step and the rates of the links
/// they cross: not a fat tree's hops between leaves beside those inside one), and each link of a
/// rail's route out of the first host or in from the last is crossed by no hop of the rails but
/// those two (a switch's or a rail fabric's own ports, not a fat tree's shared uplinks).
pub(super) fn rails_in_view(e: &EngineTerms, ppn: u32) -> bool {
    use std::collections::HashMap;
    let rails = e.hier_paths[1].used(ppn);
    if rails.is_empty() || !rails.iter().all(|r| hops_alike(r)) {
        return false;
    }
    let (mut crossings, mut in_view) = (HashMap::new(), HashMap::new());
    for &(l, _) in rails.iter().flatten().flat_map(|h| &h.links) {
        *crossings.entry(l).or_insert(0u32) += 1;
    }
    for (l, _) in rails.iter().flat_map(|r| view_links(r)) {
        *in_view.entry(l).or_insert(0u32) += 1;
    }
    // A link both of a rail's hops cross counts twice among the crossings, once in view.
    in_view.iter().all(|(l, n)| crossings.get(l) == Some(n))
}

/// Whether a rail's hops are alike: the same latency, network step and link rates.
fn hops_alike(rail: &[RingHop]) -> bool {
    let shape = |h: &RingHop| {
        let mut rates: Vec<f64> = h.links.iter().map(|l| l.1).collect();
        rates.sort_by(f64::total_cmp);
        (h.lat_us, h.send_us, rates)
    };
    let first = rail.first().map(shape);
    first.is_some() && rail.iter().all(|h| Some(shape(h)) == first)
}

/// The links (index, GB/s) a rail's step crosses in the first host's view: its route out and
/// its route in, each link once. Empty for a rail of no hops.
fn view_links(r: &[RingHop]) -> Vec<(usize, f64)> {
    let (Some(out), Some(into)) = (r.first(), r.last()) else {
        return Vec::new();
    };
    let mut links: Vec<(usize, f64)> = out.links.iter().chain(&into.links).copied().collect();
    links.sort_by_key(|l| l.0);
    links.dedup_by_key(|l| l.0);
    links
}

/// The engine's time for a hierarchical all-reduce of `bytes` on `nc` channels, `ppn` GPUs a
/// host and `nnodes` hosts, µs beyond the tuner's launch. A call of more than [`HIER_OPS`]
/// steps repeats its iterations alike, so its time is affine in their count: it is read off the
/// line through two shorter runs, both keeping the last, partial iteration. `None` where the
/// rings were not measured or too few iterations fit in the budget for a line.
pub(super) fn hier_ops_us(
    c: &TunerParams,
    p: Protocol,
    (nc, ppn, nnodes): (u32, u32, u32),
    bytes: u64,
) -> Option<f64> {
    let e = &c.engine;
    let g = Geometry::of(e, p, (nc, ppn, nnodes), bytes)?;
    let chains = distinct_chains(e.hier_paths[0].used(nc), nc);
    if ppn < 2 || nnodes < 2 || chains.iter().any(|(r, _)| r.len() != ppn as usize) {
        return None;
    }
    let affordable = (HIER_OPS / (chains.len() * g.steps_per_channel()).max(1)) as u64;
    if g.iters <= affordable {
        return engine_path(c, Some(run_us(e, &g, &chains)?));
    }
    // Full iterations of the two runs, past the connections' first slots.
    let (k1, k2) = (
        affordable.saturating_sub(1),
        affordable.saturating_sub(1) / 2,
    );
    if k2 < LINE_MIN_ITERS {
        return None;
    }
    let with = |full: u64| Geometry {
        iters: full + 1,
        ..g
    };
    let (t1, t2) = (
        run_us(e, &with(k1), &chains)?,
        run_us(e, &with(k2), &chains)?,
    );
    let slope = (t1 - t2) / (k1 - k2) as f64;
    engine_path(c, Some(t1 + slope * (g.iters - 1 - k1) as f64))
}

/// The fewest full iterations the shorter of the two runs whose line prices a long call takes.
const LINE_MIN_ITERS: u64 = 2;

/// The distinct host chains of a call on `nc` channels over `chains` (channel k on chain
/// k mod their count), each with the channels it carries. Chains whose hops are alike (a
/// 16×L20 host's nine searched rings take one order, each through its own NIC, which the
/// hierarchical call's rails do not use) run in lockstep over the same links, so one stands for
/// them all: the call then fits the budget op by op (16×L20 ×2, LL at 128 MiB on 18 channels:
/// nine chains left three iterations, too few for a line).
fn distinct_chains(chains: &[Vec<RingHop>], nc: u32) -> Vec<(&Vec<RingHop>, u32)> {
    let mut out: Vec<(&Vec<RingHop>, u32)> = Vec::new();
    for (k, chain) in chains.iter().enumerate() {
        let copies = (k as u32..nc).step_by(chains.len()).count() as u32;
        match out.iter_mut().find(|(c, _)| *c == chain) {
            Some((_, n)) => *n += copies,
            None => out.push((chain, copies)),
        }
    }
    out
}

/// The first host's programs of the call `g` on its `chains` (each with the channels it carries,
/// [`distinct_chains`]) run op by op, µs from the first step to the last. `None` where a GPU has
/// no rail or a step never ran.
fn run_us(e: &EngineTerms, g: &Geometry, chains: &[(&Vec<RingHop>, u32)]) -> Option<f64> {
    let [intra, rails] = &e.hier_paths;
    let mut dag = OpDag::default();
    for &(chain, copies) in chains {
        let rail_of = |rank| rails.rings.iter().find(|r| r[0].rank == rank);
        let hops: Option<Vec<Hops>> = (0..chain.len())
            .map(|q| Hops::of(chain, q, rail_of(chain[q].rank)?))
            .collect();
        channel(&mut dag, g, &hops?, copies);
    }
    let caps = link_caps([intra, rails], link_eff(e));
    let ends = dag.ends(&caps);
    // Every step runs: each receive has its send and each credit its message.
    debug_assert!(ends.iter().all(|t| t.is_finite()), "a step never ran");
    if ends.iter().any(|t| !t.is_finite()) {
        return None;
    }
    Some(ends.into_iter().fold(0.0, f64::max))
}

/// The call's cut as the builder lays it out and the engine steps it, and the protocol's terms.
#[derive(Clone, Copy)]
struct Geometry {
    /// Loop iterations, and each chunk's payload bytes in a full and in the last iteration.
    iters: u64,
    chunk: f64,
    last_chunk: f64,
    /// GPUs a host, hosts, the engine's step payload (bytes) and the connection's slots.
    local: usize,
    hosts: usize,
    step_bytes: f64,
    slots: usize,
    /// Wire bytes per payload byte; a channel's wire rate and a local pass's rate (GB/s).
    wire: f64,
    channel_gbps: f64,
    local_gbps: f64,
    /// The protocol's cost of a step and its one-way hop, µs.
    step_us: f64,
    hop_us: f64,
}

impl Geometry {
    fn of(
        e: &EngineTerms,
        p: Protocol,
        (nc, ppn, nnodes): (u32, u32, u32),
        bytes: u64,
    ) -> Option<Self> {
        let i = proto_idx(p);
        if e.channel_gbps[i] <= 0.0 || e.step_bytes[i] == 0 {
            return None;
        }
        let elem = ENGINE_ELEM_BYTES;
        let blocks = nc.max(1) as u64 * ppn.max(1) as u64 * nnodes.max(1) as u64;
        let per_iter = blocks * crate::schedule::build::step_elems(p);
        let count = bytes.div_ceil(elem).max(1);
        let iters = count.div_ceil(per_iter);
        let last = count - (iters - 1) * per_iter;
        Some(Geometry {
            iters,
            chunk: (per_iter / blocks * elem) as f64,
            last_chunk: (last as f64 / blocks as f64 * elem as f64).max(elem as f64),
            local: ppn as usize,
            hosts: nnodes as usize,
            step_bytes: e.step_bytes[i] as f64,
            slots: crate::schedule::build::DEFAULT_SLOTS as usize,
            wire: e.wire_factor[i].max(1.0),
            channel_gbps: e.channel_gbps[i],
            local_gbps: e.local_channel_gbps.max(1e-9),
            step_us: e.step_us[i],
            hop_us: e.hop_us[i],
        })
    }

    /// A message of `payload` bytes: its steps and each step's payload.
    fn steps(&self, payload: f64) -> (usize, f64) {
        let n = (payload / self.step_bytes).ceil().max(1.0);
        (n as usize, payload / n)
    }

    /// One channel's steps in a full iteration: each GPU's 2L host ops of a piece (H chunks)
    /// and 2H − 1 rail ops of a chunk.
    fn steps_per_channel(&self) -> usize {
        let (l, h) = (self.local, self.hosts);
        let intra = self.steps(h as f64 * self.chunk).0;
        l * (2 * l * intra + (2 * h - 1) * self.steps(self.chunk).0)
    }
}

/// A program's routes: to the next GPU of its host chain, and along its rail (out of the host
/// to the next host, and in from the previous one, which the same step crosses by symmetry).
struct Hops<'a> {
    next: &'a RingHop,
    rail: RingHop,
}

impl<'a> Hops<'a> {
    fn of(chain: &'a [RingHop], q: usize, rail: &[RingHop]) -> Option<Self> {
        let (out, into) = (rail.first()?, rail.last()?);
        let rail = RingHop {
            rank: out.rank,
            lat_us: into.lat_us,
            links: view_links(rail),
            send_us: out.send_us,
        };
        Some(Hops {
            next: &chain[q],
            rail,
        })
    }
}

/// Every link's rate (GB/s, at the links' efficiency) by index, as the rings cross them.
fn link_caps(paths: [&ChainPaths; 2], eff: f64) -> Vec<f64> {
    let mut caps = Vec::new();
    for &(l, gbps) in paths
        .iter()
        .flat_map(|p| p.rings.iter().flatten())
        .flat_map(|h| &h.links)
    {
        if caps.len() <= l {
            caps.resize(l + 1, f64::INFINITY);
        }
        caps[l] = gbps * eff;
    }
    caps
}

/// A message's steps (op ids), in order.
type Message = Vec<usize>;

/// One program's messages on one connection: sent, and received from its sender.
#[derive(Default)]
struct Conn {
    sent: Vec<Message>,
    received: Vec<Message>,
}

/// One program: its last step so far, and its connections inside the host (to the next GPU
/// of its chain; received: from the previous one) and along its rail.
#[derive(Default)]
struct Program {
    last: Option<usize>,
    intra: Conn,
    rail: Conn,
}

/// How a step of an op moves its data.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Sends only, receives and sends, receives and reduces locally, receives only.
    Send,
    RecvSend,
    RecvReduce,
    Recv,
}

/// One channel's programs (`hops[q]` the routes of the GPU at chain position q), every
/// iteration, with their data's and credits' edges; it stands for `copies` channels.
fn channel(dag: &mut OpDag, g: &Geometry, hops: &[Hops], copies: u32) {
    let mut progs: Vec<Program> = (0..hops.len()).map(|_| Program::default()).collect();
    for it in 0..g.iters {
        let chunk = if it + 1 == g.iters {
            g.last_chunk
        } else {
            g.chunk
        };
        for (q, prog) in progs.iter_mut().enumerate() {
            iteration(dag, g, (&hops[q], prog), chunk, copies);
        }
    }
    let n = hops.len();
    for q in 0..n {
        let next = &progs[(q + 1) % n].intra.received;
        wire(dag, g, &progs[q].intra.sent, next, hops[q].next.lat_us);
        let own = &progs[q].rail;
        wire(dag, g, &own.sent, &own.received, hops[q].rail.lat_us);
    }
}

/// One iteration of a program: reduce-scatter in the host, all-reduce on the rail,
/// all-gather in the host.
fn iteration(
    dag: &mut OpDag,
    g: &Geometry,
    (hops, prog): (&Hops, &mut Program),
    chunk: f64,
    copies: u32,
) {
    use Kind::*;
    let (l, h) = (g.local, g.hosts);
    let piece = h as f64 * chunk;
    let host = |last| {
        std::iter::once(Send)
            .chain(std::iter::repeat_n(RecvSend, l - 2))
            .chain([last])
    };
    let rail = std::iter::once(Send)
        .chain(std::iter::repeat_n(RecvSend, 2 * h - 3))
        .chain([Recv]);
    let phases: [(Vec<Kind>, bool, f64); 3] = [
        (host(RecvReduce).collect(), false, piece),
        (rail.collect(), true, chunk),
        (host(Recv).collect(), false, piece),
    ];
    for (kinds, on_rail, payload) in phases {
        let route = if on_rail { &hops.rail } else { hops.next };
        for kind in kinds {
            let (sent, received) = message(dag, g, (kind, route, payload, copies), &mut prog.last);
            let conn = if on_rail {
                &mut prog.rail
            } else {
                &mut prog.intra
            };
            conn.sent.extend(sent);
            conn.received.extend(received);
        }
    }
}

/// One op's steps after the program's `last`: the message it sends and the one it
/// receives, where it does.
fn message(
    dag: &mut OpDag,
    g: &Geometry,
    (kind, route, payload, copies): (Kind, &RingHop, f64, u32),
    last: &mut Option<usize>,
) -> (Option<Message>, Option<Message>) {
    let (n, step) = g.steps(payload);
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let op = match kind {
            Kind::Send | Kind::RecvSend => DagOp {
                links: route.links.iter().map(|l| l.0).collect(),
                volume: step * g.wire / 1000.0,
                cap: g.channel_gbps,
                post: g.step_us + route.send_us,
                copies,
            },
            Kind::RecvReduce => DagOp::local(step / 1000.0 / g.local_gbps + g.step_us),
            Kind::Recv => DagOp::local(g.step_us),
        };
        let id = dag.push(op, *last);
        *last = Some(id);
        ids.push(id);
    }
    let sends = matches!(kind, Kind::Send | Kind::RecvSend);
    let receives = kind != Kind::Send;
    (sends.then(|| ids.clone()), receives.then_some(ids))
}

/// A connection's data and credits: the receiver's step t of message m waits for the
/// sender's step t to land; the sender's first step of message m waits for the receiver to
/// have consumed message m − slots, the credit crossing back.
fn wire(dag: &mut OpDag, g: &Geometry, sent: &[Message], received: &[Message], lat_us: f64) {
    let delay = lat_us + g.hop_us;
    for (m, (s, r)) in sent.iter().zip(received).enumerate() {
        debug_assert_eq!(s.len(), r.len(), "a message's steps match at both ends");
        for (&a, &b) in s.iter().zip(r) {
            dag.edge(a, b, delay);
        }
        if let Some(back) = m.checked_sub(g.slots).map(|b| &received[b]) {
            dag.edge(*back.last().expect("a message has steps"), s[0], delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rails over `hosts` hosts of two GPUs (rank = host·2 + gpu), each hop over its own links
    /// unless `route` says otherwise.
    fn terms(hosts: u32, route: impl Fn(u32, u32) -> (f64, Vec<(usize, f64)>, f64)) -> EngineTerms {
        let rails: Vec<Vec<u32>> = (0..2)
            .map(|g| (0..hosts).map(|h| h * 2 + g).collect())
            .collect();
        let mut e = EngineTerms::default();
        e.hier_paths[1] = ChainPaths::of(&rails, &[], route);
        e
    }

    /// A hop's own links: out of the sender's host to the switch, and in from it.
    fn own(a: u32, b: u32) -> Vec<(usize, f64)> {
        vec![(2 * a as usize, 50.0), (2 * b as usize + 1, 50.0)]
    }

    /// A host chain over `ranks`, each hop over its own link `link + q`.
    fn chain(ranks: &[u32], link: usize) -> Vec<RingHop> {
        let hop = |(q, &rank)| RingHop {
            rank,
            lat_us: 1.0,
            links: vec![(link + q, 50.0)],
            send_us: 0.0,
        };
        ranks.iter().enumerate().map(hop).collect()
    }

    #[test]
    fn alike_chains_run_as_one_carrying_their_channels() {
        let (a, b) = (chain(&[0, 1, 2, 3], 0), chain(&[0, 2, 1, 3], 10));
        let chains = [a.clone(), a.clone(), b.clone(), a.clone()];
        // Ten channels over four chains: 3, 3, 2 and 2 of them; the three alike chains carry 8.
        let merged = distinct_chains(&chains, 10);
        assert_eq!(merged, vec![(&a, 8), (&b, 2)]);
        // Fewer channels than chains: only those the channels use.
        assert_eq!(distinct_chains(&chains[..2], 1), vec![(&a, 1)]);
    }

    #[test]
    fn hosts_on_one_switch_run_as_the_first_does() {
        let e = terms(4, |a, b| (1.0, own(a, b), 0.5));
        assert!(rails_in_view(&e, 2));
    }

    #[test]
    fn a_hop_between_leaves_makes_the_hosts_run_unlike() {
        // Host 1 → host 2 crosses a spine: one link more and a longer latency.
        let e = terms(4, |a, b| {
            let mut links = own(a, b);
            let far = a / 2 == 1 && b / 2 == 2;
            if far {
                links.push((100 + a as usize, 50.0));
            }
            (if far { 2.0 } else { 1.0 }, links, 0.5)
        });
        assert!(!rails_in_view(&e, 2));
    }

    #[test]
    fn an_uplink_other_hosts_share_is_out_of_the_first_hosts_view() {
        // Every hop also crosses one shared uplink, alike in rate and latency.
        let e = terms(4, |a, b| {
            let mut links = own(a, b);
            links.push((1000, 100.0));
            (1.0, links, 0.5)
        });
        assert!(!rails_in_view(&e, 2));
    }
}
