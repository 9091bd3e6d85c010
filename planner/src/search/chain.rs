//! The per-host search: orders of the host's GPUs (rings closing on themselves, chains, or
//! NIC-to-NIC chains across hosts), each channel charging its bandwidth on every link of every
//! hop, so that channels sharing a link (an NVSwitch uplink, a PCIe switch's uplink, a NIC) never
//! ask for more than it carries.

use super::SearchError;
use crate::topology::{LinkId, NodeId, NodeKind, Path, PathType, Topology};

/// What a channel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// A ring: every hop one way, the last GPU back to the first (single host) or NIC in → GPUs →
    /// NIC out (several hosts).
    Ring,
    /// A tree chain: data flows both ways on every hop (reduce up, broadcast down).
    Chain,
}

/// Result of a search at one speed.
#[derive(Clone, Debug)]
pub struct Found {
    pub chains: Vec<Vec<u32>>,
    pub nics: Vec<Option<usize>>,
    pub speed: f64,
    /// Worst path type used by any hop.
    pub worst: PathType,
}

pub struct ChainSearch {
    /// Local GPU count.
    l: usize,
    /// `paths[i][j]`: GPU i → GPU j (local indices).
    paths: Vec<Vec<Option<Path>>>,
    /// NICs of host 0 and paths GPU → NIC, NIC → GPU.
    pub nics: Vec<NodeId>,
    nic_speed: Vec<f64>,
    to_nic: Vec<Vec<Option<Path>>>,
    from_nic: Vec<Vec<Option<Path>>>,
    /// Capacity of every link (indexed by link id).
    cap: Vec<f64>,
    multi: bool,
    gpu_nodes: Vec<NodeId>,
}

/// Expansions allowed per channel before giving up at a speed (NCCL: 2^14 for trees).
const BUDGET: u32 = 1 << 14;
const EPS: f64 = 1e-6;

struct State {
    rem: Vec<f64>,
    nic_tx: Vec<f64>,
    nic_rx: Vec<f64>,
    budget: u32,
}

impl ChainSearch {
    pub fn new(t: &Topology, gpus: &[u32], multi: bool) -> Result<Self, SearchError> {
        let l = gpus.len();
        let mut gpu_nodes = Vec::with_capacity(l);
        for &r in gpus {
            gpu_nodes.push(
                t.gpu_of_rank(r)
                    .ok_or_else(|| SearchError::Path(format!("rank {r} has no GPU node")))?,
            );
        }
        let mut paths = vec![vec![None; l]; l];
        for i in 0..l {
            for j in 0..l {
                if i != j {
                    paths[i][j] = t.path(gpu_nodes[i], gpu_nodes[j]);
                }
            }
        }
        let nics = if multi {
            t.nics_of_host(t.host_of_rank(gpus[0]))
        } else {
            Vec::new()
        };
        let nic_speed = nics
            .iter()
            .map(|n| match &t.graph[*n].kind {
                NodeKind::Nic(x) => x.speed_gbps,
                _ => 0.0,
            })
            .collect();
        let to_nic = gpu_nodes
            .iter()
            .map(|g| nics.iter().map(|n| t.path(*g, *n)).collect())
            .collect();
        let from_nic = gpu_nodes
            .iter()
            .map(|g| nics.iter().map(|n| t.path(*n, *g)).collect())
            .collect();
        let cap = t.graph.edge_indices().map(|e| t.graph[e].bw_gbps).collect();
        Ok(ChainSearch {
            l,
            paths,
            nics,
            nic_speed,
            to_nic,
            from_nic,
            cap,
            multi,
            gpu_nodes,
        })
    }

    /// The smallest, over GPUs, of the NVLink bandwidth a GPU has to all its peers together,
    /// when every pair is joined by NVLink; `None` otherwise.
    pub fn all_peers_nvlink(&self) -> Option<f64> {
        let mut best = f64::INFINITY;
        for i in 0..self.l {
            // Sum of distinct first links of the paths to peers: a GPU's own NVLink ports.
            let mut firsts: Vec<LinkId> = Vec::new();
            for j in 0..self.l {
                if i == j {
                    continue;
                }
                let p = self.paths[i][j].as_ref()?;
                if !matches!(p.kind, PathType::Nvl) {
                    return None;
                }
                if let Some(f) = p.links.first() {
                    if !firsts.contains(f) {
                        firsts.push(*f);
                    }
                }
            }
            let sum: f64 = firsts.iter().map(|f| self.cap[f.index()]).sum();
            best = best.min(sum);
        }
        best.is_finite().then_some(best)
    }

