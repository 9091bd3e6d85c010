//! The hang report end to end: builds `tests/c/hang.c` with the system C compiler against
//! `include/nccl.h` and this crate's `libnccl.so`, runs it (3 processes, one skipping an
//! all-reduce), and reads rank 0's report from stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library built for this test run (beside the test binary in target/<profile>/deps),
/// under its soname in a directory of its own.
fn lib_dir(tmp: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let built = exe.parent().expect("deps").join("libnccl.so");
    assert!(built.exists(), "no {}", built.display());
    let dir = tmp.join("lib");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libnccl.so", "libnccl.so.2"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&built, &link).unwrap();
    }
    dir
}

fn build(tmp: &Path) -> PathBuf {
    let lib = lib_dir(tmp);
    let bin = tmp.join("hang");
    let out = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-O1"])
        .arg(format!("-I{}", manifest().join("include").display()))
        .arg(manifest().join("tests/c/hang.c"))
        .arg("-o")
        .arg(&bin)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lnccl")
        .output()
        .expect("the system C compiler (cc)");
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs `bin` with output to files, killed after `limit` (the C side also bounds itself).
fn run_bounded(
    bin: &Path,
    tmp: &Path,
    envs: &[(&str, &str)],
    limit: Duration,
) -> (bool, String, String) {
    let (o, e) = (tmp.join("stdout"), tmp.join("stderr"));
    let mut c = Command::new(bin);
    for (k, v) in envs {
        c.env(k, v);
    }
    let mut child = c
        .env_remove("TOPOPLAN_DEBUG")
        .stdout(Stdio::from(std::fs::File::create(&o).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&e).unwrap()))
        .spawn()
        .unwrap();
    let start = Instant::now();
    let ok = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.success();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after {limit:?}:\n{}{}",
                std::fs::read_to_string(&o).unwrap_or_default(),
                std::fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (ok, read(&o), read(&e))
}

/// The pid in word 0 of each hang record left in `shm`.
fn record_pids(shm: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(shm) else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("topoplan-hang-")
        })
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter(|b| b.len() >= 8)
        .map(|b| u32::from_ne_bytes(b[4..8].try_into().unwrap()))
        .collect()
}

#[test]
fn a_rank_that_skips_a_call_is_named_behind_before_the_timeout() {
    let tmp = std::env::temp_dir().join(format!("topoplan-hang-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let bin = build(&tmp);
    // A directory of its own: records other runs left behind (a killed process cannot remove
    // its own) may carry a pid this run's ranks reuse.
    let shm = tmp.join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    let (ok, out, err) = run_bounded(
        &bin,
        &tmp,
        &[
            ("TOPOPLAN_HANG_REPORT", "1s"),
            ("TOPOPLAN_TIMEOUT", "6s"),
            ("TOPOPLAN_SHM_DIR", shm.to_str().unwrap()),
        ],
        Duration::from_secs(120),
    );
    let all = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(ok && out.contains("hang: all checks passed"), "{all}");
    // Rank 0 prints the report once, before the waiting ranks time out.
    assert_eq!(err.matches("hang report:").count(), 1, "{all}");
    let at = err.find("hang report:").unwrap();
    let timeout = err.find("timed out").expect("the timeout's warning");
    assert!(at < timeout, "the report comes after the timeout:\n{all}");
    let pid = |rank: u32| -> u32 {
        let tag = format!("rank {rank} pid ");
        let line = out.lines().find(|l| l.starts_with(&tag)).expect(&tag);
        line[tag.len()..].trim().parse().unwrap()
    };
    let report: Vec<&str> = err[at..].lines().take(5).collect();
    let head = err[..at].rsplit('\n').next().unwrap();
    assert!(
        head.contains(&format!(":{}:", pid(0))),
        "the report is not rank 0's: {head}\n{all}"
    );
    assert!(
        report[0].ends_with(
            "(3 ranks): call #4 (ncclAllReduce, 1024 x float32, sum) has waited over 1.0 s on ranks 0-1"
        ),
        "{all}"
    );
    assert_eq!(
        report[1].trim(),
        "behind: rank 2; arguments differ: none; no record: none",
        "{all}"
    );
    let cells = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        cells(report[2]),
        [
            "rank",
            "pid",
            "state",
            "waited",
            "seq",
            "call",
            "count",
            "type",
            "op",
            "root/peer",
            "verdict"
        ]
    );
    let stuck = cells(report[3]);
    assert_eq!(stuck[..4], ["0-1", "-", "in", "call"], "{all}");
    assert_eq!(
        stuck[5..],
        [
            "s",
            "4",
            "ncclAllReduce",
            "1024",
            "float32",
            "sum",
            "-",
            "stuck"
        ],
        "{all}"
    );
    // Reported within the threshold and one poll (1.25 s), plus slack for a loaded machine;
    // far below the 6 s timeout either way.
    let waited: f64 = stuck[4].parse().unwrap();
    assert!((1.0..4.0).contains(&waited), "waited {waited} s:\n{all}");
    let behind = format!("2 {} idle after #3 - - - - - - - behind", pid(2));
    assert_eq!(cells(report[4]).join(" "), behind, "{all}");
    // The waiting ranks failed with the timeout, not long after it.
    for rank in [0, 1] {
        let tag = format!("rank {rank}: last call -> 6 after ");
        let line = out.lines().find(|l| l.starts_with(&tag)).expect(&tag);
        let took: f64 = line[tag.len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((5.0..30.0).contains(&took), "{line}");
    }
    // Every rank removed its record.
    let left = record_pids(&shm);
    for rank in 0..3 {
        assert!(
            !left.contains(&pid(rank)),
            "rank {rank}'s record is left:\n{all}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
