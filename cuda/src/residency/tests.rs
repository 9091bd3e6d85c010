//! The residency rule on its own, and the grids the paths derive from a rank's SM share.

use super::*;

const H200_SMS: u32 = 132;

fn demand(path: Path, wanted: u32, per_sm: u32) -> Demand {
    Demand {
        path,
        wanted_ctas: wanted,
        min_ctas: path.min_ctas(),
        ctas_per_sm: per_sm,
    }
}

#[test]
fn one_rank_keeps_the_paths_own_cap() {
    let g = |wanted, per_sm| rank_grid(0, 1, H200_SMS, demand(Path::DirectPull, wanted, per_sm));
    assert_eq!(g(64, 2), Ok(64));
    assert_eq!(g(400, 2), Ok(264), "two 256-thread pull CTAs per SM");
    assert_eq!(g(400, 1), Ok(132));
    assert_eq!(g(0, 1), Ok(1), "never below the least grid");
    assert_eq!(rank_sms(0, 1, H200_SMS), Ok(132));
}

#[test]
fn ranks_sharing_a_gpu_split_its_sms() {
    for (ranks, share) in [(2, 66), (3, 44), (4, 33), (6, 22), (8, 16)] {
        assert_eq!(rank_sms(0, ranks, H200_SMS), Ok(share), "{ranks} ranks");
        // Asked for more than the share, each rank gets the share; pull's 2 per SM is ignored.
        let got = rank_grid(0, ranks, H200_SMS, demand(Path::DirectPull, 500, 2)).unwrap();
        assert_eq!(got, share);
        assert!(got * ranks <= H200_SMS);
        // Asked for less, each gets what it asked.
        assert_eq!(
            rank_grid(0, ranks, H200_SMS, demand(Path::Exec, 5, 1)),
            Ok(5)
        );
    }
}

