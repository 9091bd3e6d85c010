//! Recognisers of the NCCL INFO messages the checks read, one small parser per record kind.

use super::*;

/// Informational NCCL messages no check needs (recognised, so not "not understood").
const INFORMATIONAL: &[&str] = &[
    "ENV/Plugin",
    "NET/Plugin",
    "PROFILER/Plugin",
    "TUNER/Plugin",
    "cudaDriverVersion",
    "NCCL git version",
    "Failed to initialize NET plugin",
    "Initialized NET plugin",
    "Assigned NET plugin",
    "RAS client",
    "MNNVL busId",
    "Topology detection",
    "Could not find real path",
    "TOPO/NET",
    "ncclTopoPopulateNics",
    "ncclTopoGetCpuAffinity",
    "CPU/",
    "+ ",
    "==========",
    "NET/0-",
    "NVS/0-",
    "ncclP2pSchedule",
    "[Proxy ",
    "Bootstrap timings",
    "Symmetric memory",
    "CC Off",
    "CC On",
    "P2P Chunksize",
    "threadThresholds",
    "Connected all rings",
    "Connected all trees",
    "Connected NVLS",
    "Max NThreads",
    "Protocol    |",
    "NVLS multicast support",
    "Setting affinity",
    "Comm config",
    "Using tuner plugin",
    "Using non-device net plugin",
    "DMA-BUF",
    "NCCL_",
];

/// Records one INFO message; `false` when it is not understood.
pub(super) fn record(log: &mut NcclLog, algos: &mut Vec<String>, at: Origin, m: &str) -> bool {
    let n = at.line;
    // Newer versions put "[Rank 0] " before some messages.
    let m = match m.strip_prefix("[Rank ").and_then(|r| r.split_once("] ")) {
        Some((r, rest)) if r.parse::<u32>().is_ok() => rest,
        _ => m,
    };
    if let Some(understood) = setup_record(log, at, m) {
        return understood;
    }
    if let Some(understood) = tuning_record(log, algos, n, m) {
        return understood;
    }
    INFORMATIONAL.iter().any(|p| m.starts_with(p))
}

/// The messages of a communicator's setup: version, environment, network, channels, graphs,
/// init and summary lines. `None` when `m` is none of them; else whether it was understood.
fn setup_record(log: &mut NcclLog, at: Origin, m: &str) -> Option<bool> {
    let n = at.line;
    if let Some(v) = m.strip_prefix("NCCL version ") {
        if log.version.is_none() {
            log.version = Some(noted(n, v));
        }
        return Some(true);
    }
    if let Some((k, v)) = m.split_once(" set by environment to ") {
        if k.starts_with("NCCL_") && !k.contains(' ') {
            // Some variables are echoed with a full stop ("... to 1.").
            let v = v.trim();
            let v = v.strip_suffix('.').unwrap_or(v);
            log.env.push((k.to_string(), v.to_string(), n));
            return Some(true);
        }
    }
    if let Some(rest) = m.strip_prefix("Channel ") {
        return Some(channel(log, at, rest));
    }
    if let Some(understood) = net_record(log, n, m) {
        return Some(understood);
    }
    if let Some(k) = m.find(" coll channels") {
        let coll = m[..k].trim().parse::<u32>();
        let p2p = m
            .split(", ")
            .find(|s| s.ends_with(" p2p channels"))
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok());
        if let (Ok(c), Some(p)) = (coll, p2p) {
            log.coll_channels.push((c, p, n));
            return Some(true);
        }
        return Some(false);
    }
    if m.starts_with("Pattern ") {
        return Some(graph(log, n, m));
    }
    if m.contains("Duplicate GPU detected") {
        log.duplicate_gpu.push(noted(n, m));
        return Some(true);
    }
    comm_record(log, at, m)
}

