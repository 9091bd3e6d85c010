//! Machine profiles and `--as nccl` through the binary: `sim --as nccl|both`, `--profile` errors
//! naming the file and field, the derived-profile note, and `calibrate` writing a profile that
//! `sim --profile` reads back.

mod common;
use common::{calibrate_rows, tmp, topoplan};

const H200: &str = "tests/data/measurements/h200x2/topo.xml";
const H100: &str = "tests/data/topologies/azure-ndv5-topo.xml";

#[test]
fn as_nccl_runs_nccls_channels_and_says_which_profile() {
    let (rc, out, err) = topoplan(&[
        "sim", H200, "--as", "nccl", "-b", "8", "-e", "1G", "-f", "8",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("profile: bundled `h200x2`"), "{out}");
    assert!(
        out.contains("12 ring channels searched x 30.0 GB/s, 24 run"),
        "{out}"
    );
    let r = calibrate_rows(&out);
    // 1 GiB: ring Simple on NCCL's 24 channels.
    let last = r.last().unwrap();
    assert_eq!(
        (last[1].as_str(), last[2].as_str(), last[3].as_str()),
        ("ring", "Simple", "24")
    );
}

#[test]
fn as_both_prints_the_ratio() {
    let (rc, out, err) = topoplan(&[
        "sim", H200, "--as", "both", "-b", "1M", "-e", "1G", "-f", "32",
    ]);
    assert_eq!(rc, 0, "{err}");
    for r in calibrate_rows(&out) {
        let ours: f64 = r[4].parse().unwrap();
        let nccl: f64 = r[10].parse().unwrap();
        let ratio: f64 = r[13].parse().unwrap();
        assert!((ratio - nccl / ours).abs() < 2e-3, "{r:?}");
    }
}

#[test]
fn bad_as_and_bad_profiles_are_input_errors_naming_the_field() {
    let (rc, _, err) = topoplan(&["sim", H200, "--as", "mpi"]);
    assert_eq!(rc, 2, "{err}");
    let p = tmp("bad.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("profiles/h200x2.json").unwrap()).unwrap();
    v["sim"]["simple"]["channel_gbps"] = serde_json::Value::from("fast");
    std::fs::write(&p, v.to_string()).unwrap();
    let (rc, _, err) = topoplan(&["sim", H200, "--profile", p.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("bad.json") && err.contains("sim.simple.channel_gbps"),
        "{err}"
    );
}

#[test]
fn a_machine_without_a_profile_says_its_defaults_are_derived() {
    let (rc, out, err) = topoplan(&["plan", H100, "-c", "all-reduce", "-b", "1M", "-e", "1M"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("none matches this machine") && out.contains("derived"),
        "{out}"
    );
}

#[test]
fn calibrate_writes_a_profile_that_sim_reads_back() {
    let p = tmp("fit.json");
    let (rc, out, err) = topoplan(&[
        "calibrate",
        "--nccl-tests",
        "tests/data/measurements/h200x2/all_reduce_g2.txt",
        "--topo",
        H200,
        "-o",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    // One line per measured size out of place (15), and in place where NCCL runs LL (8 B to
    // 512 KiB: 9), each with its error.
    let r = calibrate_rows(&out);
    assert_eq!(r.len(), 24, "{out}");
    assert!(r.iter().all(|x| x[6].ends_with('%')));
    let (rc, out, err) = topoplan(&[
        "sim",
        H200,
        "--as",
        "nccl",
        "--profile",
        p.to_str().unwrap(),
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("profile: `fit`"), "{out}");
    let (rc, _, err) = topoplan(&[
        "calibrate",
        "--nccl-tests",
        H200,
        "--topo",
        H200,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(rc, 2, "{err}");
}