#[test]
fn the_sum_of_shared_grids_never_exceeds_the_sms() {
    for sms in 1..=160u32 {
        for ranks in 2..=8u32 {
            for path in [
                Path::Exec,
                Path::DirectSimple,
                Path::DirectLl,
                Path::DirectPull,
            ] {
                for wanted in [0, 1, 2, 7, 64, 256] {
                    match rank_grid(3, ranks, sms, demand(path, wanted, 2)) {
                        Ok(g) => {
                            assert!(g * ranks <= sms, "{sms} SMs {ranks} ranks {path}: {g}");
                            assert!(g >= path.min_ctas());
                        }
                        Err(e) => {
                            assert!(sms / ranks < path.min_ctas(), "{e}");
                            assert_eq!(e.sms_needed, path.min_ctas() * ranks);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_rank_count_that_cannot_be_resident_is_refused_by_name() {
    // 8 ranks on a 12-SM GPU: one SM each; the direct Simple path needs a sender and a receiver.
    let e = check(1, 8, 12, Path::DirectSimple).unwrap_err();
    assert_eq!(
        e,
        ResidencyError {
            device: 1,
            ranks: 8,
            path: Path::DirectSimple,
            min_ctas: 2,
            sms_needed: 16,
            sms_available: 12,
        }
    );
    let msg = e.to_string();
    for part in [
        "8 ranks share GPU 1",
        "direct Simple/LL128",
        "16 SMs",
        "has 12",
    ] {
        assert!(msg.contains(part), "{msg}");
    }
    // The same GPU runs LL and the generic lowering (one CTA per rank).
    assert_eq!(check(1, 8, 12, Path::DirectLl), Ok(()));
    assert_eq!(check(1, 8, 12, Path::Exec), Ok(()));
    // More ranks than SMs: nothing runs.
    let e = rank_sms(0, 8, 7).unwrap_err();
    assert_eq!((e.ranks, e.sms_needed, e.sms_available), (8, 8, 7));
    // The copy-engine pair waits in no kernel: any rank count.
    assert_eq!(check(0, 8, 1, Path::CePair), Ok(()));
    // Every path fits 8 ranks on an H200.
    for path in [
        Path::Exec,
        Path::DirectSimple,
        Path::DirectLl,
        Path::DirectPull,
        Path::CopyEngine,
        Path::CePair,
        Path::Hybrid,
    ] {
        assert_eq!(check(0, 8, H200_SMS, path), Ok(()), "{path}");
    }
}

#[test]
fn ranks_per_device_counts_repeats() {
    assert_eq!(
        ranks_per_device(&[0, 0, 1, 0]),
        vec![(0, 3), (0, 3), (1, 1), (0, 3)]
    );
    assert_eq!(ranks_per_device(&[0, 1]), vec![(0, 1), (1, 1)]);
}

/// The direct path sizes its grids from `min_sm`; given a rank's share it must stay within it
/// (a sender and a receiver per stream while both fit, LL one set of CTAs, pull mode given
/// `path_min_sm(share, 2)`), at every size, so that the shares' sum is what runs.
#[test]
fn the_direct_grids_stay_within_a_ranks_share() {
    use crate::direct::{grid, pull, receivers};
    for share in 2..=H200_SMS {
        for bytes in [0u64, 1, 4096, 65536, 1 << 20, 3 << 20, 64 << 20, 1 << 30] {
            let s = grid(bytes, false, share, None);
            assert!(
                s + receivers(s, share) <= share,
                "Simple at {bytes} B, share {share}: {s} senders + {} receivers",
                receivers(s, share)
            );
            assert!(grid(bytes, true, share, None) <= share, "LL {bytes} B");
            // A fixed grid (TOPOPLAN_DIRECT_CTAS) is clamped to the share too.
            let s = grid(bytes, false, share, Some(500));
            assert!(s + receivers(s, share) <= share);
            let p = pull::grid(bytes, path_min_sm(share, 512 / pull::block()));
            assert!(p <= share, "pull {bytes} B, share {share}: {p}");
        }
    }
    // A share of one SM cannot hold a sender and a receiver: the group refuses that case.
    let s = grid(1 << 20, false, 1, None);
    assert!(s + receivers(s, 1) > 1);
    assert!(check(0, 132, H200_SMS, Path::DirectSimple).is_err());
}

#[test]
fn sharing_a_gpu_needs_every_hardware_queue() {
    assert_eq!(hardware_queues(None), 8);
    assert_eq!(hardware_queues(Some("32")), 32);
    assert_eq!(hardware_queues(Some(" 64 ")), 32);
    assert_eq!(hardware_queues(Some("0")), 1);
    assert_eq!(hardware_queues(Some("many")), 8);
    assert_eq!(
        check_queues(0, 1, None),
        Ok(()),
        "one rank per GPU: any queues"
    );
    assert_eq!(check_queues(0, 4, Some("32")), Ok(()));
    let e = check_queues(2, 4, Some("1")).unwrap_err();
    assert_eq!((e.device, e.ranks, e.queues), (2, 4, 1));
    let msg = check_queues(0, 8, None).unwrap_err().to_string();
    for part in [
        "8 ranks share GPU 0",
        "gives 8 hardware",
        "CUDA_DEVICE_MAX_CONNECTIONS=32",
    ] {
        assert!(msg.contains(part), "{msg}");
    }
}

#[test]
fn shared_gpus_route_the_copy_engine_paths_elsewhere() {
    let never = || -> Result<bool, ()> { panic!("capture state asked where it does not matter") };
    let yes = || Ok::<_, ()>(true);
    let no = || Ok::<_, ()>(false);
    // Ranks sharing a GPU: no copy engines, whatever the capture state (not even asked).
    assert_eq!(
        route(Path::Hybrid, true, never),
        Ok(Route::Run(Path::DirectSimple))
    );
    assert_eq!(route(Path::CePair, true, never), Ok(Route::OneShot));
    assert_eq!(
        route(Path::CopyEngine, true, never),
        Ok(Route::Refused(Path::CopyEngine))
    );
    // One rank per GPU: the copy engines run, except under graph capture.
    assert_eq!(route(Path::Hybrid, false, no), Ok(Route::Run(Path::Hybrid)));
    assert_eq!(
        route(Path::Hybrid, false, yes),
        Ok(Route::Run(Path::DirectSimple))
    );
    assert_eq!(route(Path::CePair, false, no), Ok(Route::Run(Path::CePair)));
    assert_eq!(route(Path::CePair, false, yes), Ok(Route::OneShot));
    assert_eq!(
        route(Path::CopyEngine, false, never),
        Ok(Route::Run(Path::CopyEngine))
    );
    // The SM paths run as asked everywhere.
    for path in [
        Path::Exec,
        Path::DirectSimple,
        Path::DirectLl,
        Path::DirectPull,
    ] {
        for shared in [false, true] {
            assert_eq!(route(path, shared, never), Ok(Route::Run(path)));
        }
    }
    // A failed capture query is the caller's error.
    assert_eq!(
        route(Path::CePair, false, || Err::<bool, _>("query")),
        Err("query")
    );
}
