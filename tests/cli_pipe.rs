//! A closed stdout (`topoplan plan x | head -1`) ends the process quietly, never with a panic.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn closed_stdout_is_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("topoplan-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = dir.join("c256.json");
    let bin = env!("CARGO_BIN_EXE_topoplan");
    let root = env!("CARGO_MANIFEST_DIR");
    let scaled = Command::new(bin)
        .current_dir(root)
        .args([
            "topo",
            "scale",
            "examples/h200x2-topo.json",
            "--nodes",
            "256",
            "--fabric",
            "switch",
        ])
        .args(["--nic-gbps", "400", "-o"])
        .arg(&cluster)
        .output()
        .unwrap();
    assert!(
        scaled.status.success(),
        "{}",
        String::from_utf8_lossy(&scaled.stderr)
    );
    // A 512-rank plan as JSON is megabytes: far more than any pipe buffer, so writes must fail
    // once the reader is gone.
    let mut child = Command::new(bin)
        .current_dir(root)
        .args(["plan", "--json", "-c", "all-reduce"])
        .arg(&cluster)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start topoplan");
    // Read a few bytes only (the JSON is one long line), then close our end.
    let mut head = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    assert_eq!(head[0], b'{', "{}", String::from_utf8_lossy(&head));
    // The reader is dropped here: the pipe closes with most of the plan unread.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert_ne!(
        out.status.code(),
        Some(101),
        "exit 101 is Rust's panic status"
    );
    assert!(
        !out.status.success(),
        "the writer cannot have finished: {:?}",
        out.status
    );
    std::fs::remove_dir_all(&dir).ok();
}
