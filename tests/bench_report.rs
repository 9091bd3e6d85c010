//! `topoplan bench --from-json` / `--from-log` with `--json` / `--plot`, without a GPU: a report
//! written as JSON is read back and drawn, a recorded text log converts to the same JSON, and
//! bad input names the file and what is wrong with it.

mod common;
use common::{tmp, topoplan};

/// Two sizes of an all-reduce with NCCL beside ours, as `bench --vs-nccl` prints them, timed by
/// two commands (as the recorded runs time small and large sizes with different counts), the
/// large size first.
const LOG: &str = "\
+  topoplan bench -b 1G -e 1G --vs-nccl
# topoplan bench: all-reduce on 2 GPU(s), float sum, algo auto, warmup 3 iters 20 runs 5 (median)
   1073741824    268435456     float    sum    -1 one-shot+ce    2854.50  376.16  376.16      0  3262.08   329.16       0    1.14x    2860.68  375.34  375.34      0  3293.80   325.99       0    1.15x
# all-reduce: out of bounds values : 0 OK
+  topoplan bench -b 8 -e 8 --vs-nccl
# topoplan bench: all-reduce on 2 GPU(s), float sum, algo auto, warmup 5 iters 50 runs 5 (median)
#        size        count      type  redop  root      algo  out-of-place:      time   algbw   busbw #wrong  nccl_us nccl_bus #nwrong  speedup
#         (B)   (elements)                                   in-place:     (same columns)
            8            2     float    sum    -1 one-shot-ll       4.69    0.00    0.00      0    11.25     0.00       0    2.40x       4.27    0.00    0.00      0    10.47     0.00       0    2.45x
# memory (MiB, max over GPUs): free before init 142629; init: ours 164.0, NCCL 388.0; taken during the run: 732.0
# all-reduce: out of bounds values : 0 OK
";

#[test]
fn a_log_converts_to_json_and_the_json_plots_ours_against_nccl() {
    let log = tmp("perf.log");
    std::fs::write(&log, LOG).unwrap();
    let json = tmp("perf.json");
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-log",
        log.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("valid JSON");
    assert_eq!(v["format"], "topoplan-bench/1");
    assert_eq!(
        v["command"],
        "topoplan bench -b 1G -e 1G --vs-nccl ; topoplan bench -b 8 -e 8 --vs-nccl"
    );
    // One configuration: the two commands' tables are one, by size.
    assert_eq!(v["tables"].as_array().unwrap().len(), 1);
    let t = &v["tables"][0];
    assert_eq!(
        (t["collective"].as_str(), t["ngpus"].as_u64()),
        (Some("all-reduce"), Some(2))
    );
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["bytes"], 8);
    assert_eq!(rows[1]["bytes"], 1073741824u64);
    assert_eq!(rows[1]["algo"], "one-shot+ce");
    assert_eq!(rows[1]["out_of_place"]["busbw"], 376.16);
    assert_eq!(rows[1]["in_place"]["nccl_time_us"], 3293.80);

    let svg = tmp("perf.svg");
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg"), "{}", &s[..s.len().min(200)]);
    for label in [
        "ours, out of place",
        "ours, in place",
        "NCCL, out of place",
        "NCCL, in place",
        "busbw (GB/s)",
        "time (µs)",
        "all-reduce float sum, 2 GPUs",
    ] {
        assert!(s.contains(label), "the plot lacks `{label}`");
    }
    // Two charts (busbw, time), each with four lines through both sizes: ours and NCCL's, out
    // of place (wide) and in place (thin); the legend's swatches are 18 px wide.
    let lines = data_lines(&s);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines.values().all(|l| l.len() == 2), "{lines:?}");
    let (ours, nccl) = (&lines["#1F50B4"], &lines["#C8281E"]);
    assert_eq!((ours.len(), nccl.len()), (2, 2));
    for l in ours.iter().chain(nccl) {
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[1].1 < l[0].1, "busbw and time both grow with size: {l:?}");
    }
    // At 1 GiB our busbw (376 GB/s) is above NCCL's (329) and our time below NCCL's.
    assert!(ours[0][1].1 < nccl[0][1].1, "{ours:?} {nccl:?}");
    assert!(ours[1][1].1 > nccl[1][1].1, "{ours:?} {nccl:?}");
}

