//! Reference schedules and machines the simulator is calibrated and tested with, independent of
//! the planner's choices:
//!
//! - ring all-reduce / all-gather / reduce-scatter in the IR's compact form (what NCCL runs:
//!   `docs/sim.md` lists the step order), with chunk `j` of channel `c` at index `j·channels + c`
//!   so one `repeat` with stride `-channels` walks the ring;
//! - [`nccl_ring`]: NCCL 2.28's own choice for a size on a machine — protocol from its tuning
//!   table, channel count from its thread thresholds, chunk and loop sizes from its chunking rules
//!   (`planner::tuner::nccl`: `src/enqueue.cc`, `topoGetAlgoInfo`
//!   and `calcCollChunking`) — used for `docs/fidelity.md`;
//! - small hand-built machines (two NVLinked GPUs; rail-optimised clusters) for tests and the
//!   speed benchmark.

use planner::schedule::*;
use planner::topology::*;
use planner::tuner::nccl;

fn chunk(j: u32, c: u32, nch: u32) -> u32 {
    j * nch + c
}

fn empty(
    kind: CollectiveKind,
    n: u32,
    nch: u32,
    cpb: u32,
    proto: Protocol,
    slots: u32,
) -> Schedule {
    Schedule {
        version: SCHEDULE_IR_VERSION,
        collective: Collective::new(kind),
        algorithm: Algorithm::Ring,
        protocol: proto,
        nranks: n,
        channels: nch,
        chunks_per_block: cpb,
        scratch_blocks: 0,
        slots,
        loop_elems: None,
        orders: Vec::new(),
        ranks: (0..n)
            .map(|r| RankProgram {
                rank: r,
                channels: (0..nch)
                    .map(|_| ChannelProgram { ops: Vec::new() })
                    .collect(),
            })
            .collect(),
    }
}

/// Ring all-reduce over ranks `0..n` in order, `nch` channels, `cpb = n·nch`.
pub fn ring_all_reduce(n: u32, nch: u32, proto: Protocol) -> Schedule {
    let mut s = empty(CollectiveKind::AllReduce, n, nch, n * nch, proto, 8);
    let m = |x: i64| x.rem_euclid(n as i64) as u32;
    let stride = -(nch as i32);
    for r in 0..n {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let p = r as i64;
        for c in 0..nch {
            let inp = |j: u32| ChunkRef::new(BufferKind::Input, chunk(j, c, nch), 1);
            let out = |j: u32| ChunkRef::new(BufferKind::Output, chunk(j, c, nch), 1);
            let ops = &mut s.ranks[r as usize].channels[c as usize].ops;
            if n == 1 {
                ops.push(Op::copy(inp(0), out(0)));
                continue;
            }
            ops.push(Op::send(inp(m(p - 1)), next));
            if n > 2 {
                ops.push(Op::recv_reduce_send(inp(m(p - 2)), prev, next).repeated(n - 2, stride));
            }
            ops.push(Op::recv_reduce_copy_send(inp(r), out(r), prev, next));
            if n > 2 {
                ops.push(Op::recv_copy_send(out(m(p - 1)), prev, next).repeated(n - 2, stride));
            }
            ops.push(Op::recv(out(m(p + 1)), prev));
        }
    }
    s
}

/// Ring all-gather: rank `r`'s block is output block `r`; `cpb = nch`.
pub fn ring_all_gather(n: u32, nch: u32, proto: Protocol) -> Schedule {
    let mut s = empty(CollectiveKind::AllGather, n, nch, nch, proto, 8);
    let m = |x: i64| x.rem_euclid(n as i64) as u32;
    let stride = -(nch as i32);
    for r in 0..n {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let p = r as i64;
        for c in 0..nch {
            let out = |b: u32| ChunkRef::new(BufferKind::Output, chunk(b, c, nch), 1);
            let inp = ChunkRef::new(BufferKind::Input, c, 1);
            let ops = &mut s.ranks[r as usize].channels[c as usize].ops;
            if n > 1 {
                ops.push(Op::send(inp, next));
            }
            if n > 2 {
                ops.push(Op::recv_copy_send(out(m(p - 1)), prev, next).repeated(n - 2, stride));
            }
            if n > 1 {
                ops.push(Op::recv(out(m(p + 1)), prev));
            }
            // NCCL fuses this copy into the first send; the IR has no fused op, so it runs last.
            ops.push(Op::copy(inp, out(r)));
        }
    }
    s
}

