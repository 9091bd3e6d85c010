//! `topoplan sim`, `verify` and `whatif` through the binary: tables, traces, exit codes, and the
//! parallel what-if giving the serial run's results.

mod common;
use common::{tmp, topoplan};

const H200: &str = "tests/data/topologies/h200x2-topo.xml";
const H800: &str = "tests/data/topologies/github-yccl-8xh800-nvswitch-topo.xml";

/// The rows of a `topoplan sim` table, each split into its columns (comment lines left out).
fn table_rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[test]
fn sim_prints_one_row_per_nccl_tests_size() {
    let (rc, out, err) = topoplan(&["sim", H200, "-b", "8", "-e", "128M", "-f", "4"]);
    assert_eq!(rc, 0, "{err}");
    let rows = table_rows(&out);
    let sizes: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(sizes, (0..13).map(|k| 8u64 << (2 * k)).collect::<Vec<_>>());
    // all-reduce: count = size / 4; time grows with size; busbw = algbw for 2 ranks.
    let mut last = 0.0;
    for r in &rows {
        assert_eq!(
            r[1].parse::<u64>().unwrap() * 4,
            r[0].parse::<u64>().unwrap()
        );
        let t: f64 = r[8].parse().unwrap();
        assert!(t >= last, "{r:?}");
        last = t;
        assert_eq!(r[9], r[10]);
    }
}

/// `--channels` forces the schedule's channels, and the `tuner` column prices that schedule,
/// not the tuner's own channel count: on one channel a 1 MiB all-reduce takes several times
/// what 24 take, in both columns.
#[test]
fn sim_forced_channels_are_what_the_tuner_column_prices() {
    for ch in ["1", "4"] {
        let args = [
            "sim",
            H200,
            "--algo",
            "ring",
            "--proto",
            "Simple",
            "--channels",
            ch,
        ];
        let (rc, out, err) = topoplan(&[&args[..], &["-b", "4K", "-e", "1M", "-f", "4"]].concat());
        assert_eq!(rc, 0, "{err}");
        let rows = table_rows(&out);
        assert_eq!(rows.len(), 5, "{out}");
        for r in &rows {
            assert_eq!(r[7], ch, "{r:?}");
            let (engine, tuner): (f64, f64) = (r[8].parse().unwrap(), r[11].parse().unwrap());
            assert!(
                (tuner / engine - 1.0).abs() <= 0.10,
                "{ch} channel(s): {r:?}"
            );
        }
    }
}

