//! The simulator's engine: determinism, link sharing, back-pressure, reduce cost, protocol
//! effects, and the aggregated model against the detailed engine.

use planner::schedule::*;
use sim::reference::*;
use sim::*;

fn cfg(mode: Mode) -> SimConfig {
    SimConfig {
        mode,
        ..SimConfig::default()
    }
}

#[test]
fn reruns_are_bit_identical_and_seed_changes_jitter() {
    let t = rail_cluster(2, 2, 370.8, 50.0);
    let s = cluster_ring_all_reduce(2, 2, 2, Protocol::Simple);
    let mut c = cfg(Mode::Detailed);
    c.jitter = 0.2;
    c.seed = 7;
    let a = simulate(&t, &s, 8 << 20, &c).unwrap();
    let b = simulate(&t, &s, 8 << 20, &c).unwrap();
    assert_eq!(a.time_ps, b.time_ps);
    assert_eq!(a.events, b.events);
    assert_eq!(
        a.links
            .iter()
            .map(|l| l.bytes.to_bits())
            .collect::<Vec<_>>(),
        b.links
            .iter()
            .map(|l| l.bytes.to_bits())
            .collect::<Vec<_>>()
    );
    c.seed = 8;
    let d = simulate(&t, &s, 8 << 20, &c).unwrap();
    assert_ne!(a.time_ps, d.time_ps, "another seed draws other jitter");
}

#[test]
fn time_grows_with_size_and_large_sizes_approach_link_bandwidth() {
    let t = two_gpus(370.8);
    let c = cfg(Mode::Detailed);
    let mut last = 0.0;
    for bytes in [8u64, 4096, 1 << 20, 64 << 20, 1 << 30] {
        let s = nccl_ring(
            CollectiveKind::AllReduce,
            2,
            bytes,
            4,
            &NcclTable::h200x2(CollectiveKind::AllReduce),
        );
        let r = simulate(&t, &s, bytes, &c).unwrap();
        assert!(r.time_us > last, "{bytes}: {} <= {last}", r.time_us);
        last = r.time_us;
    }
    // 1 GiB: each direction carries 1 GiB; the bound is min(link × efficiency, channels × cap).
    let bound = (370.8 * c.sm_link_efficiency).min(24.0 * c.simple.channel_gbps);
    let busbw = (1u64 << 30) as f64 / last / 1e3;
    assert!(
        busbw < bound && busbw > 0.85 * bound,
        "busbw {busbw} vs bound {bound}"
    );
}

#[test]
fn channels_share_a_link() {
    // One channel is capped by its thread block; many channels saturate the link, not more.
    let t = two_gpus(100.0);
    let mut c = cfg(Mode::Detailed);
    c.sm_link_efficiency = 1.0;
    c.simple.channel_gbps = 30.0;
    c.simple.step_us = 0.0;
    c.simple.hop_us = 0.0;
    // Keep the all-gather's local copy of its own block off the critical path.
    c.local_channel_gbps = 1e6;
    let bytes = 256u64 << 20;
    let time = |nch: u32| {
        let mut s = ring_all_gather(2, nch, Protocol::Simple);
        s.loop_elems = Some(128 * 1024 * nch as u64);
        simulate(&t, &s, bytes, &c).unwrap().time_us
    };
    let (t1, t8) = (time(1), time(8));
    // Each rank sends 128 MiB: 1 channel at 30 GB/s, 8 channels share 100 GB/s.
    let ideal1 = (128u64 << 20) as f64 / 30e3;
    let ideal8 = (128u64 << 20) as f64 / 100e3;
    assert!((t1 / ideal1 - 1.0).abs() < 0.15, "{t1} vs {ideal1}");
    assert!((t8 / ideal8 - 1.0).abs() < 0.15, "{t8} vs {ideal8}");
}

/// Rank 0 streams `k` messages to rank 1, which reduces each one slowly before the next.
fn producer_consumer(k: u32, slots: u32) -> Schedule {
    let mut s = ring_all_reduce(2, 1, Protocol::Simple);
    s.chunks_per_block = k;
    s.slots = slots;
    let c = |b: BufferKind, i: u32| ChunkRef::new(b, i, 1);
    s.ranks[0].channels[0].ops = (0..k)
        .map(|i| Op::send(c(BufferKind::Input, i), 1))
        .collect();
    s.ranks[1].channels[0].ops = (0..k)
        .flat_map(|i| {
            [
                Op::recv(c(BufferKind::Output, i), 0),
                Op::reduce(c(BufferKind::Input, i), c(BufferKind::Output, i)),
            ]
        })
        .collect();
    s
}

#[test]
fn finite_slots_create_back_pressure() {
    let t = two_gpus(370.8);
    let mut c = cfg(Mode::Detailed);
    c.trace = true;
    c.local_channel_gbps = 5.0; // a slow consumer
    let sender_done = |slots: u32| {
        let r = simulate(&t, &producer_consumer(16, slots), 16 << 20, &c).unwrap();
        let tr = r.trace.unwrap();
        let end = tr
            .steps
            .iter()
            .filter(|st| st.rank == 0)
            .map(|st| st.end_ps)
            .max()
            .unwrap();
        (end as f64 / 1e6, r.time_us)
    };
    let (deep, total_deep) = sender_done(16);
    let (shallow, total_shallow) = sender_done(1);
    // With 16 slots the sender is done long before the consumer; with one it waits for it.
    assert!(deep < 0.5 * total_deep, "sender {deep} of {total_deep}");
    assert!(
        shallow > 0.8 * total_shallow,
        "sender {shallow} of {total_shallow}"
    );
}

