//! `topoplan bench --profile FILE`: the profile is read and checked before any GPU is touched,
//! so a bad file is bad input (exit 2, naming the file and the field) on any machine, and a
//! good one gets as far as the GPUs.

mod common;
use common::{tmp, topoplan};

/// The bundled profile with one field replaced.
fn with(path: &std::path::Path, section: &str, field: &str, value: serde_json::Value) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("profiles/h200x2.json").unwrap()).unwrap();
    v[section][field] = value;
    std::fs::write(path, v.to_string()).unwrap();
}

#[test]
fn a_bad_profile_is_an_error_naming_the_file_and_field_before_any_gpu() {
    let p = tmp("bad-runtime.json");
    with(
        &p,
        "runtime",
        "ll_up_to_bytes",
        serde_json::Value::from("512K"),
    );
    let (rc, out, err) = topoplan(&[
        "bench",
        "-b",
        "8",
        "-e",
        "8",
        "--profile",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(
        err.contains("bad-runtime.json") && err.contains("runtime.ll_up_to_bytes"),
        "{err}"
    );
    assert!(!err.contains("CUDA"), "the profile is read first: {err}");
    let p = tmp("bad-tuner.json");
    with(&p, "tuner", "launch_us", serde_json::Value::from(-1.0));
    let (rc, _, err) = topoplan(&["bench", "--vs-nccl", "--profile", p.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("bad-tuner.json") && err.contains("tuner.launch_us"),
        "{err}"
    );
    // Under --procs the parent reads it before it starts any rank.
    let (rc, _, err) = topoplan(&[
        "bench",
        "-g",
        "2",
        "--procs",
        "--profile",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("tuner.launch_us"), "{err}");
    let missing = tmp("no-such-profile.json");
    let (rc, _, err) = topoplan(&["bench", "--profile", missing.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("no-such-profile.json"), "{err}");
}

#[test]
fn a_good_profile_gets_as_far_as_the_gpus() {
    if cuda::device::driver_present() {
        eprintln!("skipped: this machine has a CUDA driver (the bench would run)");
        return;
    }
    let p = tmp("fine.json");
    with(
        &p,
        "runtime",
        "ll_up_to_bytes",
        serde_json::Value::from(65536),
    );
    let (rc, _, err) = topoplan(&[
        "bench",
        "-b",
        "8",
        "-e",
        "8",
        "--profile",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("no CUDA driver"), "{err}");
}

#[test]
fn bench_help_documents_profile() {
    let (rc, out, err) = topoplan(&["bench", "--help"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("--profile <FILE>"), "{out}");
    assert!(out.contains("header line names the profile"), "{out}");
}
