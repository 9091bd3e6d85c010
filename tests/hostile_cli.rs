//! Hostile and careless input to the `topoplan` CLI, one test per class (`docs/hostile-input.md`):
//! unbounded reads (FIFOs, `/dev/zero`, huge files), deep and huge XML, huge sizes and counts,
//! values that would invent an answer, and the one CLI convention (exit 2 bad input or usage,
//! 1 a failed check or run). Every case runs under a timeout that kills the child, and asserts
//! the documented exit code and message.

mod common;

use common::tmp;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each case's limit: a hang is a failure, never a stuck CI job.
const LIMIT: Duration = Duration::from_secs(60);

fn data(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

/// Runs topoplan with `env` added, killing it at [`LIMIT`]: (exit code, stdout, stderr).
fn run_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_topoplan"));
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("start topoplan");
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("topoplan {args:?} did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        to.join().unwrap(),
        te.join().unwrap(),
    )
}

fn run(args: &[&str]) -> (i32, String, String) {
    run_env(args, &[])
}

/// Asserts exit code `code` and that stderr contains every one of `want`.
#[track_caller]
fn expect(args: &[&str], code: i32, want: &[&str]) {
    let (rc, _, err) = run(args);
    assert_eq!(rc, code, "topoplan {args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "topoplan {args:?}: no {w:?} in: {err}");
    }
}

fn fifo(name: &str) -> PathBuf {
    let p = tmp(name);
    let _ = std::fs::remove_file(&p);
    let st = Command::new("mkfifo").arg(&p).status().expect("run mkfifo");
    assert!(st.success(), "mkfifo {}", p.display());
    p
}

