use planner::schedule::*;
use sim::reference::*;
use sim::*;

#[test]
fn reference_rings_verify() {
    for n in [1u32, 2, 3, 5, 8] {
        for nch in [1u32, 2, 3] {
            for s in [
                ring_all_reduce(n, nch, Protocol::Simple),
                ring_all_gather(n, nch, Protocol::Simple),
                ring_reduce_scatter(n, nch, Protocol::Simple),
            ] {
                let r = verify(&s);
                assert!(
                    r.is_ok(),
                    "n={n} nch={nch} {:?}: {}",
                    s.collective.kind,
                    r.unwrap_err()
                );
            }
        }
    }
}

#[test]
fn nccl_ring_on_two_gpus_picks_nccls_protocols_and_grows_with_size() {
    let t = two_gpus(370.8);
    let cfg = SimConfig::default();
    let table = NcclTable::h200x2(CollectiveKind::AllReduce);
    let mut last = 0.0;
    for (bytes, proto) in [
        (8u64, Protocol::LL),
        (512 << 10, Protocol::LL),
        (2 << 20, Protocol::Simple),
        (64 << 20, Protocol::Simple),
    ] {
        let s = nccl_ring(CollectiveKind::AllReduce, 2, bytes, 4, &table);
        assert_eq!(s.protocol, proto, "{bytes} B");
        let r = simulate(&t, &s, bytes, &cfg).unwrap();
        assert!(r.time_us > last, "{bytes} B: {} after {last}", r.time_us);
        last = r.time_us;
    }
}
