//! The simulator's view of a topology: the directional links that schedules use, routes between
//! GPUs, and per-GPU resources (device memory, copy engine).
//!
//! Routes are the topology's own [`Topology::gpu_path_via`] (NCCL's path rules, as the planner
//! sees them; between hosts through the NIC [`entry_spreads`] gives the channel). Only for graphs those rules do not cover, a route is computed on the graph (restricted
//! to the two end hosts and the fabric) as the widest path (largest bottleneck bandwidth,
//! then fewest hops, then lowest latency) that does not pass through another GPU, falling back
//! to paths through GPUs (NVLink relays) only when no other path exists. Ties break on graph
//! order, so routes are deterministic.

use planner::topology::{LinkId, NodeId, NodeKind, Topology};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// A shared resource with a capacity in bytes/µs (= MB/s ... we keep GB/s × 1e3 = B/µs).
#[derive(Clone, Debug)]
pub struct Resource {
    pub name: String,
    /// Capacity in bytes per µs (1 GB/s = 1000 B/µs).
    pub cap: f64,
    /// The topology link behind it (None: GPU memory or copy engine).
    pub link: Option<LinkId>,
}

#[derive(Clone, Debug, Default)]
pub struct Route {
    /// Indices into `Net::res`.
    pub res: Vec<u32>,
    /// Sum of link latencies, µs.
    pub lat_us: f64,
    /// True when any hop is a network link (adds `net_step_us` per step).
    pub network: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetError {
    #[error("the topology has no GPU for rank {0} (it has {1} GPUs)")]
    NoGpu(u32, usize),
    #[error("no route from rank {0} to rank {1} in the topology")]
    NoRoute(u32, u32),
}

pub struct Net<'t> {
    pub topo: &'t Topology,
    pub res: Vec<Resource>,
    link_res: HashMap<LinkId, u32>,
    /// Per rank: device memory resource.
    pub mem: Vec<u32>,
    /// Per rank: copy engine resource.
    pub ce: Vec<u32>,
    /// Keyed by (from, to, the receiver's NIC among its ties; 0 inside a host).
    routes: HashMap<(u32, u32, usize), Route>,
    sm_eff: f64,
    scratch: Scratch,
}

impl<'t> Net<'t> {
    /// `nranks` GPUs of `topo` take part; `sm_eff` scales link capacity for SM-driven traffic.
    pub fn new(topo: &'t Topology, nranks: u32, sm_eff: f64) -> Result<Self, NetError> {
        let mut res = Vec::new();
        let mut mem = Vec::new();
        let mut ce = Vec::new();
        for r in 0..nranks {
            let g = topo
                .gpu_of_rank(r)
                .ok_or(NetError::NoGpu(r, topo.n_ranks()))?;
            let bw = topo.gpu(g).map(|g| g.mem_bw_gbps).unwrap_or(1000.0);
            mem.push(res.len() as u32);
            res.push(Resource {
                name: format!("{} memory", topo.describe(g)),
                cap: bw.max(1.0) * 1e3,
                link: None,
            });
            ce.push(res.len() as u32);
            res.push(Resource {
                name: format!("{} copy engine", topo.describe(g)),
                // One copy engine pair moves about 400 GB/s on H200; links bound it further.
                cap: 400.0e3,
                link: None,
            });
        }
        Ok(Self {
            topo,
            res,
            link_res: HashMap::new(),
            mem,
            ce,
            routes: HashMap::new(),
            sm_eff,
            scratch: Scratch::default(),
        })
    }

    fn link_resource(&mut self, l: LinkId) -> u32 {
        if let Some(&i) = self.link_res.get(&l) {
            return i;
        }
        let (a, b) = self
            .topo
            .graph
            .edge_endpoints(l)
            .expect("link of this graph");
        let w = &self.topo.graph[l];
        let i = self.res.len() as u32;
        self.res.push(Resource {
            name: format!(
                "{} -> {} ({:?})",
                self.topo.describe(a),
                self.topo.describe(b),
                w.kind
            ),
            cap: w.bw_gbps * 1e3 * self.sm_eff,
            link: Some(l),
        });
        self.link_res.insert(l, i);
        i
    }

    /// Which of the receiver's NICs (`Topology::path_via`: those tied for its best path, its
    /// local NIC first) the `spread`-th channel into rank `b` from rank `a` enters through; 0
    /// inside a host.
    pub fn spread(&self, a: u32, b: u32, spread: usize) -> usize {
        if self.topo.host_of_rank(a) == self.topo.host_of_rank(b) {
            return 0;
        }
        spread % self.topo.local_nic_count(b)
    }

    /// The route from rank `a` to rank `b` through the receiver's `spread`-th NIC (cached).
    pub fn route(&mut self, a: u32, b: u32, spread: usize) -> Result<&Route, NetError> {
        let key = (a, b, self.spread(a, b, spread));
        if !self.routes.contains_key(&key) {
            let ga = self.topo.gpu_of_rank(a).ok_or(NetError::NoGpu(a, 0))?;
            let gb = self.topo.gpu_of_rank(b).ok_or(NetError::NoGpu(b, 0))?;
            // NCCL's path rules first (the planner sees the same routes); the widest path only
            // for hand-built graphs that those rules do not cover.
            let links = match self.topo.gpu_path_via(a, b, key.2) {
                Some(p) if !p.links.is_empty() => p.links,
                _ => widest_path(self.topo, ga, gb, false, &mut self.scratch)
                    .or_else(|| widest_path(self.topo, ga, gb, true, &mut self.scratch))
                    .ok_or(NetError::NoRoute(a, b))?,
            };
            let mut r = Route::default();
            for l in links {
                let w = &self.topo.graph[l];
                r.lat_us += w.lat_us;
                r.network |= w.kind == planner::topology::LinkKind::Network;
                let i = self.link_resource(l);
                r.res.push(i);
            }
            self.routes.insert(key, r);
        }
        Ok(&self.routes[&key])
    }
}

