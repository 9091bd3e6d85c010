//! Builds `tests/c/check.c` with the system C compiler against `include/nccl.h`, links it with
//! this crate's `libnccl.so`, and runs each of its modes (see the file's header). The forward
//! mode also builds `tests/c/fake_nccl.c` as the "real" NCCL and reads what it was called with.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory where the freshly built library answers to its soname, `libnccl.so.2`, as an
/// installed one does. The library is the one built for this test run, beside the test binary
/// in target/<profile>/deps (cargo copies it up to target/<profile> only on `cargo build`, so
/// that copy may be stale).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let built = exe
        .parent()
        .expect("target/<profile>/deps")
        .join("libnccl.so");
    assert!(built.exists(), "no {}", built.display());
    let dir = std::env::temp_dir().join(format!("topoplan-nccl-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libnccl.so", "libnccl.so.2"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&built, &link).unwrap();
    }
    dir
}

fn cc(args: &[&str]) {
    let out = Command::new("cc")
        .args(args)
        .output()
        .expect("the system C compiler (cc)");
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `check`, compiled once per test binary.
fn check_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("topoplan-nccl-check-{}", std::process::id()));
        let lib = lib_dir();
        let src = manifest().join("tests/c/check.c");
        let inc = format!("-I{}", manifest().join("include").display());
        let l = format!("-L{}", lib.display());
        let rpath = format!("-Wl,-rpath,{}", lib.display());
        cc(&[
            "-std=c11",
            "-Wall",
            "-Werror",
            "-O1",
            &inc,
            src.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            &l,
            &rpath,
            "-lnccl",
            "-ldl",
        ]);
        out
    })
}

fn run(mode: &str, envs: &[(&str, &str)]) -> String {
    let mut c = Command::new(check_binary());
    c.arg(mode)
        .env("TOPOPLAN_TIMEOUT", "20s")
        .env("TOPOPLAN_DEBUG", "NONE");
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("running check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "check {mode} failed:\n{text}");
    assert!(text.contains("all checks passed"), "{text}");
    text
}

#[test]
fn abi_symbols_and_argument_checks() {
    run("abi", &[]);
}

#[test]
fn every_collective_across_processes() {
    let out = Command::new(check_binary())
        .args(["ranks", "3"])
        .env("TOPOPLAN_TIMEOUT", "60s")
        .env("TOPOPLAN_DEBUG", "NONE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_ranks_from_one_thread_in_groups() {
    run("onethread", &[]);
}

#[test]
fn a_killed_rank_is_a_remote_error_and_abort_returns() {
    run("killed", &[]);
}

#[test]
fn ranks_that_disagree_get_an_error_not_a_hang() {
    run("mismatch", &[]);
}

#[test]
fn without_a_real_nccl_unsupported_calls_say_why() {
    run(
        "noforward",
        &[("TOPOPLAN_NCCL_LIB", "/nonexistent/libnccl.so.2")],
    );
}

#[test]
fn unsupported_reductions_are_forwarded_to_the_real_nccl() {
    let dir = std::env::temp_dir().join(format!("topoplan-fake-nccl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("libfakenccl.so");
    let src = manifest().join("tests/c/fake_nccl.c");
    cc(&[
        "-shared",
        "-fPIC",
        "-O1",
        src.to_str().unwrap(),
        "-o",
        so.to_str().unwrap(),
    ]);
    let log = dir.join("calls.log");
    let _ = std::fs::remove_file(&log);
    run(
        "forward",
        &[
            ("TOPOPLAN_NCCL_LIB", so.to_str().unwrap()),
            ("FAKE_NCCL_LOG", log.to_str().unwrap()),
            ("CHECK_EXPECT_FORWARD", "1"),
        ],
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    // One NCCL id, made by rank 0 and handed to both ranks over topoplan's own communicator.
    assert_eq!(count("GetUniqueId"), 1, "{calls}");
    let ids: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("CommInitRank"))
        .map(|l| l.rsplit("id=").next().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{calls}");
    assert_eq!(
        ids[0], ids[1],
        "both ranks joined NCCL with the same id:\n{calls}"
    );
    assert!(ids[0].starts_with("FAKE-ID-"), "{calls}");
    assert_eq!(count("AllReduce count=16 type=10 op=0"), 2, "{calls}");
    assert_eq!(
        count("RedOpCreatePreMulSum type=7 residence=1 scalar=2"),
        2,
        "{calls}"
    );
    assert_eq!(count("ReduceScatter count=2 type=7 op=17"), 2, "{calls}");
    assert_eq!(count("RedOpDestroy op=17"), 2, "{calls}");
    assert_eq!(count("WindowRegister size=16 flags=0"), 2, "{calls}");
    assert_eq!(count("WindowDeregister ok=1"), 2, "{calls}");
    assert_eq!(
        count("AllGather"),
        0,
        "data movement stays on topoplan:\n{calls}"
    );
    assert_eq!(count("CommDestroy"), 2, "{calls}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no `TOPOPLAN_NCCL_LIB`, the real NCCL is the one beside a loaded PyTorch: a fake
/// `site-packages` holds `torch/lib/libtorch_cuda.so` (loaded first, as `import torch` does)
/// and `nvidia/nccl/lib/libnccl.so.2` (the stand-in NCCL), and the forwarded calls reach it.
#[test]
fn the_real_nccl_is_found_beside_pytorch() {
    let site = std::env::temp_dir().join(format!("topoplan-fake-site-{}", std::process::id()));
    let torch_lib = site.join("torch/lib");
    let nccl_lib = site.join("nvidia/nccl/lib");
    std::fs::create_dir_all(&torch_lib).unwrap();
    std::fs::create_dir_all(&nccl_lib).unwrap();
    let torch_src = site.join("torch.c");
    std::fs::write(&torch_src, "int fake_torch_marker(void) { return 1; }\n").unwrap();
    let torch_so = torch_lib.join("libtorch_cuda.so");
    cc(&[
        "-shared",
        "-fPIC",
        torch_src.to_str().unwrap(),
        "-o",
        torch_so.to_str().unwrap(),
    ]);
    let fake = manifest().join("tests/c/fake_nccl.c");
    let nccl_so = nccl_lib.join("libnccl.so.2");
    cc(&[
        "-shared",
        "-fPIC",
        fake.to_str().unwrap(),
        "-o",
        nccl_so.to_str().unwrap(),
    ]);
    let log = site.join("calls.log");
    let mut c = Command::new(check_binary());
    c.arg("forward")
        .env_remove("TOPOPLAN_NCCL_LIB")
        .env("TOPOPLAN_TIMEOUT", "20s")
        .env("TOPOPLAN_DEBUG", "NONE")
        .env("CHECK_LOAD_FIRST", &torch_so)
        .env("FAKE_NCCL_LOG", &log)
        .env("CHECK_EXPECT_FORWARD", "1");
    let out = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A machine with a system NCCL would find that one only after PyTorch's.
    assert!(out.status.success(), "{text}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        calls
            .lines()
            .filter(|l| l.contains("AllReduce count=16 type=10"))
            .count(),
        2,
        "{calls}"
    );
    let _ = std::fs::remove_dir_all(&site);
}
