//! Bootstrap tests: ranks as threads on 127.0.0.1.

use super::*;

fn info(rank: u32) -> PeerInfo {
    PeerInfo {
        rank,
        host: "test".into(),
        pid: std::process::id(),
        listen: "127.0.0.1:1".into(),
    }
}

/// Rank 0's listener on a port the OS chooses: bound before anyone learns the id.
fn bound_root() -> RootListener {
    RootListener::bind("127.0.0.1:0", random_secret()).unwrap()
}

fn join(id: &UniqueId, rank: u32, n: u32, timeout: Duration) -> Rendezvous {
    rendezvous(id, rank, n, 7, info(rank), timeout).unwrap()
}

/// Rank 0 on `root`, the others on its id, each in its own thread running `body`.
fn spawn_ranks<T: Send + 'static>(
    root: RootListener,
    n: u32,
    timeout: Duration,
    body: impl Fn(Rendezvous) -> T + Send + Sync + 'static,
) -> Vec<std::thread::JoinHandle<T>> {
    let id = root.id().clone();
    let body = std::sync::Arc::new(body);
    let mut root = Some(root);
    (0..n)
        .map(|r| {
            let (id, body, root) = (id.clone(), body.clone(), root.take());
            std::thread::spawn(move || {
                let rv = match root {
                    Some(root) => rendezvous_root(root, n, 7, info(0), timeout).unwrap(),
                    None => join(&id, r, n, timeout),
                };
                body(rv)
            })
        })
        .collect()
}

#[test]
fn all_gather_returns_every_rank_in_order_on_every_rank() {
    let n = 4u32;
    let hs = spawn_ranks(bound_root(), n, Duration::from_secs(20), |mut rv| {
        let r = rv.rank;
        // Different lengths (rank 0's is empty), twice in a row, then a barrier:
        // the operations stay in step.
        let a = rv.all_gather(&vec![r as u8; r as usize * 3]).unwrap();
        let b = rv.all_gather(&[0xAB, r as u8]).unwrap();
        rv.barrier().unwrap();
        (a, b)
    });
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
    let root = bound_root();
    let id = root.id().clone();
    let t = Duration::from_millis(1500);
    let (id1, id2) = (id.clone(), id.clone());
    let root = std::thread::spawn(move || {
        let mut rv = rendezvous_root(root, 3, 7, info(0), t).unwrap();
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
    let root = bound_root();
    let id1 = root.id().clone();
    let h = std::thread::spawn(move || join(&id1, 1, 2, Duration::from_secs(5)));
    let mut rv = rendezvous_root(root, 2, 7, info(0), Duration::from_secs(5)).unwrap();
    let _other = h.join().unwrap();
    let e = rv.all_gather(&vec![0; MAX_GATHER_BYTES + 1]).unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    let b: Vec<u8> = (0..=255).collect();
    assert_eq!(unhex(&hex(&b)).unwrap(), b);
    assert!(unhex("abc").is_none() && unhex("zz").is_none());
}

/// A given address that something else holds fails at once, naming the address; a root
/// listener bound at port 0 has its real port in its id.
#[test]
fn rank_0_on_a_taken_address_says_so() {
    let held = bound_root();
    let addr = held.id().addr.clone();
    match RootListener::bind(&addr, random_secret()) {
        Err(e @ BootstrapError::AddressInUse { .. }) => {
            assert!(e.to_string().contains(&addr), "{e}");
            assert!(e.to_string().contains("in use"), "{e}");
        }
        Err(e) => panic!("expected AddressInUse, got {e}"),
        Ok(_) => panic!("rank 0 listened on a taken address"),
    }
    // `rendezvous` binds the same way for rank 0.
    let id = UniqueId::new(addr.clone());
    let e = rendezvous(&id, 0, 2, 7, info(0), Duration::from_secs(2)).unwrap_err();
    assert!(matches!(e, BootstrapError::AddressInUse { .. }), "{e}");
    drop(held);
}

#[test]
fn root_listener_at_port_0_hands_out_its_real_port() {
    let secret = random_secret();
    let root = RootListener::bind("127.0.0.1:0", secret).unwrap();
    let id = root.id().clone();
    let port = id.port().expect("a port");
    assert_ne!(port, 0);
    assert_eq!(id.addr, format!("127.0.0.1:{port}"));
    assert_eq!(id.secret, secret);
    assert_eq!(root.listener.local_addr().unwrap().port(), port);
    // The text form round-trips, secret included.
    assert_eq!(id.to_string().parse::<UniqueId>().unwrap(), id);
    // Port 0 is not an address to join or to bind through `rendezvous`.
    let at_zero = UniqueId::new("127.0.0.1:0");
    for rank in [0, 1] {
        let e = rendezvous(&at_zero, rank, 2, 7, info(rank), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, BootstrapError::PortZero { .. }), "{e}");
        assert!(e.to_string().contains("127.0.0.1:0"), "{e}");
    }
    // A rank joins with the id and the rendezvous completes.
    let hs = spawn_ranks(root, 2, Duration::from_secs(10), |rv| rv.peers.len());
    for h in hs {
        assert_eq!(h.join().unwrap(), 2);
    }
    let e = RootListener::bind("no-port", secret).unwrap_err();
    assert!(e.to_string().contains("host:port"), "{e}");
}

#[test]
fn id_file_hand_off() {
    let dir = std::env::temp_dir().join(format!("topoplan-idfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("id");
    let root = bound_root();
    root.publish(&path).unwrap();
    // Only the final file is left (the temporary one was renamed), readable by its owner only.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("id")]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "mode {mode:o}");
    let got = wait_for_id_file(&path, Duration::from_secs(5), || None).unwrap();
    assert_eq!(&got, root.id());
    assert!(!path.exists(), "the launcher removes the file it read");
    // Rank 0 that exits first: a clear error at once, not the timeout.
    let exited = std::process::Command::new("sh")
        .args(["-c", "exit 3"])
        .status()
        .unwrap();
    let t = Instant::now();
    let e = wait_for_id_file(&path, Duration::from_secs(30), || Some(exited)).unwrap_err();
    assert!(matches!(e, BootstrapError::RootExited { .. }), "{e}");
    assert!(e.to_string().contains("exit status: 3"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // Nobody writes: bounded.
    let e = wait_for_id_file(&path, Duration::from_millis(100), || None).unwrap_err();
    assert!(matches!(e, BootstrapError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    // A file that is not an id.
    std::fs::write(&path, "nonsense").unwrap();
    let e = wait_for_id_file(&path, Duration::from_secs(1), || None).unwrap_err();
    assert!(matches!(e, BootstrapError::BadId(_)), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
