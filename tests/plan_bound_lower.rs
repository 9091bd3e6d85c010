//! Packed-tree schedules through the CUDA backend's generic lowering, emulated on the CPU
//! (`cuda::lower::emulate`) against `runtime::reference`: what the GPU would compute, checked
//! without a GPU, on exact integer data.

use cuda::lower::{emulate, lower, Buf, LowerParams};
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{synth, LinkKind};
use runtime::reference::{buffer_lens, expected, random_input};
use runtime::types::ReduceOp;
use runtime::Element;

fn run(
    s: &Schedule,
    count: u64,
    in_place: bool,
    op: ReduceOp,
    p: LowerParams,
) -> Result<(), String> {
    let n = s.nranks as usize;
    let coll = &s.collective;
    let l = lower(s, p).map_err(|e| format!("lower: {e}"))?;
    let (il, ol) = buffer_lens(coll, n as u32, count as usize);
    let inputs: Vec<Vec<i64>> = (0..n)
        .map(|r| random_input::<i64>(count, r as u32, il, op))
        .collect();
    let poison = i64::MIN + 12345;
    let ll_len = l
        .items
        .iter()
        .flat_map(|i| {
            i.srcs
                .iter()
                .chain(&i.dsts)
                .filter(|o| o.buf == Buf::Ll)
                .map(move |o| (o.off + i.n) as usize)
        })
        .max()
        .unwrap_or(1);
    let c = count as usize;
    let mut mem: Vec<[Vec<i64>; 4]> = (0..n)
        .map(|r| {
            let mut inp = inputs[r].clone();
            let mut out = vec![poison; ol];
            if in_place {
                match coll.kind {
                    CollectiveKind::AllGather => {
                        out[r * c..(r + 1) * c].copy_from_slice(&inputs[r])
                    }
                    CollectiveKind::ReduceScatter => {}
                    _ => {
                        out = inputs[r].clone();
                        inp = vec![poison; il];
                    }
                }
            }
            let scratch = vec![poison; l.scratch_elems.max(1) as usize];
            [inp, out, scratch, vec![poison; ll_len]]
        })
        .collect();
    emulate(
        &l,
        &mut mem,
        |a, b| a.combine(b, op),
        |a| a.div_ranks(n as u32),
    );
    let want = expected(coll, op, c, &inputs);
    for r in 0..n {
        let Some(w) = &want[r] else { continue };
        let got: &[i64] = if in_place && coll.kind == CollectiveKind::ReduceScatter {
            &mem[r][0][r * c..(r + 1) * c]
        } else {
            &mem[r][1][..w.len()]
        };
        if let Some(i) = got.iter().zip(w).position(|(a, b)| a != b) {
            return Err(format!(
                "rank {r} element {i}: got {} want {}",
                got[i], w[i]
            ));
        }
    }
    Ok(())
}

#[test]
fn packed_schedules_lower_to_the_reference_result() {
    let mut cases = 0;
    for n in [3u32, 4, 6] {
        // A PCIe tree: irregular enough that the trees are not all alike.
        let t = synth::single_host(n, LinkKind::Pcie, 24.0);
        let planner = Planner::new(&t).unwrap();
        for kind in [
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
        ] {
            let coll = Collective::new(kind);
            let s = planner
                .schedule(&coll, &Algorithm::Packed, Protocol::Simple, None)
                .unwrap();
            for count in [7u64, 4099] {
                for in_place in [false, true] {
                    for op in [ReduceOp::Sum, ReduceOp::Max] {
                        for (flatten_loops, elide_copies) in [(false, false), (true, true)] {
                            let p = LowerParams {
                                count,
                                in_place,
                                average: false,
                                scratch_cap: 1 << 14,
                                flatten_loops,
                                elide_copies,
                                ce_push: false,
                                elem_bytes: 4,
                            };
                            run(&s, count, in_place, op, p).unwrap_or_else(|e| {
                                panic!("{} n={n} count={count} in_place={in_place} {op:?} flatten={flatten_loops}: {e}", kind.name())
                            });
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 3 * 3 * 2 * 2 * 2 * 2);
}