/// The drawn series of an SVG by stroke color, in drawing order: each `<polyline>`'s points,
/// without the legend's swatches.
fn data_lines(svg: &str) -> std::collections::BTreeMap<String, Vec<Vec<(f64, f64)>>> {
    let mut out: std::collections::BTreeMap<String, Vec<Vec<(f64, f64)>>> = Default::default();
    for p in svg.split("<polyline").skip(1) {
        let attr = |name: &str| {
            let i = p.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            p[i..].split('"').next().unwrap().to_string()
        };
        let pts: Vec<(f64, f64)> = attr("points")
            .split_whitespace()
            .map(|xy| {
                let (x, y) = xy.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        let swatch = pts.len() == 2 && pts[1].0 - pts[0].0 == 18.0 && pts[0].1 == pts[1].1;
        let color = attr("stroke");
        if !swatch && color != "#000000" && !color.starts_with("#0000") {
            out.entry(color).or_default().push(pts);
        }
    }
    out.retain(|_, v| v.iter().all(|l| l.len() >= 2));
    out
}

#[test]
fn the_json_round_trips_through_from_json() {
    let log = tmp("rt.log");
    std::fs::write(&log, LOG).unwrap();
    let (a, b) = (tmp("rt-a.json"), tmp("rt-b.json"));
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-log",
        log.to_str().unwrap(),
        "--json",
        a.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-json",
        a.to_str().unwrap(),
        "--json",
        b.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap()
    );
}

#[test]
fn bad_reports_are_input_errors_naming_the_file() {
    let bad = tmp("bad.json");
    std::fs::write(
        &bad,
        "{\"format\": \"topoplan-bench/1\", \"command\": \"x\", \"tables\": [{\"collective\": 3}]}",
    )
    .unwrap();
    let svg = tmp("bad.svg");
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-json",
        bad.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("bad.json: field `tables[0].collective`: not a string"),
        "{err}"
    );

    let other = tmp("other.json");
    std::fs::write(
        &other,
        "{\"format\": \"nccl-tests\", \"command\": \"x\", \"tables\": []}",
    )
    .unwrap();
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-json",
        other.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("`format`") && err.contains("nccl-tests"),
        "{err}"
    );

    let log = tmp("bad.log");
    std::fs::write(&log, LOG.replace("4.69", "fast")).unwrap();
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-log",
        log.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("bad.log:9") && err.contains("fast"), "{err}");

    let empty = tmp("empty.log");
    std::fs::write(&empty, "+ nvidia-smi\nGPU 0: H200\n").unwrap();
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-log",
        empty.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("no `topoplan bench` table"), "{err}");

    let (rc, _, err) = topoplan(&["bench", "--from-log", log.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("--plot") && err.contains("--json"), "{err}");
}

/// The plots in `docs/` are what `bench --plot` draws from the recorded runs (the commands are in
/// `docs/benchmarks-gpu.md`), and the recorded JSON is what `--from-log` makes of its log.
#[test]
fn the_docs_plots_come_from_the_recorded_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let m = format!("{root}/docs/measurements");
    let log = format!("{m}/2026-11-30-h200x2-allreduce-vs-nccl/perf.log");
    let json = tmp("docs-perf.json");
    let (rc, _, err) = topoplan(&[
        "bench",
        "--from-log",
        &log,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&json).unwrap(),
        std::fs::read_to_string(format!("{m}/2026-11-30-h200x2-allreduce-vs-nccl/perf.json"))
            .unwrap(),
        "perf.json is not what --from-log makes of perf.log: rerun the commands in docs/benchmarks-gpu.md"
    );
    for (data, svg) in [
        (
            "2026-11-30-h200x2-allreduce-vs-nccl/perf.json",
            "bench-allreduce-h200x2.svg",
        ),
        (
            "2026-11-30-h200x2-allreduce-shared-sm-hybrid/others.json",
            "bench-others-h200x2.svg",
        ),
        (
            "2026-11-30-h200x2-allreduce-one-and-two-procs/procs.json",
            "bench-procs-h200x2.svg",
        ),
    ] {
        let out = tmp(svg);
        let src = format!("{m}/{data}");
        let (rc, _, err) = topoplan(&[
            "bench",
            "--from-json",
            &src,
            "--plot",
            out.to_str().unwrap(),
        ]);
        assert_eq!(rc, 0, "{data}: {err}");
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(format!("{root}/docs/{svg}")).unwrap(),
            "docs/{svg} is not what `bench --from-json {data} --plot` draws: rerun the commands in \
             docs/benchmarks-gpu.md"
        );
    }
}