    /// The first speed (fastest first) whose channel count times speed is best overall, like
    /// NCCL: stop at the first speed whose aggregate reaches what the GPUs' links allow, else
    /// keep the best aggregate (ties: fewer channels).
    pub fn best(&self, speeds: &[f64], hop: Hop, max_channels: usize) -> Option<Found> {
        let total = self.total_bw();
        let mut best: Option<Found> = None;
        for &s in speeds {
            if s * 1.0 > total + EPS && best.is_some() {
                continue;
            }
            let f = self.at_speed(s, hop, max_channels);
            if f.chains.is_empty() {
                continue;
            }
            let agg = f.chains.len() as f64 * s;
            let better = best
                .as_ref()
                .is_none_or(|b| agg > b.chains.len() as f64 * b.speed + EPS);
            if better {
                best = Some(f);
            }
            let b = best.as_ref().unwrap();
            if b.chains.len() >= max_channels || b.chains.len() as f64 * b.speed >= total - EPS {
                break;
            }
        }
        best
    }

    /// What one GPU can push at most: its outgoing link bandwidth (NVLink ports summed, or its
    /// PCIe link), capped by the NICs' total when crossing hosts.
    fn total_bw(&self) -> f64 {
        let mut t = 0.0f64;
        for i in 0..self.l {
            let mut firsts: Vec<LinkId> = Vec::new();
            for j in 0..self.l {
                if let Some(p) = &self.paths[i][j] {
                    if let Some(f) = p.links.first() {
                        if !firsts.contains(f) {
                            firsts.push(*f);
                        }
                    }
                }
            }
            t = t.max(firsts.iter().map(|f| self.cap[f.index()]).sum());
        }
        if self.multi && !self.nics.is_empty() {
            t = t.min(self.nic_speed.iter().sum());
        }
        if self.l == 1 && !self.multi {
            t = 5000.0;
        }
        t
    }

    /// As many channels as fit at `speed`.
    pub fn at_speed(&self, speed: f64, hop: Hop, max_channels: usize) -> Found {
        let mut st = State {
            rem: self.cap.clone(),
            nic_tx: self.nic_speed.clone(),
            nic_rx: self.nic_speed.clone(),
            budget: 0,
        };
        let mut chains: Vec<Vec<u32>> = Vec::new();
        let mut nics = Vec::new();
        let mut worst = PathType::Loc;
        while chains.len() < max_channels {
            let nic = if self.multi && !self.nics.is_empty() {
                Some(chains.len() % self.nics.len())
            } else {
                None
            };
            if let Some(k) = nic {
                if st.nic_tx[k] < speed - EPS || st.nic_rx[k] < speed - EPS {
                    break;
                }
            }
            st.budget = BUDGET;
            let replay = chains.last().cloned();
            let Some(order) = self.one(&mut st, speed, hop, nic, replay.as_deref()) else {
                break;
            };
            if let Some(k) = nic {
                st.nic_tx[k] -= speed;
                st.nic_rx[k] -= speed;
            }
            for w in self.hops(&order, hop, nic) {
                worst = worst.max(w);
            }
            chains.push(order.iter().map(|&i| i as u32).collect());
            nics.push(nic);
        }
        Found {
            chains,
            nics,
            speed,
            worst,
        }
    }

    /// Path types of a channel's hops.
    fn hops(&self, order: &[usize], hop: Hop, nic: Option<usize>) -> Vec<PathType> {
        let mut v: Vec<PathType> = order
            .windows(2)
            .filter_map(|w| self.paths[w[0]][w[1]].as_ref().map(|p| p.kind))
            .collect();
        if hop == Hop::Ring && nic.is_none() && order.len() > 1 {
            if let Some(p) = &self.paths[order[order.len() - 1]][order[0]] {
                v.push(p.kind);
            }
        }
        v
    }

    /// Charges (sign +1) or refunds (-1) a path's links; false if a link lacks capacity.
    fn charge(&self, st: &mut State, p: &Path, speed: f64) -> bool {
        if p.links.iter().any(|l| st.rem[l.index()] < speed - EPS) {
            return false;
        }
        for l in &p.links {
            st.rem[l.index()] -= speed;
        }
        true
    }
    fn refund(&self, st: &mut State, p: &Path, speed: f64) {
        for l in &p.links {
            st.rem[l.index()] += speed;
        }
    }

    /// Charges a hop i → j (both directions for chains); false if it does not fit.
    fn take(&self, st: &mut State, i: usize, j: usize, speed: f64, hop: Hop) -> bool {
        let Some(p) = &self.paths[i][j] else {
            return false;
        };
        if !self.charge(st, p, speed) {
            return false;
        }
        if hop == Hop::Chain {
            let back = self.paths[j][i].as_ref();
            if !back.is_some_and(|b| self.charge(st, b, speed)) {
                self.refund(st, p, speed);
                return false;
            }
        }
        true
    }
    fn give(&self, st: &mut State, i: usize, j: usize, speed: f64, hop: Hop) {
        if let Some(p) = &self.paths[i][j] {
            self.refund(st, p, speed);
        }
        if hop == Hop::Chain {
            if let Some(b) = &self.paths[j][i] {
                self.refund(st, b, speed);
            }
        }
    }

