//! The bootstrap's bad-input cases: each must give a clear error within the timeout, never hang.

use runtime::bootstrap::{hex, RootListener, UniqueId, MAGIC, PROTOCOL_VERSION};
use runtime::{CommError, Communicator, Config};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Rank 0's listener on a port the OS chooses, bound before anyone learns its id.
fn bound_root() -> RootListener {
    RootListener::bind("127.0.0.1:0", UniqueId::new("x:1").secret).unwrap()
}

/// An address nobody listens at: port 1 is outside the range the OS hands out for port 0, so
/// no test running beside this one can be given it.
const NOBODY: &str = "127.0.0.1:1";

fn cfg(timeout_ms: u64) -> Config {
    Config {
        timeout: Duration::from_millis(timeout_ms),
        ..Config::default()
    }
}

/// Runs `init_rank` for each (nranks, rank, config) in its own thread, the first rank 0 on
/// `root` and the others with its id; returns the results.
fn join(
    root: RootListener,
    ranks: Vec<(u32, u32, Config)>,
) -> Vec<Result<Communicator, CommError>> {
    let id = root.id().clone();
    let mut root = Some(root);
    let hs: Vec<_> = ranks
        .into_iter()
        .map(|(n, r, c)| {
            let id = id.clone();
            let root = if r == 0 { root.take() } else { None };
            std::thread::spawn(move || Communicator::init_rank_on(root, &id, n, r, c))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn two_ranks_join_and_all_reduce() {
    let comms = join(bound_root(), vec![(2, 0, cfg(20_000)), (2, 1, cfg(20_000))]);
    let hs: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || {
                let mut c = c.unwrap();
                assert_eq!(c.transport_name(), "shm");
                let mut v = vec![c.rank() as i64 + 1; 1001];
                c.all_reduce_in_place(&mut v, runtime::ReduceOp::Sum)
                    .unwrap();
                v
            })
        })
        .collect();
    for h in hs {
        assert!(h.join().unwrap().iter().all(|&x| x == 3));
    }
}

#[test]
fn world_size_mismatch_fails_both() {
    let t = Instant::now();
    let r = join(bound_root(), vec![(2, 0, cfg(10_000)), (3, 1, cfg(10_000))]);
    let e0 = r[0].as_ref().unwrap_err().to_string();
    let e1 = r[1].as_ref().unwrap_err().to_string();
    assert!(e0.contains("world has 3 ranks, rank 0 says 2"), "{e0}");
    assert!(e1.contains("refused") && e1.contains("3 ranks"), "{e1}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn duplicate_rank_fails() {
    let r = join(
        bound_root(),
        vec![
            (3, 0, cfg(10_000)),
            (3, 1, cfg(10_000)),
            (3, 1, cfg(10_000)),
        ],
    );
    let e0 = r[0].as_ref().unwrap_err().to_string();
    assert!(e0.contains("rank 1 joined twice"), "{e0}");
    assert!(r[1].is_err() && r[2].is_err());
}

#[test]
fn config_mismatch_fails() {
    let other = Config {
        algorithm: Some("tree".into()),
        ..cfg(10_000)
    };
    let r = join(bound_root(), vec![(2, 0, cfg(10_000)), (2, 1, other)]);
    let e0 = r[0].as_ref().unwrap_err().to_string();
    assert!(e0.contains("configuration"), "{e0}");
}

#[test]
fn nobody_joins_times_out() {
    let t = Instant::now();
    let e = join(bound_root(), vec![(3, 0, cfg(300))])
        .remove(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("timed out") && e.contains("[1, 2]"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    // A rank whose root never comes up times out too.
    let t = Instant::now();
    let e = Communicator::init_rank(&UniqueId::new(NOBODY), 2, 1, cfg(300))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("timed out") && e.contains("connecting to rank 0"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
}

/// Waits until rank 0 listens at `addr`, then connects.
fn connect(addr: &str) -> TcpStream {
    let t = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "rank 0 never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_all(mut s: TcpStream) -> String {
    let mut b = Vec::new();
    let _ = s.read_to_end(&mut b);
    String::from_utf8_lossy(&b).to_string()
}

#[test]
fn foreign_and_wrong_secret_connections_are_refused_and_the_job_goes_on() {
    let root = bound_root();
    let id = root.id().clone();
    let root = {
        let id = id.clone();
        std::thread::spawn(move || Communicator::init_rank_on(Some(root), &id, 2, 0, cfg(10_000)))
    };
    // Garbage (an HTTP request) is told off and dropped.
    let mut g = connect(&id.addr);
    g.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let reply = read_all(g);
    assert!(reply.contains("not a topoplan bootstrap frame"), "{reply}");
    // Another job's rank (wrong secret) is refused with a clear reason.
    let other = UniqueId {
        addr: id.addr.clone(),
        secret: [7; 16],
    };
    let e = Communicator::init_rank(&other, 2, 1, cfg(5_000))
        .unwrap_err()
        .to_string();
    assert!(e.contains("wrong secret"), "{e}");
    // The real rank 1 still joins.
    let one = Communicator::init_rank(&id, 2, 1, cfg(10_000));
    assert!(one.is_ok(), "{:?}", one.err());
    assert!(root.join().unwrap().is_ok());
}

/// A frame header as this build writes it, with any secret and version.
fn header(secret: &[u8; 16], version: u32, len: usize) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(secret);
    f.extend_from_slice(&version.to_le_bytes());
    f.extend_from_slice(&(len as u32).to_le_bytes());
    f
}

/// Rank 0 of a two-rank job on its own thread.
fn root_of_two(
    timeout_ms: u64,
) -> (
    UniqueId,
    std::thread::JoinHandle<Result<Communicator, CommError>>,
) {
    let root = bound_root();
    let id = root.id().clone();
    let h = {
        let id = id.clone();
        std::thread::spawn(move || {
            Communicator::init_rank_on(Some(root), &id, 2, 0, cfg(timeout_ms))
        })
    };
    (id, h)
}

#[test]
fn version_mismatch_is_fatal_and_explained() {
    let (id, root) = root_of_two(10_000);
    let mut s = connect(&id.addr);
    let payload = b"{}";
    let mut f = header(&id.secret, 99, payload.len());
    f.extend_from_slice(payload);
    s.write_all(&f).unwrap();
    let reply = read_all(s);
    assert!(reply.contains("version 99"), "{reply}");
    let e = root.join().unwrap().unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "speaks bootstrap protocol version 99, this build speaks {PROTOCOL_VERSION}"
        )),
        "{e}"
    );
}

