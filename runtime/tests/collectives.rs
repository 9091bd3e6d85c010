//! Every collective × type × op × (in-place, out-of-place) on 1–8 thread ranks with odd counts,
//! checked element by element against the serial reference (`runtime::reference`).

use planner::schedule::CollectiveKind;
use runtime::check::{collective_for, Case};
use runtime::{Communicator, Config, DataType, ReduceOp};
use std::sync::Arc;

/// Runs `cases` on `n` thread ranks (each rank runs them all in order); returns failures.
fn run_cases(n: u32, cfg: Config, cases: &[Case]) -> Vec<String> {
    let expected: Arc<Vec<Vec<Option<Vec<u8>>>>> = Arc::new(cases.iter().map(|c| c.expected(n)).collect());
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
    handles.into_iter().flat_map(|h| h.join().expect("rank thread panicked")).collect()
}

fn matrix(n: u32, counts: &[usize], seed: u64) -> Vec<Case> {
    let mut v = Vec::new();
    let mut s = seed;
    for kind in CollectiveKind::ALL {
        let ops: &[ReduceOp] = if kind.reduces() { &ReduceOp::ALL } else { &[ReduceOp::Sum] };
        for dtype in DataType::ALL {
            for &op in ops {
                for in_place in [false, true] {
                    for &count in counts {
                        s += 1;
                        let root = (s % n as u64) as u32;
                        v.push(Case { coll: collective_for(kind, n, root), dtype, op, count, in_place, seed: s });
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
        let fails = run_cases(n, Config::default(), &matrix(n, &[1, 7, 37], 1000 * n as u64));
        assert!(fails.is_empty(), "{} failures on {n} ranks, first: {:#?}", fails.len(), &fails[..fails.len().min(5)]);
    }
}
