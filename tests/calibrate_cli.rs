//! `topoplan calibrate` inputs: `--bench` files (NCCL's columns of `topoplan bench --json
//! --vs-nccl`), alone and with `--nccl-tests`; bad input naming the file and field; no input;
//! and `--measure` on a machine without GPUs.

mod common;
use common::{calibrate_rows, tmp, topoplan};

const H200: &str = "tests/data/measurements/h200x2/topo.xml";
const H100: &str = "tests/data/topologies/azure-ndv5-topo.xml";
const BENCH: &str = "tests/data/calibrate/h200x2_bench.json";
const AR: &str = "tests/data/measurements/h200x2/all_reduce_g2.txt";
const AG: &str = "tests/data/measurements/h200x2/all_gather_g2.txt";

/// nccl-tests' out-of-place time of `bytes` in `file`.
fn nccl_tests_us(file: &str, bytes: u64) -> f64 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 5 && f[0] == bytes.to_string())
        .map(|f| f[5].parse().unwrap())
        .unwrap_or_else(|| panic!("{file}: no row of {bytes} B"))
}

#[test]
fn bench_json_is_fitted_with_its_nccl_columns() {
    let p = tmp("bench-fit.json");
    let (rc, out, err) = topoplan(&[
        "calibrate",
        "--bench",
        BENCH,
        "--topo",
        H200,
        "-o",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("2 table(s) of 1 topoplan bench file(s)"),
        "{out}"
    );
    let r = calibrate_rows(&out);
    // The fixture's 8 all-reduce and 3 all-gather sizes, each with its error, and each measured
    // time the nccl-tests file's it was taken from.
    assert_eq!(r.len(), 11, "{out}");
    for x in &r {
        assert!(x[6].ends_with('%'), "{x:?}");
        let file = match x[0].as_str() {
            "all-reduce" => AR,
            "all-gather" => AG,
            other => panic!("{other}"),
        };
        let measured: f64 = x[4].parse().unwrap();
        assert_eq!(
            measured,
            nccl_tests_us(file, x[1].parse().unwrap()),
            "{x:?}"
        );
    }
    assert_eq!(r.iter().filter(|x| x[0] == "all-gather").count(), 3);
    // The profile names its measurements and reads back.
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let m: Vec<&str> = v["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(m, vec![H200, BENCH]);
    let (rc, out, err) = topoplan(&[
        "sim",
        H200,
        "--as",
        "nccl",
        "--profile",
        p.to_str().unwrap(),
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("profile: `bench-fit`"), "{out}");
}

#[test]
fn bench_and_nccl_tests_inputs_combine() {
    let p = tmp("both.json");
    let (rc, out, err) = topoplan(&[
        "calibrate",
        "--nccl-tests",
        AR,
        "--bench",
        BENCH,
        "--topo",
        H200,
        "-o",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    // 15 nccl-tests sizes out of place, the 9 of them NCCL runs in LL (8 B to 512 KiB) in
    // place too, and the fixture's 11.
    assert_eq!(calibrate_rows(&out).len(), 35, "{out}");
    assert!(
        out.contains("in place too where NCCL runs LL: 9 point(s)"),
        "{out}"
    );
    assert!(out.contains("1 nccl-tests file(s)"), "{out}");
}

#[test]
fn calibrate_without_measurements_says_what_it_takes() {
    let (rc, _, err) = topoplan(&["calibrate", "--topo", H200, "-o", "/dev/null"]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("--nccl-tests") && err.contains("--bench") && err.contains("--measure"),
        "{err}"
    );
}

#[test]
fn bad_bench_files_name_the_file_and_field() {
    let text = std::fs::read_to_string(BENCH).unwrap();
    let bad = tmp("bad-bench.json");
    std::fs::write(
        &bad,
        text.replacen("\"nccl_time_us\": 13.34", "\"nccl_time_us\": -1", 1),
    )
    .unwrap();
    let (rc, _, err) = topoplan(&[
        "calibrate",
        "--bench",
        bad.to_str().unwrap(),
        "--topo",
        H200,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("bad-bench.json")
            && err.contains("tables[0].rows[0].out_of_place.nccl_time_us"),
        "{err}"
    );
    // An nccl-tests file is not a bench file.
    let (rc, _, err) = topoplan(&[
        "calibrate",
        "--bench",
        AR,
        "--topo",
        H200,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("all_reduce_g2.txt") && err.contains("not JSON"),
        "{err}"
    );
    // A bench run without --vs-nccl has nothing to fit.
    let ours = tmp("ours-only.json");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for t in v["tables"].as_array_mut().unwrap() {
        for r in t["rows"].as_array_mut().unwrap() {
            for half in ["out_of_place", "in_place"] {
                let o = r[half].as_object_mut().unwrap();
                o.retain(|k, _| !k.starts_with("nccl_"));
            }
        }
    }
    std::fs::write(&ours, v.to_string()).unwrap();
    let (rc, _, err) = topoplan(&[
        "calibrate",
        "--bench",
        ours.to_str().unwrap(),
        "--topo",
        H200,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("ours-only.json") && err.contains("--vs-nccl"),
        "{err}"
    );
    // The tables ran on 2 GPUs; the fit simulates the topology's 8.
    let (rc, _, err) = topoplan(&[
        "calibrate",
        "--bench",
        BENCH,
        "--topo",
        H100,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("h200x2_bench.json") && err.contains("tables[0].ngpus") && err.contains("8"),
        "{err}"
    );
}

#[test]
fn measure_without_gpus_says_why_and_fails() {
    if cuda::device::driver_present() {
        eprintln!("skipped: this machine has a CUDA driver");
        return;
    }
    for args in [
        &["calibrate", "--measure", "-o", "/dev/null"][..],
        &[
            "calibrate",
            "--measure",
            "--topo",
            H200,
            "-g",
            "2",
            "-o",
            "/dev/null",
        ],
        &[
            "calibrate",
            "--measure",
            "--bench",
            BENCH,
            "--topo",
            H200,
            "-o",
            "/dev/null",
        ],
    ] {
        let (rc, out, err) = topoplan(args);
        // A failure of the machine, not bad input (src/cli/error.rs): exit 1.
        assert_eq!(rc, 1, "{args:?}: {out}{err}");
        assert!(
            err.contains("no CUDA driver") && err.contains("2 or more") && err.contains("links"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Without --topo and without a driver to detect one with, --nccl-tests alone says so.
    let (rc, _, err) = topoplan(&["calibrate", "--nccl-tests", AR, "-o", "/dev/null"]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("--topo FILE"), "{err}");
}
