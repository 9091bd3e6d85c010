//! A closed stdout (`topoplan plan x | head -1`) ends the process quietly, never with a panic.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn closed_stdout_is_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        // --json on 16 GPUs writes ~230 KB: far more than a pipe buffer holds, so writes must fail.
        .args([
            "plan",
            "tests/data/topologies/github-yccl-16xl20-pcie-topo.xml",
            "--json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start topoplan");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "{first}");
    // The reader is dropped here: the pipe closes with most of the plan unread.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert_ne!(
        out.status.code(),
        Some(101),
        "exit 101 is Rust's panic status"
    );
}
