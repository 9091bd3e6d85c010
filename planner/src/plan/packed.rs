//! The planner's packed trees (`planner::bound::pack`) and what the tuner needs to know of them.

use crate::bound::pack::pack;
use crate::schedule::TreeChannel;
use crate::search::Channels;
use crate::topology::Topology;
use crate::tuner::profile::ProfileChoice;
use crate::tuner::{self, EngineTerms, PackedPaths, PackedSet, PackedWave};

/// Most ranks packed when a planner is made: a packing of 8 GPUs takes about 0.1 s of CPU, of 16
/// about 1 s; larger machines keep rings and trees.
pub const PACK_MAX_RANKS: u32 = 16;

/// The packing of a planner's machine, made at its first use (planners are made often, by
/// tests and the runtime, and most never ask for packed trees).
#[derive(Clone, Debug)]
pub(super) struct Lazy {
    /// What to pack: the machine, its channels and profile (`None`: not eligible).
    input: Option<Box<(Topology, Channels, ProfileChoice)>>,
    cell: std::sync::OnceLock<Option<(PackedSet, PackedTrees)>>,
}

impl Lazy {
    pub fn new(t: &Topology, ch: &Channels, profile: &ProfileChoice) -> Lazy {
        let n = t.n_ranks() as u32;
        let eligible = ch.hosts.len() == 1 && (3..=PACK_MAX_RANKS).contains(&n);
        Lazy {
            input: eligible.then(|| Box::new((t.clone(), ch.clone(), profile.clone()))),
            cell: std::sync::OnceLock::new(),
        }
    }

    pub fn get(&self) -> Option<&(PackedSet, PackedTrees)> {
        let (t, ch, p) = self.input.as_deref()?;
        self.cell.get_or_init(|| plan_packed(t, ch, p)).as_ref()
    }
}

/// Trees per root and the trees themselves, ready for `build::packed`.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedTrees {
    pub copies: u32,
    pub trees: Vec<TreeChannel>,
}

/// Packs trees on one host of 3 to [`PACK_MAX_RANKS`] GPUs (on two, packed trees are the ring).
/// No tree is asked more than one channel's rate (the profile's Simple channel, else a ring
/// channel's) at a node with several children.
pub fn plan_packed(
    t: &Topology,
    ch: &Channels,
    profile: &ProfileChoice,
) -> Option<(PackedSet, PackedTrees)> {
    let n = t.n_ranks() as u32;
    if ch.hosts.len() != 1 || !(3..=PACK_MAX_RANKS).contains(&n) {
        return None;
    }
    let per_channel = profile
        .profile
        .sim
        .get("simple")
        .and_then(|x| x.get("channel_gbps"))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(ch.ring_run().bw_gbps);
    let p = pack(t, per_channel)?;
    let trees = p
        .trees
        .iter()
        .map(|par| TreeChannel::from_parents(par.clone()).ok())
        .collect::<Option<Vec<_>>>()?;
    let set = PackedSet {
        trees: trees.len() as u32,
        ag_busbw_gbps: p.ag_busbw_gbps,
        rs_busbw_gbps: p.rs_busbw_gbps,
        ar_busbw_gbps: p.ar_busbw_gbps,
        depth: p.depth,
        intra: ch.ring.intra,
        paths: PackedPaths::of(&trees, |a, b| t.gpu_path(a, b).map_or(0.0, |x| x.lat_us)),
        wave: wave(t, &trees, &profile.profile.tuner.engine),
        sends: sends(t, &trees),
        lanes: trees
            .iter()
            .map(|x| crate::schedule::build::lanes(x).1)
            .collect(),
        memo: Default::default(),
    };
    Some((
        set,
        PackedTrees {
            copies: p.copies,
            trees,
        },
    ))
}

/// [`PackedSet::sends`]: each tree's sends over the topology's routes (a link by its index in
/// the topology, at its rate; one host: no network step).
fn sends(t: &Topology, trees: &[TreeChannel]) -> Vec<tuner::TreeSends> {
    let route = |a: u32, b: u32| match t.gpu_path(a, b) {
        Some(p) => {
            let links = p.links.iter().map(|&l| (l.index(), t.graph[l].bw_gbps));
            (p.lat_us, links.collect(), 0.0)
        }
        None => (0.0, Vec::new(), 0.0),
    };
    trees
        .iter()
        .filter_map(|x| tuner::TreeSends::of(x, &route))
        .collect()
}

/// [`PackedSet::wave`]: the trees' transfers over the topology's routes, the links at SM
/// traffic's efficiency.
fn wave(t: &Topology, trees: &[TreeChannel], e: &EngineTerms) -> PackedWave {
    let mut index = std::collections::HashMap::new();
    let mut caps = Vec::new();
    let eff = if e.link_eff > 0.0 { e.link_eff } else { 1.0 };
    let route = |a: u32, b: u32| -> (Vec<usize>, f64) {
        let Some(p) = t.gpu_path(a, b) else {
            return (Vec::new(), 0.0);
        };
        let links = p.links.iter().map(|&l| {
            *index.entry(l).or_insert_with(|| {
                caps.push(t.graph[l].bw_gbps * eff);
                caps.len() - 1
            })
        });
        (links.collect(), p.lat_us)
    };
    let flows = tuner::wave_flows(trees, route);
    PackedWave { flows, caps }
}
