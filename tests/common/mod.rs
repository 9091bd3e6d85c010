//! Helpers shared by the CLI tests in this folder (each test file includes it with `mod common;`).

use std::process::Command;

/// Runs the `topoplan` binary built for these tests: (exit code, stdout, stderr).
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
