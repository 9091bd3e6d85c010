//! Unit and property tests of the CUDA IPC exchange (no GPU needed).

use super::*;
use planner::schedule::{Collective, CollectiveKind};

fn rec(rank: u32) -> PeerRecord {
    let mut handles = [[0u8; 64]; 3];
    for (i, h) in handles.iter_mut().enumerate() {
        for (j, b) in h.iter_mut().enumerate() {
            *b = (rank as usize * 97 + i * 31 + j) as u8;
        }
    }
    PeerRecord {
        rank,
        nranks: 3,
        sm_count: 132 - rank,
        ordinal: rank,
        pid: 1000 + rank,
        host: 0xfeed_beef_0123_4567,
        handles,
        bytes: [64 << 20, 32 << 20, 8 << 10],
    }
}

#[test]
fn records_round_trip_at_a_fixed_size() {
    let r = rec(2);
    let b = r.encode();
    assert_eq!(b.len(), RECORD_BYTES);
    assert_eq!(RECORD_BYTES, 256);
    assert_eq!(PeerRecord::decode(&b).unwrap(), r);
}

#[test]
fn bad_records_are_refused_clearly() {
    let b = rec(1).encode();
    let e = PeerRecord::decode(&b[..100]).unwrap_err();
    assert_eq!(
        e,
        RecordError::Length {
            got: 100,
            want: 256
        }
    );
    assert!(e.to_string().contains("100 bytes, expected 256"));
    let mut long = b.to_vec();
    long.push(0);
    assert!(matches!(
        PeerRecord::decode(&long),
        Err(RecordError::Length { got: 257, .. })
    ));
    let mut m = b;
    m[0] = b'X';
    assert!(matches!(PeerRecord::decode(&m), Err(RecordError::Magic(_))));
    let mut v = b;
    v[4] = 9;
    let e = PeerRecord::decode(&v).unwrap_err();
    assert!(e.to_string().contains("version 9"), "{e}");
}

fn table(recs: &[PeerRecord]) -> Vec<Vec<u8>> {
    recs.iter().map(|r| r.encode().to_vec()).collect()
}

#[test]
fn the_gathered_table_is_checked() {
    let recs: Vec<PeerRecord> = (0..3).map(rec).collect();
    let me = &recs[1];
    let got = check_table(&table(&recs), me).unwrap();
    assert_eq!(got, recs);
    assert_eq!(got.iter().map(|p| p.sm_count).min(), Some(130));

    let err = |recs: &[PeerRecord]| check_table(&table(recs), me).unwrap_err().to_string();
    let e = err(&recs[..2]);
    assert!(
        e.starts_with("rank 1:") && e.contains("2 records for 3 ranks"),
        "{e}"
    );
    let mut swapped = recs.clone();
    swapped.swap(0, 2);
    assert!(err(&swapped).contains("rank 0's IPC record: says it is rank 2"));
    let mut far = recs.clone();
    far[2].host = 1;
    assert!(err(&far).contains("another host"));
    let mut same = recs.clone();
    same[0].pid = me.pid;
    assert!(err(&same).contains("same process"));
    let mut knobs = recs.clone();
    knobs[0].bytes[0] = 1 << 20;
    assert!(err(&knobs).contains("TOPOPLAN_DIRECT_SLOT_KB"));
    let mut world = recs.clone();
    world[2].nranks = 4;
    assert!(err(&world).contains("4 ranks, this rank says 3"));
    let mut short = table(&recs);
    short[2].truncate(10);
    let e = check_table(&short, me).unwrap_err().to_string();
    assert!(
        e.contains("rank 2's IPC record: IPC record of 10 bytes"),
        "{e}"
    );
}

#[test]
fn only_direct_schedules_run() {
    let coll = Collective::new(CollectiveKind::AllReduce);
    let (_, one) = super::super::schedules::pick(
        &coll,
        2,
        1 << 20,
        "one-shot",
        planner::tuner::Profile::bundled(),
    )
    .unwrap();
    assert!(check_direct(&one).is_ok());
    let (_, ring) = super::super::schedules::pick(
        &coll,
        2,
        1 << 20,
        "ring",
        planner::tuner::Profile::bundled(),
    )
    .unwrap();
    let e = check_direct(&ring).unwrap_err();
    assert!(matches!(e, CudaError::Input(_)));
    let e = e.to_string();
    assert!(
        e.contains("one-shot (direct) schedules only") && e.contains("ring"),
        "{e}"
    );
}

#[test]
fn setup_fails_cleanly_without_a_driver_or_with_bad_ranks() {
    let mut calls = 0;
    let mut ex = |b: &[u8]| -> Result<Vec<Vec<u8>>, CudaError> {
        calls += 1;
        Ok(vec![b.to_vec()])
    };
    let e = CudaProcComm::new(0, 2, 2, &mut ex).unwrap_err();
    assert!(matches!(e, CudaError::Input(_)), "{e}");
    let e = CudaProcComm::new(0, 0, 1, &mut ex).unwrap_err();
    assert!(e.to_string().contains("2 to 8 ranks"), "{e}");
    if !driver_present() {
        let e = CudaProcComm::new(0, 0, 2, &mut ex).unwrap_err();
        assert!(matches!(e, CudaError::NoDriver), "{e}");
    }
    assert_eq!(calls, 0, "nothing is exchanged when the setup cannot start");
}

