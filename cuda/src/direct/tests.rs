//! Every [`DirectRole`] emulated at message granularity (all pushes read before any write, as
//! the kernel orders them) against `runtime::reference`, in place and not.

use super::*;
use planner::schedule::Collective;
use runtime::reference::{buffer_lens, expected, random_input};
use runtime::Element;

const KINDS: [CollectiveKind; 6] = [
    CollectiveKind::AllReduce,
    CollectiveKind::ReduceScatter,
    CollectiveKind::AllGather,
    CollectiveKind::Broadcast,
    CollectiveKind::Reduce,
    CollectiveKind::AllToAll,
];

/// Runs the roles of every rank on one flat memory per rank laid out as the caller's buffers
/// (aliased in place like nccl-tests), returning each rank's output view.
fn emulate(
    kind: CollectiveKind,
    root: u32,
    count: usize,
    in_place: bool,
    op: ReduceOp,
    inputs: &[Vec<i64>],
) -> Vec<Vec<i64>> {
    let n = inputs.len();
    let coll = Collective {
        root: Some(root),
        ..Collective::new(kind)
    };
    let (il, ol) = buffer_lens(&coll, n as u32, count);
    let poison = i64::MIN + 777;
    // (memory, input offset, output offset) per rank.
    let mut mem: Vec<(Vec<i64>, usize, usize)> = (0..n)
        .map(|r| {
            if !in_place {
                let mut m = inputs[r].clone();
                m.extend(std::iter::repeat_n(poison, ol));
                return (m, 0, il);
            }
            match kind {
                CollectiveKind::AllGather => {
                    let mut m = vec![poison; ol];
                    m[r * count..(r + 1) * count].copy_from_slice(&inputs[r]);
                    (m, r * count, 0)
                }
                CollectiveKind::ReduceScatter => (inputs[r].clone(), 0, r * count),
                _ => (inputs[r].clone(), 0, 0),
            }
        })
        .collect();
    let roles: Vec<DirectRole> = (0..n)
        .map(|r| {
            role(
                kind,
                root,
                r as u32,
                n as u32,
                count as u64,
                in_place,
                op == ReduceOp::Avg,
            )
            .unwrap()
        })
        .collect();
    for s in 0..n {
        for r in 0..n {
            let sends = roles[s].send_mask >> r & 1 == 1;
            let recvs = roles[r].recv_mask >> s & 1 == 1;
            assert_eq!(
                sends, recvs,
                "{kind:?}: {s} -> {r} pushes {sends}, receives {recvs}"
            );
            assert!(!(sends && s == r), "{kind:?}: rank {s} sends to itself");
        }
    }
    // Every read happens before every write (the kernel pushes a segment before it writes it).
    let snap: Vec<Vec<i64>> = mem.iter().map(|(m, _, _)| m.clone()).collect();
    let msg = |s: usize, r: usize| -> &[i64] {
        let at = mem[s].1 + r * roles[s].send_stride as usize;
        &snap[s][at..at + count]
    };
    let mut out_mem: Vec<Vec<i64>> = snap.clone();
    for r in 0..n {
        let ro = &roles[r];
        let (_, i0, o0) = mem[r];
        if let Some(d) = ro.copy_dst {
            let c0 = i0 + ro.copy_src as usize;
            let src = snap[r][c0..c0 + count].to_vec();
            out_mem[r][o0 + d as usize..o0 + d as usize + count].copy_from_slice(&src);
        }
        if ro.recv_mask == 0 {
            continue;
        }
        for i in 0..count {
            if ro.reduce {
                let mut acc = snap[r][i0 + ro.local_off as usize + i];
                for s in 0..n {
                    if ro.recv_mask >> s & 1 == 1 {
                        acc = acc.combine(msg(s, r)[i], op);
                    }
                }
                if ro.avg {
                    acc = acc.div_ranks(n as u32);
                }
                out_mem[r][o0 + i] = acc;
            } else {
                for s in 0..n {
                    if ro.recv_mask >> s & 1 == 1 {
                        out_mem[r][o0 + s * ro.gather_stride as usize + i] = msg(s, r)[i];
                    }
                }
            }
        }
    }
    for (r, m) in mem.iter_mut().enumerate() {
        m.0 = out_mem[r].clone();
    }
    let out_len = if kind == CollectiveKind::ReduceScatter {
        count
    } else {
        ol
    };
    mem.iter()
        .map(|(m, _, o0)| m[*o0..*o0 + out_len].to_vec())
        .collect()
}

