//! Helpers shared by the CLI tests in this folder (each test file includes it with `mod common;`).

use std::process::Command;

/// `topoplan doctor` on its test corpus (the doctor test files).
#[allow(dead_code)]
pub mod doctor;

/// Runs the `topoplan` binary built for these tests: (exit code, stdout, stderr).
#[allow(dead_code)]
pub fn topoplan(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(args)
        .output()
        .expect("run topoplan");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A scratch file `name` in this test binary's own folder under the system's temp dir (one
/// per process, so parallel test binaries never share a path).
#[allow(dead_code)]
pub fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "topoplan-{}-{}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The point rows of `topoplan calibrate`'s output (every line not starting with `#`), split
/// into fields: collective, size, proto, channels, measured, fitted, error.
#[allow(dead_code)]
pub fn calibrate_rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Every shipped topology the planner reads: the NCCL dumps under `tests/data/topologies`,
/// sorted, then the bundled example.
#[allow(dead_code)]
pub fn shipped() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("tests/data/topologies")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with("-topo.xml") || p.ends_with("-topo-2023.xml"))
        .collect();
    v.sort();
    v.push("examples/h200x2-topo.json".into());
    v
}
