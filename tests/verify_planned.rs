//! Random topologies (planner::topology::synth::random: 1–8 hosts, 2–64 GPUs, random NVLink,
//! PCIe and NIC structure) → the planner's schedules for every collective verify, and mutated
//! planned schedules are caught. The seed of a failing case is printed.

use planner::plan::Planner;
use planner::schedule::{Collective, CollectiveKind, Op, Schedule};
use planner::topology::synth;
use proptest::prelude::*;

fn collective(kind: CollectiveKind, n: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, n - 1),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| Some((i + 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    }
}

/// Every schedule the tuner picks at 8 B, 1 MiB and 1 GiB, and every candidate it weighs, for
/// every collective.
fn planned(seed: u64) -> Vec<(String, Schedule)> {
    let topo = synth::random(seed);
    let planner = Planner::new(&topo).unwrap_or_else(|e| panic!("seed {seed}: planner: {e}"));
    let n = planner.nranks();
    let mut out = Vec::new();
    for kind in CollectiveKind::ALL {
        let coll = collective(kind, n);
        let mut seen = Vec::new();
        // The tuner's pick at three sizes, then every other candidate it considers.
        let mut picks: Vec<(u64, planner::plan::Choice)> = [8u64, 1 << 20, 1 << 30]
            .iter()
            .map(|&b| (b, planner.choose(&coll, b)))
            .collect();
        for c in planner.candidates(&coll, 1 << 20) {
            picks.push((
                1 << 20,
                planner::plan::Choice {
                    algorithm: c.algorithm,
                    protocol: c.protocol,
                    channels: c.channels,
                    est_us: c.time_us,
                    algbw_gbps: 0.0,
                    busbw_gbps: 0.0,
                },
            ));
        }
        for (bytes, ch) in picks {
            let key = (ch.algorithm.name(), ch.protocol, ch.channels);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let nch = match ch.algorithm {
                planner::schedule::Algorithm::CopyEnginePipeline
                | planner::schedule::Algorithm::Direct => None,
                _ => Some(ch.channels),
            };
            let s = planner
                .schedule(&coll, &ch.algorithm, ch.protocol, nch)
                .unwrap_or_else(|e| {
                    panic!("seed {seed}: {} {}: {e}", kind.name(), ch.algorithm.name())
                });
            out.push((
                format!(
                    "seed {seed}: {n} ranks, {} {} {} {}ch at {bytes} B",
                    kind.name(),
                    ch.algorithm.name(),
                    ch.protocol.name(),
                    s.channels
                ),
                s,
            ));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn planned_schedules_on_random_topologies_verify(seed in any::<u64>()) {
        for (label, s) in planned(seed) {
            if let Err(e) = sim::verify(&s) {
                panic!("{label}: {e}");
            }
        }
    }

    #[test]
    fn mutated_planned_schedules_are_caught(seed in any::<u64>()) {
        for (label, s) in planned(seed) {
            if s.nranks < 2 {
                continue;
            }
            // Drop the first op of the busiest program; duplicate a reduction when there is one.
            let (r, c) = (0..s.nranks as usize)
                .flat_map(|r| (0..s.channels as usize).map(move |c| (r, c)))
                .max_by_key(|&(r, c)| s.ranks[r].channels[c].ops.len())
                .unwrap();
            let mut m = s.clone();
            m.ranks[r].channels[c].ops.remove(0);
            prop_assert!(sim::verify(&m).is_err(), "{label}: dropping rank {r} channel {c} op 0 not caught");
            let red = (0..s.nranks as usize)
                .flat_map(|r| (0..s.channels as usize).map(move |c| (r, c)))
                .find_map(|(r, c)| {
                    s.ranks[r].channels[c].ops.iter().position(|o| o.kind.reduces() && o.dst.is_some()).map(|i| (r, c, i))
                });
            if let Some((r, c, i)) = red {
                let op = &s.ranks[r].channels[c].ops[i];
                let last = s.op_copy(op, op.repeat.max(1) - 1);
                let mut m = s.clone();
                m.ranks[r].channels[c].ops.insert(i + 1, Op::reduce(last.src.unwrap(), last.dst.unwrap()));
                prop_assert!(sim::verify(&m).is_err(), "{label}: duplicated reduce at rank {r} channel {c} op {i} not caught");
            }
        }
    }
}
