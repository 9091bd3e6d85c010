use super::*;
use crate::cli::doctor::input::from_bytes;
use proptest::prelude::*;

fn healthy() -> NcclLog {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/doctor/h200x2-healthy.log"
    );
    parse(&super::super::input::read(std::path::Path::new(p)).unwrap()).unwrap()
}

fn one(text: &str) -> NcclLog {
    parse(&from_bytes("t.log", text.as_bytes().to_vec()).unwrap()).unwrap()
}

#[test]
fn healthy_h200x2_log_is_read_in_full() {
    let l = healthy();
    assert_eq!(l.version.as_ref().unwrap().text, "2.28.9+cuda13.0");
    assert_eq!(l.version.as_ref().unwrap().line, 8);
    // 24 channels each way, all P2P over cuMem.
    assert_eq!(l.transports.len(), 48);
    assert!(l
        .transports
        .iter()
        .all(|t| t.transport == "P2P" && t.detail == "CUMEM"));
    assert_eq!(l.coll_channels.len(), 2);
    assert_eq!((l.coll_channels[0].0, l.coll_channels[0].1), (24, 32));
    let rings: Vec<_> = l.graphs.iter().filter(|g| g.pattern == 4).collect();
    assert_eq!(rings.len(), 2);
    assert_eq!(rings[0].nchannels, 12);
    assert_eq!(rings[0].bw_intra, 30.0);
    assert_eq!(rings[0].type_intra, "NVL");
    assert_eq!(l.nnodes(), Some(1));
    assert_eq!(l.nranks(), Some(2));
    assert_eq!(l.inits.len(), 2);
    assert_eq!(l.inits[0].busid.as_deref(), Some("60"));
    assert_eq!(l.socket_ifaces[0].name, "eth0");
    assert_eq!(l.socket_ifaces[0].addr, "192.0.2.2");
    assert!(l.ib_no_device.is_some());
    assert_eq!(l.network[0].text, "Socket");
    assert!(l.ib_devices.is_empty(), "[RO] is a flag, not a device");
    let ar_ring_simple = l
        .tuner
        .iter()
        .find(|c| c.func == "AllReduce" && c.algo == "Ring" && c.proto == "Simple")
        .unwrap();
    assert_eq!(
        (ar_ring_simple.lat_us, ar_ring_simple.bw_gbps),
        (15.2, 360.0)
    );
    let tree_ll = l
        .tuner
        .iter()
        .find(|c| c.func == "AllReduce" && c.algo == "Tree" && c.proto == "LL")
        .unwrap();
    assert_eq!(tree_ll.bw_gbps, 61.1);
    assert!(l.tuner.iter().any(|c| c.algo == "PAT"));
    let big = l.choices.iter().find(|c| c.bytes == 2147483648).unwrap();
    assert_eq!(
        (big.algo.as_str(), big.proto.as_str(), big.channels),
        ("RING", "SIMPLE", 24)
    );
    assert!(l
        .gpu_paths
        .iter()
        .any(|p| p.kind == "NVL" && p.bw_gbps == 370.8));
    assert_eq!(l.all_cuda_p2p.map(|c| c.0), Some(1));
    assert_eq!(l.system_bw.map(|s| (s.0, s.1)), Some((370.8, 370.8)));
    assert_eq!(l.nvl_links.len(), 4);
    assert_eq!(l.net_paths.len(), 4);
    assert!(l
        .net_paths
        .iter()
        .all(|p| p.to == "NET/0-0" && p.kind == "PHB"));
    assert_eq!(l.init_timings.len(), 2);
    assert_eq!(l.init_timings[0].1, 0.49);
    assert!(l.warnings.is_empty());
    assert!(l.duplicate_gpu.is_empty());
    // The sweep's own table and Python's warnings are another program's lines.
    assert!(l.other >= 15, "{}", l.other);
    assert!(
        l.not_understood.is_empty(),
        "unexpected: {:?}",
        l.not_understood_samples
    );
}

#[test]
fn transports_of_every_kind() {
    let l = one(concat!(
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n",
        "h:1:2 [0] NCCL INFO Channel 01 : 15[7] -> 0[0] [send] via NET/IB/0\n",
        "h:1:2 [0] NCCL INFO Channel 02/1 : 0[0] -> 1[1] via P2P/IPC/read\n",
    ));
    let t: Vec<_> = l
        .transports
        .iter()
        .map(|t| (t.channel, t.from, t.to, t.transport.as_str()))
        .collect();
    assert_eq!(
        t,
        vec![(0, 0, 1, "SHM"), (1, 15, 0, "NET"), (2, 0, 1, "P2P")]
    );
    assert_eq!(l.transports[1].detail, "IB/0");
}

