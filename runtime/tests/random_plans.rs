//! Property test: random collective × rank count × count × type × op × algorithm × channels ×
//! protocol × slot size, on thread ranks, against the serial reference. proptest prints the
//! failing case (and its seed) when one fails.

use planner::schedule::{CollectiveKind, Protocol};
use proptest::prelude::*;
use runtime::check::{collective_for, Case};
use runtime::{Communicator, Config, DataType, ReduceOp};

fn run(n: u32, cfg: Config, case: Case) -> Result<(), String> {
    let comms = Communicator::init_all(n, cfg).map_err(|e| e.to_string())?;
    runtime::check::run_on_threads(comms, &case)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]
    #[test]
    fn random_collectives_match_the_reference(
        kind in prop::sample::select(CollectiveKind::ALL.to_vec()),
        n in 1u32..=6,
        count in prop_oneof![0usize..4, 4usize..300, 300usize..20_000],
        dtype in prop::sample::select(DataType::ALL.to_vec()),
        op in prop::sample::select(ReduceOp::ALL.to_vec()),
        alg in prop::sample::select(vec![None, Some("ring"), Some("tree"), Some("one-shot"), Some("two-shot")]),
        channels in prop::option::of(1u32..4),
        proto in prop::option::of(prop::sample::select(Protocol::ALL.to_vec())),
        slot_bytes in prop_oneof![Just(256 * 1024usize), 64usize..5000],
        in_place in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let root = (seed % n as u64) as u32;
        let case = Case { coll: collective_for(kind, n, root), dtype, op, count, in_place, seed };
        let cfg = Config { algorithm: alg.map(str::to_string), channels, protocol: proto, slot_bytes, ..Config::default() };
        // Skip only combinations no planner or builder offers (e.g. two-shot all-gather).
        let plannable = Communicator::init_all(n, cfg.clone()).unwrap().remove(0).schedule_for(&case.coll, 1 << 20).is_ok();
        prop_assume!(plannable);
        prop_assert_eq!(run(n, cfg, case), Ok(()));
    }
}