/// Ring reduce-scatter: rank `r` ends with block `r` reduced; `cpb = nch`.
pub fn ring_reduce_scatter(n: u32, nch: u32, proto: Protocol) -> Schedule {
    let mut s = empty(CollectiveKind::ReduceScatter, n, nch, nch, proto, 8);
    let m = |x: i64| x.rem_euclid(n as i64) as u32;
    let stride = -(nch as i32);
    for r in 0..n {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let p = r as i64;
        for c in 0..nch {
            let inp = |b: u32| ChunkRef::new(BufferKind::Input, chunk(b, c, nch), 1);
            let out = ChunkRef::new(BufferKind::Output, c, 1);
            let ops = &mut s.ranks[r as usize].channels[c as usize].ops;
            if n == 1 {
                ops.push(Op::copy(inp(0), out));
                continue;
            }
            ops.push(Op::send(inp(m(p - 1)), next));
            if n > 2 {
                ops.push(Op::recv_reduce_send(inp(m(p - 2)), prev, next).repeated(n - 2, stride));
            }
            ops.push(Op::recv_reduce_copy(inp(r), out, prev));
        }
    }
    s
}

/// NCCL's tuning table for one collective on one machine: (latency µs, bandwidth GB/s) for
/// Ring LL, LL128, Simple, as NCCL prints it (`NCCL_DEBUG_SUBSYS=TUNING`).
#[derive(Clone, Debug)]
pub struct NcclTable {
    pub ring: [(f64, f64); 3],
    /// Collective channels NCCL runs with (comm->nChannels).
    pub channels: u32,
}

impl NcclTable {
    /// NCCL's ring table as [`crate::nccl::Model`] derives it (NCCL's own formulas on the
    /// model's graphs), with the channels it runs.
    pub fn from_model(m: &crate::nccl::Model, kind: CollectiveKind) -> Self {
        let t = m.table(kind);
        let ring = [0, 1, 2].map(|i| t[1][i].unwrap_or((f64::INFINITY, 1e-9)));
        Self {
            ring,
            channels: m.comm_channels,
        }
    }

    /// NCCL 2.28's table on two H200s joined by 18 NVLinks ([`two_gpus`]), derived: it equals
    /// what NCCL printed on the lent machine (a test checks every entry against
    /// tests/data/measurements/h200x2/README.md).
    pub fn h200x2(kind: CollectiveKind) -> Self {
        let t = two_gpus(370.8);
        match planner::plan::Planner::new(&t) {
            Ok(p) => Self::from_model(&crate::nccl::Model::new(&t, &p), kind),
            Err(_) => Self {
                ring: [(f64::INFINITY, 1e-9); 3],
                channels: 1,
            },
        }
    }
}

/// NCCL's ring schedule for `bytes` (nccl-tests size) of `kind` on `n` ranks: returns the
/// schedule (protocol, channel count and loop size as NCCL would pick them).
pub fn nccl_ring(kind: CollectiveKind, n: u32, bytes: u64, elem: u32, t: &NcclTable) -> Schedule {
    // Protocol: smallest lat + bytes / bw (time in µs with bw in GB/s).
    let mut best = (f64::INFINITY, Protocol::Simple);
    for (i, p) in Protocol::ALL.into_iter().enumerate() {
        let (lat, bw) = t.ring[i];
        let time = lat + bytes as f64 / (1000.0 * bw);
        if time < best.0 {
            best = (time, p);
        }
    }
    let proto = best.1;
    let (nc, _) = nccl::channels_for(&Algorithm::Ring, proto, bytes, t.channels, n, f64::MAX);
    let chunk_elems = nccl::chunk_bytes(&Algorithm::Ring, kind, proto) / elem as u64;
    let mut s = match kind {
        CollectiveKind::AllReduce => ring_all_reduce(n, nc, proto),
        CollectiveKind::AllGather => ring_all_gather(n, nc, proto),
        _ => ring_reduce_scatter(n, nc, proto),
    };
    // Elements per block per loop: every chunk of the block once.
    s.loop_elems = Some(chunk_elems * s.chunks_per_block as u64);
    s.slots = nccl::slots(&Algorithm::Ring, kind, proto);
    s
}

fn gpu(rank: u32, dev: u32, mem_bw: f64) -> NodeKind {
    NodeKind::Gpu(Gpu {
        rank,
        dev,
        busid: format!("0000:{:02x}:00.0", dev + 1),
        sm: 90,
        gdr: true,
        mem_bw_gbps: mem_bw,
        model: Some("h200-sxm".into()),
    })
}

fn nvlink(bw: f64) -> Link {
    Link {
        kind: LinkKind::NvLink,
        bw_gbps: bw,
        lat_us: 0.0,
        count: 18,
    }
}