/// Frames that do not carry the secret are dropped before their version or length is read,
/// whatever they claim: rank 0 goes on and the real rank joins.
#[test]
fn unauthenticated_frames_never_fail_the_rendezvous() {
    let (id, root) = root_of_two(20_000);
    // The old 16-byte header: magic, a version, a length, no secret.
    let mut old = MAGIC.to_vec();
    old.extend_from_slice(&2u32.to_le_bytes());
    old.extend_from_slice(&0u32.to_le_bytes());
    // Another secret claiming another version, and one claiming a 4 GiB payload.
    let wrong = header(&[9; 16], 77, 0);
    let huge = header(&[9; 16], PROTOCOL_VERSION, u32::MAX as usize);
    for f in [old, wrong, huge] {
        let mut s = connect(&id.addr);
        s.write_all(&f).unwrap();
        let reply = read_all(s);
        assert!(
            !reply.contains(&hex(&id.secret)),
            "a refusal leaked the secret"
        );
    }
    let one = Communicator::init_rank(&id, 2, 1, cfg(20_000));
    assert!(one.is_ok(), "{:?}", one.err());
    assert!(root.join().unwrap().is_ok());
}

/// Silent and trickling connections are closed after their greeting time; they neither stall
/// the real rank nor keep rank 0 waiting past its timeout.
#[test]
fn idle_and_trickling_connections_stall_nobody() {
    let (id, root) = root_of_two(20_000);
    let _idle: Vec<TcpStream> = (0..3).map(|_| connect(&id.addr)).collect();
    let mut trickle = connect(&id.addr);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // One byte of a valid-looking magic every 300 ms: each read makes progress.
            for b in MAGIC.iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed)
                    || trickle.write_all(&[*b]).is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let t = Instant::now();
    let one = Communicator::init_rank(&id, 2, 1, cfg(20_000));
    assert!(one.is_ok(), "{:?}", one.err());
    assert!(root.join().unwrap().is_ok());
    // Three silent connections read one after another would take 15 s at least.
    assert!(
        t.elapsed() < Duration::from_secs(12),
        "the real rank waited {:?}",
        t.elapsed()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickler.join().unwrap();

    // Alone with a trickler, rank 0 still fails at its own timeout, not later.
    let (id, root) = root_of_two(1_500);
    let mut s = connect(&id.addr);
    let t = Instant::now();
    let feeder = std::thread::spawn(move || {
        for b in MAGIC.iter().cycle().take(80) {
            if s.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let e = root.join().unwrap().unwrap_err().to_string();
    assert!(e.contains("timed out"), "{e}");
    // The trickle lasts 8 s: rank 0 did not wait for it.
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "rank 0 waited {:?}",
        t.elapsed()
    );
    feeder.join().unwrap();
}

#[test]
fn bad_unique_ids_and_env() {
    assert!("topoplan1:1234@h:1"
        .parse::<UniqueId>()
        .unwrap_err()
        .to_string()
        .contains("bad unique id"));
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let e = runtime::EnvRank::from_lookup(env(&[("WORLD_SIZE", "2")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("RANK is not set"), "{e}");
    let e = runtime::EnvRank::from_lookup(env(&[("RANK", "x"), ("WORLD_SIZE", "2")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("RANK=\"x\""), "{e}");
    let ok = runtime::EnvRank::from_lookup(env(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ]))
    .unwrap();
    assert_eq!(ok.id.addr, "10.0.0.1:29500");
    let same = runtime::EnvRank::from_lookup(env(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ]))
    .unwrap();
    assert_eq!(ok.id, same.id, "ranks of one job derive the same id");
    // An explicit id in TOPOPLAN_UNIQUE_ID wins over MASTER_ADDR/PORT.
    let id = UniqueId::new("127.0.0.1:4242");
    let text = id.to_string();
    let lookup = |k: &str| match k {
        "RANK" => Some("0".to_string()),
        "WORLD_SIZE" => Some("3".to_string()),
        "MASTER_PORT" => Some("1".to_string()),
        "TOPOPLAN_UNIQUE_ID" => Some(text.clone()),
        _ => None,
    };
    assert_eq!(runtime::EnvRank::from_lookup(lookup).unwrap().id, id);
    let e = runtime::EnvRank::from_lookup(|k: &str| match k {
        "RANK" | "WORLD_SIZE" => Some("1".to_string()),
        "TOPOPLAN_UNIQUE_ID" => Some("topoplan1:xyz".to_string()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("bad unique id"), "{e}");
    // Rank 0 at port 0 needs a file to tell its launcher the port it got.
    let e = runtime::EnvRank::from_lookup(env(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_PORT", "0"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(e.contains("port 0 needs TOPOPLAN_UNIQUE_ID_FILE"), "{e}");
    let e = Communicator::init_rank(&UniqueId::new(NOBODY), 2, 5, cfg(100))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 5 is not below the world size 2"), "{e}");
}

#[test]
fn same_host_without_shared_memory_is_explained() {
    let base = std::env::temp_dir().join(format!("topoplan-noshare-{}", std::process::id()));
    let dirs: Vec<_> = (0..2).map(|r| base.join(r.to_string())).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let ranks = (0..2u32)
        .map(|r| {
            (
                2,
                r,
                Config {
                    shm_dir: dirs[r as usize].clone(),
                    ..cfg(5_000)
                },
            )
        })
        .collect();
    let t = Instant::now();
    let r = join(bound_root(), ranks);
    let errs: Vec<String> = r.into_iter().map(|x| x.unwrap_err().to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("do not share")), "{errs:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&base);
}

/// The launcher's hand-off, with ranks as threads: rank 0 from torchrun-style variables at
/// port 0 writes the id it listens at; rank 1 joins with that id's text.
#[test]
fn rank_0_at_port_0_hands_its_id_to_the_launcher() {
    let path = runtime::bootstrap::fresh_id_file();
    let file = path.display().to_string();
    let lookup = move |k: &str| match k {
        "RANK" => Some("0".to_string()),
        "WORLD_SIZE" => Some("2".to_string()),
        "MASTER_ADDR" => Some("127.0.0.1".to_string()),
        "MASTER_PORT" => Some("0".to_string()),
        "TOPOPLAN_UNIQUE_ID_FILE" => Some(file.clone()),
        _ => None,
    };
    let env0 = runtime::EnvRank::from_lookup(lookup).unwrap();
    assert_eq!(env0.id_file.as_deref(), Some(path.as_path()));
    let root = std::thread::spawn(move || Communicator::from_env_rank(&env0, cfg(10_000)));
    let id = runtime::bootstrap::wait_for_id_file(&path, Duration::from_secs(10), || None).unwrap();
    assert_ne!(id.port(), Some(0));
    let text = id.to_string();
    let env1 = runtime::EnvRank::from_lookup(|k: &str| match k {
        "RANK" => Some("1".to_string()),
        "WORLD_SIZE" => Some("2".to_string()),
        "TOPOPLAN_UNIQUE_ID" => Some(text.clone()),
        _ => None,
    })
    .unwrap();
    let mut one = Communicator::from_env_rank(&env1, cfg(10_000)).unwrap();
    let mut zero = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || {
        let mut v = vec![2i32; 77];
        zero.all_reduce_in_place(&mut v, runtime::ReduceOp::Sum)
            .unwrap();
        v
    });
    let mut v = vec![5i32; 77];
    one.all_reduce_in_place(&mut v, runtime::ReduceOp::Sum)
        .unwrap();
    assert!(v.iter().chain(&h.join().unwrap()).all(|&x| x == 7));
}

/// More silent connections than rank 0 awaits at once ([`runtime::bootstrap::MAX_PENDING`]):
/// the oldest are closed, and the real rank, which greets as soon as it connects, still joins
/// at once.
#[test]
fn a_flood_of_connections_does_not_keep_a_rank_out() {
    let (id, root) = root_of_two(20_000);
    let flood: Vec<TcpStream> = (0..runtime::bootstrap::MAX_PENDING + 44)
        .filter_map(|_| TcpStream::connect(&id.addr).ok())
        .collect();
    assert!(flood.len() > runtime::bootstrap::MAX_PENDING);
    let t = Instant::now();
    let one = Communicator::init_rank(&id, 2, 1, cfg(20_000));
    assert!(one.is_ok(), "{:?}", one.err());
    assert!(root.join().unwrap().is_ok());
    // Waiting behind the strangers' greetings would take minutes; typically 10 ms.
    let took = t.elapsed();
    assert!(took < Duration::from_secs(12), "{took:?}");
}
