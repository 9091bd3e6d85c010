//! Where a communicator's schedules come from. The runtime has no algorithm of its own: it asks
//! the planner (or a plan file, or the `TOPOPLAN_ALGO`/`TOPOPLAN_PROTO` overrides, which name
//! one of the planner's builders) and executes the schedule IR it gets back.
//!
//! Order of precedence for a collective:
//! 1. a schedule in the plan file (`TOPOPLAN_PLAN`) for the same collective and rank count;
//! 2. the planner's (`planner::plan::Planner`) fastest choice for this size, among the algorithms
//!    and protocols the configuration allows (`TOPOPLAN_ALGO`, `TOPOPLAN_PROTO` narrow it to one),
//!    with `TOPOPLAN_CHANNELS` overriding its channel count; a choice whose schedule needs more
//!    channels than the transports carry ([`MAX_CHANNELS`]) gives way to the next algorithm.
//!
//! The planner plans on the topology the ranks find themselves on. CPU ranks share memory, which
//! every rank reaches at the same speed, so the communicator describes them as one host whose
//! ranks are all joined through one switch (`planner::topology::synth::single_host` with
//! all-to-all links) at [`CPU_LINK_GBPS`]. If the planner cannot plan (no channels found, or a
//! forced algorithm it does not offer for this collective), the topology-free builders of
//! `planner::schedule::build` are used with the forced or default (ring; direct for all-to-all
//! and sendrecv) algorithm. Either way the schedule is the planner's IR.
//!
//! Every schedule is validated before use and cached (schedules are size-independent).

use crate::config::Config;
use crate::error::CommError;
use planner::plan::Planner;
use planner::schedule::{build, Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{scale, synth, Fabric, FabricKind, LinkKind};
use planner::tuner::Filter;
use std::collections::HashMap;
use std::sync::Arc;

/// Collectives only the direct algorithm runs.
fn direct_only(kind: CollectiveKind) -> bool {
    matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv)
}

/// The most channels a schedule may use: what every transport carries (shared memory has a
/// connection region per channel).
pub const MAX_CHANNELS: u32 = crate::transport::shm::MAX_CHANNELS;

/// Bandwidth of the links of the topology CPU ranks are planned on (GB/s): a memory copy.
pub const CPU_LINK_GBPS: f64 = 10.0;

/// Port speed of the network between hosts in the model (GB/s): 10 Gb/s Ethernet.
pub const TCP_GBPS: f64 = 1.25;

/// Algorithm names accepted by `TOPOPLAN_ALGO`.
pub const ALGORITHMS: &[&str] = &[
    "ring",
    "tree",
    "one-shot",
    "two-shot",
    "direct",
    "copy-engine-pipeline",
];

pub fn parse_algorithm(s: &str) -> Option<Algorithm> {
    Algorithm::parse(s).ok()
}

/// The schedule source of one communicator.
#[derive(Debug)]
pub struct Plans {
    nranks: u32,
    algorithm: Option<Algorithm>,
    protocol: Option<Protocol>,
    channels: Option<u32>,
    slots: u32,
    file: Vec<Arc<Schedule>>,
    /// `None` when the planner could not plan this topology. Shared by the ranks of one
    /// process (the channel search runs once).
    planner: Arc<Option<Planner>>,
    cache: HashMap<(String, String, Protocol, u32), Arc<Schedule>>,
}

impl Plans {
    /// The planner of `nranks` CPU ranks (see the module docs), planned now: the channel search
    /// runs at init, not inside the first collective.
    pub fn cpu_planner(nranks: u32) -> Arc<Option<Planner>> {
        Arc::new(Planner::new(&synth::single_host(nranks, LinkKind::NvLink, CPU_LINK_GBPS)).ok())
    }

