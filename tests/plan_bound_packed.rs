//! Packed-tree schedules on the CPU runtime: all-gather, reduce-scatter and all-reduce on 3 to 8
//! thread ranks and on 16 (the planner packs up to `PACK_MAX_RANKS`), every element checked
//! against the serial reference.

use planner::schedule::{Algorithm, CollectiveKind};
use runtime::check::{collective_for, Case};
use runtime::{Communicator, Config, DataType, ReduceOp};

fn run(n: u32, case: Case) -> Result<(), String> {
    let cfg = Config {
        algorithm: Some("packed".into()),
        ..Config::default()
    };
    let mut comms = Communicator::init_all(n, cfg).map_err(|e| e.to_string())?;
    // The runtime must really run packed trees, not fall back.
    let s = comms[0]
        .schedule_for(&case.coll, 1 << 20)
        .map_err(|e| e.to_string())?;
    assert_eq!(s.algorithm, Algorithm::Packed, "{n} ranks");
    runtime::check::run_on_threads(comms, &case)
}

#[test]
fn packed_schedules_run_with_no_wrong_element_on_3_to_8_and_16_ranks() {
    assert_eq!(planner::plan::PACK_MAX_RANKS, 16);
    for n in (3..=8u32).chain([16]) {
        for (i, kind) in [
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
        ]
        .into_iter()
        .enumerate()
        {
            let seed = (n as u64) * 10 + i as u64;
            let case = Case {
                coll: collective_for(kind, n, 0),
                dtype: if i == 1 { DataType::I32 } else { DataType::F32 },
                op: if i == 2 { ReduceOp::Max } else { ReduceOp::Sum },
                // Odd counts, so chunks of the trees differ in size.
                count: 4099 + 77 * n as usize,
                in_place: n % 2 == 0,
                seed,
            };
            assert_eq!(run(n, case), Ok(()), "{} on {n} ranks", kind.name());
        }
    }
}