#[test]
fn env_echo_bootstrap_and_launcher_prefix() {
    let l = one(concat!(
        "[1,2]<stdout>:node7:29880:30398 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0\n",
        "node7:29880:30398 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n",
        "node7:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000\n",
    ));
    assert_eq!(l.env_value("NCCL_SOCKET_IFNAME"), Some(("docker0", 1)));
    assert_eq!(l.bootstrap_ifaces[0].name, "docker0");
    assert_eq!(l.bootstrap_ifaces[0].addr, "172.17.0.1");
    assert_eq!(l.duplicate_gpu.len(), 1);
    assert_eq!(l.duplicate_gpu[0].line, 3);
    assert_eq!(l.warnings.len(), 1);
}

#[test]
fn origins_without_tid_or_host_and_echoes_with_a_full_stop() {
    let l = one(concat!(
        "proxmox:1495819 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n",
        "[2024-03-15 02:34:11] [rank 0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n",
        "NCCL INFO Channel 00/02 : 0 -> 1 via NET/Socket/0\n",
        "[2024-03-15 02:34:12] [rank 0] NCCL INFO Channel 00 : 0[0] -> 1[1] -> 2[2] -> 3[3]\n",
        "h:1:2 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 2 cudaDev 0 busId 60 commId 0x5 - Init COMPLETE\n",
    ));
    assert_eq!(l.env_value("NCCL_SHM_DISABLE"), Some(("1", 1)));
    assert_eq!(l.env_value("NCCL_P2P_DISABLE"), Some(("1", 2)));
    assert_eq!(l.transports.len(), 1);
    assert_eq!((l.transports[0].from, l.transports[0].to), (0, 1));
    assert!(
        l.not_understood.is_empty(),
        "{:?}",
        l.not_understood_samples
    );
    assert_eq!(l.inits[0].at.host, "h");
    assert_eq!(l.inits[0].at.pid, "1");
    assert_eq!(l.transports[0].at.host, "", "no origin printed");
}

#[test]
fn unknown_nccl_lines_are_counted_not_guessed() {
    let l = one(concat!(
        "h:1:2 [0] NCCL INFO Some message of a future NCCL version\n",
        "h:1:2 [0] NCCL INFO Channel xx : garbage\n",
        "h:1:2 [0] NCCL INFO NCCL version 3.1.0\n",
        "plain application output\n",
    ));
    assert_eq!(l.not_understood, vec![1, 2]);
    assert!(l.transports.is_empty());
    assert_eq!(l.other, 1);
    assert_eq!(l.understood, 1);
}

#[test]
fn no_nccl_lines_is_bad_input() {
    let e = parse(&from_bytes("x.log", b"hello\nworld\n".to_vec()).unwrap()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().starts_with("x.log: no NCCL lines"), "{e}");
}

#[test]
fn cut_last_line_is_bad_input_naming_the_line() {
    let e = parse(
        &from_bytes(
            "cut.log",
            b"h:1:2 [0] NCCL INFO NCCL version 2.28.9\nh:1:2 [0] NCCL INFO Channel 03/0 : 0[0] -> 1".to_vec(),
        )
        .unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cut.log:2: the log ends inside an NCCL line (truncated while being written?)"
    );
    // A complete last line without a newline is fine.
    assert!(parse(
        &from_bytes(
            "ok.log",
            b"h:1:2 [0] NCCL INFO NCCL version 2.28.9".to_vec()
        )
        .unwrap()
    )
    .is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
    /// Random bytes (and random NCCL-looking lines) never panic: text parses or is bad input.
    #[test]
    fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(t) = from_bytes("r", bytes) {
            let _ = parse(&t);
        }
    }

    #[test]
    fn random_nccl_lines_never_panic(msgs in proptest::collection::vec("[ -~]{0,60}", 1..20),
                                     kinds in proptest::collection::vec(0usize..8, 20)) {
        const HEADS: [&str; 8] = ["Channel ", "Pattern ", "AllReduce |", "Algorithm   |",
            "comm 0x1 rank ", "GPU/0-1 :", "NET/Socket : Using ", "AllReduce: "];
        let mut s = String::new();
        for (i, m) in msgs.iter().enumerate() {
            s.push_str(&format!("h:1:2 [0] NCCL INFO {}{}\n", HEADS[kinds[i] % 8], m));
        }
        let _ = parse(&from_bytes("r", s.into_bytes()).unwrap());
    }
}