    /// The planner of CPU ranks spread over hosts (`host_of[r]` names rank r's host). When every
    /// host holds the same number of consecutive ranks (torchrun's layout), the hosts are
    /// modelled as copies of the single-host model joined by one switch at [`TCP_GBPS`], so the
    /// planner can pick hierarchical patterns; any other layout is planned as one host.
    pub fn cpu_planner_hosts(host_of: &[String]) -> Arc<Option<Planner>> {
        let n = host_of.len() as u32;
        let mut hosts: Vec<&String> = Vec::new();
        for h in host_of {
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        let nh = hosts.len() as u32;
        let per = n.checked_div(nh).unwrap_or(0);
        let regular = nh > 1
            && per * nh == n
            && host_of
                .iter()
                .enumerate()
                .all(|(r, h)| hosts[r / per as usize] == h);
        if !regular {
            return Self::cpu_planner(n);
        }
        let fabric = Fabric {
            kind: FabricKind::SingleSwitch,
            port_gbps: TCP_GBPS,
            switch_lat_us: 10.0,
        };
        let topo = scale(
            &synth::single_host(per, LinkKind::NvLink, CPU_LINK_GBPS),
            nh,
            fabric,
        );
        Arc::new(topo.ok().and_then(|t| Planner::new(&t).ok()))
    }

    /// `shared`: a planner from [`Plans::cpu_planner`] to share between ranks of one process.
    pub fn new(
        nranks: u32,
        cfg: &Config,
        shared: Option<Arc<Option<Planner>>>,
    ) -> Result<Self, CommError> {
        let algorithm = match &cfg.algorithm {
            None => None,
            Some(a) => Some(parse_algorithm(a).ok_or_else(|| {
                CommError::Config(format!(
                    "TOPOPLAN_ALGO={a:?}: expected one of {}",
                    ALGORITHMS.join(", ")
                ))
            })?),
        };
        let mut file = Vec::new();
        if let Some(p) = &cfg.plan_file {
            let text = planner::input::read_text(p)
                .map_err(|e| CommError::Config(format!("plan file {e}")))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CommError::Config(format!("plan file {}: {e}", p.display())))?;
            let list = if v.is_array() {
                v
            } else {
                serde_json::Value::Array(vec![v])
            };
            let scheds: Vec<Schedule> = serde_json::from_value(list).map_err(|e| {
                CommError::Config(format!("plan file {}: not schedule IR: {e}", p.display()))
            })?;
            for (i, s) in scheds.into_iter().enumerate() {
                s.validate().map_err(|e| {
                    CommError::Config(format!("plan file {} schedule {i}: {e}", p.display()))
                })?;
                if s.nranks == nranks {
                    file.push(Arc::new(s));
                }
            }
        }
        Ok(Plans {
            nranks,
            algorithm,
            protocol: cfg.protocol,
            channels: cfg.channels,
            slots: cfg.slots,
            file,
            planner: shared.unwrap_or_else(|| Self::cpu_planner(nranks)),
            cache: HashMap::new(),
        })
    }

    /// The schedule for `coll` at `bytes` bytes (nccl-tests' size: the larger buffer).
    pub fn schedule(&mut self, coll: &Collective, bytes: u64) -> Result<Arc<Schedule>, CommError> {
        if let Some(s) = self.file.iter().find(|s| &s.collective == coll) {
            if s.slots > self.slots {
                return Err(CommError::Plan(format!(
                    "{}: plan-file schedule needs {} slots, the runtime has {}",
                    coll.kind.name(),
                    s.slots,
                    self.slots
                )));
            }
            return Ok(s.clone());
        }
        let n = self.nranks;
        let planner = self.planner.as_ref().as_ref();
        let choice = planner.and_then(|p| self.choose_fitting(p, coll, bytes));
        let (alg, proto, ch) = match &choice {
            Some(c) => (
                c.algorithm.clone(),
                c.protocol,
                self.channels.or(Some(c.channels)),
            ),
            None => {
                let (a, p, c) = self.fallback(coll);
                (a, p, Some(c))
            }
        };
        let key = (format!("{coll:?}"), alg.name(), proto, ch.unwrap_or(0));
        if let Some(s) = self.cache.get(&key) {
            return Ok(s.clone());
        }
        let planned = planner.map(|p| p.schedule(coll, &alg, proto, ch).map_err(|e| e.to_string()));
        let s = match planned {
            Some(Ok(s)) => s,
            other => {
                let why = match other {
                    Some(Err(e)) => format!("planner: {e}; "),
                    _ => String::new(),
                };
                // The planner could not build its own pick: use the topology-free builders with
                // the forced or default algorithm.
                let (alg, proto, c) = if choice.is_some() {
                    self.fallback(coll)
                } else {
                    (alg.clone(), proto, ch.unwrap_or(1))
                };
                self.build(coll, &alg, proto, c).map_err(|e| {
                    CommError::Plan(format!(
                        "{} with {} / {} on {n} ranks: {why}builder: {e}",
                        coll.kind.name(),
                        alg.name(),
                        proto.name()
                    ))
                })?
            }
        };
        let s = self.admit(s, coll)?;
        self.cache.insert(key, s.clone());
        Ok(s)
    }