#[test]
fn aliasing_follows_nccl() {
    // 10 f32 elements per rank block: 40 bytes.
    let in_place = |kind, rank, input, output| direct::is_in_place(kind, rank, 40, input, output);
    assert!(in_place(CollectiveKind::AllReduce, 1, 64, 64));
    assert!(!in_place(CollectiveKind::AllReduce, 1, 64, 128));
    assert!(in_place(CollectiveKind::AllGather, 1, 1040, 1000));
    assert!(!in_place(CollectiveKind::AllGather, 0, 1040, 1000));
    assert!(in_place(CollectiveKind::ReduceScatter, 1, 1000, 1040));
}

mod props {
    use super::super::*;
    use proptest::prelude::*;

    fn arb_record() -> impl Strategy<Value = PeerRecord> {
        (
            any::<[u32; 5]>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 192),
            any::<[u64; 3]>(),
        )
            .prop_map(|(w, host, h, bytes)| {
                let mut handles = [[0u8; 64]; 3];
                for (i, hh) in handles.iter_mut().enumerate() {
                    hh.copy_from_slice(&h[i * 64..(i + 1) * 64]);
                }
                PeerRecord {
                    rank: w[0],
                    nranks: w[1],
                    sm_count: w[2],
                    ordinal: w[3],
                    pid: w[4],
                    host,
                    handles,
                    bytes,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Every record survives the exchange unchanged.
        #[test]
        fn records_round_trip(r in arb_record()) {
            prop_assert_eq!(PeerRecord::decode(&r.encode()), Ok(r));
        }

        /// Bytes from a peer never panic the reader; what it accepts re-encodes to the same
        /// bytes (but the reserved word, which encode writes as zero).
        #[test]
        fn any_bytes_decode_or_fail_cleanly(
            b in proptest::collection::vec(any::<u8>(), 0..RECORD_BYTES + 8),
            magic in any::<bool>(),
        ) {
            let mut b = b;
            if magic && b.len() >= 8 {
                b[..4].copy_from_slice(RECORD_MAGIC);
                b[4..8].copy_from_slice(&RECORD_VERSION.to_le_bytes());
            }
            if let Ok(r) = PeerRecord::decode(&b) {
                let e = r.encode();
                prop_assert_eq!(&e[..28], &b[..28]);
                prop_assert_eq!(&e[32..], &b[32..]);
            }
        }

        /// A flipped byte in any record of a valid table is either harmless or reported as an
        /// error naming the rank; the table check never panics.
        #[test]
        fn corrupted_tables_are_reported(
            recs in proptest::collection::vec(arb_record(), 2..4),
            at in any::<prop::sample::Index>(),
            flip in 1u8..,
        ) {
            let n = recs.len() as u32;
            let fixed: Vec<PeerRecord> = recs
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    r.rank = i as u32;
                    r.nranks = n;
                    r.sm_count = r.sm_count.max(1);
                    r.host = 7;
                    r.pid = 100 + i as u32;
                    r.bytes = [1, 2, 3];
                    r
                })
                .collect();
            let mut table: Vec<Vec<u8>> = fixed.iter().map(|r| r.encode().to_vec()).collect();
            prop_assert!(check_table(&table, &fixed[0]).is_ok());
            let i = at.index(table.len() * RECORD_BYTES);
            table[i / RECORD_BYTES][i % RECORD_BYTES] ^= flip;
            match check_table(&table, &fixed[0]) {
                Ok(v) => prop_assert_eq!(v.len(), table.len()),
                Err(e) => prop_assert!(e.to_string().contains("rank"), "{}", e),
            }
        }
    }
}

/// A step that must work on every rank: all go on, or all fail, and each says why.
#[test]
fn ranks_agree_before_going_on() {
    let mut ok_table = |_: &[u8]| -> Result<Vec<Vec<u8>>, CudaError> { Ok(vec![vec![], vec![]]) };
    assert!(agree(0, &mut ok_table, Ok(()), "map its peers").is_ok());
    // Another rank failed: this one fails too, naming it.
    let mut peer_failed = |mine: &[u8]| -> Result<Vec<Vec<u8>>, CudaError> {
        assert!(
            mine.is_empty(),
            "this rank's step worked, so it sends nothing"
        );
        Ok(vec![vec![], b"out of memory".to_vec()])
    };
    let e = agree(0, &mut peer_failed, Ok(()), "map its peers")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank 1 could not map its peers: out of memory"),
        "{e}"
    );
    // This rank failed: it still takes part in the exchange, then returns its own error.
    let mut sent = Vec::new();
    let mut record = |mine: &[u8]| -> Result<Vec<Vec<u8>>, CudaError> {
        sent = mine.to_vec();
        Ok(vec![mine.to_vec(), vec![]])
    };
    let own = Err(CudaError::Input("bad handle".into()));
    let e = agree(0, &mut record, own, "map its peers")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad handle"), "{e}");
    assert!(String::from_utf8_lossy(&sent).contains("bad handle"));
}
