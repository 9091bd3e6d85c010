//! Checks on small inputs built in place (the corpus tests in tests/doctor_checks.rs run the
//! rest).

use super::*;
use crate::cli::doctor::input::from_bytes;
use crate::cli::doctor::{env, nccl_log};

fn log(text: &str) -> NcclLog {
    nccl_log::parse(&from_bytes("t.log", text.as_bytes().to_vec()).unwrap()).unwrap()
}

fn envf(text: &str) -> Env {
    env::Env::parse(&from_bytes("t.env", text.as_bytes().to_vec()).unwrap()).unwrap()
}

fn checks(i: &Inputs) -> Vec<&'static str> {
    run_all(i).iter().map(|f| f.check).collect()
}

const FOUR_RANKS: &str = "\
h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 4 cudaDev 0 busId 1000 commId 0x9 - Init COMPLETE
h:2:2 [1] NCCL INFO ncclCommInitRankConfig comm 0x2 rank 1 nranks 4 cudaDev 1 busId 2000 commId 0x9 - Init COMPLETE
h:3:3 [2] NCCL INFO ncclCommInitRankConfig comm 0x3 rank 2 nranks 4 cudaDev 2 busId 3000 commId 0x9 - Init COMPLETE
h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0
";

#[test]
fn ranks_missing_from_a_one_node_log() {
    let i = Inputs {
        log: Some(log(FOUR_RANKS)),
        ..Default::default()
    };
    let f = launch::ranks_joined(&i);
    assert_eq!(f.len(), 1);
    assert!(
        f[0].title.starts_with("3 of 4 ranks completed"),
        "{}",
        f[0].title
    );
    assert!(f[0].title.ends_with("missing: 3"));
    // One process's log is partial, not missing ranks.
    let one = FOUR_RANKS
        .lines()
        .filter(|l| l.starts_with("h:1:"))
        .collect::<Vec<_>>()
        .join("\n");
    let i = Inputs {
        log: Some(log(&one)),
        ..Default::default()
    };
    assert!(launch::ranks_joined(&i).is_empty());
}

