//! Which planner schedule the CUDA backend runs for a collective and size. The runtime never
//! invents an algorithm: it picks among the planner's builders (`planner::schedule::build`) as
//! the planner's tuner prices them with the machine profile it is given (`profiles/`,
//! `topoplan bench --profile`; for GPU pairs the measured crossovers of the profile's `runtime`
//! section, which the tuner reproduces: a test checks it on the bundled profile), or as
//! `TOPOPLAN_ALGO` / `--algo` says. Every function that chooses takes the profile: there is no
//! profile of the runtime's own.

use planner::schedule::build;
use planner::schedule::{Collective, CollectiveKind, Protocol, Schedule, Transport};

/// Algorithms `topoplan bench --algo` and `TOPOPLAN_ALGO` accept.
pub const ALGOS: [&str; 10] = [
    "auto",
    "one-shot",
    "one-shot-ll",
    "one-shot-ll128",
    "two-shot",
    "ring",
    "tree",
    "ce",
    "direct",
    "direct-ll",
];

use planner::tuner::{self, ChannelSet, Filter, Hw, Profile, SystemModel};

fn ce_auto() -> bool {
    params::CE_AUTO.flag_or_warn()
}

/// Up to this size (bytes per rank; `TOPOPLAN_LL128_MAX` overrides) `auto` uses LL128 above
/// the LL range, where the direct path runs it.
const LL128_UP_TO_BYTES: u64 = 0;

fn ll128_up_to() -> u64 {
    params::LL128_MAX
        .bytes_or_warn()
        .unwrap_or(LL128_UP_TO_BYTES)
}

/// Up to this size (bytes per rank; `TOPOPLAN_LL_MAX` overrides) `auto` sends two-rank direct
/// schedules through LL buffers: no barrier, one NVLink latency, but only 8 data bytes per
/// 16-byte line. The profile's measured crossover (`runtime.ll_up_to_bytes`; 2×H200: 512 KiB).
fn ll_up_to(p: &Profile) -> u64 {
    params::LL_MAX
        .bytes_or_warn()
        .unwrap_or(p.runtime.ll_up_to_bytes)
}

/// The tuner's model of one host of `nranks` GPUs, every pair NVLinked as on the profile's
/// machine (the CUDA backend runs one process on one host): rings and trees as NCCL runs them
/// there (24 channels sharing the searched 360 GB/s of 18 NVLinks), the direct patterns.
fn host_model(p: &Profile, nranks: u32) -> SystemModel {
    let nvl = p.machine.nvlink_gbps_per_gpu.max(1.0);
    // NCCL's search on 18 NVLinks of 20.6 GB/s: 12 channels × 30 GB/s, run twice.
    let searched = (nvl / 30.0).floor().max(1.0) * 30.0;
    let set = ChannelSet {
        count: 24,
        bw_gbps: searched / 24.0,
        intra: Hw::NvLink,
    };
    SystemModel {
        nranks,
        nnodes: 1,
        sm: p.machine.sm,
        ring: Some(set.clone()),
        tree: Some(set),
        all_peers_nvlink_gbps: Some(nvl),
        net_lat_us: 0.0,
        direct_gbps: nvl,
        nic_gbps_per_gpu: 0.0,
        calib: p.tuner.clone(),
        packed: None,
        p2p: None,
    }
}

/// The runtime's name of the tuner's fastest candidate among what the CUDA backend runs (the
/// one-shot in LL, LL128 and Simple, the two-shot, ring and tree in Simple).
fn tuner_algo(p: &Profile, kind: CollectiveKind, nranks: u32, bytes: u64) -> Option<&'static str> {
    use planner::schedule::Algorithm as A;
    let mut c = tuner::candidates(&host_model(p, nranks), kind, bytes, &Filter::default());
    c.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
    c.into_iter().find_map(|e| match (e.algorithm, e.protocol) {
        (A::OneShot, Protocol::LL) => Some("one-shot-ll"),
        (A::OneShot, Protocol::LL128) => Some("one-shot-ll128"),
        (A::OneShot, Protocol::Simple) => Some("one-shot"),
        (A::TwoShot, Protocol::Simple) => Some("two-shot"),
        (A::Ring, Protocol::Simple) => Some("ring"),
        (A::Tree, Protocol::Simple) => Some("tree"),
        _ => None,
    })
}