#[test]
fn roles_compute_every_collective_in_and_out_of_place() {
    let mut cases = 0;
    for kind in KINDS {
        for n in 2..=8usize {
            for &count in &[1usize, 7, 64] {
                for in_place in [false, true] {
                    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg] {
                        let root = (n as u32 * 7 + count as u32) % n as u32;
                        let coll = Collective {
                            root: Some(root),
                            ..Collective::new(kind)
                        };
                        let seed = 0x5eed ^ (n as u64) << 8 ^ count as u64;
                        let (il, _) = buffer_lens(&coll, n as u32, count);
                        let inputs: Vec<Vec<i64>> = (0..n)
                            .map(|r| random_input::<i64>(seed, r as u32, il, op))
                            .collect();
                        let got = emulate(kind, root, count, in_place, op, &inputs);
                        let want = expected(&coll, op, count, &inputs);
                        for r in 0..n {
                            if let Some(w) = &want[r] {
                                assert_eq!(
                                    &got[r], w,
                                    "{kind:?} n={n} count={count} in_place={in_place} {op:?} \
                                     root={root} rank {r} (seed {seed:#x})"
                                );
                            }
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 6 * 7 * 3 * 2 * 3);
}

#[test]
fn only_one_shot_schedules_and_the_direct_all_to_all_take_the_path() {
    use planner::schedule::build;
    for kind in KINDS.into_iter().filter(|&k| k != CollectiveKind::AllToAll) {
        let coll = Collective {
            root: Some(0),
            ..Collective::new(kind)
        };
        let s = build::one_shot(&coll, 2, Protocol::Simple).unwrap();
        assert!(applies(&s), "{kind:?}");
        let r = build::ring(&coll, &[vec![0, 1]], Protocol::Simple).unwrap();
        assert!(!applies(&r), "{kind:?} ring");
    }
    let a2a = Collective::new(CollectiveKind::AllToAll);
    assert!(applies(&build::direct(&a2a, 4).unwrap()));
    assert!(!applies(&build::direct(&a2a, 9).unwrap()), "9 ranks");
    let sr = Collective::as_nccl_tests(CollectiveKind::SendRecv, 2, 0);
    assert!(!applies(&build::direct(&sr, 2).unwrap()));
    assert!(role(CollectiveKind::SendRecv, 0, 0, 2, 8, false, false).is_none());
}

#[test]
fn grids_fit_the_gpu_and_the_kernel_layout() {
    for min_sm in [1u32, 2, 3, 8, 16, 78, 108, 132, 170] {
        for ll in [false, true] {
            let mut last = 0;
            for shift in 0..32 {
                let bytes = 1u64 << shift;
                let g = grid(bytes, ll, min_sm, None);
                assert!((1..=MAX_CTAS).contains(&g), "{shift} {ll} {g}");
                assert!(g >= last, "grid shrinks with size at 2^{shift}");
                last = g;
                if ll {
                    assert!(g <= LL_MAX_CTAS && g <= min_sm, "{min_sm} {shift} {g}");
                } else {
                    // Every CTA of both roles resident at once, within a receiver's stream cap.
                    let r = receivers(g, min_sm);
                    assert!(r >= 1 && r <= g, "{min_sm} {g} {r}");
                    assert!(g <= r * RECV_STREAMS, "{min_sm} {g} {r}");
                    if min_sm >= 2 {
                        assert!(g + r <= min_sm, "{min_sm} {shift}: {g} + {r} CTAs");
                    }
                    let seg = segment_bytes(bytes, g, 256 << 10);
                    assert!(
                        seg.is_multiple_of(16) && (64 << 10..=256 << 10).contains(&seg),
                        "{seg}"
                    );
                }
            }
        }
    }
    assert_eq!(grid(1 << 30, false, 132, None), 64);
    assert_eq!(receivers(64, 132), 64);
    assert_eq!(receivers(88, 132), 44);
    assert_eq!(grid(1 << 30, true, 132, None), LL_MAX_CTAS);
    assert_eq!(grid(8, true, 132, Some(7)), 7);
    assert_eq!(grid(8, false, 132, Some(1000)), 64);
    // A quarter of a stream's share, from 64 KiB to the slot.
    assert_eq!(segment_bytes(16 << 20, 64, 512 << 10), 64 << 10);
    assert_eq!(segment_bytes(64 << 20, 64, 512 << 10), 256 << 10);
    assert_eq!(segment_bytes(1 << 30, 64, 512 << 10), 512 << 10);
    assert_eq!(ll128_segment_lines(1 << 20, 32), 69);
    assert_eq!(ll128_segment_lines(8, 1), LL128_MIN_SEG_LINES);
    assert_eq!(ll128_segment_lines(1 << 30, 64), LL128_SLOT_LINES);
    assert_eq!(simple_slot_bytes(7, None), 80 << 10);
}

#[test]
fn only_in_place_all_reduce_and_all_to_all_overwrite_what_they_push() {
    for kind in KINDS {
        for rank in 0..3 {
            let r = role(kind, 1, rank, 3, 64, true, false).unwrap();
            assert_eq!(
                r.overwrites_what_it_pushes(),
                matches!(kind, CollectiveKind::AllReduce | CollectiveKind::AllToAll),
                "{kind:?} rank {rank}"
            );
        }
    }
}

#[test]
fn kernel_arguments_have_the_c_layout() {
    // 2 pointers, 2 × 8 pointers, 8 u64, 10 u32, then the 32-byte TpAbort (direct.cuh).
    assert_eq!(
        std::mem::size_of::<TdArgs>(),
        2 * 8 + 2 * 64 + 8 * 8 + 10 * 4 + 32
    );
    assert_eq!(std::mem::align_of::<TdArgs>(), 8);
}

#[test]
fn in_place_detection_inverts_the_benchmarks_aliasing() {
    use crate::direct::rank_ptrs;
    let (inp, out) = (1u64 << 40, 1u64 << 41);
    for kind in KINDS {
        for rank in 0..4u32 {
            let (count, elem) = (1000u64, 4u64);
            let (i, o) = rank_ptrs(kind, rank, count, elem, true, inp, out);
            assert!(
                is_in_place(kind, rank, count * elem, i, o),
                "{kind:?} {rank}"
            );
            let (i, o) = rank_ptrs(kind, rank, count, elem, false, inp, out);
            assert!(
                !is_in_place(kind, rank, count * elem, i, o),
                "{kind:?} {rank}"
            );
        }
    }
}

/// Implied LL credits only where the peer's data of the call proves its previous call ended
/// (every peer both sends and receives), every CTA's share is one segment and 2+ slots exist.
#[test]
fn ll_credits_are_implied_only_for_symmetric_one_segment_calls() {
    let r = |kind, count| role(kind, 0, 0, 2, count, false, false).unwrap();
    let ar = CollectiveKind::AllReduce;
    // LL grids: one CTA per 4 KiB; a slot carries 16 KiB of data.
    for count in [1u64, 2, 1000, 1 << 10, 64 << 10] {
        let g = grid(count * 4, true, 132, None);
        assert!(ll_credit_implied(&r(ar, count), 4, g, 2), "{count}");
        assert!(
            !ll_credit_implied(&r(ar, count), 4, g, 1),
            "{count}: one slot"
        );
    }
    // 2 CTAs for 256 KiB: 32 segments each.
    assert!(!ll_credit_implied(&r(ar, 64 << 10), 4, 2, 2));
    assert!(ll_credit_implied(&r(ar, 8 << 10), 4, 2, 2)); // 16 KiB per CTA: one segment
    assert!(!ll_credit_implied(&r(ar, (8 << 10) + 4), 4, 2, 2));
    for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter] {
        assert!(ll_credit_implied(&r(kind, 100), 4, 1, 2), "{kind:?}");
    }
    // One-way flows: the root of a broadcast only sends, the root of a reduce only receives.
    for kind in [CollectiveKind::Broadcast, CollectiveKind::Reduce] {
        for rank in [0, 1] {
            let one_way = role(kind, 0, rank, 2, 100, false, false).unwrap();
            assert!(
                !ll_credit_implied(&one_way, 4, 1, 2),
                "{kind:?} rank {rank}"
            );
        }
    }
}

/// Pull mode needs every input (one process), the Simple protocol, and 16-byte alignment where
/// an in-place result overwrites what the peers read.
#[test]
fn pull_runs_only_where_its_reads_are_sound() {
    let call = |kind, in_place, inputs: Option<[u64; 8]>, output| DirectCall {
        kind,
        root: 0,
        protocol: Protocol::Simple,
        count: 1 << 20,
        dtype: runtime::types::DataType::F32,
        op: ReduceOp::Sum,
        input: inputs.map_or(0x1000, |i| i[0]),
        output,
        in_place,
        inputs,
        shares_sms: false,
        ab: Default::default(),
    };
    let ar = CollectiveKind::AllReduce;
    let role_of = |kind, in_place| role(kind, 0, 0, 2, 1 << 20, in_place, false).unwrap();
    let mut ins = [0u64; 8];
    ins[0] = 0x1000;
    ins[1] = 0x2000;
    assert!(pull::runnable(
        &call(ar, false, Some(ins), 0x3000),
        &role_of(ar, false)
    ));
    assert!(pull::runnable(
        &call(ar, true, Some(ins), 0x1000),
        &role_of(ar, true)
    ));
    // Across processes the peers' inputs are unknown.
    assert!(!pull::runnable(
        &call(ar, false, None, 0x3000),
        &role_of(ar, false)
    ));
    // In place and unaligned: the pass-by-pass guard works on whole vectors.
    let mut odd = ins;
    odd[1] = 0x2004;
    assert!(!pull::runnable(
        &call(ar, true, Some(odd), 0x1000),
        &role_of(ar, true)
    ));
    // Out of place, unaligned is fine (the kernel's scalar path), and so is in-place all-gather
    // (a rank never writes the block its peers read).
    assert!(pull::runnable(
        &call(ar, false, Some(odd), 0x3000),
        &role_of(ar, false)
    ));
    let ag = CollectiveKind::AllGather;
    assert!(pull::runnable(
        &call(ag, true, Some(odd), 0x1000),
        &role_of(ag, true)
    ));
    let ll = DirectCall {
        protocol: Protocol::LL,
        ..call(ar, false, Some(ins), 0x3000)
    };
    assert!(!pull::runnable(&ll, &role_of(ar, false)));
}
