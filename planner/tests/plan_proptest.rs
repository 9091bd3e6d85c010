//! Property: on random topologies (topology::synth::random), the planner finds channels and every
//! schedule it would run validates and moves the right contributions.

use planner::plan::Planner;
use planner::schedule::*;
use planner::topology::synth;
use proptest::prelude::*;

fn coll(kind: CollectiveKind, n: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, n / 2),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| Some((i + n - 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_topologies_plan_valid_schedules(seed in any::<u64>()) {
        let t = synth::random(seed);
        let p = match Planner::new(&t) {
            Ok(p) => p,
            Err(e) => return Err(TestCaseError::fail(format!("seed {seed}: {e}"))),
        };
        let n = p.nranks();
        for kind in CollectiveKind::ALL {
            let c = coll(kind, n);
            for bytes in [8u64, 1 << 16, 1 << 24, 1 << 30] {
                let ch = p.choose(&c, bytes);
                prop_assert!(ch.est_us.is_finite() && ch.est_us > 0.0, "seed {seed}: {ch:?}");
                let nch = matches!(ch.algorithm, Algorithm::Ring | Algorithm::Tree).then_some(ch.channels);
                let s = p.schedule(&c, &ch.algorithm, ch.protocol, nch)
                    .map_err(|e| TestCaseError::fail(format!("seed {seed} {kind:?} {bytes}: {e}")))?;
                if n <= 16 {
                    symbolic::check(&s).map_err(|e| TestCaseError::fail(format!("seed {seed} {kind:?} {ch:?}: {e}")))?;
                } else {
                    s.validate().map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))?;
                }
            }
            // Rings exist for every reducing/gathering collective, whatever the tuner picked.
            if !matches!(kind, CollectiveKind::AllToAll | CollectiveKind::SendRecv) {
                let s = p.schedule(&c, &Algorithm::Ring, Protocol::Simple, None)
                    .map_err(|e| TestCaseError::fail(format!("seed {seed} ring {kind:?}: {e}")))?;
                s.validate().map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))?;
            }
        }
    }
}
