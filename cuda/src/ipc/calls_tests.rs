use super::*;
use std::sync::atomic::AtomicU32;

static KEYS: AtomicU32 = AtomicU32::new(0);

/// Every rank's `Calls` over fresh boards in the temp dir (unlinked at once: the mappings
/// stay).
fn ranks(n: u32, timeout: Duration) -> Vec<Calls> {
    let dir = std::env::temp_dir();
    let key = format!("test{}-{}", std::process::id(), KEYS.fetch_add(1, Relaxed));
    let own: Vec<Board> = (0..n)
        .map(|r| Board::create(&dir, &key, r).unwrap())
        .collect();
    let all = (0..n)
        .map(|r| {
            let boards = (0..n)
                .map(|p| Board::open(&dir, &key, p).unwrap())
                .collect();
            Calls::new(r, boards, timeout)
        })
        .collect();
    for r in 0..n {
        std::fs::remove_file(board_path(&dir, &key, r)).unwrap();
    }
    drop(own);
    all
}

fn ar(count: u64) -> Desc {
    Desc::Coll {
        kind: CollectiveKind::AllReduce,
        count,
        dtype: DataType::F32,
        op: ReduceOp::Sum,
        root: 0,
    }
}

#[test]
fn descriptors_round_trip_and_name_what_differs() {
    for kind in CollectiveKind::ALL {
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                let d = Desc::Coll {
                    kind,
                    count: u64::MAX - 3,
                    dtype,
                    op,
                    root: 7,
                };
                assert_eq!(Desc::decode(d.encode()), Some(d));
            }
        }
    }
    for d in [
        Desc::Send {
            peer: 7,
            bytes: 1 << 40,
        },
        Desc::Recv { peer: 0, bytes: 0 },
    ] {
        assert_eq!(Desc::decode(d.encode()), Some(d));
    }
    assert_eq!(Desc::decode([1, 0]), None);
    assert_eq!(Desc::decode([1, 1 | 200 << 8]), None);
    assert!(ar(4).differs(&ar(4)).is_empty());
    assert_eq!(ar(4).differs(&ar(5)), ["count"]);
    let half = Desc::Coll {
        kind: CollectiveKind::AllReduce,
        count: 4,
        dtype: DataType::F16,
        op: ReduceOp::Max,
        root: 1,
    };
    // The root means nothing to an all-reduce.
    assert_eq!(ar(4).differs(&half), ["type", "op"]);
    let bc = |root, op| Desc::Coll {
        kind: CollectiveKind::Broadcast,
        count: 4,
        dtype: DataType::U8,
        op,
        root,
    };
    assert_eq!(
        bc(0, ReduceOp::Sum).differs(&bc(1, ReduceOp::Max)),
        ["root"]
    );
    assert_eq!(ar(4).differs(&bc(0, ReduceOp::Sum)), ["collective", "type"]);
    let s = Desc::Send { peer: 1, bytes: 64 };
    let r = Desc::Recv { peer: 0, bytes: 64 };
    assert!(s.differs(&r).is_empty());
    assert_eq!(s.differs(&Desc::Recv { peer: 0, bytes: 8 }), ["size"]);
    assert_eq!(s.differs(&ar(64)), ["call"]);
    assert_eq!(
        bc(2, ReduceOp::Sum).describe(),
        "broadcast of 4 x uint8 root 2"
    );
    assert_eq!(ar(9).describe(), "all-reduce of 9 x float sum");
}

/// Calls that agree pass for many times the ring, whichever rank comes first; messages too.
#[test]
fn agreeing_calls_pass_past_the_rings() {
    let mut c = ranks(3, Duration::from_secs(5));
    for i in 0..3 * COLL_RING as u64 {
        let order: [usize; 3] = [
            (i % 3) as usize,
            ((i + 1) % 3) as usize,
            ((i + 2) % 3) as usize,
        ];
        for r in order {
            c[r].collective(&ar(i)).unwrap();
        }
    }
    for i in 0..3 * MSG_RING as u64 {
        let bytes = i * 7;
        c[2].message(&Desc::Recv { peer: 0, bytes }).unwrap();
        c[0].message(&Desc::Send { peer: 2, bytes }).unwrap();
        c[0].message(&Desc::Recv { peer: 1, bytes: 3 }).unwrap();
        c[1].message(&Desc::Send { peer: 0, bytes: 3 }).unwrap();
    }
    assert!(c.iter().all(|c| c.verdict().is_none()));
}