/// The network's setup messages: InfiniBand devices, the network used, the socket and
/// bootstrap interfaces. `None` when `m` is none of them; else whether it was understood.
fn net_record(log: &mut NcclLog, n: usize, m: &str) -> Option<bool> {
    if m.starts_with("NET/IB : No device found") {
        log.ib_no_device = Some(n);
        return Some(true);
    }
    if let Some(rest) = m.strip_prefix("NET/IB : Using ") {
        let devs = rest.split(';').next().unwrap_or("");
        if devs.contains("]") && devs.split_whitespace().any(|w| w.contains(':')) {
            log.ib_devices.push(noted(n, devs));
        }
        return Some(true);
    }
    if let Some(rest) = m.strip_prefix("Using network ") {
        log.network.push(noted(n, rest));
        return Some(true);
    }
    for (p, boot) in [
        ("NET/Socket : Using ", false),
        ("NET : Using interface ", false),
        ("Bootstrap : Using ", true),
        ("Bootstrap: Using ", true),
    ] {
        if let Some(rest) = m.strip_prefix(p) {
            let v = ifaces(n, rest);
            if v.is_empty() {
                return Some(false);
            }
            if boot {
                log.bootstrap_ifaces.extend(v);
            } else {
                log.socket_ifaces.extend(v);
            }
            return Some(true);
        }
    }
    if m.starts_with("NET/Socket :") {
        return Some(true);
    }
    None
}

/// A communicator's init, summary and destroy lines. `None` when `m` is none of them; else
/// whether it was understood.
fn comm_record(log: &mut NcclLog, at: Origin, m: &str) -> Option<bool> {
    let n = at.line;
    if (m.starts_with("ncclCommInitRank") || m.starts_with("comm 0x")) && m.contains(" - Init ") {
        return Some(init(log, at, m));
    }
    if m.starts_with("comm 0x") && m.contains(" nNodes ") {
        let f = |k: &str| kv(m, k);
        if let (Some(rank), Some(nranks), Some(nnodes), Some(lr)) =
            (f("rank"), f("nRanks"), f("nNodes"), f("localRanks"))
        {
            log.comms.push(CommSummary {
                line: n,
                rank,
                nranks,
                nnodes,
                local_ranks: lr,
            });
            return Some(true);
        }
        return Some(false);
    }
    if m.starts_with("comm 0x") && m.contains("Destroy COMPLETE") {
        return Some(true);
    }
    None
}

/// The tuner's table and choices, rings and trees, paths, links, timings and the lines known
/// to carry nothing. `None` when `m` is none of them; else whether it was understood.
fn tuning_record(log: &mut NcclLog, algos: &mut Vec<String>, n: usize, m: &str) -> Option<bool> {
    if let Some(rest) = m.strip_prefix("Algorithm   |") {
        *algos = rest
            .split('|')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        return Some(!algos.is_empty());
    }
    if let Some((func, cells)) = m.split_once(" |") {
        const FUNCS: [&str; 5] = [
            "Broadcast",
            "Reduce",
            "AllGather",
            "ReduceScatter",
            "AllReduce",
        ];
        if FUNCS.contains(&func.trim()) && !algos.is_empty() {
            return Some(tuner_row(log, algos, n, func.trim(), cells));
        }
    }
    if m.contains(" Bytes -> Algo ") {
        return Some(choice(log, n, m));
    }
    if m.starts_with("Ring ") {
        log.rings += 1;
        return Some(true);
    }
    if m.starts_with("Tree ") || m.starts_with("Trees ") {
        log.trees += 1;
        return Some(true);
    }
    if m.starts_with("GPU/") {
        return Some(paths(log, n, m));
    }
    if m.starts_with("Check P2P Type") {
        return Some(match kv(m, "isAllCudaP2p") {
            Some(v) => {
                log.all_cuda_p2p.get_or_insert((v, n));
                if v == 0 {
                    log.all_cuda_p2p = Some((0, n));
                }
                true
            }
            None => false,
        });
    }
    if let Some(rest) = m.strip_prefix("+ NVL[") {
        if let Some(bw) = rest.split(']').next().and_then(|b| b.parse::<f64>().ok()) {
            log.nvl_links.push((bw, n));
            return Some(true);
        }
        return Some(false);
    }
    if m.starts_with("=== System") {
        let f = |k: &str| word_after(m, k).and_then(|v| v.parse::<f64>().ok());
        if let (Some(a), Some(b)) = (f("maxBw"), f("totalBw")) {
            log.system_bw = Some((a, b, n));
            return Some(true);
        }
        return Some(false);
    }
    if let Some(rest) = m.strip_prefix("Init timings - ") {
        let rank = kv(rest, "rank");
        let total = rest
            .split_whitespace()
            .skip_while(|w| *w != "total")
            .nth(1)
            .and_then(|w| w.parse::<f64>().ok());
        if let (Some(r), Some(t)) = (rank, total) {
            log.init_timings.push((r, t, n));
            return Some(true);
        }
        return Some(false);
    }
    // " 0 : GPU/0-60 GPU/0-70": a graph's channel.
    if let Some((a, b)) = m.split_once(" : ") {
        if a.trim().parse::<u32>().is_ok() && b.trim_start().starts_with("GPU/") {
            return Some(true);
        }
    }
    // Error trace "init.cc:867 -> 5" and opCount lines of older versions.
    if m.contains(".cc:") && m.contains(" -> ") {
        return Some(true);
    }
    None
}