/// Two H200s joined by 18 NVLinks (`nvlink_gbps` per direction; 478 nominal).
pub fn two_gpus(nvlink_gbps: f64) -> Topology {
    let mut t = Topology::new();
    let a = t.add_node(Some(0), gpu(0, 0, 4800.0));
    let b = t.add_node(Some(0), gpu(1, 1, 4800.0));
    t.add_duplex(a, b, nvlink(nvlink_gbps));
    t.validate().expect("valid by construction");
    t
}

/// `nodes` hosts of `gpus` GPUs on an NVSwitch (`nvlink_gbps` per GPU and direction), each GPU
/// with its own NIC (`nic_gbps`) on rail switch `dev` (rail-optimised fabric), rails joined by
/// nothing else (rings stay on their rail).
pub fn rail_cluster(nodes: u32, gpus: u32, nvlink_gbps: f64, nic_gbps: f64) -> Topology {
    let mut t = Topology::new();
    let rails: Vec<NodeId> = (0..gpus)
        .map(|i| t.add_node(None, NodeKind::NetSwitch { level: 0, index: i }))
        .collect();
    for h in 0..nodes {
        let sw = t.add_node(Some(h), NodeKind::NvSwitch);
        for d in 0..gpus {
            let g = t.add_node(Some(h), gpu(h * gpus + d, d, 4800.0));
            t.add_duplex(g, sw, nvlink(nvlink_gbps));
            let nic = t.add_node(
                Some(h),
                NodeKind::Nic(Nic {
                    busid: Some(format!("0000:{:02x}:00.0", 0x80 + d)),
                    name: format!("mlx5_{d}"),
                    dev: d,
                    speed_gbps: nic_gbps,
                    port: 1,
                    guid: (h as u64) << 8 | d as u64,
                    max_conn: 65536,
                    gdr: true,
                    coll: false,
                    latency_us: 0.0,
                }),
            );
            t.add_duplex(
                g,
                nic,
                Link {
                    kind: LinkKind::Pcie,
                    bw_gbps: 64.0,
                    lat_us: 0.0,
                    count: 1,
                },
            );
            t.add_duplex(
                nic,
                rails[d as usize],
                Link {
                    kind: LinkKind::Network,
                    bw_gbps: nic_gbps,
                    lat_us: 1.0,
                    count: 1,
                },
            );
        }
    }
    t.validate().expect("valid by construction");
    t
}

/// A ring all-reduce over a `rail_cluster`, channel `c` using rail `c % gpus` to leave each
/// node: the ring visits the node's GPUs starting after GPU `c % gpus` and leaves from it.
pub fn cluster_ring_all_reduce(nodes: u32, gpus: u32, nch: u32, proto: Protocol) -> Schedule {
    let n = nodes * gpus;
    let mut s = ring_all_reduce(n, nch, proto);
    // Rank order along channel c's ring: within each node start at local (c+1)%g, end at c%g.
    for c in 0..nch {
        let rail = c % gpus;
        let mut order = Vec::with_capacity(n as usize);
        for h in 0..nodes {
            for k in 1..=gpus {
                order.push(h * gpus + (rail + k) % gpus);
            }
        }
        let mut pos = vec![0u32; n as usize];
        for (i, &r) in order.iter().enumerate() {
            pos[r as usize] = i as u32;
        }
        for r in 0..n {
            let p = pos[r as usize];
            let next = order[((p + 1) % n) as usize];
            let prev = order[((p + n - 1) % n) as usize];
            let ops = &mut s.ranks[r as usize].channels[c as usize].ops;
            // Rebuild this program with ring position p instead of rank r.
            let pp = p as i64;
            let m = |x: i64| x.rem_euclid(n as i64) as u32;
            let stride = -(nch as i32);
            let inp = |j: u32| ChunkRef::new(BufferKind::Input, chunk(j, c, nch), 1);
            let out = |j: u32| ChunkRef::new(BufferKind::Output, chunk(j, c, nch), 1);
            ops.clear();
            ops.push(Op::send(inp(m(pp - 1)), next));
            if n > 2 {
                ops.push(Op::recv_reduce_send(inp(m(pp - 2)), prev, next).repeated(n - 2, stride));
            }
            ops.push(Op::recv_reduce_copy_send(inp(p), out(p), prev, next));
            if n > 2 {
                ops.push(Op::recv_copy_send(out(m(pp - 1)), prev, next).repeated(n - 2, stride));
            }
            ops.push(Op::recv(out(m(pp + 1)), prev));
        }
    }
    s
}
