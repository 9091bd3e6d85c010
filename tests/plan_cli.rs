//! `topoplan plan` end to end: tables, --json, --explain, --algo/--proto, --msccl-xml, and the
//! exit-code convention (2 for bad input or usage).

use std::process::Command;

const H200: &str = "tests/data/topologies/h200x2-topo.xml";

fn plan(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .arg("plan")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Data rows of the table under `# <collective> on`.
fn rows<'a>(out: &'a str, coll: &str) -> Vec<Vec<&'a str>> {
    let start = out
        .find(&format!("# {coll} on"))
        .unwrap_or_else(|| panic!("no {coll} table in\n{out}"));
    out[start..]
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[test]
fn default_table_covers_8_bytes_to_2_gib_for_every_collective() {
    let (code, out, err) = plan(&[H200]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# Rings: 12 channels x 30.0 GB/s"), "{out}");
    for coll in [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "broadcast",
        "reduce",
        "all-to-all",
        "sendrecv",
    ] {
        let r = rows(&out, coll);
        // Like nccl-tests -b 8 -e 4G -f 4: 8, 32, ..., 2 GiB (the next step passes 4 GiB).
        assert_eq!(r.len(), 15, "{coll}");
        assert_eq!(r[0][0], "8");
        assert_eq!(r[14][0], "2147483648");
        // busbw = algbw × factor, algbw = size / time.
        for row in &r {
            let (size, t, algbw): (f64, f64, f64) = (
                row[0].parse().unwrap(),
                row[4].parse().unwrap(),
                row[5].parse().unwrap(),
            );
            assert!(
                (size / 1000.0 / t - algbw).abs() <= 0.01 + algbw * 1e-3,
                "{coll} {row:?}"
            );
        }
    }
}

#[test]
fn size_range_and_collective_flags() {
    let (code, out, _) = plan(&[H200, "-b", "1K", "-e", "1M", "-f", "2", "-c", "all-reduce"]);
    assert_eq!(code, 0);
    let r = rows(&out, "all-reduce");
    assert_eq!(r.len(), 11);
    assert_eq!(r[0][0], "1024");
    assert!(!out.contains("# all-gather on"));
}

#[test]
fn algo_and_proto_restrict_like_nccl_env() {
    let (code, out, _) = plan(&[
        H200,
        "-c",
        "all-reduce",
        "--algo",
        "ring",
        "--proto",
        "Simple",
    ]);
    assert_eq!(code, 0);
    for r in rows(&out, "all-reduce") {
        assert_eq!((r[1], r[2]), ("ring", "Simple"), "{r:?}");
    }
    let (_, out, _) = plan(&[H200, "-c", "all-reduce", "--proto", "^LL,LL128"]);
    assert!(rows(&out, "all-reduce").iter().all(|r| r[2] == "Simple"));
    let (_, out, _) = plan(&[
        H200,
        "-c",
        "all-reduce,all-gather",
        "--algo",
        "allreduce:tree;allgather:ring",
    ]);
    assert!(rows(&out, "all-reduce").iter().all(|r| r[1] == "tree"));
    assert!(rows(&out, "all-gather").iter().all(|r| r[1] == "ring"));
}

#[test]
fn explain_lists_every_candidate_fastest_first() {
    let (code, out, _) = plan(&[H200, "-c", "all-reduce", "--explain", "2M"]);
    assert_eq!(code, 0);
    let times: Vec<f64> = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert!(
        times.len() >= 8,
        "ring and tree × 3 protocols plus direct patterns:\n{out}"
    );
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    for a in [
        "ring",
        "tree",
        "one-shot",
        "two-shot",
        "copy-engine-pipeline",
    ] {
        assert!(out.contains(a), "{a} missing:\n{out}");
    }
}

#[test]
fn json_has_channels_rows_and_valid_schedules() {
    let (code, out, _) = plan(&[H200, "--json", "-c", "all-reduce,broadcast"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["channels"]["ring"]["count"], 12);
    let colls = v["collectives"].as_array().unwrap();
    assert_eq!(colls.len(), 2);
    for c in colls {
        assert_eq!(c["rows"].as_array().unwrap().len(), 15);
        let scheds = c["schedules"].as_array().unwrap();
        assert!(!scheds.is_empty());
        for s in scheds {
            let s: planner::schedule::Schedule = serde_json::from_value(s.clone()).unwrap();
            s.validate().unwrap();
            planner::schedule::symbolic::check(&s).unwrap();
        }
    }
}

#[test]
fn msccl_xml_writes_one_importable_file_per_collective() {
    let dir = std::env::temp_dir().join(format!("topoplan-msccl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, _, err) = plan(&[
        "tests/data/topologies/azure-ndv5-topo.xml",
        "--msccl-xml",
        dir.to_str().unwrap(),
        "-e",
        "64K",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut n = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let p = f.unwrap().path();
        let s = planner::schedule::msccl::import(
            &std::fs::read_to_string(&p).unwrap(),
            &p.display().to_string(),
        )
        .unwrap();
        planner::schedule::symbolic::check(&s).unwrap();
        n += 1;
    }
    assert_eq!(n, 7);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2() {
    let bad = std::env::temp_dir().join(format!("topoplan-bad-{}.xml", std::process::id()));
    std::fs::write(
        &bad,
        "<system version=\"1\"><cpu numaid=\"0\"><pci busid=oops></cpu></system>",
    )
    .unwrap();
    for args in [
        vec!["does/not/exist.xml"],
        vec![bad.to_str().unwrap()],
        vec![H200, "-b", "lots"],
        vec![H200, "-c", "all-frobnicate"],
        vec![H200, "--algo", "nvls"],
        vec![H200, "--proto", "LL256"],
        vec![H200, "-b", "1M", "-e", "1K"],
        vec![H200, "--root", "7"],
        vec![H200, "--no-such-flag"],
        vec![],
    ] {
        let (code, _, err) = plan(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.is_empty(), "{args:?} printed no error");
    }
    let _ = std::fs::remove_file(&bad);
}

/// Writes the ndv5 machine as a topoplan JSON cluster of `nodes` hosts (what `topo scale` does).
fn cluster_file(nodes: u32) -> std::path::PathBuf {
    use planner::topology::*;
    let mut l = load_file(
        std::path::Path::new("tests/data/topologies/azure-ndv5-topo.xml"),
        &LoadOptions::default(),
    )
    .unwrap();
    l.doc.cluster = Some(doc::ClusterDoc {
        nodes,
        fabric: "rail".into(),
        nic_gbps: 400.0,
        oversubscription: 1.0,
        hosts_per_leaf: None,
        switch_lat_us: 0.6,
    });
    let p = std::env::temp_dir().join(format!(
        "topoplan-cluster-{nodes}-{}.json",
        std::process::id()
    ));
    std::fs::write(&p, write_json(&l.doc)).unwrap();
    p
}

#[test]
fn cluster_files_plan_the_same_way() {
    let f = cluster_file(16);
    let (code, out, err) = plan(&[
        f.to_str().unwrap(),
        "--timing",
        "-c",
        "all-reduce,all-to-all",
        "-e",
        "1M",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("timing: 128 ranks"), "{err}");
    assert!(
        out.contains("16 host(s)") && out.contains("rail-aligned"),
        "{out}"
    );
    assert_eq!(rows(&out, "all-reduce").len(), 9);
    assert_eq!(rows(&out, "all-to-all").len(), 9);
    let _ = std::fs::remove_file(&f);
}