    /// The planner's fastest choice whose schedule fits the channels every transport carries
    /// ([`MAX_CHANNELS`]): a pick built over more (packed trees on a large machine, one channel
    /// per tree lane) gives way to the next algorithm. A forced algorithm is kept as it is.
    fn choose_fitting(
        &self,
        p: &Planner,
        coll: &Collective,
        bytes: u64,
    ) -> Option<planner::plan::Choice> {
        let forced = self.forced_for(coll.kind);
        let mut allowed: Vec<Algorithm> = match &forced {
            Some(a) => vec![a.clone()],
            None => Algorithm::ALL.to_vec(),
        };
        loop {
            let filter = Filter {
                algorithms: Some(allowed.clone()),
                protocols: self.protocol.map(|p| vec![p]),
                channels: None,
            };
            let c = p.choose_filtered(coll, bytes, &filter)?;
            let ch = self.channels.or(Some(c.channels));
            let fits = p
                .schedule(coll, &c.algorithm, c.protocol, ch)
                .map_or(true, |s| s.channels <= MAX_CHANNELS);
            if fits || forced.is_some() {
                return Some(c);
            }
            allowed.retain(|a| *a != c.algorithm);
        }
    }

    fn admit(&self, s: Schedule, coll: &Collective) -> Result<Arc<Schedule>, CommError> {
        s.validate()
            .map_err(|e| CommError::Plan(format!("{}: invalid schedule: {e}", coll.kind.name())))?;
        if s.nranks != self.nranks || &s.collective != coll {
            return Err(CommError::Plan(format!(
                "{}: schedule is for another collective or rank count",
                coll.kind.name()
            )));
        }
        if s.slots > self.slots {
            return Err(CommError::Plan(format!(
                "{}: schedule needs {} slots per connection, the runtime has {}",
                coll.kind.name(),
                s.slots,
                self.slots
            )));
        }
        Ok(Arc::new(s))
    }

    /// Algorithm, protocol and channel count when the planner has no choice: the forced ones,
    /// else ring (direct for all-to-all and sendrecv).
    fn fallback(&self, coll: &Collective) -> (Algorithm, Protocol, u32) {
        let alg = match self.forced_for(coll.kind) {
            Some(a) => a,
            None if direct_only(coll.kind) => Algorithm::Direct,
            None => Algorithm::Ring,
        };
        (
            alg,
            self.protocol.unwrap_or(Protocol::Simple),
            self.channels.unwrap_or(1),
        )
    }

    /// The forced algorithm (`TOPOPLAN_ALGO`), where it can run `kind`: it applies to a whole
    /// job's collectives, so all-to-all and send/recv ignore anything but `direct`, and the
    /// others ignore `direct` (the runtime's own all-reduces for timing and checks included).
    fn forced_for(&self, kind: CollectiveKind) -> Option<Algorithm> {
        self.algorithm
            .clone()
            .filter(|a| direct_only(kind) == (*a == Algorithm::Direct))
    }