/// The integer after the word `key` ("rank 0 nranks 2" → kv(_, "nranks") = 2).
fn kv(m: &str, key: &str) -> Option<u32> {
    let mut w = m.split_whitespace();
    while let Some(x) = w.next() {
        if x == key {
            return w.next()?.parse().ok();
        }
    }
    None
}

fn word_after<'a>(m: &'a str, key: &str) -> Option<&'a str> {
    let mut w = m.split_whitespace();
    while let Some(x) = w.next() {
        if x == key {
            return w.next();
        }
    }
    None
}

/// "00/0 : 0[0] -> 1[1] via P2P/CUMEM" (or "00 : 15[7] -> 0[0] [send] via NET/IB/0"), or the
/// ring order "00/24 : 0 1".
fn channel(log: &mut NcclLog, at: Origin, rest: &str) -> bool {
    let Some((ch, body)) = rest.split_once(" : ") else {
        return false;
    };
    let Ok(channel) = ch.split('/').next().unwrap_or("").trim().parse::<u32>() else {
        return false;
    };
    let Some((peers, via)) = body.split_once(" via ") else {
        // Ring order: "0 1" (2.28), or "0[0] -> 1[1] -> 2[2]" (older versions, every rank
        // with its device: a line cut short is not taken for one).
        let arrows = body.contains("->");
        return body.split_whitespace().all(|w| {
            (arrows && w == "->")
                || match w.split_once('[') {
                    Some((r, d)) => arrows && r.parse::<u32>().is_ok() && d.ends_with(']'),
                    None => !arrows && w.parse::<u32>().is_ok(),
                }
        });
    };
    let rank = |s: &str| s.trim().split('[').next()?.trim().parse::<u32>().ok();
    let Some((a, b)) = peers.split_once("->") else {
        return false;
    };
    let b = b.split_whitespace().next().unwrap_or("");
    let (Some(from), Some(to)) = (rank(a), rank(b)) else {
        return false;
    };
    let via = via.trim();
    let (transport, detail) = via.split_once('/').unwrap_or((via, ""));
    let transport = transport.to_ascii_uppercase();
    if transport.is_empty() {
        return false;
    }
    log.transports.push(TransportLine {
        at,
        channel,
        from,
        to,
        transport,
        detail: detail.to_string(),
    });
    true
}

/// "[0]eth0:192.0.2.2<0> [1]ib0:10.0.0.1<0>" or "eth0:10.1.1.1<0>".
fn ifaces(line: usize, rest: &str) -> Vec<Iface> {
    rest.split_whitespace()
        .filter_map(|w| {
            let w = w.rsplit(']').next().unwrap_or(w);
            let (name, addr) = w.split_once(':')?;
            if name.is_empty() || name.contains('[') {
                return None;
            }
            Some(Iface {
                line,
                name: name.to_string(),
                addr: addr.split('<').next().unwrap_or(addr).to_string(),
            })
        })
        .collect()
}

