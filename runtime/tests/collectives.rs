//! Every collective × type × op × (in-place, out-of-place) on 1–8 thread ranks with odd counts,
//! checked element by element against the serial reference (`runtime::reference`).

use planner::schedule::CollectiveKind;
use runtime::check::{collective_for, Case};
use runtime::{Communicator, Config, DataType, ReduceOp};
use std::sync::Arc;

/// Runs `cases` on `n` thread ranks (each rank runs them all in order); returns failures.
fn run_cases(n: u32, cfg: Config, cases: &[Case]) -> Vec<String> {
    let expected: Arc<Vec<Vec<Option<Vec<u8>>>>> =
        Arc::new(cases.iter().map(|c| c.expected(n)).collect());
    let comms = Communicator::init_all(n, cfg).expect("init_all");
    let cases = Arc::new(cases.to_vec());
    let handles: Vec<_> = comms
        .into_iter()
        .map(|mut comm| {
            let (cases, expected) = (cases.clone(), expected.clone());
            std::thread::spawn(move || {
                let r = comm.rank();
                let mut fails = Vec::new();
                for (i, c) in cases.iter().enumerate() {
                    let (send, mut recv) = c.buffers(n, r);
                    if let Err(e) = c.run(&mut comm, send.as_deref(), &mut recv) {
                        fails.push(format!("rank {r} {c:?}: {e}"));
                        break;
                    }
                    let w = c.wrong(r, &recv, expected[i][r as usize].as_deref());
                    if w > 0 {
                        fails.push(format!("rank {r}: {w} wrong elements in {c:?}"));
                    }
                }
                fails
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("rank thread panicked"))
        .collect()
}

fn matrix(n: u32, counts: &[usize], seed: u64) -> Vec<Case> {
    let mut v = Vec::new();
    let mut s = seed;
    for kind in CollectiveKind::ALL {
        let ops: &[ReduceOp] = if kind.reduces() {
            &ReduceOp::ALL
        } else {
            &[ReduceOp::Sum]
        };
        for dtype in DataType::ALL {
            for &op in ops {
                for in_place in [false, true] {
                    for &count in counts {
                        s += 1;
                        let root = (s % n as u64) as u32;
                        v.push(Case {
                            coll: collective_for(kind, n, root),
                            dtype,
                            op,
                            count,
                            in_place,
                            seed: s,
                        });
                    }
                }
            }
        }
    }
    v
}

#[test]
fn full_matrix_on_1_to_8_threads() {
    for n in [1u32, 2, 3, 4, 5, 8] {
        let fails = run_cases(
            n,
            Config::default(),
            &matrix(n, &[1, 7, 37], 1000 * n as u64),
        );
        assert!(
            fails.is_empty(),
            "{} failures on {n} ranks, first: {:#?}",
            fails.len(),
            &fails[..fails.len().min(5)]
        );
    }
}

/// Every buildable algorithm × channel count × protocol, with slots so small that messages are
/// cut into many loop slices: the executor must not depend on the planner's defaults.
#[test]
fn every_algorithm_channels_and_tiny_slots() {
    let mut ran = 0;
    for alg in runtime::plan::ALGORITHMS {
        for (n, channels, slot_bytes, proto) in [
            (2u32, 1u32, 64usize, "Simple"),
            (3, 2, 4096, "LL"),
            (5, 3, 200, "LL128"),
            (4, 1, 1 << 20, "Simple"),
        ] {
            let cfg = Config {
                algorithm: Some(alg.to_string()),
                channels: Some(channels),
                slot_bytes,
                protocol: planner::schedule::Protocol::parse(proto),
                ..Config::default()
            };
            // Keep the cases whose schedule the planner can build for this algorithm.
            let mut probe = Communicator::init_all(n, cfg.clone()).unwrap().remove(0);
            let cases: Vec<Case> = matrix(n, &[1, 29, 301], 77)
                .into_iter()
                .filter(|c| {
                    matches!(
                        c.dtype,
                        DataType::F32 | DataType::Bf16 | DataType::I8 | DataType::F64
                    )
                })
                .filter(|c| probe.schedule_for(&c.coll, 1).is_ok())
                .collect();
            ran += cases.len();
            eprintln!("{alg} n={n} C={channels}: {} cases", cases.len());
            let fails = run_cases(n, cfg, &cases);
            assert!(
                fails.is_empty(),
                "{alg} n={n} C={channels} slot={slot_bytes}: {} failures: {:#?}",
                fails.len(),
                &fails[..fails.len().min(3)]
            );
        }
    }
    assert!(ran > 500, "only {ran} cases could be planned");
}
