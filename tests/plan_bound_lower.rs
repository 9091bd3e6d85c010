//! Packed-tree schedules through the CUDA backend's generic lowering, emulated on the CPU
//! (`cuda::lower::emulate`) against `runtime::reference`: what the GPU would compute, checked
//! without a GPU, on exact integer data.

use cuda::lower::{check_against_reference, lower, LowerParams};
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{synth, LinkKind};
use runtime::types::ReduceOp;

fn run(
    s: &Schedule,
    count: u64,
    in_place: bool,
    op: ReduceOp,
    p: LowerParams,
) -> Result<(), String> {
    let l = lower(s, p).map_err(|e| format!("lower: {e}"))?;
    check_against_reference(s, &l, count, in_place, op, count).map_err(|m| m.to_string())
}

#[test]
fn packed_schedules_lower_to_the_reference_result() {
    let mut cases = 0;
    for n in [3u32, 4, 6] {
        // A PCIe tree: irregular enough that the trees are not all alike.
        let t = synth::single_host(n, LinkKind::Pcie, 24.0);
        let planner = Planner::new(&t).unwrap();
        for kind in [
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
        ] {
            let coll = Collective::new(kind);
            let s = planner
                .schedule(&coll, &Algorithm::Packed, Protocol::Simple, None)
                .unwrap();
            for count in [7u64, 4099] {
                for in_place in [false, true] {
                    for op in [ReduceOp::Sum, ReduceOp::Max] {
                        for (flatten_loops, elide_copies) in [(false, false), (true, true)] {
                            let p = LowerParams {
                                count,
                                in_place,
                                average: false,
                                scratch_cap: 1 << 14,
                                flatten_loops,
                                elide_copies,
                                ce_push: false,
                                elem_bytes: 4,
                            };
                            run(&s, count, in_place, op, p).unwrap_or_else(|e| {
                                panic!("{} n={n} count={count} in_place={in_place} {op:?} flatten={flatten_loops}: {e}", kind.name())
                            });
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 3 * 3 * 2 * 2 * 2 * 2);
}