/// Per (channel, receiving rank), which of the receiver's NICs the channel enters it through
/// from another host (`Net::route`'s `spread`), for connections `keys` = (channel, from, to):
/// channels with the same hops between hosts (a ring run twice) share one, and each further
/// such channel into the GPU takes its next NIC, as NCCL's search gives each ring channel its
/// own NIC next to the GPU it enters. Missing: 0.
pub fn entry_spreads(
    topo: &Topology,
    keys: impl Iterator<Item = (u32, u32, u32)>,
) -> HashMap<(u32, u32), usize> {
    let mut between: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    for (c, f, t) in keys {
        if topo.host_of_rank(f) != topo.host_of_rank(t) {
            between.entry(c).or_default().push((f, t));
        }
    }
    for v in between.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    let mut channels: Vec<u32> = between.keys().copied().collect();
    channels.sort_unstable();
    // Per entered GPU, the distinct channels' hops between hosts, in channel order.
    let mut seen: HashMap<u32, Vec<&Vec<(u32, u32)>>> = HashMap::new();
    let mut spread = HashMap::new();
    for c in &channels {
        let sig = &between[c];
        for &(_, to) in sig {
            let v = seen.entry(to).or_default();
            let i = match v.iter().position(|x| *x == sig) {
                Some(i) => i,
                None => {
                    v.push(sig);
                    v.len() - 1
                }
            };
            spread.insert((*c, to), i);
        }
    }
    spread
}

#[derive(PartialEq)]
struct Label {
    bw: f64,
    hops: u32,
    lat: f64,
    node: NodeId,
}
impl Eq for Label {}
impl PartialOrd for Label {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Label {
    // Max-heap: larger bandwidth first, then fewer hops, lower latency, lower node index.
    fn cmp(&self, o: &Self) -> Ordering {
        self.bw
            .total_cmp(&o.bw)
            .then(o.hops.cmp(&self.hops))
            .then(o.lat.total_cmp(&self.lat))
            .then(o.node.index().cmp(&self.node.index()))
    }
}

fn better(a: (f64, u32, f64), b: (f64, u32, f64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
}

/// Reusable per-node arrays for route searches, reset through a touched list so a search costs
/// only the nodes it visits (8192-rank clusters have tens of thousands of nodes).
#[derive(Default)]
pub(crate) struct Scratch {
    best: Vec<Option<(f64, u32, f64)>>,
    prev: Vec<Option<LinkId>>,
    done: Vec<bool>,
    touched: Vec<usize>,
}

impl Scratch {
    fn reset(&mut self, n: usize) {
        if self.best.len() != n {
            self.best = vec![None; n];
            self.prev = vec![None; n];
            self.done = vec![false; n];
            self.touched.clear();
        }
        for &i in &self.touched {
            self.best[i] = None;
            self.prev[i] = None;
            self.done[i] = false;
        }
        self.touched.clear();
    }
}

/// Widest path from `src` to `dst` through nodes of the two end hosts and the fabric only;
/// intermediate GPUs only when `through_gpus`.
fn widest_path(
    topo: &Topology,
    src: NodeId,
    dst: NodeId,
    through_gpus: bool,
    sc: &mut Scratch,
) -> Option<Vec<LinkId>> {
    use petgraph::visit::EdgeRef;
    sc.reset(topo.graph.node_count());
    let (ha, hb) = (topo.graph[src].host, topo.graph[dst].host);
    let allowed = |n: NodeId| {
        let h = topo.graph[n].host;
        h.is_none() || h == ha || h == hb
    };
    let mut heap = BinaryHeap::new();
    sc.best[src.index()] = Some((f64::INFINITY, 0, 0.0));
    sc.touched.push(src.index());
    heap.push(Label {
        bw: f64::INFINITY,
        hops: 0,
        lat: 0.0,
        node: src,
    });
    while let Some(Label {
        bw,
        hops,
        lat,
        node,
    }) = heap.pop()
    {
        if sc.done[node.index()] {
            continue;
        }
        sc.done[node.index()] = true;
        if node == dst {
            break;
        }
        if node != src && !through_gpus && matches!(topo.graph[node].kind, NodeKind::Gpu(_)) {
            continue;
        }
        for e in topo.graph.edges(node) {
            let t = e.target();
            if sc.done[t.index()] || !allowed(t) {
                continue;
            }
            let l = e.weight();
            let cand = (bw.min(l.bw_gbps), hops + 1, lat + l.lat_us);
            if sc.best[t.index()].is_none_or(|b| better(cand, b)) {
                if sc.best[t.index()].is_none() {
                    sc.touched.push(t.index());
                }
                sc.best[t.index()] = Some(cand);
                sc.prev[t.index()] = Some(e.id());
                heap.push(Label {
                    bw: cand.0,
                    hops: cand.1,
                    lat: cand.2,
                    node: t,
                });
            }
        }
    }
    if !sc.done[dst.index()] {
        return None;
    }
    let mut path = Vec::new();
    let mut cur = dst;
    while cur != src {
        let l = sc.prev[cur.index()]?;
        path.push(l);
        cur = topo.graph.edge_endpoints(l)?.0;
    }
    path.reverse();
    Some(path)
}
