//! Builds `tests/c/check.c` with the system C compiler against `include/nccl.h`, links it with
//! this crate's `libnccl.so`, and runs each of its modes (see the file's header). The forward
//! modes also build `tests/c/fake_nccl.c` as the "real" NCCL and read what it was called with;
//! `tests/c/header_use.c` is compiled only, as nccl-tests uses the header.

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
    BIN.get_or_init(|| c_program("check.c", "check", &["-ldl"]))
}

/// `tests/c/<src>` built against this crate's header and library, as `<name>` in a temporary
/// folder.
fn c_program(src: &str, name: &str, libs: &[&str]) -> PathBuf {
    let out = std::env::temp_dir().join(format!("topoplan-nccl-{name}-{}", std::process::id()));
    let lib = lib_dir();
    let src = manifest().join("tests/c").join(src);
    let inc = format!("-I{}", manifest().join("include").display());
    let l = format!("-L{}", lib.display());
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    let mut args = vec![
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
    ];
    args.extend_from_slice(libs);
    cc(&args);
    out
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
    // The killed rank cannot remove its hang record; the survivor (rank 0) does at abort.
    let shm = std::env::temp_dir().join(format!("topoplan-nccl-killed-{}", std::process::id()));
    std::fs::create_dir_all(&shm).unwrap();
    run("killed", &[("TOPOPLAN_SHM_DIR", shm.to_str().unwrap())]);
    let left: Vec<_> = std::fs::read_dir(&shm)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in {}: {left:?}", shm.display());
    let _ = std::fs::remove_dir_all(&shm);
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
fn windows_are_forwarded_to_the_real_nccl_and_host_reductions_are_not() {
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
    // The float8 sum and average, the PreMulSum with a host scalar and the uint64 max, min
    // and average ran on topoplan, so NCCL never saw the op.
    assert_eq!(count("AllReduce"), 0, "{calls}");
    assert_eq!(count("RedOpCreatePreMulSum"), 0, "{calls}");
    assert_eq!(count("ReduceScatter"), 0, "{calls}");
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
/// `site-packages` holds `torch/lib/libtorch_cuda.so` (loaded first) and
/// `nvidia/nccl/lib/libnccl.so.2` (the stand-in NCCL), and the forwarded calls reach it: the
/// device-buffer calls of `check devforward`, with the stand-in CUDA driver.
///
/// The stand-in libtorch loads that NCCL itself, by absolute path and globally, before the
/// first NCCL call, as `import torch` does; and the stand-in's all-reduce calls its own
/// `ncclCommGetAsyncError` by name. Opening the already-loaded copy again would return it
/// unchanged, its internal call would bind to this library's symbol, and the forwarded
/// all-reduce would fail: the library must run a private instance of it.
#[test]
fn the_real_nccl_is_found_beside_pytorch() {
    let site = std::env::temp_dir().join(format!("topoplan-fake-site-{}", std::process::id()));
    let torch_lib = site.join("torch/lib");
    let nccl_lib = site.join("nvidia/nccl/lib");
    std::fs::create_dir_all(&torch_lib).unwrap();
    std::fs::create_dir_all(&nccl_lib).unwrap();
    let nccl_so = nccl_lib.join("libnccl.so.2");
    let torch_so = torch_lib.join("libtorch_cuda.so");
    let fake = manifest().join("tests/c/fake_nccl.c");
    cc(&[
        "-shared",
        "-fPIC",
        fake.to_str().unwrap(),
        "-o",
        nccl_so.to_str().unwrap(),
    ]);
    let define = format!("-DFAKE_TORCH_NCCL=\"{}\"", nccl_so.display());
    let torch_src = manifest().join("tests/c/fake_torch.c");
    cc(&[
        "-shared",
        "-fPIC",
        &define,
        torch_src.to_str().unwrap(),
        "-o",
        torch_so.to_str().unwrap(),
        "-ldl",
    ]);
    let log = site.join("calls.log");
    let cuda = fake_cuda(&site);
    let mut c = Command::new(check_binary());
    c.arg("devforward")
        .env_remove("TOPOPLAN_NCCL_LIB")
        .env("TOPOPLAN_TIMEOUT", "20s")
        .env("TOPOPLAN_DEBUG", "NONE")
        .env("TOPOPLAN_NCCL_CUDA", "0")
        .env("LD_LIBRARY_PATH", &cuda)
        .env("CHECK_LOAD_FIRST", &torch_so)
        .env("FAKE_NCCL_LOG", &log);
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
            .filter(|l| l.contains("AllReduce count=16 type=2 op=2"))
            .count(),
        2,
        "{calls}"
    );
    let _ = std::fs::remove_dir_all(&site);
}

/// The header declares every host call nccl-tests 2.19.6 makes at its version code, with
/// NCCL's signatures (`ncclGather` and `ncclScatter` from 2.28 on): built as C, and as C++
/// (nccl-tests is C++ through nvcc) where a C++ compiler is installed.
#[test]
fn the_header_declares_what_nccl_tests_calls() {
    let src = manifest().join("tests/c/header_use.c");
    let inc = format!("-I{}", manifest().join("include").display());
    cc(&[
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-fsyntax-only",
        &inc,
        src.to_str().unwrap(),
    ]);
    if Command::new("c++").arg("--version").output().is_ok() {
        let out = Command::new("c++")
            .args([
                "-std=c++17",
                "-x",
                "c++",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                &inc,
                src.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "c++ {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Builds `tests/c/<src>` as the shared object `path`, with `defines`.
fn shared(src: &str, path: &Path, defines: &[&str]) {
    let src = manifest().join("tests/c").join(src);
    let mut args = vec!["-shared", "-fPIC", "-O1"];
    args.extend_from_slice(defines);
    args.extend_from_slice(&[src.to_str().unwrap(), "-o", path.to_str().unwrap()]);
    cc(&args);
}

/// A folder holding the stand-in CUDA driver (`tests/c/fake_cuda.c`) as `libcuda.so.1`.
fn fake_cuda(dir: &Path) -> PathBuf {
    let cuda = dir.join("cuda");
    std::fs::create_dir_all(&cuda).unwrap();
    shared("fake_cuda.c", &cuda.join("libcuda.so.1"), &[]);
    let _ = std::fs::remove_file(cuda.join("libcuda.so"));
    std::os::unix::fs::symlink("libcuda.so.1", cuda.join("libcuda.so")).unwrap();
    cuda
}

/// With `TOPOPLAN_NCCL_CUDA=0`, device-buffer calls go to the real NCCL: an all-reduce with
/// NCCL's op value, gather and scatter to its `ncclGather`/`ncclScatter` where it has them,
/// else (NCCL before 2.28) as the sends and receives they are made of, in one NCCL group. The
/// "device" buffers come from a stand-in driver (`tests/c/fake_cuda.c`), and the same calls on
/// host buffers still run on topoplan (checked by `check devforward`).
#[test]
fn device_buffer_calls_are_forwarded_when_asked() {
    let dir = std::env::temp_dir().join(format!("topoplan-fake-dev-{}", std::process::id()));
    let cuda = fake_cuda(&dir);
    let new = dir.join("libfakenccl.so");
    let old = dir.join("libfakenccl-2.27.so");
    shared("fake_nccl.c", &new, &[]);
    shared("fake_nccl.c", &old, &["-DFAKE_NCCL_BEFORE_2_28"]);
    let calls = |lib: &Path, name: &str, extra: &[(&str, &str)]| -> String {
        let log = dir.join(name);
        let _ = std::fs::remove_file(&log);
        let mut envs = vec![
            ("LD_LIBRARY_PATH", cuda.to_str().unwrap()),
            ("TOPOPLAN_NCCL_LIB", lib.to_str().unwrap()),
            ("FAKE_NCCL_LOG", log.to_str().unwrap()),
            ("TOPOPLAN_NCCL_CUDA", "0"),
        ];
        envs.extend_from_slice(extra);
        run("devforward", &envs);
        std::fs::read_to_string(&log).unwrap()
    };
    let count = |calls: &str, s: &str| calls.lines().filter(|l| l.contains(s)).count();
    {
        let log = calls(&new, "new.log", &[]);
        // bfloat16 is 9, int32 2; each rank makes each call once.
        assert_eq!(count(&log, "Gather count=24 type=9 root=1"), 2, "{log}");
        assert_eq!(count(&log, "Scatter count=40 type=2 root=0"), 2, "{log}");
        assert_eq!(
            count(&log, "Gather"),
            2,
            "host buffers stay on topoplan:\n{log}"
        );
        assert_eq!(
            count(&log, "Scatter"),
            2,
            "host buffers stay on topoplan:\n{log}"
        );
        assert_eq!(count(&log, "Send") + count(&log, "Recv"), 0, "{log}");
        assert_eq!(count(&log, "GroupStart"), count(&log, "GroupEnd"), "{log}");
        // The device-buffer int32 max reaches NCCL with NCCL's value of ncclMax (2, never
        // the runtime's enum order: `NcclOp::builtin_raw`); a PreMulSum with a device scalar
        // on host buffers stays on topoplan.
        assert_eq!(count(&log, "AllReduce count=16 type=2 op=2"), 2, "{log}");
        assert_eq!(count(&log, "AllReduce"), 2, "{log}");
        assert_eq!(count(&log, "RedOpCreatePreMulSum"), 0, "{log}");
    }
    let log = calls(&old, "old.log", &[]);
    assert_eq!(count(&log, "Gather") + count(&log, "Scatter"), 0, "{log}");
    // Gather to rank 1, out of place: each rank sends its block to rank 1 (rank 1 to itself),
    // and rank 1 receives every rank's.
    assert_eq!(count(&log, "Send count=24 type=9 peer=1"), 2, "{log}");
    assert_eq!(count(&log, "Recv count=24 type=9 peer=0"), 1, "{log}");
    assert_eq!(count(&log, "Recv count=24 type=9 peer=1"), 1, "{log}");
    assert_eq!(count(&log, "count=24"), 4, "{log}");
    // Scatter from rank 0, in place: rank 0 keeps its own block and sends rank 1 its own.
    assert_eq!(count(&log, "Send count=40 type=2 peer=1"), 1, "{log}");
    assert_eq!(count(&log, "Recv count=40 type=2 peer=0"), 1, "{log}");
    assert_eq!(count(&log, "count=40"), 2, "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Device-buffer calls topoplan's CUDA path runs no kernel for (grouped send/recv to peers and
/// to itself, gather, scatter; all-to-all, PreMulSum with a device scalar and float8 average
/// with the direct kernels off) run on topoplan through host copies, on 3 ranks, with every
/// byte of random data checked; there is no real NCCL to fall back on.
#[test]
fn device_buffers_without_a_cuda_kernel_run_on_topoplan_through_host_copies() {
    let dir = std::env::temp_dir().join(format!("topoplan-fake-staged-{}", std::process::id()));
    let cuda = fake_cuda(&dir);
    // The stand-in driver runs no kernel: with the direct kernels off, all-to-all takes the
    // host-copy path too, as gather, scatter and point-to-point always do.
    let out = run(
        "devstaged",
        &[
            ("LD_LIBRARY_PATH", cuda.to_str().unwrap()),
            ("TOPOPLAN_NCCL_LIB", "/nonexistent/libnccl.so.2"),
            ("TOPOPLAN_DIRECT", "0"),
        ],
    );
    assert!(out.contains("devstaged: all checks passed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ranks of one process on a real GPU (`tests/c/inproc.c`): every collective, a send/recv
/// ring and PreMulSum (host and device scalar) of 2 and 4 ranks sharing GPU 0 (`ncclCommInitAll` with a repeated device), issued from
/// one thread in a group, from a thread per rank, and captured into CUDA graphs, every element
/// checked against a CPU reference; `TOPOPLAN_DEBUG=INFO` must say that they ran on the CUDA
/// direct path in one process, never through host copies. Skipped, saying so, without a GPU.
#[test]
fn ranks_of_one_process_run_on_the_cuda_kernels() {
    let bin = c_program("inproc.c", "inproc", &["-ldl", "-lpthread"]);
    for devs in [&["0", "0"][..], &["0", "0", "0", "0"]] {
        let out = Command::new(&bin)
            .args(devs)
            .env("TOPOPLAN_DEBUG", "INFO")
            .env("TOPOPLAN_TIMEOUT", "60s")
            // Ranks sharing a GPU need a hardware queue each (`cuda::residency::check_queues`).
            .env("CUDA_DEVICE_MAX_CONNECTIONS", "32")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "inproc {devs:?} failed:\n{text}");
        if text.contains("inproc: SKIP") {
            eprintln!("skipped: needs a CUDA GPU ({})", text.trim());
            return;
        }
        assert!(text.contains("all checks passed"), "{text}");
        assert!(text.contains("direct path in one process"), "{text}");
        // The int64 all-reduce, first called inside a graph capture, ran on the kernels.
        assert!(
            text.lines().any(|l| l.contains("ncclAllReduce")
                && l.contains(" x int64 ")
                && l.contains("topoplan CUDA backend")),
            "{text}"
        );
        assert!(!text.contains("through host copies"), "{text}");
    }
}
