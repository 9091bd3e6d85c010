//! The hostile corpus (`tests/hostile/`): C programs that call the library the way an attacker
//! or a careless user would, a rendezvous attacker, and every entry point called with hostile
//! arguments under a panic hook. Each case must end in the code and message
//! `docs/nccl-library.md` documents, within its bound, with no crash and no wrong data.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library built for this run, answering to its soname in a directory of its own.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let built = exe.parent().expect("deps").join("libnccl.so");
    assert!(built.exists(), "no {}", built.display());
    let dir = std::env::temp_dir().join(format!("topoplan-hostile-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libnccl.so", "libnccl.so.2"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&built, &link).unwrap();
    }
    dir
}

/// `tests/hostile/<name>.c`, built once per test binary.
fn program(name: &'static str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<(&'static str, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut b = built.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, p)) = b.iter().find(|(n, _)| *n == name) {
        return p.clone();
    }
    let lib = lib_dir();
    let out = std::env::temp_dir().join(format!("topoplan-hostile-{name}-{}", std::process::id()));
    let src = manifest().join(format!("tests/hostile/{name}.c"));
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-O1"])
        .arg(format!("-I{}", manifest().join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lnccl")
        .output()
        .expect("the system C compiler (cc)");
    assert!(
        cc.status.success(),
        "cc {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&cc.stderr)
    );
    b.push((name, out.clone()));
    out
}

/// Runs `program mode` with `envs`, killed after `limit`; returns its output, asserting it
/// passed every check.
fn run(name: &'static str, mode: &str, envs: &[(&str, &str)], limit: Duration) -> String {
    let mut c = Command::new(program(name));
    c.arg(mode)
        .env("TOPOPLAN_TIMEOUT", "20s")
        .env("TOPOPLAN_DEBUG", "NONE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        c.env(k, v);
    }
    let child = c.spawn().expect("running a hostile program");
    let (text, ok) = wait_bounded(child, limit, &format!("{name} {mode}"));
    assert!(ok, "{name} {mode} failed:\n{text}");
    assert!(
        text.contains(&format!("{mode}: all checks passed")),
        "{text}"
    );
    text
}

/// Waits for `child` at most `limit` (then kills it and fails); its output and success.
fn wait_bounded(mut child: std::process::Child, limit: Duration, what: &str) -> (String, bool) {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    (text, status.success())
}

#[test]
fn sizes_past_memory_or_a_byte_count_are_invalid_arguments() {
    run("limits", "sizes", &[], Duration::from_secs(30));
}

#[test]
fn nccl_return_codes_and_the_panics_that_were() {
    run("limits", "codes", &[], Duration::from_secs(30));
}

#[test]
fn timeouts_past_a_clock_are_refused_or_clamped_never_a_panic() {
    // Past a Duration: refused, naming the variable.
    run(
        "limits",
        "timeout",
        &[("TOPOPLAN_TIMEOUT", "100000000000000000000")],
        Duration::from_secs(30),
    );
    // A Duration, but past what a clock can add: "never", not a panic.
    run(
        "limits",
        "timeout",
        &[("TOPOPLAN_TIMEOUT", "10000000000000000000")],
        Duration::from_secs(30),
    );
}

#[test]
fn a_failed_nonblocking_init_is_reported() {
    run(
        "limits",
        "nonblocking",
        &[("TOPOPLAN_TIMEOUT", "1s")],
        Duration::from_secs(30),
    );
}

#[test]
fn ranks_that_disagree_on_roots_all_fail_naming_the_call() {
    // A 60 s timeout: every failure must come from the disagreement, long before it.
    run(
        "disagree",
        "roots",
        &[("TOPOPLAN_TIMEOUT", "60s")],
        Duration::from_secs(60),
    );
}

#[test]
fn sends_nobody_receives_fail_within_the_timeout() {
    run(
        "disagree",
        "p2p",
        &[("TOPOPLAN_TIMEOUT", "2s")],
        Duration::from_secs(40),
    );
}

#[test]
fn reordered_collectives_in_a_group_fail_with_messages() {
    run(
        "disagree",
        "reorder",
        &[("TOPOPLAN_TIMEOUT", "60s")],
        Duration::from_secs(40),
    );
}

#[test]
fn split_works_with_a_fixed_rendezvous_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    run(
        "disagree",
        "split",
        &[("NCCL_COMM_ID", addr.as_str())],
        Duration::from_secs(40),
    );
}

#[test]
fn abort_over_tcp_does_not_wait_for_a_stopped_peer() {
    run(
        "disagree",
        "stopped",
        &[("TOPOPLAN_TRANSPORT", "tcp")],
        Duration::from_secs(30),
    );
}

/// Connects to `addr`, retrying briefly.
fn connect(addr: &str) -> TcpStream {
    let t = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{addr} never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An attacker who knows rank 0's address but not the secret: idle connections, a byte every
/// 300 ms, frames without the secret (the old 16-byte header claiming version 2, another
/// secret claiming version 99), garbage and a flood of connections, all before the ranks join.
/// The ranks still join and all-reduce, at once.
#[test]
fn the_rendezvous_survives_an_unauthenticated_attacker() {
    let mut child = Command::new(program("disagree"))
        .arg("attacked")
        .env("TOPOPLAN_TIMEOUT", "30s")
        .env("TOPOPLAN_DEBUG", "NONE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("ADDR ")
        .expect("ADDR line")
        .to_string();
    let mut held: Vec<TcpStream> = (0..3).map(|_| connect(&addr)).collect();
    let mut old = b"TOPOPLAN".to_vec();
    old.extend_from_slice(&2u32.to_le_bytes());
    old.extend_from_slice(&0u32.to_le_bytes());
    let mut other = b"TOPOPLAN".to_vec();
    other.extend_from_slice(&[0x5a; 16]);
    other.extend_from_slice(&99u32.to_le_bytes());
    other.extend_from_slice(&2u32.to_le_bytes());
    other.extend_from_slice(b"{}");
    for f in [old, other, b"GET / HTTP/1.1\r\n\r\n".to_vec()] {
        let mut s = connect(&addr);
        s.write_all(&f).unwrap();
        held.push(s);
    }
    held.extend((0..100).filter_map(|_| TcpStream::connect(&addr).ok()));
    let mut trickle = connect(&addr);
    let trickler = std::thread::spawn(move || {
        for b in b"TOPOPLAN".iter().cycle().take(30) {
            if trickle.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let t = Instant::now();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    child.stdout = Some(out.into_inner());
    let (text, ok) = wait_bounded(child, Duration::from_secs(60), "attacked");
    assert!(ok && text.contains("attacked: all checks passed"), "{text}");
    // The ranks do not wait out the attacker's connections one after another (5 s each, over a
    // hundred of them) or the trickle (9 s); a generous bound, for loaded machines.
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "joining took {:?}:\n{text}",
        t.elapsed()
    );
    drop(held);
    trickler.join().unwrap();
}

/// Every entry point, called with hostile arguments in this process, under a panic hook that
/// counts panics: each returns a code, and nothing panics, not even where it would be caught.
#[test]
fn no_entry_point_panics_on_hostile_arguments() {
    hostile_calls::run_all();
}

#[path = "hostile/calls.rs"]
mod hostile_calls;