fn write(name: &str, text: &str) -> String {
    let p = tmp(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn fifos_dev_zero_directories_and_huge_files_are_refused_not_read() {
    let f = fifo("in.fifo");
    let f = f.to_str().unwrap();
    let topo = data("examples/h200x2-topo.xml");
    let fifo_msg = "not a regular file (a FIFO)";
    let zero_msg = "/dev/zero: not a regular file (a character device)";
    let json = tmp("never.json").display().to_string();
    for args in [
        vec!["plan", f],
        vec!["topo", "show", f],
        vec!["verify", f],
        vec!["sim", f],
        vec!["doctor", "--nccl-log", f, "--no-sysfs", "--no-detect"],
        vec!["doctor", "--nccl-tests", f, "--no-sysfs", "--no-detect"],
        vec![
            "calibrate",
            "--nccl-tests",
            f,
            "--topo",
            &topo,
            "-o",
            "/dev/null",
        ],
        vec!["plan", &topo, "--profile", f],
        vec!["sim", &topo, "--config", f],
    ] {
        expect(&args, 2, &[f, fifo_msg]);
    }
    for args in [
        vec!["plan", "/dev/zero"],
        vec!["topo", "convert", "/dev/zero", "-o", &json],
        vec!["verify", "/dev/zero"],
        vec![
            "doctor",
            "--nccl-log",
            "/dev/zero",
            "--no-sysfs",
            "--no-detect",
        ],
        vec![
            "calibrate",
            "--bench",
            "/dev/zero",
            "--topo",
            &topo,
            "-o",
            "/dev/null",
        ],
        vec!["bench", "--from-json", "/dev/zero", "--plot", "/dev/null"],
    ] {
        expect(&args, 2, &[zero_msg]);
    }
    // A plan file named by the environment is read by the same function.
    let (rc, _, err) = run_env(&["run", "-b", "8", "-e", "8"], &[("TOPOPLAN_PLAN", f)]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains(fifo_msg), "{err}");
    let dir = tmp("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    expect(&["plan", dir.to_str().unwrap()], 2, &["(a directory)"]);
    // A sparse file over the 256 MiB cap: refused by its size, before a byte is read.
    let big = tmp("big.xml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((256 << 20) + 1)
        .unwrap();
    expect(
        &["plan", big.to_str().unwrap()],
        2,
        &["268435457 bytes is larger than the 268435456-byte limit"],
    );
    std::fs::remove_file(&big).unwrap();
}

/// `<system><cpu>` + `inner` + `</cpu></system>`.
fn system(inner: &str) -> String {
    format!("<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\">{inner}</cpu></system>")
}

#[test]
fn deep_and_huge_xml_fails_fast_with_exit_2() {
    let deep = write(
        "deep.xml",
        &system(&format!(
            "{}{}",
            "<pci busid=\"0000:01:00.0\">".repeat(100_000),
            "</pci>".repeat(100_000)
        )),
    );
    for cmd in [vec!["plan"], vec!["verify"], vec!["topo", "show"]] {
        let mut args = cmd.clone();
        args.push(&deep);
        expect(&args, 2, &["elements nested more than 64 deep"]);
    }
    let wide = write("wide.xml", &system(&"<x/>".repeat(200_001)));
    expect(&["plan", &wide], 2, &["more than 100000 elements"]);
    // 8,000 GPUs in one machine: past NCCL's limit, said in well under the timeout (reading
    // is linear; the quadratic position lookups and NVSwitch link walks are gone).
    let gpus: String = (0..8000)
        .map(|i| {
            format!(
                "<pci busid=\"{:04x}:{:02x}:00.0\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"{i}\" sm=\"90\" rank=\"{i}\" gdr=\"1\"><nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/></gpu></pci>\n",
                i / 256,
                i % 256
            )
        })
        .collect();
    let many = write("many.xml", &system(&gpus));
    expect(&["plan", &many], 2, &["more than 640 GPUs in one machine"]);
}

#[test]
fn huge_sizes_channels_and_buffers_are_usage_errors() {
    let topo = data("examples/h200x2-topo.xml");
    let limit = "limit on message sizes";
    expect(&["plan", &topo, "-b", "4611686018427387904"], 2, &[limit]);
    expect(&["sim", &topo, "-e", "4611686018427387904"], 2, &[limit]);
    expect(&["plan", &topo, "--explain", "2000T"], 2, &[limit]);
    let max = u64::MAX.to_string();
    expect(&["run", "-b", &max, "-e", &max], 2, &["-b: ", limit]);
    expect(
        &["run", "-b", "1T", "-e", "1T"],
        2,
        &["of memory is available"],
    );
    expect(
        &["run", "-b", "64G", "-e", "64G"],
        2,
        &["of memory is available"],
    );
    for cmd in [
        vec!["sim", topo.as_str()],
        vec!["run", "-b", "8", "-e", "8"],
    ] {
        let mut args = cmd.clone();
        args.extend(["--channels", "100000"]);
        expect(&args, 2, &["--channels 100000: expected 1 to 64"]);
    }
    expect(&["run", "--ranks", "100000"], 2, &["expected 1 to 1024"]);
}

#[test]
fn scale_limits_are_usage_errors_not_results() {
    // 50,000 machines of 2 GPUs (`topo scale`): 100,000 ranks.
    let c = data("tests/data/hostile/cluster-100k-ranks.json");
    expect(
        &["sim", &c, "-b", "1M", "-e", "1M"],
        2,
        &["100000 ranks: sim takes at most 16384"],
    );
    expect(
        &["sim", &c, "--as", "nccl"],
        2,
        &["100000 ranks: sim takes at most 16384"],
    );
    expect(
        &["verify", &c],
        2,
        &["100000 ranks: verify takes at most 4096"],
    );
    expect(
        &["whatif", &c, "--vary", "nodes=2"],
        2,
        &["whatif takes at most 16384"],
    );
    // Schedules past the verifier's state limit are a limit (exit 2), not counter-examples.
    let c4k = data("tests/data/hostile/cluster-4096-ranks.json");
    let (rc, out, err) = run(&["verify", &c4k, "-c", "all-reduce"]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("too large to verify") && err.contains(" verify."),
        "{err}"
    );
    assert!(out.contains("LIMIT ") && !out.contains("FAIL "), "{out}");
    // A scenario past the limit is that scenario's error; the others are answered.
    let topo = data("examples/h200x2-topo.xml");
    let (rc, out, err) = run(&[
        "whatif",
        &topo,
        "--vary",
        "nodes=8193",
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("no plan: 16386 ranks: whatif takes at most 16384"),
        "{out}"
    );
    assert!(out.contains("baseline"), "{out}");
}

#[test]
fn values_that_would_invent_an_answer_are_refused_or_said() {
    let text = std::fs::read_to_string(data("examples/h200x2-topo.xml")).unwrap();
    let sm = write("sm9000.xml", &text.replacen("sm=\"90\"", "sm=\"9000\"", 1));
    expect(
        &["plan", &sm],
        2,
        &["sm 9000 is not the compute capability of a known GPU generation"],
    );
    let dup = write(
        "dupdev.xml",
        &text.replacen("dev=\"1\" sm", "dev=\"0\" sm", 1),
    );
    expect(
        &["topo", "show", &dup],
        2,
        &["duplicate dev 0: already used by"],
    );
    // One GPU lists NVLinks to the other, which lists none back.
    let one_way = write(
        "oneway.xml",
        &system(
            "<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\
             <gpu dev=\"0\" sm=\"86\" rank=\"0\" gdr=\"1\">\
             <nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030000\"/></gpu></pci>\
             <pci busid=\"0000:02:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\
             <gpu dev=\"1\" sm=\"86\" rank=\"1\" gdr=\"1\"/></pci>",
        ),
    );
    let (rc, out, err) = run(&["plan", &one_way, "-c", "all-reduce", "-b", "1M", "-e", "1M"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("NVLinks are asymmetric") && err.contains("GPU 1 reaches GPU 0 over PCIe"),
        "{err}"
    );
    // The pair is as good as its worse direction, as the rings find it.
    assert!(out.contains("GPU pairs in a host: 1 over PHB"), "{out}");
    assert!(out.contains("hops over Pci"), "{out}");
}

fn measurements(f: &str) -> String {
    data(&format!("tests/data/measurements/h200x2/{f}"))
}

/// The recorded all-reduce with the out-of-place time of 2 MiB replaced by `v`.
fn with_time(v: &str) -> String {
    let text = std::fs::read_to_string(measurements("all_reduce_g2.txt")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.first() == Some(&"2097152") {
                let mut f = f.clone();
                f[5] = v;
                f.join(" ")
            } else {
                l.to_string()
            }
        })
        .collect();
    write(&format!("ar-{v}.txt"), &(lines.join("\n") + "\n"))
}

#[test]
fn calibrate_refuses_bad_times_other_gpu_counts_and_bad_fits() {
    let topo = measurements("topo.xml");
    let out = tmp("never-written.json");
    let o = out.to_str().unwrap();
    for (v, why) in [
        ("nan", "\"nan\", not a number"),
        ("-1.5", "a time is a positive number"),
        ("0", "a time is a positive number"),
    ] {
        let f = with_time(v);
        expect(
            &["calibrate", "--nccl-tests", &f, "--topo", &topo, "-o", o],
            2,
            &[&format!("{f}:21: nccl-tests row field 6 (time)"), why],
        );
    }
    let eight = data("tests/data/topologies/azure-ndv4-topo.xml");
    expect(
        &[
            "calibrate",
            "--nccl-tests",
            &measurements("all_reduce_g2.txt"),
            "--topo",
            &eight,
            "-o",
            o,
        ],
        2,
        &["the run was on 2 GPU(s) (its '# Rank' lines), the topology has 8"],
    );
    // Four sizes whose times zigzag by 8x: no profile describes them.
    let text = std::fs::read_to_string(measurements("all_reduce_g2.txt")).unwrap();
    let mut k = 0;
    let zig: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let mut f: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            if f.len() != 13 || f[0].parse::<u64>().is_err() {
                return Some(l.to_string());
            }
            k += 1;
            if k > 4 {
                return None;
            }
            if k % 2 == 0 {
                for i in [5, 9] {
                    f[i] = format!("{:.2}", f[i].parse::<f64>().unwrap() * 8.0);
                }
            }
            Some(f.join(" "))
        })
        .collect();
    let zig = write("zig.txt", &(zig.join("\n") + "\n"));
    let args = ["calibrate", "--nccl-tests", &zig, "--topo", &topo, "-o", o];
    let (rc, stdout, err) = run(&args);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("exceeds 25%") && err.contains("--force"),
        "{err}"
    );
    assert!(stdout.contains("not written"), "{stdout}");
    assert!(!out.exists(), "a refused fit wrote {o}");
    let mut forced = args.to_vec();
    forced.push("--force");
    let (rc, stdout, err) = run(&forced);
    assert_eq!(rc, 0, "{err}");
    assert!(
        stdout.contains("with --force: over the 25% limit"),
        "{stdout}"
    );
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains("written with --force although"),
        "{written}"
    );
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn one_convention_for_exit_codes_flags_help_and_environment() {
    let topo = data("examples/h200x2-topo.xml");
    // An output that cannot be written is bad input in every subcommand.
    expect(
        &["topo", "convert", &topo, "-o", "/proc/x.json"],
        2,
        &["cannot write /proc/x.json"],
    );
    expect(
        &["plan", &topo, "--msccl-xml", "/proc/xx"],
        2,
        &["cannot create /proc/xx"],
    );
    // An algorithm no schedule can honour: bad input from `run` as from `plan`.
    expect(
        &["run", "--algo", "ce", "--ranks", "4", "-b", "8", "-e", "8"],
        2,
        &[],
    );
    expect(
        &["plan", &topo, "--algo", "tree", "-c", "all-to-all"],
        2,
        &["leave no algorithm"],
    );
    expect(
        &["plan", &topo, "--explain", "2M", "--json"],
        2,
        &["cannot be used with"],
    );
    expect(
        &["sim", &topo, "--as", "nccl", "--channels", "4"],
        2,
        &["not with --as nccl"],
    );
    // The skeleton warning names the flag every subcommand takes.
    let skel = data("tests/data/topologies/azure-ndv5-topo.xml");
    let (rc, _, err) = run(&["plan", &skel, "-c", "all-reduce", "-b", "1M", "-e", "1M"]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("pass --gpu-model MODEL"), "{err}");
    for cmd in [vec!["plan"], vec!["topo", "show"], vec!["sim"]] {
        let mut args = cmd.clone();
        args.extend([skel.as_str(), "--gpu-model", "h100-sxm", "-h"]);
        let (rc, _, err) = run(&args);
        assert_eq!(rc, 0, "{args:?}: {err}");
    }
    for cmd in [
        "topo",
        "topo show",
        "topo convert",
        "topo scale",
        "plan",
        "sim",
        "verify",
        "calibrate",
        "whatif",
        "run",
        "doctor",
        "env",
    ] {
        let mut args: Vec<&str> = cmd.split(' ').collect();
        args.push("--help");
        let (rc, out, _) = run(&args);
        assert_eq!(rc, 0);
        assert!(
            out.lines().any(|l| l.eq_ignore_ascii_case("examples:")),
            "`topoplan {cmd} --help` has no examples"
        );
    }
    // `env --check` semantics in every command that reads variables.
    for (k, v) in [("TOPOPLAN_LL_MAX", "-1"), ("TOPOPLAN_DEBUG", "LOUD")] {
        for args in [
            vec!["run", "-b", "8", "-e", "8"],
            vec!["plan", topo.as_str()],
        ] {
            let (rc, _, err) = run_env(&args, &[(k, v)]);
            assert_eq!(rc, 2, "{k}={v} {args:?}: {err}");
            assert!(err.contains(&format!("{k}=\"{v}\"")), "{err}");
        }
        let (rc, _, _) = run_env(&["env", "--check"], &[(k, v)]);
        assert_eq!(rc, 2);
    }
}
