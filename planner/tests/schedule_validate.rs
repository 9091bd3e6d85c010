//! `Schedule::validate` rejects malformed schedules with errors that say where; the symbolic
//! check catches schedules that validate but compute the wrong thing.

use planner::schedule::build;
use planner::schedule::*;

fn ring4() -> Schedule {
    build::ring(
        &Collective::new(CollectiveKind::AllReduce),
        &[vec![0, 1, 2, 3], vec![3, 1, 0, 2]],
        Protocol::Simple,
    )
    .unwrap()
}

#[test]
fn out_of_range_chunk_is_rejected() {
    let mut s = ring4();
    s.ranks[1].channels[0].ops[0].src = Some(ChunkRef::new(BufferKind::Input, 8, 1));
    let e = s.validate().unwrap_err();
    assert!(
        matches!(
            e,
            ScheduleError::Op {
                rank: 1,
                channel: 0,
                index: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn unknown_peer_is_rejected() {
    let mut s = ring4();
    s.ranks[2].channels[1].ops[0].send_to = Some(4);
    let e = s.validate().unwrap_err();
    assert!(
        e.to_string().contains("peer rank 4 is not below nranks 4"),
        "{e}"
    );
}

#[test]
fn dependency_cycle_is_rejected() {
    let mut s = ring4();
    // channel 0 op 1 waits for channel 1 op 2, which (by program order) follows channel 1 op 0,
    // which waits for channel 0 op 2: a cycle.
    s.ranks[0].channels[0].ops[1].deps = vec![OpRef {
        channel: 1,
        index: 2,
    }];
    s.ranks[0].channels[1].ops[0].deps = vec![OpRef {
        channel: 0,
        index: 2,
    }];
    let e = s.validate().unwrap_err();
    assert!(matches!(e, ScheduleError::Cycle { rank: 0, .. }), "{e}");
    // One direction alone is fine.
    s.ranks[0].channels[1].ops[0].deps.clear();
    s.validate().unwrap();
}

#[test]
fn dependency_on_missing_op_is_rejected() {
    let mut s = ring4();
    s.ranks[3].channels[0].ops[0].deps = vec![OpRef {
        channel: 1,
        index: 99,
    }];
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("does not exist"));
}

#[test]
fn unmatched_message_is_rejected() {
    let mut s = ring4();
    s.ranks[0].channels[0].ops.pop(); // the final receive
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::Unmatched { channel: 0, .. })
    ));
}

#[test]
fn peer_stride_onto_self_is_rejected() {
    let mut s = build::direct(&Collective::new(CollectiveKind::AllToAll), 5).unwrap();
    s.ranks[2].channels[0].ops[1].repeat = 5; // the fifth copy would send to rank 2 itself
    let e = s.validate().unwrap_err();
    assert!(e.to_string().contains("talks to the rank itself"), "{e}");
}

#[test]
fn walk_errors_are_rejected() {
    let coll = Collective::new(CollectiveKind::AllGather);
    let good = build::ring(&coll, &[vec![2, 0, 3, 1]], Protocol::LL).unwrap();
    let (r, i) = (0usize, 2usize); // rank 0's repeated recv-copy-send
    assert!(good.ranks[r].channels[0].ops[i].walk.is_some());
    let mut s = good.clone();
    s.ranks[r].channels[0].ops[i].walk.as_mut().unwrap().order = 3;
    assert!(s.validate().unwrap_err().to_string().contains("orders"));
    let mut s = good.clone();
    s.ranks[r].channels[0].ops[i].walk.as_mut().unwrap().start = 2;
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("walk starts"));
    let mut s = good.clone();
    s.orders[0][1] = 9;
    assert!(s.validate().is_err());
}

#[test]
fn symbolic_check_catches_wrong_data_flow() {
    // Reducing into the wrong chunk changes the message shape: validation sees it already.
    let mut s = ring4();
    let op = &mut s.ranks[1].channels[0].ops[1];
    assert_eq!(op.kind, OpKind::RecvReduceSend);
    let mut src = op.src.unwrap();
    src.chunk = (src.chunk + 2) % 8;
    op.src = Some(src);
    assert!(matches!(
        s.validate(),
        Err(ScheduleError::SizeMismatch { .. })
    ));

    // A local copy to the wrong block validates, but the data is wrong.
    let mut s = build::ring(
        &Collective::new(CollectiveKind::AllGather),
        &[vec![0, 2, 1, 3]],
        Protocol::Simple,
    )
    .unwrap();
    let op = &mut s.ranks[2].channels[0].ops[0];
    assert_eq!(op.kind, OpKind::Copy);
    op.dst = Some(ChunkRef::new(BufferKind::Output, 1, 1));
    s.validate().unwrap();
    let e = symbolic::check(&s).unwrap_err();
    assert!(e.contains("rank 2 output chunk"), "{e}");

    // Double counting: reduce the own input twice.
    let mut s =
        build::one_shot(&Collective::new(CollectiveKind::AllReduce), 3, Protocol::LL).unwrap();
    let dup = s.ranks[1].channels[0]
        .ops
        .iter()
        .find(|o| o.kind == OpKind::Reduce)
        .cloned()
        .unwrap();
    s.ranks[1].channels[0].ops.push(dup);
    let e = symbolic::check(&s).unwrap_err();
    assert!(e.contains("counted twice"), "{e}");
}

#[test]
fn version_and_shape_errors() {
    let mut s = ring4();
    s.version = 99;
    assert!(matches!(s.validate(), Err(ScheduleError::Version(99))));
    let mut s = ring4();
    s.ranks.pop();
    assert!(matches!(s.validate(), Err(ScheduleError::Shape(_))));
}

#[test]
fn large_schedules_still_catch_unmatched_messages() {
    // 2^24 expanded ops is the exact-check limit; an all-to-all of 2900 ranks (2900 × 5799 ops) is above it.
    let n = 2900;
    let mut s = build::direct(&Collective::new(CollectiveKind::AllToAll), n).unwrap();
    s.validate().unwrap();
    // One receive too few on rank 17: its last peer's message is never taken.
    s.ranks[17].channels[0].ops[2].repeat -= 1;
    let e = s.validate().unwrap_err();
    assert!(matches!(e, ScheduleError::Unmatched { to: 17, .. }), "{e}");
}

#[test]
fn strided_groups_pair_only_when_they_mirror() {
    // Big enough for the fingerprint path. Every rank sends to r+1.. and receives from r-1..:
    // the groups mirror and cancel. Shift one rank's receive offset: it leaves its group, and
    // the messages no longer match.
    let n = 2900;
    let mut s = build::direct(&Collective::new(CollectiveKind::AllToAll), n).unwrap();
    s.validate().unwrap();
    let op = &mut s.ranks[5].channels[0].ops[2];
    op.recv_from = Some(3); // offset -2 instead of -1, same stride and repeat
    op.repeat = n - 2; // stays off the rank itself
    assert!(s.validate().is_err());
}
