//! Bootstrap tests: ranks as threads on 127.0.0.1.

use super::*;

fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn join(id: &UniqueId, rank: u32, n: u32, timeout: Duration) -> Rendezvous {
    let info = PeerInfo {
        rank,
        host: "test".into(),
        pid: std::process::id(),
        listen: "127.0.0.1:1".into(),
    };
    rendezvous(id, rank, n, 7, info, timeout).unwrap()
}

#[test]
fn all_gather_returns_every_rank_in_order_on_every_rank() {
    let id = UniqueId::new(free_addr());
    let n = 4u32;
    let hs: Vec<_> = (0..n)
        .map(|r| {
            let id = id.clone();
            std::thread::spawn(move || {
                let mut rv = join(&id, r, n, Duration::from_secs(20));
                // Different lengths (rank 0's is empty), twice in a row, then a barrier:
                // the operations stay in step.
                let a = rv.all_gather(&vec![r as u8; r as usize * 3]).unwrap();
                let b = rv.all_gather(&[0xAB, r as u8]).unwrap();
                rv.barrier().unwrap();
                (a, b)
            })
        })
        .collect();
    for h in hs {
        let (a, b) = h.join().unwrap();
        for r in 0..n as usize {
            assert_eq!(a[r], vec![r as u8; r * 3]);
            assert_eq!(b[r], vec![0xAB, r as u8]);
        }
        assert_eq!(a.len(), n as usize);
    }
}

#[test]
fn all_gather_times_out_and_tells_the_others() {
    let id = UniqueId::new(free_addr());
    let t = Duration::from_millis(1500);
    let (id1, id2) = (id.clone(), id.clone());
    let root = std::thread::spawn(move || {
        let mut rv = join(&id, 0, 3, t);
        rv.all_gather(b"zero")
    });
    // Rank 1 joins the gather (waiting longer than rank 0, so that it hears rank 0's
    // verdict rather than timing out itself), rank 2 never does.
    let one =
        std::thread::spawn(move || join(&id1, 1, 3, Duration::from_secs(10)).all_gather(b"one"));
    let two = std::thread::spawn(move || {
        let rv = join(&id2, 2, 3, t);
        std::thread::sleep(Duration::from_millis(2000));
        drop(rv);
    });
    let start = Instant::now();
    let e0 = root.join().unwrap().unwrap_err().to_string();
    assert!(e0.contains("waiting for rank 2"), "{e0}");
    let e1 = one.join().unwrap().unwrap_err().to_string();
    assert!(e1.contains("refused") && e1.contains("rank 2"), "{e1}");
    assert!(start.elapsed() < Duration::from_secs(3));
    two.join().unwrap();
}

#[test]
fn all_gather_refuses_oversized_contributions_and_hex_round_trips() {
    let id = UniqueId::new(free_addr());
    let id1 = id.clone();
    let h = std::thread::spawn(move || join(&id1, 1, 2, Duration::from_secs(5)));
    let mut rv = join(&id, 0, 2, Duration::from_secs(5));
    let _other = h.join().unwrap();
    let e = rv.all_gather(&vec![0; MAX_GATHER_BYTES + 1]).unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    let b: Vec<u8> = (0..=255).collect();
    assert_eq!(unhex(&hex(&b)).unwrap(), b);
    assert!(unhex("abc").is_none() && unhex("zz").is_none());
}

/// Rank 0 whose address is taken says so in a variant of its own, which a launcher that chose
/// the port retries on another.
#[test]
fn rank_0_on_a_taken_address_says_so() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let id = UniqueId::new(addr.clone());
    let info = PeerInfo {
        rank: 0,
        host: "test".into(),
        pid: std::process::id(),
        listen: "127.0.0.1:1".into(),
    };
    match rendezvous(&id, 0, 2, 7, info, Duration::from_secs(2)) {
        Err(e @ BootstrapError::AddressInUse { .. }) => {
            assert!(e.to_string().contains(&addr), "{e}");
            assert!(e.to_string().contains("in use"), "{e}");
        }
        Err(e) => panic!("expected AddressInUse, got {e}"),
        Ok(_) => panic!("rank 0 listened on a taken address"),
    }
    drop(held);
}
