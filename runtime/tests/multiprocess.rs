//! Ranks as separate processes: this test binary re-runs itself as each rank (torchrun-style
//! environment), over shared memory and over TCP; plus a rank killed mid-run and a stalled rank.
//! Rank 0 binds first, on a port the OS chooses, and hands its id to the others.

use planner::schedule::CollectiveKind;
use runtime::bootstrap;
use runtime::check::{collective_for, Case};
use runtime::{CommError, Communicator, DataType, ReduceOp};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "TOPOPLAN_TEST_ROLE";

/// Starts `n` copies of this binary as ranks running `role`; returns their (status, output).
fn spawn(n: u32, role: &str, extra: &[(&str, &str)]) -> Vec<(bool, String)> {
    spawn_wrapped(n, role, extra, "127.0.0.1", &|_| Vec::new())
}

/// Like [`spawn`], each rank's command prefixed by `wrap(rank)` (e.g. `ip netns exec ...`).
///
/// Rank 0 starts first, from torchrun-style variables at `MASTER_PORT=0`: it binds a port the
/// OS chooses and writes its id to `TOPOPLAN_UNIQUE_ID_FILE`; the other ranks start with that
/// id in `TOPOPLAN_UNIQUE_ID`. No port is chosen here and bound by another process.
fn spawn_wrapped(
    n: u32,
    role: &str,
    extra: &[(&str, &str)],
    master: &str,
    wrap: &dyn Fn(u32) -> Vec<String>,
) -> Vec<(bool, String)> {
    let exe = std::env::current_exe().unwrap();
    let id_file = bootstrap::fresh_id_file();
    let start = |r: u32, env: &[(&str, String)]| {
        let mut argv = wrap(r);
        argv.push(exe.display().to_string());
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..])
            .args([
                "--exact",
                "rank_entry_point",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, role)
            .env("RANK", r.to_string())
            .env("LOCAL_RANK", r.to_string())
            .env("WORLD_SIZE", n.to_string())
            .env_remove("TOPOPLAN_UNIQUE_ID")
            .env_remove("TOPOPLAN_MASTER_PORT")
            .env_remove(bootstrap::ID_FILE_VAR)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in extra {
            c.env(k, v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.spawn().unwrap()
    };
    let mut root = start(
        0,
        &[
            ("MASTER_ADDR", master.to_string()),
            ("MASTER_PORT", "0".to_string()),
            (bootstrap::ID_FILE_VAR, id_file.display().to_string()),
        ],
    );
    let id = match bootstrap::wait_for_id_file(&id_file, Duration::from_secs(60), || {
        root.try_wait().ok().flatten()
    }) {
        Ok(id) => id,
        Err(e) => {
            let _ = root.kill();
            let (_, out) = collect(root);
            panic!("rank 0 gave no id: {e}\n{out}");
        }
    };
    let mut kids = vec![root];
    for r in 1..n {
        kids.push(start(r, &[("TOPOPLAN_UNIQUE_ID", id.to_string())]));
    }
    kids.into_iter().map(collect).collect()
}

/// Waits for a rank; returns (whether it succeeded, its stdout and stderr).
fn collect(k: std::process::Child) -> (bool, String) {
    let o = k.wait_with_output().unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn cases(n: u32) -> Vec<Case> {
    let mut v = Vec::new();
    let mut seed = 5;
    for kind in CollectiveKind::ALL {
        for (dtype, op) in [
            (DataType::F32, ReduceOp::Sum),
            (DataType::Bf16, ReduceOp::Avg),
            (DataType::I8, ReduceOp::Prod),
            (DataType::F64, ReduceOp::Max),
        ] {
            if !kind.reduces() && op != ReduceOp::Sum {
                continue;
            }
            for in_place in [false, true] {
                for count in [1usize, 1000, 70_001] {
                    seed += 1;
                    v.push(Case {
                        coll: collective_for(kind, n, (seed % n as u64) as u32),
                        dtype,
                        op,
                        count,
                        in_place,
                        seed,
                    });
                }
            }
        }
    }
    v
}

/// The body of every child process (a no-op when run as a normal test).
#[test]
fn rank_entry_point() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let mut comm = Communicator::from_env().expect("join");
    let (n, r) = (comm.nranks(), comm.rank());
    match role.as_str() {
        "matrix" => {
            println!("transport {}", comm.transport_name());
            for c in cases(n) {
                let want = c.expected(n);
                let (send, mut recv) = c.buffers(n, r);
                c.run(&mut comm, send.as_deref(), &mut recv)
                    .unwrap_or_else(|e| panic!("{c:?}: {e}"));
                let w = c.wrong(r, &recv, want[r as usize].as_deref());
                assert_eq!(w, 0, "rank {r}: {w} wrong in {c:?}");
            }
            // Grouped send/recv around the ring, both directions at once.
            let mut g = comm.group();
            let out: Vec<i32> = (0..100_003).map(|i| i * (r as i32 + 1)).collect();
            let mut a = vec![0i32; out.len()];
            let mut b = vec![0i32; out.len()];
            g.send(&out, (r + 1) % n).unwrap();
            g.send(&out, (r + n - 1) % n).unwrap();
            g.recv(&mut a, (r + n - 1) % n).unwrap();
            g.recv(&mut b, (r + 1) % n).unwrap();
            g.run().unwrap();
            let from = |p: u32| {
                (0..100_003)
                    .map(|i| i * (p as i32 + 1))
                    .collect::<Vec<i32>>()
            };
            assert_eq!(a, from((r + n - 1) % n));
            assert_eq!(b, from((r + 1) % n));
            println!("rank {r} ok");
        }
        "killed" => {
            let mut v = vec![1.0f32; 4096];
            comm.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap();
            if r == 1 {
                // Dies in the middle of whatever collective it is running 300 ms from now.
                std::thread::spawn(|| {
                    std::thread::sleep(Duration::from_millis(300));
                    std::process::exit(3);
                });
            }
            let t = Instant::now();
            let mut big = vec![1.0f32; 1 << 18];
            let mut done = 0u32;
            let e = loop {
                match comm.all_reduce_in_place(&mut big, ReduceOp::Max) {
                    Ok(()) => done += 1,
                    Err(e) => break e,
                }
                assert!(t.elapsed() < Duration::from_secs(30), "rank 1 never died");
            };
            println!(
                "rank {r} error after {done} collectives, {:?}: {e}",
                t.elapsed()
            );
            // Rank 1 is dead; a rank may also see the other survivor leave after its own error.
            assert!(
                matches!(e, CommError::PeerGone { .. } | CommError::Timeout { .. }),
                "{e}"
            );
            assert!(t.elapsed() < Duration::from_secs(20));
            // The communicator stays failed.
            assert!(matches!(
                comm.all_reduce_in_place(&mut v, ReduceOp::Sum),
                Err(CommError::Poisoned(_))
            ));
        }
        "stall" => {
            let mut v = vec![r as i64; 333];
            comm.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap();
            if r == n - 1 {
                std::thread::sleep(Duration::from_secs(4)); // alive but never calls the collective
                return;
            }
            let t = Instant::now();
            let e = comm.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap_err();
            println!("rank {r} error after {:?}: {e}", t.elapsed());
            let s = e.to_string();
            // A survivor may also see the other survivor exit after its own timeout.
            assert!(
                matches!(
                    e,
                    CommError::Timeout { seq: 1, .. } | CommError::PeerGone { seq: 1, .. }
                ),
                "{s}"
            );
            assert!(
                s.contains("all-reduce #1") && s.contains(&format!("rank {r}")),
                "{s}"
            );
            assert!(t.elapsed() < Duration::from_secs(3));
        }
        other => panic!("unknown role {other}"),
    }
}

fn assert_all_ok(res: &[(bool, String)]) {
    for (i, (ok, out)) in res.iter().enumerate() {
        assert!(ok, "rank {i} failed:\n{out}");
    }
}

#[test]
fn processes_over_shared_memory() {
    let res = spawn(3, "matrix", &[("TOPOPLAN_TIMEOUT", "60s")]);
    assert_all_ok(&res);
    assert!(res[0].1.contains("transport shm"), "{}", res[0].1);
}

#[test]
fn processes_over_tcp() {
    let res = spawn(
        3,
        "matrix",
        &[
            ("TOPOPLAN_TIMEOUT", "60s"),
            ("TOPOPLAN_TRANSPORT", "tcp"),
            ("TOPOPLAN_SLOT_BYTES", "8192"),
        ],
    );
    assert_all_ok(&res);
    assert!(res[0].1.contains("transport tcp"), "{}", res[0].1);
}

#[test]
fn killed_rank_is_reported_in_bounded_time() {
    for transport in ["shm", "tcp"] {
        let res = spawn(
            3,
            "killed",
            &[
                ("TOPOPLAN_TIMEOUT", "10s"),
                ("TOPOPLAN_TRANSPORT", transport),
            ],
        );
        for (ok, out) in &res {
            if let Some(l) = out.lines().find(|l| l.contains("error after")) {
                eprintln!("{transport}: {l} (exit ok: {ok})");
            }
        }
        assert!(!res[1].0, "rank 1 was meant to die");
        assert!(res[0].0 && res[2].0, "{transport}: {:#?}", res);
        assert!(
            res.iter().any(|r| r.1.contains("peer rank 1 is gone")),
            "{res:#?}"
        );
    }
}

#[test]
fn stalled_rank_times_out_with_context() {
    let res = spawn(3, "stall", &[("TOPOPLAN_TIMEOUT", "1s")]);
    assert_all_ok(&res);
    assert!(
        res.iter().any(|r| r.1.contains("timed out after")),
        "{res:#?}"
    );
}

/// Deletes the test's network namespaces however the test ends.
struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Two ranks as two hosts: separate network namespaces joined by a veth pair, separate host
/// names (UTS namespaces), so the runtime picks TCP on its own. Needs CAP_NET_ADMIN; where
/// namespaces cannot be made the test says so and checks nothing.
#[test]
fn processes_across_network_namespaces() {
    let tag = format!("tp{}", std::process::id() % 1_000_000);
    let (a, b) = (format!("{tag}a"), format!("{tag}b"));
    let ip = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ip(&["netns", "add", &a]) {
        eprintln!("NOT RUN: cannot create network namespaces here (needs `ip` and CAP_NET_ADMIN)");
        return;
    }
    let _guard = Netns(vec![a.clone(), b.clone()]);
    let (x, y) = (format!("{tag}x"), format!("{tag}y"));
    for cmd in [
        vec!["netns", "add", &b],
        vec![
            "link", "add", &x, "netns", &a, "type", "veth", "peer", "name", &y, "netns", &b,
        ],
        vec!["-n", &a, "addr", "add", "10.213.7.1/24", "dev", &x],
        vec!["-n", &b, "addr", "add", "10.213.7.2/24", "dev", &y],
        vec!["-n", &a, "link", "set", &x, "up"],
        vec!["-n", &b, "link", "set", &y, "up"],
        vec!["-n", &a, "link", "set", "lo", "up"],
        vec!["-n", &b, "link", "set", "lo", "up"],
    ] {
        assert!(ip(&cmd), "ip {cmd:?} failed after netns add worked");
    }
    // Host names need a UTS namespace (unshare, hostname, CAP_SYS_ADMIN): probe first.
    let probe = Command::new("ip")
        .args([
            "netns",
            "exec",
            &a,
            "unshare",
            "--uts",
            "sh",
            "-c",
            "hostname probe",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !probe {
        eprintln!(
            "NOT RUN: cannot give a namespace its own host name here (needs unshare, hostname)"
        );
        return;
    }
    let wrap = |r: u32| -> Vec<String> {
        let ns = if r == 0 { &a } else { &b };
        // A UTS namespace with its own host name makes the two ranks two hosts.
        [
            "ip",
            "netns",
            "exec",
            ns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            &format!("hostname {ns} && exec \"$0\" \"$@\""),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let res = spawn_wrapped(
        2,
        "matrix",
        &[("TOPOPLAN_TIMEOUT", "60s")],
        "10.213.7.1",
        &wrap,
    );
    assert_all_ok(&res);
    assert!(res[0].1.contains("transport tcp"), "{}", res[0].1);
}
