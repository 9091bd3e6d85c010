//! The bootstrap's bad-input cases: each must give a clear error within the timeout, never hang.

use runtime::bootstrap::{hex, UniqueId, MAGIC};
use runtime::{CommError, Communicator, Config};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn cfg(timeout_ms: u64) -> Config {
    Config {
        timeout: Duration::from_millis(timeout_ms),
        ..Config::default()
    }
}

/// Runs `init_rank` for each (nranks, rank, config) in its own thread; returns the results.
fn join(id: &UniqueId, ranks: Vec<(u32, u32, Config)>) -> Vec<Result<Communicator, CommError>> {
    let hs: Vec<_> = ranks
        .into_iter()
        .map(|(n, r, c)| {
            let id = id.clone();
            std::thread::spawn(move || Communicator::init_rank(&id, n, r, c))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn two_ranks_join_and_all_reduce() {
    let id = UniqueId::new(free_addr());
    let comms = join(&id, vec![(2, 0, cfg(20_000)), (2, 1, cfg(20_000))]);
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
    let id = UniqueId::new(free_addr());
    let t = Instant::now();
    let r = join(&id, vec![(2, 0, cfg(10_000)), (3, 1, cfg(10_000))]);
    let e0 = r[0].as_ref().unwrap_err().to_string();
    let e1 = r[1].as_ref().unwrap_err().to_string();
    assert!(e0.contains("world has 3 ranks, rank 0 says 2"), "{e0}");
    assert!(e1.contains("refused") && e1.contains("3 ranks"), "{e1}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn duplicate_rank_fails() {
    let id = UniqueId::new(free_addr());
    let r = join(
        &id,
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
    let id = UniqueId::new(free_addr());
    let other = Config {
        algorithm: Some("tree".into()),
        ..cfg(10_000)
    };
    let r = join(&id, vec![(2, 0, cfg(10_000)), (2, 1, other)]);
    let e0 = r[0].as_ref().unwrap_err().to_string();
    assert!(e0.contains("configuration"), "{e0}");
}

#[test]
fn nobody_joins_times_out() {
    let id = UniqueId::new(free_addr());
    let t = Instant::now();
    let e = join(&id, vec![(3, 0, cfg(300))])
        .remove(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("timed out") && e.contains("[1, 2]"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    // A rank whose root never comes up times out too.
    let t = Instant::now();
    let e = join(&UniqueId::new(free_addr()), vec![(2, 1, cfg(300))])
        .remove(0)
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
    let id = UniqueId::new(free_addr());
    let root = {
        let id = id.clone();
        std::thread::spawn(move || Communicator::init_rank(&id, 2, 0, cfg(10_000)))
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

#[test]
fn version_mismatch_is_fatal_and_explained() {
    let id = UniqueId::new(free_addr());
    let root = {
        let id = id.clone();
        std::thread::spawn(move || Communicator::init_rank(&id, 2, 0, cfg(10_000)))
    };
    let mut s = connect(&id.addr);
    let payload = format!("{{\"secret\":\"{}\"}}", hex(&id.secret));
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&99u32.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload.as_bytes());
    s.write_all(&f).unwrap();
    let reply = read_all(s);
    assert!(reply.contains("version 99"), "{reply}");
    let e = root.join().unwrap().unwrap_err().to_string();
    assert!(
        e.contains("speaks bootstrap protocol version 99, this build speaks 1"),
        "{e}"
    );
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
    let e = Communicator::init_rank(&UniqueId::new(free_addr()), 2, 5, cfg(100))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 5 is not below the world size 2"), "{e}");
}

#[test]
fn same_host_without_shared_memory_is_explained() {
    let id = UniqueId::new(free_addr());
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
    let r = join(&id, ranks);
    let errs: Vec<String> = r.into_iter().map(|x| x.unwrap_err().to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("do not share")), "{errs:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&base);
}
