//! A lowered plan checked against `runtime::reference` on the CPU emulator: what the GPU would
//! compute, on exact integer data, without a GPU. One check for every test that lowers.

use super::emulate::emulate;
use super::item::{Buf, Lowered};
use planner::schedule::{CollectiveKind, Schedule};
use runtime::reference::{buffer_lens, expected, random_input};
use runtime::types::ReduceOp;
use runtime::Element;

/// The first element of a rank's output that differs from the reference's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub rank: usize,
    pub index: usize,
    pub got: i64,
    pub want: i64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rank {} element {}: got {} want {}",
            self.rank, self.index, self.got, self.want
        )
    }
}

/// Emulates `l` (a lowering of `s` for `count` elements per rank, `in_place` as NCCL places
/// it) on the reference's random i64 inputs for `seed`, and compares every rank's output.
pub fn check_against_reference(
    s: &Schedule,
    l: &Lowered,
    count: u64,
    in_place: bool,
    op: ReduceOp,
    seed: u64,
) -> Result<(), Mismatch> {
    let n = s.nranks as usize;
    let coll = &s.collective;
    let (il, ol) = buffer_lens(coll, n as u32, count as usize);
    let inputs: Vec<Vec<i64>> = (0..n)
        .map(|r| random_input::<i64>(seed, r as u32, il, op))
        .collect();
    let mut mem = emulated_memory(l, coll.kind, count as usize, in_place, &inputs, ol);
    emulate(
        l,
        &mut mem,
        |a, b| a.combine(b, op),
        |a| a.div_ranks(n as u32),
    );
    let c = count as usize;
    let want = expected(coll, op, c, &inputs);
    for r in 0..n {
        let Some(w) = &want[r] else { continue };
        let got: &[i64] = if in_place && coll.kind == CollectiveKind::ReduceScatter {
            &mem[r][0][r * c..(r + 1) * c]
        } else {
            &mem[r][1][..w.len()]
        };
        if let Some(i) = got.iter().zip(w).position(|(a, b)| a != b) {
            return Err(Mismatch {
                rank: r,
                index: i,
                got: got[i],
                want: w[i],
            });
        }
    }
    Ok(())
}

/// Every rank's buffers (input, output, scratch, LL): its inputs where the call finds them (in
/// place as NCCL places them) and a poison everywhere else.
fn emulated_memory(
    l: &Lowered,
    kind: CollectiveKind,
    c: usize,
    in_place: bool,
    inputs: &[Vec<i64>],
    ol: usize,
) -> Vec<[Vec<i64>; 4]> {
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
    (0..inputs.len())
        .map(|r| {
            let mut inp = inputs[r].clone();
            let mut out = vec![poison; ol];
            if in_place {
                match kind {
                    CollectiveKind::AllGather => {
                        out[r * c..(r + 1) * c].copy_from_slice(&inputs[r])
                    }
                    CollectiveKind::ReduceScatter => {}
                    _ => {
                        out = inputs[r].clone();
                        inp = vec![poison; inputs[r].len()];
                    }
                }
            }
            let scratch = vec![poison; l.scratch_elems.max(1) as usize];
            [inp, out, scratch, vec![poison; ll_len]]
        })
        .collect()
}
