//! Lowering checked by emulation: every planner builder, several rank counts, odd counts,
//! in place and not, against `runtime::reference` on exact integer data.

use super::*;
use planner::schedule::{build, Collective, Protocol};
use runtime::types::ReduceOp;

fn run_case(
    s: &Schedule,
    count: u64,
    in_place: bool,
    op: ReduceOp,
    seed: u64,
) -> Result<(), String> {
    for (flatten_loops, elide_copies, ce_push) in [
        (false, false, false),
        (true, true, true),
        (true, true, false),
    ] {
        run_case_with(
            s,
            count,
            in_place,
            op,
            seed,
            LowerParams {
                count,
                in_place,
                average: op == ReduceOp::Avg,
                scratch_cap: 1 << 14,
                flatten_loops,
                elide_copies,
                ce_push,
                elem_bytes: 4,
            },
        )
        .map_err(|e| format!("flatten {flatten_loops} elide {elide_copies} push {ce_push}: {e}"))?;
    }
    Ok(())
}

fn skip_one_way_ll(s: &Schedule) -> bool {
    s.protocol == Protocol::LL
        && matches!(
            s.collective.kind,
            CollectiveKind::Broadcast | CollectiveKind::Reduce
        )
}

#[test]
fn one_way_ll_is_refused() {
    let s = build::one_shot(
        &Collective::rooted(CollectiveKind::Broadcast, 0),
        2,
        Protocol::LL,
    )
    .unwrap();
    let p = LowerParams {
        count: 64,
        in_place: false,
        average: false,
        scratch_cap: 1 << 14,
        flatten_loops: true,
        elide_copies: true,
        ce_push: false,
        elem_bytes: 4,
    };
    assert!(matches!(lower(&s, p), Err(LowerError::Unsupported(_))));
}

fn run_case_with(
    s: &Schedule,
    count: u64,
    in_place: bool,
    op: ReduceOp,
    seed: u64,
    params: LowerParams,
) -> Result<(), String> {
    let l = lower(s, params).map_err(|e| format!("lower: {e}"))?;
    check_against_reference(s, &l, count, in_place, op, seed)
        .map_err(|m| format!("{m} ({} phases, seed {seed})", l.nphases()))
}

fn builders(kind: CollectiveKind, n: u32) -> Vec<(String, Schedule)> {
    let coll = match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, n - 1),
        k => Collective::new(k),
    };
    let mut v = Vec::new();
    for algo in super::super::schedules::ALGOS {
        if let Ok((name, s)) =
            super::super::schedules::pick(&coll, n, 1000, algo, planner::tuner::Profile::bundled())
        {
            v.push((name, s));
        }
    }
    if let Ok(s) = build::one_shot_channels(&coll, n, Protocol::Simple, 3) {
        v.push(("one-shot x3".into(), s));
    }
    if let Ok(s) = build::one_shot(&coll, n, Protocol::LL) {
        v.push(("one-shot LL".into(), s));
    }
    v
}

#[test]
fn every_builder_lowers_to_the_reference_result() {
    let kinds = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
    ];
    let mut cases = 0;
    for n in [2u32, 3, 4] {
        for kind in kinds {
            for (name, s) in builders(kind, n)
                .into_iter()
                .filter(|(_, s)| !skip_one_way_ll(s))
            {
                for count in [1u64, 7, 1000, 4099] {
                    for in_place in [false, true] {
                        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
                            if !kind.reduces() && op != ReduceOp::Sum {
                                continue;
                            }
                            run_case(&s, count, in_place, op, count * 31 + n as u64)
                                .unwrap_or_else(|e| panic!("{} {name} n={n} count={count} in_place={in_place} {op:?}: {e}", kind.name()));
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 300, "{cases}");
}

#[test]
fn one_shot_all_reduce_is_one_barrier_and_one_phase_of_remote_reads() {
    let s = build::one_shot(
        &Collective::new(CollectiveKind::AllReduce),
        2,
        Protocol::Simple,
    )
    .unwrap();
    let l = lower(
        &s,
        LowerParams {
            count: 1 << 20,
            in_place: false,
            average: false,
            scratch_cap: 1 << 20,
            flatten_loops: false,
            elide_copies: false,
            ce_push: false,
            elem_bytes: 4,
        },
    )
    .unwrap();
    // Every rank's first remote access needs the peer to have reached the call, and the last
    // one keeps the peer from returning early.
    assert!(l.barriers.iter().any(|b| *b != Barrier::None));
    assert_eq!(l.end_barrier, Barrier::Cta);
    assert!(l
        .items
        .iter()
        .any(|i| i.srcs.iter().any(|o| o.rank != i.exec)));
}

#[test]
fn copy_engine_pipeline_uses_copy_engine_items_and_bounded_scratch() {
    let coll = Collective::new(CollectiveKind::AllReduce);
    let s = build::copy_engine_pipeline(&coll, 16).unwrap();
    let l = lower(
        &s,
        LowerParams {
            count: 1 << 16,
            in_place: true,
            average: false,
            scratch_cap: 1 << 14,
            flatten_loops: true,
            elide_copies: true,
            ce_push: true,
            elem_bytes: 4,
        },
    )
    .unwrap();
    assert!(l.uses_copy_engine);
    // 16 chunks of 4096 elements land in a ring of 4 chunks: no growth beyond the ring.
    assert!(l.scratch_elems <= 1 << 14, "{}", l.scratch_elems);
    for seed in 0..3 {
        run_case(&s, 1 << 16, true, ReduceOp::Sum, seed).unwrap();
    }
}

#[test]
fn one_shot_all_reduce_is_a_single_fused_pass_per_rank() {
    let s = build::one_shot(
        &Collective::new(CollectiveKind::AllReduce),
        2,
        Protocol::Simple,
    )
    .unwrap();
    let p = LowerParams {
        count: 1 << 20,
        in_place: false,
        average: false,
        scratch_cap: 1 << 20,
        flatten_loops: true,
        elide_copies: true,
        ce_push: false,
        elem_bytes: 4,
    };
    let l = lower(&s, p).unwrap();
    assert_eq!(l.items.len(), 2, "{:?}", l.items);
    for it in &l.items {
        assert_eq!(it.srcs.len(), 2);
        assert_eq!(it.n, 1 << 20);
    }
}

#[test]
fn ll_one_shot_needs_no_barrier_at_all() {
    let s = build::one_shot(&Collective::new(CollectiveKind::AllReduce), 2, Protocol::LL).unwrap();
    for in_place in [false, true] {
        let p = LowerParams {
            count: 4096,
            in_place,
            average: false,
            scratch_cap: 1 << 20,
            flatten_loops: true,
            elide_copies: true,
            ce_push: false,
            elem_bytes: 4,
        };
        let l = lower(&s, p).unwrap();
        assert!(l.uses_ll);
        assert!(
            l.barriers.iter().all(|b| *b == Barrier::None),
            "{:?}",
            l.barriers
        );
        assert_eq!(l.end_barrier, Barrier::None);
    }
}
