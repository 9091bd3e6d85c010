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
fn sim_two_gpus() {
    let t = two_gpus(478.0);
    let cfg = SimConfig::default();
    for bytes in [8u64, 1 << 20, 1 << 26] {
        let s = nccl_ring(
            CollectiveKind::AllReduce,
            2,
            bytes,
            4,
            &NcclTable::h200x2(CollectiveKind::AllReduce),
        );
        let r = simulate(&t, &s, bytes, &cfg).unwrap();
        eprintln!(
            "{bytes} {:?} ch={} t={:.2} ev={}",
            s.protocol, s.channels, r.time_us, r.events
        );
    }
}
