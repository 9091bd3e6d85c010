//! `topoplan run`: checked runs print nccl-tests columns with #wrong 0; bad input exits 2; the
//! multi-process launcher's hand-off of rank 0's address.

mod common;
use common::topoplan;
use std::process::Command;

/// Data rows of the table: (size, count, #wrong out-of-place, #wrong in-place).
fn rows(out: &str) -> Vec<(u64, u64, String, String)> {
    out.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[8].to_string(),
                f[12].to_string(),
            )
        })
        .collect()
}

#[test]
fn every_collective_on_threads_checks_clean() {
    for c in [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "broadcast",
        "reduce",
        "all-to-all",
        "sendrecv",
    ] {
        let (code, out, err) = topoplan(&[
            "run",
            "--backend",
            "cpu",
            "--ranks",
            "3",
            "--collective",
            c,
            "-b",
            "24",
            "-e",
            "96K",
            "-f",
            "64",
            "-n",
            "2",
            "-w",
            "1",
            "-d",
            "bf16",
            "-o",
            "max",
        ]);
        assert_eq!(code, 0, "{c}: {err}\n{out}");
        let r = rows(&out);
        assert_eq!(r.len(), 3, "{c}: sizes 24, 1536, 96K expected:\n{out}");
        for (size, count, w1, w2) in &r {
            assert_eq!(
                (w1.as_str(), w2.as_str()),
                ("0", "0"),
                "{c} at {size}:\n{out}"
            );
            assert!(
                *count > 0 && *size == count * 2,
                "{c}: size {size} is count {count} × 2 bytes"
            );
        }
        assert!(out.contains("# Out of bounds values : 0 OK"), "{out}");
    }
}

#[test]
fn processes_and_tcp() {
    let (code, out, err) = topoplan(&[
        "run",
        "--ranks",
        "3",
        "-c",
        "all-reduce",
        "-b",
        "1K",
        "-e",
        "64K",
        "-f",
        "8",
        "-n",
        "2",
        "--mode",
        "procs",
        "--transport",
        "tcp",
        "-d",
        "i32",
        "-o",
        "prod",
    ]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("processes over tcp"), "{out}");
    assert!(rows(&out).iter().all(|r| r.2 == "0" && r.3 == "0"), "{out}");
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    for (args, want) in [
        (vec!["run", "-c", "all-mix"], "--collective"),
        (vec!["run", "-d", "f128"], "--datatype"),
        (vec!["run", "-b", "1M", "-e", "1K"], "larger than"),
        (vec!["run", "--backend", "tpu"], "--backend"),
        (vec!["run", "--ranks", "0"], "--ranks"),
        (
            vec!["run", "-c", "reduce", "--ranks", "2", "--root", "5"],
            "--root",
        ),
        (vec!["run", "--algo", "magic"], "--algo"),
        // An explicit algorithm that cannot run the collective is refused, never replaced.
        (
            vec!["run", "-c", "all-to-all", "--algo", "tree"],
            "all-to-all runs the direct algorithm only",
        ),
        (
            vec!["run", "-c", "all-reduce", "--algo", "direct"],
            "--algo direct runs all-to-all and sendrecv only",
        ),
    ] {
        let (code, _, err) = topoplan(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A rank 0 whose given address is taken fails at once (exit 1) and names the address.
#[test]
fn rank_0_on_a_taken_port_names_the_address() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["run", "--ranks", "2", "-b", "1K", "-e", "1K", "--from-env"])
        .env("RANK", "0")
        .env("LOCAL_RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", &port)
        .env("TOPOPLAN_TIMEOUT", "5s")
        .env_remove("TOPOPLAN_UNIQUE_ID")
        .env_remove("TOPOPLAN_UNIQUE_ID_FILE")
        .output()
        .expect("run topoplan");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("in use"),
        "{err}"
    );
    drop(held);
}

/// Rank 0 at port 0 writes the id it listens at to the file its launcher named, with the port
/// it got; without such a file it is refused (no other rank could find it).
#[test]
fn rank_0_at_port_0_reports_its_id_or_is_refused() {
    let run = |file: Option<&std::path::Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_topoplan"));
        c.args(["run", "--ranks", "2", "-b", "1K", "-e", "1K", "--from-env"])
            .env("RANK", "0")
            .env("WORLD_SIZE", "2")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", "0")
            .env("TOPOPLAN_TIMEOUT", "1s")
            .env_remove("TOPOPLAN_UNIQUE_ID")
            .env_remove("TOPOPLAN_UNIQUE_ID_FILE");
        if let Some(f) = file {
            c.env("TOPOPLAN_UNIQUE_ID_FILE", f);
        }
        c.output().expect("run topoplan")
    };
    let o = run(None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("TOPOPLAN_UNIQUE_ID_FILE"), "{err}");
    // With the file: the id is written, then rank 0 times out waiting for rank 1 (exit 1).
    let f = std::env::temp_dir().join(format!("topoplan-run-cli-id-{}", std::process::id()));
    let o = run(Some(&f));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("waiting for ranks [1]"), "{err}");
    let id = std::fs::read_to_string(&f).expect("rank 0 wrote its id");
    let _ = std::fs::remove_file(&f);
    let port = id.trim().rsplit_once(':').expect("host:port").1;
    assert!(
        id.starts_with("topoplan1:") && id.contains("@127.0.0.1:"),
        "{id}"
    );
    assert_ne!(port.parse::<u16>().expect("a port"), 0, "{id}");
}

/// `--algo direct` runs all-to-all and sendrecv (the run's own timing and check all-reduces
/// take the planner's choice), and names `direct` in the header.
#[test]
fn forced_direct_runs_all_to_all_and_sendrecv() {
    for c in ["all-to-all", "sendrecv"] {
        let args = [
            "run", "-g", "3", "-c", c, "--algo", "direct", "-b", "1K", "-e", "64K", "-f", "8",
        ];
        let (code, out, err) = topoplan(&args);
        assert_eq!(code, 0, "{c}: {err}\n{out}");
        assert!(
            out.lines().next().unwrap_or("").contains("direct /"),
            "{c}: {out}"
        );
        let r = rows(&out);
        assert_eq!(r.len(), 3, "{c}: {out}");
        assert!(r.iter().all(|r| r.2 == "0" && r.3 == "0"), "{c}: {out}");
    }
}