/// For the multi-process path, which runs the direct schedules only: the tuner's price of the
/// fastest of them (one-shot in LL, LL128 or Simple) against the fastest of NCCL's own
/// algorithms (ring, tree) for `kind` of `bytes` per rank on `nranks` GPUs of the profile's
/// machine, as (ours, NCCL's) in µs. `None` for what the tuner does not price.
pub fn direct_vs_nccl(
    p: &Profile,
    kind: CollectiveKind,
    nranks: u32,
    bytes: u64,
) -> Option<(f64, f64)> {
    use planner::schedule::Algorithm as A;
    let c = tuner::candidates(&host_model(p, nranks), kind, bytes, &Filter::default());
    let best = |keep: &dyn Fn(&A) -> bool| {
        c.iter()
            .filter(|e| keep(&e.algorithm))
            .map(|e| e.time_us)
            .min_by(f64::total_cmp)
    };
    let ours = best(&|a| *a == A::OneShot)?;
    let nccl = best(&|a| matches!(a, A::Ring | A::Tree))?;
    Some((ours, nccl))
}

/// Bytes per chunk of the copy-engine pipeline schedule. Only the generic lowering
/// (`TOPOPLAN_CE_PAIR=0`) follows it; `ce_pair` cuts the message itself (64 MiB chunks).
const CE_CHUNK_BYTES: u64 = 16 << 20;
/// From this size (bytes per rank) `auto` uses the copy-engine pipeline for 2-rank all-reduce.
const CE_FROM_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum PickError {
    #[error(
        "unknown algorithm `{0}` (one of: auto, one-shot, one-shot-ll, one-shot-ll128, two-shot, ring, tree, ce, direct, direct-ll)"
    )]
    Unknown(String),
    #[error("{0}")]
    Build(String),
}

/// The name `auto` resolves to for this collective, rank count and per-rank byte size, priced
/// with `profile` (its tuner section above two ranks, its `runtime` section for pairs).
pub fn auto_algo(profile: &Profile, kind: CollectiveKind, nranks: u32, bytes: u64) -> &'static str {
    if kind == CollectiveKind::AllToAll {
        return auto_direct_algo(profile, kind, bytes, false);
    }
    if nranks > 2
        && matches!(
            kind,
            CollectiveKind::AllReduce
                | CollectiveKind::AllGather
                | CollectiveKind::ReduceScatter
                | CollectiveKind::Broadcast
                | CollectiveKind::Reduce
        )
    {
        if let Some(name) = tuner_algo(profile, kind, nranks, bytes) {
            // One-way LL flows need the direct path's credits (the generic lowering refuses
            // them).
            let one_way = matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce);
            return match name {
                "one-shot-ll" | "one-shot-ll128" if one_way && !super::direct::enabled() => {
                    "one-shot"
                }
                "one-shot-ll128" if !super::direct::enabled() => "one-shot",
                n => n,
            };
        }
    }
    match kind {
        // The copy-engine pair all-reduce is not chosen (`TOPOPLAN_CE_AUTO` opts in): measured
        // at 330-345 GB/s busbw at 512 MiB against the SM one-shot's 359 (docs/benchmarks-gpu.md).
        // `--algo ce` still runs it.
        CollectiveKind::AllReduce if nranks == 2 && bytes >= CE_FROM_BYTES && ce_auto() => "ce",
        // In one process, the direct path's pull mode beats LL from 512 KiB (2×H200: 7.7
        // against 9.2 µs), so LL yields where pull would run the Simple one-shot.
        CollectiveKind::AllReduce
            if bytes <= ll_up_to(profile)
                && !super::direct::pull::wanted(kind, Protocol::Simple, bytes) =>
        {
            "one-shot-ll"
        }
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter if bytes <= ll_up_to(profile) => {
            "one-shot-ll"
        }
        // One-way LL flows need the direct path's credits (the generic lowering refuses them).
        CollectiveKind::Broadcast | CollectiveKind::Reduce
            if bytes <= ll_up_to(profile) && super::direct::enabled() =>
        {
            "one-shot-ll"
        }
        _ if bytes <= ll128_up_to() && super::direct::enabled() => "one-shot-ll128",
        _ => "one-shot",
    }
}