#[test]
fn loopback_master_on_one_node_is_fine() {
    let i = Inputs {
        env: envf("MASTER_ADDR=127.0.0.1\nWORLD_SIZE=8\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    assert!(checks(&i).is_empty());
    let i = Inputs {
        env: envf("MASTER_ADDR=127.0.0.1\nWORLD_SIZE=16\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    assert_eq!(checks(&i), vec!["master-addr"]);
    // Node count unknown: no verdict.
    let i = Inputs {
        env: envf("MASTER_ADDR=localhost\n"),
        ..Default::default()
    };
    assert!(checks(&i).is_empty());
}

#[test]
fn socket_ifname_severity_follows_the_node_count() {
    let one = Inputs {
        env: envf("NCCL_SOCKET_IFNAME=lo\nWORLD_SIZE=8\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    let f = net::socket_ifname(&one);
    assert_eq!(f[0].severity, crate::cli::doctor::finding::Severity::Info);
    let many = Inputs {
        env: envf("NCCL_SOCKET_IFNAME=lo\nWORLD_SIZE=16\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    assert_eq!(
        net::socket_ifname(&many)[0].severity,
        crate::cli::doctor::finding::Severity::Error
    );
    // Exclusion lists and real interfaces are not judged.
    let ex = Inputs {
        env: envf("NCCL_SOCKET_IFNAME=^docker0,lo\nWORLD_SIZE=16\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    assert!(net::socket_ifname(&ex).is_empty());
    let ok = Inputs {
        env: envf("NCCL_SOCKET_IFNAME==eth0\nWORLD_SIZE=16\nLOCAL_WORLD_SIZE=8\n"),
        ..Default::default()
    };
    assert!(net::socket_ifname(&ok).is_empty());
}

#[test]
fn zero_valued_switches_are_not_findings() {
    let i = Inputs {
        env: envf("NCCL_P2P_DISABLE=0\nNCCL_IB_DISABLE=0\nNCCL_SHM_DISABLE=0\n"),
        ..Default::default()
    };
    assert!(checks(&i).is_empty());
    assert!(truthy("1") && truthy("true") && !truthy("0") && !truthy(""));
}

#[test]
fn non_integer_rank_variables_are_findings() {
    let i = Inputs {
        env: envf("RANK=zero\nWORLD_SIZE=2\n"),
        ..Default::default()
    };
    let f = launch::rank_world(&i);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].title, "RANK=zero is not an integer");
}

#[test]
fn nccl_warnings_skip_the_duplicate_gpu_one() {
    let i = Inputs {
        log: Some(log("h:1:1 [0] init.cc:1 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\nh:1:1 [0] misc/socket.cc:5 NCCL WARN socketConnect: Connect to 10.0.0.2<1> failed : Connection refused\n")),
        ..Default::default()
    };
    assert_eq!(checks(&i), vec!["duplicate-gpu", "nccl-warn"]);
    assert_eq!(perf::nccl_warnings(&i)[0].evidence.len(), 1);
}

#[test]
fn watchdog_off_is_a_warning_and_its_default_is_quiet() {
    let i = Inputs {
        env: envf("TORCH_NCCL_ASYNC_ERROR_HANDLING=0\n"),
        ..Default::default()
    };
    assert_eq!(checks(&i), vec!["torch-watchdog"]);
    let i = Inputs {
        env: envf("TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"),
        ..Default::default()
    };
    assert!(checks(&i).is_empty());
}

#[test]
fn cuda_denying_peer_access_is_evidence_of_the_downgrade() {
    let i = Inputs {
        log: Some(log(concat!(
            "h:1:1 [0] NCCL INFO Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 0\n",
            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n",
        ))),
        ..Default::default()
    };
    let f = p2p::transport_downgrade(&i);
    assert_eq!(f.len(), 1);
    assert!(f[0].evidence.iter().any(|e| e == "t.log:1: isAllCudaP2p 0 (CUDA reports no peer access between some GPUs)"), "{:?}", f[0].evidence);
    assert!(f[0].fix.starts_with("CUDA denies peer access"));
}

#[test]
fn nics_across_the_socket_link_from_nccls_paths() {
    let text = concat!(
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n",
        "h:1:1 [0] NCCL INFO GPU/0-1b000 :GPU/0-1b000 (0/5000.0/LOC) NET/0-0 (4/24.0/PIX) NET/0-1 (6/10.0/SYS)\n",
        "h:1:1 [0] NCCL INFO GPU/0-9a000 :GPU/0-9a000 (0/5000.0/LOC) NET/0-0 (6/10.0/SYS) NET/0-1 (6/10.0/SYS)\n",
    );
    let i = Inputs {
        log: Some(log(text)),
        ..Default::default()
    };
    let f = pcie::numa_nic(&i);
    assert_eq!(f.len(), 1, "only the GPU with no near NIC");
    assert!(f[0].title.contains("GPU/0-9a000"), "{}", f[0].title);
    assert_eq!(
        f[0].evidence[0],
        "t.log:3: GPU/0-9a000 -> NET/0-0 (SYS/10.0 GB/s)"
    );
    // The same paths on sockets (no RDMA devices listed): nothing to say.
    let i = Inputs {
        log: Some(log(&text.lines().skip(1).collect::<Vec<_>>().join("\n"))),
        ..Default::default()
    };
    assert!(pcie::numa_nic(&i).is_empty());
}

#[test]
fn every_check_is_documented_and_every_source_check_is_listed() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/doctor.md")).unwrap();
    for c in CHECKS {
        assert!(
            doc.contains(&format!("| `{c}` |")),
            "docs/doctor.md has no row for {c}"
        );
    }
    // Every name a check file passes to Finding::new is in CHECKS.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/cli/doctor/checks");
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for part in text.split("Finding::new(").skip(1) {
            let name = part
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next());
            if let Some(n) = name
                .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !n.is_empty())
            {
                if !["a", "b", "c"].contains(&n) {
                    assert!(CHECKS.contains(&n), "{n} is not in CHECKS");
                }
            }
        }
    }
}
