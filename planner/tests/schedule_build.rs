//! Every builder, every collective, several rank counts and channel counts: the output validates
//! and passes the chunk-level symbolic check (right contributions in every output chunk).

use planner::schedule::build;
use planner::schedule::*;

fn colls(n: u32) -> Vec<Collective> {
    let mut v: Vec<Collective> = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::AllToAll,
    ]
    .into_iter()
    .map(Collective::new)
    .collect();
    for root in [0, n - 1, n / 2] {
        v.push(Collective::rooted(CollectiveKind::Broadcast, root));
        v.push(Collective::rooted(CollectiveKind::Reduce, root));
    }
    // Send/recv: a shift by one, and a pairwise exchange with one idle rank for odd n.
    let mut shift = Collective::new(CollectiveKind::SendRecv);
    shift.send_peers = (0..n).map(|i| Some((i + 1) % n)).collect();
    v.push(shift);
    let mut pairs = Collective::new(CollectiveKind::SendRecv);
    pairs.send_peers = (0..n)
        .map(|i| {
            if i + 1 == n && n % 2 == 1 {
                None
            } else {
                Some(i ^ 1)
            }
        })
        .collect();
    v.push(pairs);
    v
}

/// Deterministic permutation of 0..n from a seed (xorshift; no extra crates).
fn perm(n: u32, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

fn ok(s: Result<Schedule, ScheduleError>, what: &str) -> Option<Schedule> {
    match s {
        Ok(s) => {
            if let Err(e) = symbolic::check(&s) {
                panic!("{what}: symbolic check failed: {e}");
            }
            Some(s)
        }
        Err(ScheduleError::Unsupported(_)) => None,
        Err(e) => panic!("{what}: builder failed: {e}"),
    }
}

#[test]
fn rings_compute_every_collective() {
    for n in 1..=7u32 {
        for nc in 1..=3u32 {
            let rings: Vec<Vec<u32>> = (0..nc).map(|c| perm(n, (n * 10 + c) as u64)).collect();
            for coll in colls(n) {
                let what = format!("ring n={n} channels={nc} rings={rings:?} {coll:?}");
                let built = ok(build::ring(&coll, &rings, Protocol::Simple), &what);
                let expect_ring = !matches!(
                    coll.kind,
                    CollectiveKind::AllToAll | CollectiveKind::SendRecv
                );
                assert_eq!(built.is_some(), expect_ring, "{what}");
            }
        }
    }
}

#[test]
fn ring_all_reduce_matches_nccl_step_count() {
    // Each rank sends 2(n-1) messages per channel, each one chunk of n*C.
    let n = 5;
    let rings = vec![perm(n, 1), perm(n, 2)];
    let s = build::ring(
        &Collective::new(CollectiveKind::AllReduce),
        &rings,
        Protocol::LL,
    )
    .unwrap();
    assert_eq!(s.chunks_per_block, n * 2);
    for r in 0..n {
        for c in 0..2 {
            let ops = s.expanded_ops(r, c);
            assert_eq!(
                ops.iter().filter(|o| o.kind.sends()).count(),
                2 * (n as usize - 1)
            );
            assert_eq!(
                ops.iter().filter(|o| o.kind.receives()).count(),
                2 * (n as usize - 1)
            );
            // Programs stay short: 5 raw ops whatever n is.
            assert_eq!(s.ranks[r as usize].channels[c as usize].ops.len(), 5);
        }
    }
}

fn chain(n: u32) -> TreeChannel {
    TreeChannel::from_parents((0..n).map(|r| r.checked_sub(1)).collect()).unwrap()
}

fn binary(n: u32, root_shift: u32) -> TreeChannel {
    // Heap-shaped binary tree over ranks relabelled by a shift.
    let lab = |i: u32| (i + root_shift) % n;
    let mut parent = vec![None; n as usize];
    for i in 1..n {
        parent[lab(i) as usize] = Some(lab((i - 1) / 2));
    }
    TreeChannel::from_parents(parent).unwrap()
}

#[test]
fn trees_compute_all_reduce_broadcast_reduce() {
    for n in 1..=9u32 {
        let trees = vec![chain(n), binary(n, 0), binary(n, n / 2)];
        let what = format!("tree n={n}");
        let s = ok(
            build::tree(
                &Collective::new(CollectiveKind::AllReduce),
                &trees,
                Protocol::LL128,
            ),
            &what,
        )
        .expect("tree all-reduce");
        assert_eq!(s.channels, 6, "two IR channels per tree");
        for root in 0..n {
            let t = vec![binary(n, root)];
            for kind in [CollectiveKind::Broadcast, CollectiveKind::Reduce] {
                ok(
                    build::tree(&Collective::rooted(kind, root), &t, Protocol::Simple),
                    &what,
                )
                .expect("rooted tree");
            }
        }
        for kind in [CollectiveKind::AllGather, CollectiveKind::AllToAll] {
            assert!(matches!(
                build::tree(&Collective::new(kind), &trees, Protocol::Simple),
                Err(ScheduleError::Unsupported(_))
            ));
        }
    }
}

#[test]
fn tree_root_must_match_collective_root() {
    let t = vec![binary(4, 0)];
    let e = build::tree(
        &Collective::rooted(CollectiveKind::Broadcast, 2),
        &t,
        Protocol::Simple,
    );
    assert!(matches!(e, Err(ScheduleError::Unsupported(_))), "{e:?}");
}

#[test]
fn bad_trees_are_rejected() {
    // Two roots.
    assert!(TreeChannel::from_parents(vec![None, None, Some(0)]).is_err());
    // Cycle 1 -> 2 -> 1 with root 0 alone.
    assert!(TreeChannel::from_parents(vec![None, Some(2), Some(1)]).is_err());
    // Parent out of range.
    assert!(TreeChannel::from_parents(vec![None, Some(7)]).is_err());
}

#[test]
fn direct_patterns_compute_their_collectives() {
    for n in 1..=7u32 {
        for nc in 1..=2u32 {
            for coll in colls(n) {
                let what = format!("direct n={n} channels={nc} {coll:?}");
                let a = ok(build::one_shot_channels(&coll, n, Protocol::LL, nc), &what);
                let b = ok(
                    build::two_shot_channels(&coll, n, Protocol::Simple, nc),
                    &what,
                );
                let d = ok(build::direct(&coll, n), &what);
                match coll.kind {
                    CollectiveKind::AllReduce => assert!(a.is_some() && b.is_some()),
                    CollectiveKind::AllToAll | CollectiveKind::SendRecv => assert!(d.is_some()),
                    _ => assert!(a.is_some()),
                }
            }
        }
    }
}

#[test]
fn direct_programs_are_linear_in_ranks() {
    let n = 64;
    let s = build::direct(&Collective::new(CollectiveKind::AllToAll), n).unwrap();
    for r in 0..n {
        assert!(s.ranks[r as usize].channels[0].ops.len() <= 3);
    }
    let s = build::one_shot(&Collective::new(CollectiveKind::AllReduce), n, Protocol::LL).unwrap();
    assert!(s.ranks.iter().all(|rp| rp.channels[0].ops.len() <= 5));
}

#[test]
fn copy_engine_pipeline_all_reduce() {
    for k in [1, 2, 8] {
        let s =
            build::copy_engine_pipeline(&Collective::new(CollectiveKind::AllReduce), k).unwrap();
        symbolic::check(&s).unwrap();
        assert_eq!(s.nranks, 2);
        assert!(s.ranks[0].channels[0].ops[0].transport == Transport::CopyEngine);
    }
    assert!(build::copy_engine_pipeline(&Collective::new(CollectiveKind::AllGather), 4).is_err());
}

#[test]
fn builders_reject_bad_input() {
    let ar = Collective::new(CollectiveKind::AllReduce);
    assert!(matches!(
        build::ring(&ar, &[], Protocol::LL),
        Err(ScheduleError::Shape(_))
    ));
    assert!(matches!(
        build::ring(&ar, &[vec![0, 0, 1]], Protocol::LL),
        Err(ScheduleError::Shape(_))
    ));
    assert!(matches!(
        build::ring(&ar, &[vec![0, 1, 2], vec![0, 1]], Protocol::LL),
        Err(ScheduleError::Shape(_))
    ));
    let bc = Collective::rooted(CollectiveKind::Broadcast, 9);
    assert!(matches!(
        build::ring(&bc, &[vec![0, 1]], Protocol::LL),
        Err(ScheduleError::Shape(_))
    ));
    let mut sr = Collective::new(CollectiveKind::SendRecv);
    sr.send_peers = vec![Some(2), None, None, Some(2)];
    assert!(matches!(
        build::direct(&sr, 4),
        Err(ScheduleError::Shape(_))
    ));
}

#[test]
fn json_round_trip_keeps_schedules() {
    let rings = vec![perm(6, 3), perm(6, 4)];
    let s = build::ring(
        &Collective::new(CollectiveKind::AllGather),
        &rings,
        Protocol::Simple,
    )
    .unwrap();
    let j = serde_json::to_string(&s).unwrap();
    let back: Schedule = serde_json::from_str(&j).unwrap();
    assert_eq!(back, s);
    back.validate().unwrap();
}

#[test]
fn hierarchical_all_reduce_for_every_host_shape() {
    let ar = Collective::new(CollectiveKind::AllReduce);
    for h in 1..=4u32 {
        for l in 1..=4u32 {
            // Ranks of a host are not contiguous here: host i holds ranks i, i+h, i+2h, ...
            let hosts: Vec<Vec<u32>> = (0..h)
                .map(|i| (0..l).map(|j| i + j * h).collect())
                .collect();
            let chains = vec![perm(l, 7), perm(l, 8)];
            let what = format!("hierarchical h={h} l={l} chains={chains:?}");
            let s = ok(
                build::hierarchical(&ar, &hosts, &chains, Protocol::Simple),
                &what,
            )
            .expect("all-reduce is supported");
            // Linear: at most 11 raw ops per rank and channel, whatever the sizes.
            assert!(
                s.ranks
                    .iter()
                    .all(|r| r.channels.iter().all(|c| c.ops.len() <= 11)),
                "{what}"
            );
        }
    }
    assert!(matches!(
        build::hierarchical(
            &Collective::new(CollectiveKind::AllGather),
            &[vec![0, 1]],
            &[vec![0, 1]],
            Protocol::LL
        ),
        Err(ScheduleError::Unsupported(_))
    ));
    assert!(matches!(
        build::hierarchical(&ar, &[vec![0, 1], vec![2]], &[vec![0, 1]], Protocol::LL),
        Err(ScheduleError::Shape(_))
    ));
}

#[test]
fn windows_keep_rotations_inside_and_are_checked() {
    let ar = Collective::new(CollectiveKind::AllReduce);
    let hosts = vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
    let good =
        build::hierarchical(&ar, &hosts, &[vec![0, 1, 2], vec![2, 0, 1]], Protocol::LL).unwrap();
    let (r, i) = (0usize, 1usize);
    assert!(good.ranks[r].channels[1].ops[i].window.is_some());
    let mut s = good.clone();
    s.ranks[r].channels[1].ops[i].window.as_mut().unwrap().start = 0; // channel 0's chunks
    assert!(
        s.validate().unwrap_err().to_string().contains("window"),
        "{:?}",
        s.validate()
    );
    let mut s = good;
    s.ranks[r].channels[1].ops[i].window.as_mut().unwrap().len = 1000;
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("does not fit"));
}