/// What `auto` means where only the direct path runs (one process per GPU, `--procs`): the
/// one-shot schedules, LL up to the LL limit, Simple above, whatever the rank count. With
/// `pull` (the inputs registered, so pull mode can run), LL yields where pull mode would run,
/// as in one process. The LL limit is `profile`'s.
pub fn auto_direct_algo(
    profile: &Profile,
    kind: CollectiveKind,
    bytes: u64,
    pull: bool,
) -> &'static str {
    let ll = bytes <= ll_up_to(profile)
        && !(pull && super::direct::pull::wanted(kind, Protocol::Simple, bytes));
    // All-to-all is the direct pattern (block q to rank q); `bytes` is one block.
    match (kind == CollectiveKind::AllToAll, ll) {
        (true, true) => "direct-ll",
        (true, false) => "direct",
        (false, true) => "one-shot-ll",
        (false, false) => "one-shot",
    }
}

/// Builds the schedule for `coll` on `nranks` ranks with algorithm `algo` (see [`ALGOS`]);
/// `auto` is [`auto_algo`] priced with `profile` (the other names ignore it).
pub fn pick(
    coll: &Collective,
    nranks: u32,
    bytes: u64,
    algo: &str,
    profile: &Profile,
) -> Result<(String, Schedule), PickError> {
    let name = if algo == "auto" {
        auto_algo(profile, coll.kind, nranks, bytes)
    } else {
        algo
    };
    let err = |e: planner::schedule::ScheduleError| PickError::Build(format!("{name}: {e}"));
    let ring: Vec<u32> = (0..nranks).collect();
    let s = match name {
        "one-shot" => build::one_shot(coll, nranks, Protocol::Simple).map_err(err)?,
        "one-shot-ll" => build::one_shot(coll, nranks, Protocol::LL).map_err(err)?,
        "one-shot-ll128" => build::one_shot(coll, nranks, Protocol::LL128).map_err(err)?,
        "two-shot" => build::two_shot(coll, nranks, Protocol::Simple).map_err(err)?,
        "ring" => {
            let mut s = build::ring(coll, &[ring], Protocol::Simple).map_err(err)?;
            // One process, peer-mapped buffers: receivers load straight from the sender.
            set_transport(&mut s, Transport::P2pLoad);
            s
        }
        "tree" => {
            let parent: Vec<Option<u32>> = (0..nranks)
                .map(|r| if r == 0 { None } else { Some((r - 1) / 2) })
                .collect();
            let t = build::TreeChannel::from_parents(parent).map_err(err)?;
            let mut s = build::tree(coll, &[t], Protocol::Simple).map_err(err)?;
            set_transport(&mut s, Transport::P2pLoad);
            s
        }
        "direct" => build::direct(coll, nranks).map_err(err)?,
        // The direct all-to-all through LL lines: its small blocks then cost one NVLink
        // latency, as the one-shot's do.
        "direct-ll" if coll.kind == CollectiveKind::AllToAll => {
            let mut s = build::direct(coll, nranks).map_err(err)?;
            s.protocol = Protocol::LL;
            s
        }
        "direct-ll" => {
            return Err(PickError::Build(
                "direct-ll: the LL direct schedule is an all-to-all".into(),
            ))
        }
        "ce" => {
            let chunks = bytes.div_ceil(CE_CHUNK_BYTES).clamp(1, 1024) as u32;
            build::copy_engine_pipeline(coll, chunks).map_err(err)?
        }
        other => return Err(PickError::Unknown(other.to_string())),
    };
    Ok((name.to_string(), s))
}