    /// One channel: replay the previous order if it still fits, else depth-first search.
    fn one(
        &self,
        st: &mut State,
        speed: f64,
        hop: Hop,
        nic: Option<usize>,
        replay: Option<&[u32]>,
    ) -> Option<Vec<usize>> {
        if let Some(prev) = replay {
            let order: Vec<usize> = prev.iter().map(|&i| i as usize).collect();
            if self.try_fixed(st, &order, speed, hop, nic) {
                return Some(order);
            }
        }
        // Start GPUs: in index order (NCCL's PCI order) or, across hosts, closest to the NIC.
        let mut starts: Vec<usize> = (0..self.l).collect();
        if let Some(k) = nic {
            starts.sort_by(|&a, &b| {
                let pa = self.from_nic[a][k].as_ref();
                let pb = self.from_nic[b][k].as_ref();
                let key = |p: Option<&Path>| {
                    p.map(|p| (p.kind, -p.bw_gbps))
                        .unwrap_or((PathType::Dis, 0.0))
                };
                let (ka, kb) = (key(pa), key(pb));
                ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(a.cmp(&b))
            });
        } else if hop == Hop::Ring {
            starts.truncate(1); // a ring may start anywhere; GPU 0 is as good as any
        }
        for s in starts {
            let mut entry = None;
            if let Some(k) = nic {
                let p = self.from_nic[s][k].as_ref()?;
                if !self.charge(st, p, speed) {
                    continue;
                }
                entry = Some(p);
            }
            let mut order = vec![s];
            let mut used = vec![false; self.l];
            used[s] = true;
            if self.dfs(st, &mut order, &mut used, speed, hop, nic) {
                return Some(order);
            }
            if let Some(p) = entry {
                self.refund(st, p, speed);
            }
            if st.budget == 0 {
                break;
            }
        }
        None
    }

    fn close(
        &self,
        st: &mut State,
        order: &[usize],
        speed: f64,
        hop: Hop,
        nic: Option<usize>,
    ) -> bool {
        let last = *order.last().unwrap();
        match (hop, nic) {
            (_, Some(k)) => match self.to_nic[last][k].as_ref() {
                Some(p) => self.charge(st, p, speed),
                None => false,
            },
            (Hop::Ring, None) => {
                order.len() == 1 || self.take(st, last, order[0], speed, Hop::Ring)
            }
            (Hop::Chain, None) => true,
        }
    }

    fn try_fixed(
        &self,
        st: &mut State,
        order: &[usize],
        speed: f64,
        hop: Hop,
        nic: Option<usize>,
    ) -> bool {
        let snapshot = st.rem.clone();
        let ok = (|| {
            if let Some(k) = nic {
                let p = self.from_nic[order[0]][k].as_ref()?;
                if !self.charge(st, p, speed) {
                    return None;
                }
            }
            for w in order.windows(2) {
                if !self.take(st, w[0], w[1], speed, hop) {
                    return None;
                }
            }
            self.close(st, order, speed, hop, nic).then_some(())
        })()
        .is_some();
        if !ok {
            st.rem = snapshot;
        }
        ok
    }

    fn dfs(
        &self,
        st: &mut State,
        order: &mut Vec<usize>,
        used: &mut [bool],
        speed: f64,
        hop: Hop,
        nic: Option<usize>,
    ) -> bool {
        if st.budget == 0 {
            return false;
        }
        st.budget -= 1;
        let cur = *order.last().unwrap();
        if order.len() == self.l {
            return self.close(st, order, speed, hop, nic);
        }
        // Candidates: best path type, then most capacity left on the hop, then the next index
        // (NCCL tries neighbours g+1 first, so NVSwitch rings come out in index order).
        let mut cand: Vec<(PathType, f64, usize, usize)> = (0..self.l)
            .filter(|&j| !used[j])
            .filter_map(|j| {
                let p = self.paths[cur][j].as_ref()?;
                let left = p
                    .links
                    .iter()
                    .map(|l| st.rem[l.index()])
                    .fold(f64::INFINITY, f64::min);
                let dist = (j + self.l - cur) % self.l;
                Some((p.kind, -left, dist, j))
            })
            .collect();
        cand.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
        for (_, _, _, j) in cand {
            if !self.take(st, cur, j, speed, hop) {
                continue;
            }
            used[j] = true;
            order.push(j);
            if self.dfs(st, order, used, speed, hop, nic) {
                return true;
            }
            order.pop();
            used[j] = false;
            self.give(st, cur, j, speed, hop);
            if st.budget == 0 {
                return false;
            }
        }
        false
    }

    /// GPU node of local index i.
    #[allow(dead_code)]
    pub fn gpu_node(&self, i: usize) -> NodeId {
        self.gpu_nodes[i]
    }
}