#[test]
fn sim_forced_algorithm_and_trace() {
    let trace = tmp("trace.json");
    let (rc, out, err) = topoplan(&[
        "sim",
        H200,
        "-b",
        "1M",
        "-e",
        "4M",
        "--algo",
        "ring",
        "--proto",
        "simple",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.lines()
            .filter(|l| !l.starts_with('#'))
            .all(|l| l.contains(" ring ") && l.contains("Simple")),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    // Steps on rank tracks, counters on link tracks.
    assert!(ev.iter().any(|e| e["ph"] == "X" && e["pid"] == 1));
    assert!(ev
        .iter()
        .any(|e| e["ph"] == "C" && e["name"].as_str().unwrap().contains("NvLink")));
    assert!(ev
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "links"));
}

#[test]
fn sim_bad_input_exits_2() {
    for args in [
        vec!["sim", H200, "-c", "all-sideways"],
        vec!["sim", H200, "-f", "1"],
        vec!["sim", H200, "--algo", "nope"],
        vec!["sim", "tests/data/topologies/does-not-exist.xml"],
        vec!["sim", H200, "--mode", "fast"],
    ] {
        let (rc, _, err) = topoplan(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.starts_with("error:"), "{err}");
    }
}

#[test]
fn verify_topology_plan_and_counter_example() {
    let (rc, out, err) = topoplan(&["verify", H200]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("schedule(s) verify") && !out.contains("FAIL"),
        "{out}"
    );
    // A plan JSON verifies schedule by schedule.
    let (rc, plan, err) = topoplan(&["plan", H200, "-c", "all-reduce", "--json"]);
    assert_eq!(rc, 0, "{err}");
    let planf = tmp("plan.json");
    std::fs::write(&planf, &plan).unwrap();
    let (rc, out, err) = topoplan(&["verify", planf.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
    // A broken schedule (rank 1's last op dropped): exit 1, the counter-example names the rank.
    let v: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let mut s = v["collectives"][0]["schedules"][0].clone();
    let ops = s["ranks"][1]["channels"][0]["ops"].as_array_mut().unwrap();
    ops.remove(ops.len() - 1);
    let bad = tmp("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&s).unwrap()).unwrap();
    let (rc, out, _) = topoplan(&["verify", bad.to_str().unwrap()]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("FAIL") && out.contains("rank 1"), "{out}");
    // Malformed JSON: exit 2.
    std::fs::write(&bad, "{\"version\": 1, \"nranks\": ").unwrap();
    let (rc, _, err) = topoplan(&["verify", bad.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
}

#[test]
fn whatif_parallel_equals_serial_and_plots() {
    let svg = tmp("w.svg");
    let args = [
        "whatif",
        H800,
        "--vary",
        "nvlink-gbps=10,40",
        "--vary",
        "fail-gpu=3",
        "--vary",
        "fail-link=0-1",
        "-b",
        "1K",
        "-e",
        "16M",
        "-f",
        "16",
        "--json",
    ];
    let (rc, par, err) = topoplan(&args);
    assert_eq!(rc, 0, "{err}");
    let mut serial = args.to_vec();
    serial.push("--serial");
    let (rc, ser, err) = topoplan(&serial);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(par, ser, "parallel and serial what-if differ");
    let v: serde_json::Value = serde_json::from_str(&par).unwrap();
    let sc = v["scenarios"].as_array().unwrap();
    assert_eq!(sc.len(), 5);
    assert_eq!(sc[3]["nranks"], 7, "fail-gpu leaves 7 ranks");
    // Slower NVLink cannot make the largest size faster.
    let t = |i: usize| {
        sc[i]["cells"].as_array().unwrap().last().unwrap()["Ok"]["time_us"]
            .as_f64()
            .unwrap()
    };
    assert!(t(1) > t(0) && t(2) <= t(0), "{} {} {}", t(0), t(1), t(2));
    let (rc, out, err) = topoplan(&[
        "whatif",
        H200,
        "--vary",
        "nvlink-gbps=10",
        "-b",
        "1M",
        "-e",
        "4M",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("vs base") && out.contains("nvlink-gbps=10"),
        "{out}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("polyline"),
        "not an SVG plot"
    );
}

#[test]
fn whatif_bad_keys_exit_2() {
    for v in [
        "colour=red",
        "nodes=0",
        "fail-link=3",
        "nic-gbps=-1",
        "oversubscription=0.5",
        // Ranks the machine does not have are bad input, not a scenario's "no plan" row.
        "fail-link=0-9",
        "fail-link=1-1",
        "fail-gpu=4",
    ] {
        let (rc, _, err) = topoplan(&["whatif", H200, "--vary", v]);
        assert_eq!(rc, 2, "{v}: {err}");
    }
}

#[test]
fn verify_reads_msccl_ir() {
    let dir = tmp("msccl");
    let (rc, _, err) = topoplan(&[
        "plan",
        H200,
        "-c",
        "all-reduce",
        "--msccl-xml",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let xml = dir.join("all-reduce.xml");
    let (rc, out, err) = topoplan(&["verify", xml.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("MSCCL-IR") && out.contains("all 1 schedule(s) verify"),
        "{out}"
    );
    // A truncated file is bad input.
    let text = std::fs::read_to_string(&xml).unwrap();
    let bad = dir.join("bad.xml");
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let (rc, _, err) = topoplan(&["verify", bad.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
}

/// Losing the double NVLink 0–4 of the DGX-1 cube mesh: topoplan's pick (priced by the engine)
/// is no slower than NCCL's ring. Before the engine priced trees past its event budget, the
/// tuner's estimate picked a tree at 50 GB/s where NCCL's ring runs 89.
#[test]
fn whatif_a_failed_link_picks_no_slower_than_nccl() {
    let busbw = |who: &str| -> f64 {
        let (rc, out, err) = topoplan(&[
            "whatif",
            "tests/data/topologies/azure-ndv2-topo.xml",
            "--gpu-model",
            "v100-sxm",
            "--vary",
            "fail-link=0-4",
            "-b",
            "1G",
            "-e",
            "1G",
            "--as",
            who,
        ]);
        assert_eq!(rc, 0, "{err}");
        let row: Vec<&str> = out
            .lines()
            .find(|l| l.trim_start().starts_with("fail-link=0-4"))
            .unwrap_or_else(|| panic!("{out}"))
            .split_whitespace()
            .collect();
        // scenario ranks size algo proto ch time busbw ...
        row[7].parse().unwrap()
    };
    let (ours, nccl) = (busbw("topoplan"), busbw("nccl"));
    assert!(ours >= nccl, "topoplan {ours} GB/s, NCCL {nccl} GB/s");
}

/// `--config` changes the fields it gives and keeps the profile's others: a file with one
/// field prices as the profile does but for that field, and an unknown field exits 2 naming it.
#[test]
fn sim_config_overrides_only_the_fields_it_gives() {
    let args = |cfg: Option<&str>| {
        let mut a = vec![
            "sim", H200, "-b", "1M", "-e", "1M", "--algo", "ring", "--proto", "simple",
        ];
        if let Some(c) = cfg {
            a.extend(["--config", c]);
        }
        let (rc, out, err) = topoplan(&a);
        (rc, out, err)
    };
    let time = |out: &str| -> f64 {
        let row = out.lines().find(|l| !l.starts_with('#')).unwrap();
        row.split_whitespace().nth(8).unwrap().parse().unwrap()
    };
    let (rc, base, err) = args(None);
    assert_eq!(rc, 0, "{err}");
    // The same launch as the profile's: the same time.
    let same = tmp("config-same.json");
    std::fs::write(&same, r#"{"seed": 0}"#).unwrap();
    let (rc, out, err) = args(Some(same.to_str().unwrap()));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(time(&out), time(&base), "{out}");
    // The bundled profile's launch (11.06 µs) raised by 100 µs: 100 µs more.
    let slower = tmp("config-launch.json");
    std::fs::write(&slower, r#"{"launch_us": 111.06}"#).unwrap();
    let (rc, out, err) = args(Some(slower.to_str().unwrap()));
    assert_eq!(rc, 0, "{err}");
    assert!(
        (time(&out) - time(&base) - 100.0).abs() < 0.05,
        "{base}\n{out}"
    );
    let bad = tmp("config-bad.json");
    std::fs::write(&bad, r#"{"simple": {"channel_gbz": 1}}"#).unwrap();
    let (rc, _, err) = args(Some(bad.to_str().unwrap()));
    assert_eq!(rc, 2);
    assert!(err.contains("simple.channel_gbz"), "{err}");
}