    fn build(
        &self,
        coll: &Collective,
        alg: &Algorithm,
        proto: Protocol,
        ch: u32,
    ) -> Result<Schedule, String> {
        let n = self.nranks;
        let e = |e: planner::schedule::ScheduleError| e.to_string();
        match alg {
            Algorithm::Ring => {
                let rings: Vec<Vec<u32>> = (0..ch).map(|_| (0..n).collect()).collect();
                build::ring(coll, &rings, proto).map_err(e)
            }
            Algorithm::Tree => {
                // A binary tree hanging from the collective's root (rank 0 when unrooted).
                let root = coll.root.unwrap_or(0);
                let order: Vec<u32> = (0..n).map(|i| (root + i) % n).collect();
                let mut parent = vec![None; n as usize];
                for i in 1..n as usize {
                    parent[order[i] as usize] = Some(order[(i - 1) / 2]);
                }
                let t = build::TreeChannel::from_parents(parent).map_err(e)?;
                build::tree(coll, &vec![t; ch as usize], proto).map_err(e)
            }
            Algorithm::OneShot => build::one_shot_channels(coll, n, proto, ch).map_err(e),
            Algorithm::TwoShot => build::two_shot_channels(coll, n, proto, ch).map_err(e),
            Algorithm::Direct => build::direct(coll, n).map_err(e),
            Algorithm::CopyEnginePipeline => build::copy_engine_pipeline(coll, 4 * ch).map_err(e),
            other => Err(format!(
                "{} cannot be built without a topology",
                other.name()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    /// Whatever the planner picks for CPU ranks (packed trees use one channel per tree lane), the
    /// schedule fits the transports' channels, at every size and rank count.
    #[test]
    fn every_planned_schedule_fits_the_transports_channels() {
        use super::*;
        for n in [3u32, 4, 6, 8] {
            let mut plans = Plans::new(n, &Config::default(), None).unwrap();
            for kind in [
                CollectiveKind::AllReduce,
                CollectiveKind::AllGather,
                CollectiveKind::ReduceScatter,
            ] {
                for sh in (4..=32).step_by(4) {
                    let s = plans.schedule(&Collective::new(kind), 1 << sh).unwrap();
                    assert!(
                        s.channels <= MAX_CHANNELS,
                        "{kind:?} on {n} ranks at 2^{sh} B: {} {} channels",
                        s.algorithm.name(),
                        s.channels
                    );
                }
            }
        }
    }

    use super::*;
    use crate::check::{collective_for, Case};
    use crate::comm::Communicator;
    use crate::transport::local::{LocalHub, LocalTransport};
    use crate::types::{DataType, ReduceOp};

    /// Two hosts of two ranks: the planner plans a cluster (hierarchical all-reduce for small
    /// sizes), and its schedules compute the right results when executed.
    #[test]
    fn multi_host_plans_execute_correctly() {
        let hosts: Vec<String> = ["a", "a", "b", "b"].iter().map(|s| s.to_string()).collect();
        let planner = Plans::cpu_planner_hosts(&hosts);
        let p = planner
            .as_ref()
            .as_ref()
            .expect("the planner plans two hosts of two CPU ranks");
        assert_eq!(p.nranks(), 4);
        let cfg = Config::default();
        let hub = LocalHub::new(cfg.slots, cfg.slot_bytes + crate::protocol::SLOT_HEADER);
        let comms: Vec<Communicator> = (0..4)
            .map(|r| {
                let t = LocalTransport {
                    hub: hub.clone(),
                    rank: r,
                };
                Communicator::with_transport(
                    r,
                    4,
                    cfg.clone(),
                    Box::new(t),
                    Vec::new(),
                    Some(planner.clone()),
                )
                .unwrap()
            })
            .collect();
        let mut cases = Vec::new();
        for kind in CollectiveKind::ALL {
            for count in [3usize, 5000, 300_000] {
                let op = if kind.reduces() {
                    ReduceOp::Sum
                } else {
                    ReduceOp::Max
                };
                cases.push(Case {
                    coll: collective_for(kind, 4, 1),
                    dtype: DataType::F32,
                    op,
                    count,
                    in_place: false,
                    seed: count as u64,
                });
            }
        }
        let want: Vec<_> = cases.iter().map(|c| c.expected(4)).collect();
        let hs: Vec<_> = comms
            .into_iter()
            .map(|mut comm| {
                let (cases, want) = (cases.clone(), want.clone());
                std::thread::spawn(move || {
                    let r = comm.rank();
                    for (c, w) in cases.iter().zip(&want) {
                        let (send, mut recv) = c.buffers(4, r);
                        c.run(&mut comm, send.as_deref(), &mut recv).unwrap();
                        assert_eq!(c.wrong(r, &recv, w[r as usize].as_deref()), 0, "{c:?}");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // An irregular layout is planned as one host.
        let odd: Vec<String> = ["a", "b", "a"].iter().map(|s| s.to_string()).collect();
        assert!(Plans::cpu_planner_hosts(&odd).as_ref().is_some());
    }
}