/// Rank 0 enqueues first and sees nothing; rank 1 sees the difference, and flags rank 0,
/// whose abort word is set and whose next call fails with the same verdict.
#[test]
fn a_count_mismatch_fails_both_ranks() {
    let mut c = ranks(2, Duration::from_secs(5));
    c[0].collective(&ar(8)).unwrap();
    c[1].collective(&ar(8)).unwrap();
    c[0].collective(&ar(1024)).unwrap();
    let e = c[1].collective(&ar(512)).unwrap_err();
    let CallsError::Mismatch(m) = e else {
        panic!("{e}")
    };
    let msg = m.to_string();
    assert!(msg.contains("device collective #1"), "{msg}");
    assert!(
        msg.contains("rank 1 calls all-reduce of 512 x float sum"),
        "{msg}"
    );
    assert!(
        msg.contains("rank 0 calls all-reduce of 1024 x float sum"),
        "{msg}"
    );
    assert!(msg.contains("(count differs)"), "{msg}");
    for (r, calls) in c.iter().enumerate() {
        assert_eq!(calls.verdict().as_ref(), Some(&m), "rank {r}");
        assert_ne!(calls.me().w(ABORT_W).load(SeqCst), 0, "rank {r}");
    }
    assert!(matches!(
        c[0].collective(&ar(8)),
        Err(CallsError::Mismatch(v)) if v == m
    ));
}

#[test]
fn a_message_size_mismatch_fails_both_ranks() {
    let mut c = ranks(2, Duration::from_secs(5));
    c[1].message(&Desc::Recv {
        peer: 0,
        bytes: 128,
    })
    .unwrap();
    let e = c[0]
        .message(&Desc::Send {
            peer: 1,
            bytes: 256,
        })
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("message #0 from rank 0 to rank 1"), "{msg}");
    assert!(msg.contains("rank 0 sends 256 bytes to rank 1"), "{msg}");
    assert!(
        msg.contains("rank 1 receives 128 bytes from rank 0"),
        "{msg}"
    );
    assert!(msg.contains("(size differs)"), "{msg}");
    assert!(c[1].verdict().is_some());
}

/// A rank a whole ring ahead waits for its peer, fails after the timeout if the peer never
/// comes, and goes on as soon as it does.
#[test]
fn a_rank_a_ring_ahead_waits_for_its_peer() {
    let mut c = ranks(2, Duration::from_millis(50));
    for i in 0..COLL_RING as u64 {
        c[0].collective(&ar(i)).unwrap();
    }
    let e = c[0].collective(&ar(0)).unwrap_err();
    assert!(matches!(e, CallsError::Behind { peer: 1, .. }), "{e}");
    let mut c = ranks(2, Duration::from_secs(20));
    for i in 0..COLL_RING as u64 {
        c[0].collective(&ar(i)).unwrap();
    }
    let (a, b) = c.split_at_mut(1);
    std::thread::scope(|s| {
        let lead = s.spawn(|| a[0].collective(&ar(COLL_RING as u64)));
        std::thread::sleep(Duration::from_millis(20));
        for i in 0..=COLL_RING as u64 {
            b[0].collective(&ar(i)).unwrap();
        }
        lead.join().unwrap().unwrap();
    });
}

/// Racing ranks: of two that differ at a call, at least one sees it, every time, and every
/// rank ends up with the verdict.
#[test]
fn racing_ranks_never_both_miss_a_difference() {
    for trial in 0..100u64 {
        let mut c = ranks(2, Duration::from_secs(20));
        let bad = trial % 7;
        let outs: Vec<Result<(), CallsError>> = std::thread::scope(|s| {
            let hs: Vec<_> = c
                .iter_mut()
                .enumerate()
                .map(|(r, calls)| {
                    s.spawn(move || {
                        for i in 0..8u64 {
                            let n = if r == 1 && i == bad { 1 } else { 2 };
                            calls.collective(&ar(n))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            outs.iter()
                .any(|o| matches!(o, Err(CallsError::Mismatch(_)))),
            "trial {trial}: {outs:?}"
        );
        assert!(c.iter().all(|c| c.verdict().is_some()), "trial {trial}");
    }
}