fn set_transport(s: &mut Schedule, t: Transport) {
    for r in &mut s.ranks {
        for c in &mut r.channels {
            for op in &mut c.ops {
                op.transport = t;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct path against NCCL's ring and tree on the bundled H200 profile: ours wins
    /// every size on two ranks and at small sizes on more; a one-shot all-reduce moves n - 1
    /// copies of the input, so on 8 ranks from a few MiB the ring wins by far.
    #[test]
    fn the_direct_path_loses_to_nccls_ring_only_for_large_many_rank_all_reduce() {
        let ar = CollectiveKind::AllReduce;
        for sh in [3u32, 10, 16, 20, 24, 30] {
            let (ours, nccl) = direct_vs_nccl(b(), ar, 2, 1 << sh).unwrap();
            assert!(ours < nccl, "2 ranks 2^{sh}: {ours} against {nccl}");
            let (ours, nccl) = direct_vs_nccl(b(), ar, 8, 1 << sh.min(16)).unwrap();
            assert!(ours < nccl, "8 ranks small: {ours} against {nccl}");
        }
        let (ours, nccl) = direct_vs_nccl(b(), ar, 8, 1 << 30).unwrap();
        assert!(nccl * 3.0 < ours, "8 ranks 1 GiB: {ours} against {nccl}");
        let ag = CollectiveKind::AllGather;
        let (ours, nccl) = direct_vs_nccl(b(), ag, 8, 1 << 30).unwrap();
        assert!(ours < nccl, "8-rank all-gather: {ours} against {nccl}");
        assert_eq!(
            direct_vs_nccl(b(), CollectiveKind::AllToAll, 8, 1 << 20),
            None
        );
    }

    fn b() -> &'static Profile {
        Profile::bundled()
    }

    /// Above two ranks `auto` is the tuner's choice (the profile's model of an all-NVLink
    /// host), restricted to what the backend runs: small messages one-shot, large all-reduce a
    /// bandwidth-optimal schedule, never a hand table.
    #[test]
    fn auto_above_two_ranks_is_the_tuners_choice() {
        let ar = CollectiveKind::AllReduce;
        assert_eq!(auto_algo(b(), ar, 2, 8), "one-shot-ll");
        assert_eq!(auto_algo(b(), ar, 2, 1 << 30), "one-shot");
        for kind in [
            ar,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
            CollectiveKind::Broadcast,
            CollectiveKind::Reduce,
        ] {
            for n in [3u32, 4, 8] {
                for bytes in [8u64, 64 << 10, 1 << 20, 64 << 20, 1 << 30] {
                    let want = tuner_algo(b(), kind, n, bytes).unwrap();
                    let got = auto_algo(b(), kind, n, bytes);
                    let one_way =
                        matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce);
                    if !(want.starts_with("one-shot-ll") && (one_way || want == "one-shot-ll128")) {
                        assert_eq!(got, want, "{kind:?} {n} {bytes}");
                    }
                }
            }
        }
        assert_eq!(auto_algo(b(), ar, 8, 8), "one-shot-ll");
        // A 1 GiB all-reduce on 8 GPUs is not a one-shot: it moves 7x the bytes through each
        // GPU's links.
        assert_ne!(auto_algo(b(), ar, 8, 1 << 30), "one-shot");
        let ar = CollectiveKind::AllReduce;
        assert_eq!(auto_direct_algo(b(), ar, 1 << 30, false), "one-shot");
        assert_eq!(auto_direct_algo(b(), ar, 8, true), "one-shot-ll");
        // 512 KiB: LL unless pull mode can run it (registered inputs).
        assert_eq!(auto_direct_algo(b(), ar, 512 << 10, false), "one-shot-ll");
        assert_eq!(auto_direct_algo(b(), ar, 512 << 10, true), "one-shot");
        assert_eq!(
            auto_direct_algo(b(), CollectiveKind::AllGather, 512 << 10, true),
            "one-shot-ll"
        );
        // Every name auto gives builds for every collective it is given.
        for kind in [
            ar,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
            CollectiveKind::Broadcast,
            CollectiveKind::Reduce,
        ] {
            for n in [2, 3, 8] {
                for bytes in [8u64, 1 << 20, 1 << 30] {
                    let coll = Collective {
                        root: Some(0),
                        ..Collective::new(kind)
                    };
                    let (name, s) = pick(&coll, n, bytes, "auto", b()).unwrap();
                    assert_eq!(s.nranks, n, "{kind:?} {name}");
                }
            }
        }
    }

    /// On the machine both were calibrated on (2×H200), the planner's tuner and the runtime's
    /// `auto` pick the same algorithm and protocol for all-reduce at every size: `topoplan plan`
    /// predicts what `topoplan bench` runs.
    #[test]
    fn auto_agrees_with_the_tuner_on_h200x2() {
        use planner::schedule::Algorithm;
        use planner::topology::{load_file, LoadOptions};
        let t = load_file(
            std::path::Path::new("../tests/data/measurements/h200x2/topo.xml"),
            &LoadOptions::default(),
        )
        .unwrap()
        .topology;
        let p = planner::plan::Planner::new(&t).unwrap();
        let coll = Collective::new(CollectiveKind::AllReduce);
        let mut bytes = 8u64;
        while bytes <= 4 << 30 {
            let c = p.choose(&coll, bytes);
            let ours = match auto_algo(b(), CollectiveKind::AllReduce, 2, bytes) {
                "one-shot-ll" => (Algorithm::OneShot, Protocol::LL),
                "one-shot" => (Algorithm::OneShot, Protocol::Simple),
                other => panic!("auto picked {other} at {bytes} B"),
            };
            assert_eq!((c.algorithm, c.protocol), ours, "{bytes} B");
            bytes *= 2;
        }
    }

    /// `auto` reads the profile it is given: with a lower `runtime.ll_up_to_bytes`, a pair's
    /// message between the two limits leaves LL, and with a higher one a message above the
    /// bundled limit stays in LL. (`TOPOPLAN_LL_MAX`, which overrides both, is not set in
    /// tests.)
    #[test]
    fn a_profiles_ll_limit_moves_autos_choice() {
        let bundled = b().runtime.ll_up_to_bytes;
        assert!(bundled >= 16, "{bundled}");
        let mut low = b().clone();
        low.runtime.ll_up_to_bytes = bundled / 8;
        let mut high = b().clone();
        high.runtime.ll_up_to_bytes = bundled * 8;
        let ag = CollectiveKind::AllGather;
        // Between the low and the bundled limit.
        let mid = bundled / 2;
        assert_eq!(auto_algo(b(), ag, 2, mid), "one-shot-ll");
        assert_eq!(auto_algo(&low, ag, 2, mid), "one-shot");
        assert_eq!(auto_direct_algo(b(), ag, mid, false), "one-shot-ll");
        assert_eq!(auto_direct_algo(&low, ag, mid, false), "one-shot");
        // Between the bundled and the high limit.
        assert_eq!(auto_algo(b(), ag, 2, bundled * 2), "one-shot");
        assert_eq!(auto_algo(&high, ag, 2, bundled * 2), "one-shot-ll");
        // `pick` builds what the profile chose.
        let coll = Collective::new(ag);
        let (name, s) = pick(&coll, 2, mid, "auto", &low).unwrap();
        assert_eq!((name.as_str(), s.protocol), ("one-shot", Protocol::Simple));
        let (name, s) = pick(&coll, 2, mid, "auto", b()).unwrap();
        assert_eq!((name.as_str(), s.protocol), ("one-shot-ll", Protocol::LL));
    }
}