#[test]
fn local_reduce_runs_at_memory_bandwidth() {
    // A single local Reduce of 1 GiB on a GPU with 1000 GB/s memory, no channel cap binding:
    // it reads dst and src and writes dst, 3 passes.
    let t = two_gpus(370.8);
    let mut s = ring_all_reduce(1, 1, Protocol::Simple);
    s.nranks = 1;
    s.ranks.truncate(1);
    s.ranks[0].channels[0].ops = vec![
        Op::copy(
            ChunkRef::new(BufferKind::Input, 0, 1),
            ChunkRef::new(BufferKind::Output, 0, 1),
        ),
        Op::reduce(
            ChunkRef::new(BufferKind::Input, 0, 1),
            ChunkRef::new(BufferKind::Output, 0, 1),
        ),
    ];
    let mut c = cfg(Mode::Detailed);
    c.local_channel_gbps = 1e6;
    c.launch_us = 0.0;
    let r = simulate(&t, &s, 1 << 30, &c).unwrap();
    let mem = 4800.0e3; // two_gpus: 4800 GB/s in B/µs
    let expect = (1u64 << 30) as f64 * (2.0 + 3.0) / mem;
    assert!(
        (r.time_us / expect - 1.0).abs() < 0.01,
        "{} vs {expect}",
        r.time_us
    );
}

#[test]
fn ll_pays_its_wire_factor_on_the_links() {
    let t = two_gpus(370.8);
    let c = cfg(Mode::Detailed);
    let bytes = 64u64 << 20;
    let run = |p: Protocol| {
        let mut s = ring_all_gather(2, 24, p);
        s.loop_elems = Some(8192 * 24);
        simulate(&t, &s, bytes, &c).unwrap()
    };
    let (ll, simple) = (run(Protocol::LL), run(Protocol::Simple));
    let wire = |r: &SimResult| {
        r.links
            .iter()
            .filter(|l| l.name.contains("NvLink"))
            .map(|l| l.bytes)
            .sum::<f64>()
    };
    let ratio = wire(&ll) / wire(&simple);
    assert!((ratio - c.ll.wire_factor).abs() < 0.01, "{ratio}");
}

/// Runs `nch` channels of the rail cluster's ring all-reduce in `proto` (one message per `step`
/// elements a chunk) at `bytes` in both engines, under `c` (a mode's configuration), and checks
/// the aggregated model is within `bound` of the detailed engine.
fn assert_aggregated_matches(
    (nodes, gpus, nch, bytes): (u32, u32, u32, u64),
    nic_gbps: f64,
    proto: Protocol,
    step: u64,
    c: impl Fn(Mode) -> SimConfig,
    bound: f64,
) {
    let t = rail_cluster(nodes, gpus, 370.8, nic_gbps);
    let mut s = cluster_ring_all_reduce(nodes, gpus, nch, proto);
    s.loop_elems = Some(step * s.chunks_per_block as u64);
    let d = simulate(&t, &s, bytes, &c(Mode::Detailed)).unwrap();
    let a = simulate(&t, &s, bytes, &c(Mode::Aggregated)).unwrap();
    let err = a.time_us / d.time_us - 1.0;
    assert!(
        err.abs() < bound,
        "{nodes}x{gpus} {nch}ch {bytes}B {proto:?}: aggregated {} vs detailed {} ({:+.1}%)",
        a.time_us,
        d.time_us,
        err * 100.0
    );
}

#[test]
fn aggregated_matches_detailed_on_small_rings() {
    for case in [
        (1u32, 4u32, 4u32, 64u64 << 20),
        (2, 4, 4, 256 << 20),
        (4, 2, 2, 16 << 20),
    ] {
        assert_aggregated_matches(case, 50.0, Protocol::Simple, 128 * 1024, cfg, 0.10);
    }
}

/// LL rings across hosts: the detailed engine paces a connection's messages after its first
/// `slots` (the aggregated model splits the call in that proportion, not the whole call paced),
/// and a ring's NVLink ranks absorb the network ranks' longer steps and hand-offs (the period is
/// the steps and hand-offs around the ring over its ranks, not the slowest rank's step plus its
/// hand-off).
#[test]
fn aggregated_matches_detailed_on_ll_rings_past_their_slots() {
    for case in [
        (4u32, 2u32, 4u32, 1u64 << 20),
        (4, 2, 4, 64 << 20),
        (2, 4, 2, 8 << 20),
    ] {
        let paced = |m| cfg(m).with_ll_channel_cap(20.4 / case.2 as f64);
        assert_aggregated_matches(case, 25.0, Protocol::LL, 8 * 1024, paced, 0.05);
    }
}

#[test]
fn a_deadlocking_schedule_is_reported_not_hung() {
    let t = two_gpus(370.8);
    let mut s = ring_all_gather(2, 1, Protocol::Simple);
    s.slots = 1;
    for r in 0..2usize {
        let ops = &mut s.ranks[r].channels[0].ops;
        let send = ops[0].clone();
        ops.insert(0, send);
        let recv = ops.iter().find(|o| o.kind == OpKind::Recv).unwrap().clone();
        ops.push(recv);
    }
    match simulate(&t, &s, 1 << 20, &cfg(Mode::Detailed)) {
        Err(SimError::Stuck { .. }) => {}
        other => panic!("expected Stuck, got {other:?}"),
    }
}

#[test]
fn a_topology_with_too_few_gpus_is_an_error() {
    let t = two_gpus(370.8);
    let s = ring_all_reduce(4, 1, Protocol::Simple);
    assert!(matches!(
        simulate(&t, &s, 1024, &cfg(Mode::Detailed)),
        Err(SimError::Net(NetError::NoGpu(2, 2)))
    ));
}