/// "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1".
fn graph(log: &mut NcclLog, line: usize, m: &str) -> bool {
    let field = |k: &str| {
        m.split(", ")
            .find_map(|s| s.trim().strip_prefix(k).map(|v| v.trim().to_string()))
    };
    let pair = |s: Option<String>| -> Option<(String, String)> {
        let s = s?;
        let (a, b) = s.split_once('/')?;
        Some((a.to_string(), b.to_string()))
    };
    let pattern = field("Pattern ").and_then(|v| v.parse().ok());
    let nch = field("nChannels ").and_then(|v| v.parse().ok());
    let bw = pair(field("bw ")).and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    let ty = pair(field("type "));
    match (pattern, nch, bw, ty) {
        (Some(pattern), Some(nchannels), Some((bw_intra, bw_inter)), Some((ti, te))) => {
            log.graphs.push(Graph {
                line,
                pattern,
                nchannels,
                bw_intra,
                bw_inter,
                type_intra: ti,
                type_inter: te,
            });
            true
        }
        _ => false,
    }
}

fn init(log: &mut NcclLog, at: Origin, m: &str) -> bool {
    let (Some(rank), Some(nranks)) = (kv(m, "rank"), kv(m, "nranks").or(kv(m, "nRanks"))) else {
        return false;
    };
    if m.contains("Init START") {
        return true;
    }
    log.inits.push(Init {
        at,
        rank,
        nranks,
        cuda_dev: kv(m, "cudaDev"),
        busid: word_after(m, "busId").map(str::to_string),
        comm_id: word_after(m, "commId").map(str::to_string),
    });
    true
}

/// "     AllReduce |     8.0/  61.1 |    16.5/ 180.6 | ..." under the current algorithm header.
fn tuner_row(log: &mut NcclLog, algos: &[String], line: usize, func: &str, cells: &str) -> bool {
    const PROTOS: [&str; 3] = ["LL", "LL128", "Simple"];
    let mut any = false;
    for (i, c) in cells
        .split('|')
        .filter(|c| !c.trim().is_empty())
        .enumerate()
    {
        let Some((l, b)) = c.split_once('/') else {
            return false;
        };
        let (Ok(lat), Ok(bw)) = (l.trim().parse::<f64>(), b.trim().parse::<f64>()) else {
            return false;
        };
        let Some(algo) = algos.get(i / 3) else {
            continue;
        };
        log.tuner.push(TunerCell {
            line,
            func: func.to_string(),
            algo: algo.clone(),
            proto: PROTOS[i % 3].to_string(),
            lat_us: lat,
            bw_gbps: bw,
        });
        any = true;
    }
    any
}

/// "AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}".
fn choice(log: &mut NcclLog, line: usize, m: &str) -> bool {
    let Some((func, rest)) = m.split_once(": ") else {
        return false;
    };
    let bytes = rest.split_whitespace().next().and_then(|b| b.parse().ok());
    let algo = word_after(rest, "Algo");
    let proto = word_after(rest, "proto");
    let channels = rest.rsplit("={").next().and_then(|r| {
        let (lo, hi) = r.trim_end_matches('}').split_once("..")?;
        Some(hi.parse::<u32>().ok()? + 1 - lo.parse::<u32>().ok()?.min(hi.parse().ok()?))
    });
    match (bytes, algo, proto, channels) {
        (Some(bytes), Some(a), Some(p), Some(channels)) => {
            log.choices.push(AlgoChoice {
                line,
                func: func.to_string(),
                bytes,
                algo: a.to_string(),
                proto: p.to_string(),
                channels,
            });
            true
        }
        _ => false,
    }
}

/// "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) NVS/0-0 (1/370.8/NVL) ...".
fn paths(log: &mut NcclLog, line: usize, m: &str) -> bool {
    let Some((from, rest)) = m.split_once(" :") else {
        return false;
    };
    let mut w = rest.split_whitespace();
    while let (Some(to), Some(p)) = (w.next(), w.next()) {
        let p = p.trim_start_matches('(').trim_end_matches(')');
        let f: Vec<&str> = p.split('/').collect();
        if f.len() != 3 {
            return false;
        }
        let Ok(bw) = f[1].parse::<f64>() else {
            return false;
        };
        let path = GpuPath {
            line,
            from: from.trim().to_string(),
            to: to.to_string(),
            bw_gbps: bw,
            kind: f[2].to_string(),
        };
        if from.starts_with("GPU/") && to.starts_with("GPU/") && to != from {
            log.gpu_paths.push(path);
        } else if from.starts_with("GPU/") && to.starts_with("NET/") {
            log.net_paths.push(path);
        }
    }
    true
}
