//! Bad topology files: clear errors naming file, line/column or element; exit code 2; no panic.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bad(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/bad")
        .join(name)
}

fn topoplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `topo show` on a bad file; checks exit 2 and returns stderr.
fn show_fails(name: &str) -> String {
    let p = bad(name);
    let out = topoplan(&["topo", "show", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{name}: {err}");
    assert!(!err.contains("panicked"), "{name}: {err}");
    assert!(
        err.contains(name),
        "{name}: error does not name the file: {err}"
    );
    err
}

#[test]
fn malformed_xml_shows_line_column_expected_and_the_line() {
    let e = show_fails("unclosed.xml");
    assert!(e.contains("unclosed.xml:5:5"), "{e}");
    assert!(e.contains("5 |     </pci>"), "{e}");
    assert!(e.contains("expected the closing tag </gpu>"), "{e}");
    let e = show_fails("bad-attr.xml");
    assert!(e.contains("bad-attr.xml:3:87"), "{e}");
    assert!(e.contains("link_width=16>"), "{e}");
    let e = show_fails("wrong-version.xml");
    assert!(e.contains(":1:9:") && e.contains("version=\"1\""), "{e}");
}

#[test]
fn malformed_json_shows_line_column_expected_and_the_line() {
    let e = show_fails("trailing-comma.json");
    assert!(e.contains("trailing-comma.json:5:40"), "{e}");
    assert!(e.contains("trailing comma"), "{e}");
    let e = show_fails("unknown-field.json");
    assert!(e.contains("unknown field `cores`"), "{e}");
    assert!(e.contains("expected one of"), "{e}");
    assert!(e.contains("5 |"), "{e}");
    let e = show_fails("future-version.json");
    assert!(
        e.contains("version 7") && e.contains("\"version\": 1"),
        "{e}"
    );
}

#[test]
fn semantic_errors_name_the_element() {
    let e = show_fails("bad-class.xml");
    assert!(e.contains("<pci busid=\"0000:0e:00.0\"> at line 3"), "{e}");
    assert!(e.contains("unknown PCI class \"bridge\""), "{e}");
    let e = show_fails("zero-nvlink.xml");
    assert!(
        e.contains("<nvlink target=\"fffffff:ff:ff.0\"> at line 5"),
        "{e}"
    );
    assert!(e.contains("zero bandwidth"), "{e}");
    // The offending line is shown for semantic errors too.
    assert!(e.contains("5 |         <nvlink target"), "{e}");
    let e = show_fails("negative-width.xml");
    assert!(e.contains("link_width -8"), "{e}");
    let e = show_fails("dup-busid.xml");
    assert!(
        e.contains("duplicate bus id 0000:0f:00.0") && e.contains("line 6") && e.contains("line 3"),
        "{e}"
    );
    let e = show_fails("dup-busid.json");
    assert!(e.contains("system.cpus[0].pci[1]"), "{e}");
    let e = show_fails("dup-rank.xml");
    assert!(
        e.contains("duplicate rank 0") && e.contains("line 7"),
        "{e}"
    );
    let e = show_fails("implausible.xml");
    assert!(
        e.contains("link_width 99999999999 is not a plausible"),
        "{e}"
    );
    let e = show_fails("zero-speed-cluster.json");
    assert!(e.contains("nic_gbps 0"), "{e}");
}

#[test]
fn graph_file_missing_file_and_bad_flags_exit_2() {
    let g = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/topologies/azure-ncv4-graph.xml");
    let out = topoplan(&["topo", "show", g.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NCCL graph file"));
    let out = topoplan(&["topo", "show", "/nonexistent/topo.xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/topo.xml: cannot read"));
    let ex = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/h200x2-topo.xml");
    let out = topoplan(&["topo", "show", ex.to_str().unwrap(), "--gpu", "k80"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown GPU model"));
    let out = topoplan(&[
        "topo",
        "scale",
        ex.to_str().unwrap(),
        "--nodes",
        "2",
        "--fabric",
        "torus",
        "--nic-gbps",
        "400",
        "-o",
        "x.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = topoplan(&["topo", "convert", ex.to_str().unwrap(), "-o", "out.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".json or .xml"));
}

#[test]
fn unreachable_gpu_is_rejected_by_validate() {
    use planner::topology::*;
    let mut t = synth::single_host(2, LinkKind::NvLink, 100.0);
    let g = t.add_node(
        Some(0),
        NodeKind::Gpu(Gpu {
            rank: 2,
            dev: 2,
            busid: "0000:77:00.0".into(),
            sm: 90,
            gdr: true,
            mem_bw_gbps: 1000.0,
            model: None,
        }),
    );
    let _ = g;
    match t.validate() {
        Err(ModelError::Unreachable(what)) => assert_eq!(what, "GPU2"),
        other => panic!("expected Unreachable, got {other:?}"),
    }
}
