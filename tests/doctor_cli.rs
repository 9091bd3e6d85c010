//! `topoplan doctor`'s inputs and report on the corpus in tests/data/doctor/: the healthy 2xH200
//! log and environment produce no finding, bad input exits 2 naming the file and line, and the
//! text report, standard input, public logs and the live sysfs read as they should (the checks
//! themselves are in tests/doctor_checks.rs).

mod common;

use common::doctor::{doctor, finding, found, D, TOPO};
use serde_json::Value;
use std::process::Command;

#[test]
fn healthy_log_env_sysfs_and_nccl_tests_produce_no_finding() {
    let (code, v, err) = doctor(&[
        "--env",
        "@/healthy-torchrun.env",
        "--nccl-log",
        "@/h200x2-healthy.log",
        "--nccl-tests",
        "@/h200x2-all-reduce-healthy.txt",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/measurements/h200x2/all_gather_g2.txt"
        ),
        "--sysfs",
        "@/sysfs-healthy",
        "--topo",
        TOPO,
    ]);
    assert_eq!(code, 0, "{v} {err}");
    assert_eq!(found(&v), vec![]);
    assert_eq!(v["healthy"], true);
    assert_eq!(v["summary"]["not_understood"], 0);
    // The measurement is stated as shares of the prediction and the ceiling even when healthy.
    let notes: Vec<String> = v["summary"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let m = notes
        .iter()
        .find(|n| n.starts_with("measured: all_reduce at 2147483648 B: 340 GB/s busbw, "))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        m.contains("% of the")
            && m.contains("predicted (planner on")
            && m.contains("GB/s ceiling (the topology's bound")
            && m.contains("smallest cut between two GPUs"),
        "{m}"
    );
    // And without a topology (costs from the log's own tuning table) it stays quiet.
    let (code, v, _) = doctor(&[
        "--env",
        "@/healthy-torchrun.env",
        "--nccl-log",
        "@/h200x2-healthy.log",
        "--nccl-tests",
        "@/h200x2-all-reduce-healthy.txt",
    ]);
    assert_eq!((code, found(&v)), (0, vec![]));
}

#[test]
fn bad_input_exits_2_naming_file_and_line() {
    for (file, msg) in [
        ("cut.log", "cut.log:2: the log ends inside an NCCL line"),
        ("binary.log", "binary.log:2: not text"),
        (
            "h200x2-all-reduce-healthy.txt",
            "h200x2-all-reduce-healthy.txt: no NCCL lines",
        ),
    ] {
        let (code, v, err) = doctor(&["--nccl-log", &format!("@/{file}")]);
        assert_eq!(code, 2, "{file}: {err}");
        assert_eq!(v, Value::Null);
        assert!(err.contains(msg), "{file}: {err}");
    }
    let (code, _, err) = doctor(&["--nccl-tests", "@/h200x2-healthy.log"]);
    assert_eq!(code, 2);
    assert!(err.contains("nccl-tests row has"), "{err}");
    let (code, _, err) = doctor(&["--env", "@/h200x2-healthy.log"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("h200x2-healthy.log:2: expected KEY=VALUE"),
        "{err}"
    );
    let (code, _, err) = doctor(&["--nccl-log", "@/no-such-file.log"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-file.log: cannot read"), "{err}");
}

#[test]
fn text_report_and_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args([
            "doctor",
            "--no-detect",
            "--no-sysfs",
            "--env",
            "/dev/null",
            "--nccl-log",
            &format!("{D}/h200x2-p2p-disabled.log"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("3 finding(s): 3 error"), "{t}");
    assert!(
        t.contains("1. [ERROR] P2P is disabled between NVLink peers"),
        "{t}"
    );
    assert!(t.contains("   fix:      unset NCCL_P2P_DISABLE"), "{t}");
    let h = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["doctor", "--help"])
        .output()
        .unwrap();
    let h = String::from_utf8(h.stdout).unwrap();
    assert!(
        h.contains("EXAMPLES:") && h.contains("EXIT STATUS") && h.contains("--nccl-log"),
        "{h}"
    );
}

#[test]
fn measure_without_a_gpu_says_so() {
    let (code, v, _) = doctor(&["--measure", "--nccl-log", "@/h200x2-healthy.log"]);
    if v["summary"]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i.as_str().unwrap().starts_with("measurement:"))
    {
        eprintln!("a GPU measured here; nothing to assert about its absence");
        return;
    }
    assert_eq!(code, 0);
    let notes: Vec<_> = v["summary"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("--measure: ")),
        "{notes:?}"
    );
}

#[test]
fn the_live_sysfs_reads_without_error() {
    // Whatever this machine's /sys holds, it is read as evidence, never as bad input.
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["doctor", "--no-detect", "--env", "/dev/null", "--json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["summary"]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i.as_str().unwrap().starts_with("sysfs /sys")));
}

#[test]
fn a_public_nccl_2_29_log_with_p2p_and_shm_off() {
    // NVIDIA/nccl#2057: one rank's log, NCCL 2.29.2, P2P and SHM disabled, a socket error.
    let (code, v, _) = doctor(&["--nccl-log", "@/public-nccl-2057-p2p-shm-off.log"]);
    assert_eq!(code, 1);
    assert_eq!(
        found(&v),
        vec![
            ("p2p-disabled".into(), "warning".into()),
            ("nccl-warn".into(), "warning".into())
        ]
    );
    assert_eq!(v["summary"]["not_understood"], 0, "{}", v["summary"]);
    let notes = v["summary"]["notes"].to_string();
    assert!(
        notes.contains("NCCL 2.29.2+cuda12.8") && notes.contains("read with NCCL 2.28's wording"),
        "{notes}"
    );
}

#[test]
fn a_log_on_standard_input() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args([
            "doctor",
            "--no-detect",
            "--no-sysfs",
            "--env",
            "/dev/null",
            "--json",
            "--nccl-log",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::fs::read(format!("{D}/h200x2-same-gpu.log")).unwrap();
    child.stdin.take().unwrap().write_all(&log).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found(&v), vec![("duplicate-gpu".into(), "error".into())]);
    assert!(finding(&v, "duplicate-gpu")["evidence"][0]
        .as_str()
        .unwrap()
        .starts_with("<stdin>:"));
    let (code, _, err) = doctor(&["--nccl-log", "-", "--nccl-tests", "-"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("only one input can be read from standard input"),
        "{err}"
    );
}
