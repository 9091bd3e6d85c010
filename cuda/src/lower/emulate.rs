//! A CPU emulator for lowered plans, so lowering is testable without a GPU: reading every
//! phase's inputs before writing its outputs makes a missing phase boundary a wrong result.

use super::item::{ItemKind, Lowered, Operand};

/// Runs a lowered plan on host memory (`mem[rank][buf]`, elements as f64 or exact integers via
/// `combine`), phase by phase, all reads of a phase before its writes.
pub fn emulate<T: Copy>(
    l: &Lowered,
    mem: &mut [[Vec<T>; 4]],
    combine: impl Fn(T, T) -> T,
    scale: impl Fn(T) -> T,
) {
    for ph in 1..l.nphases() {
        let mut writes: Vec<(Operand, Vec<T>)> = Vec::new();
        for it in l.items.iter().filter(|i| i.phase == ph) {
            let read = |o: &Operand| -> Vec<T> {
                mem[o.rank as usize][o.buf as usize][o.off as usize..(o.off + it.n) as usize]
                    .to_vec()
            };
            let mut acc = read(&it.srcs[0]);
            for s in &it.srcs[1..] {
                let x = read(s);
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = combine(*a, b);
                }
            }
            if it.kind == ItemKind::Scale {
                acc.iter_mut().for_each(|a| *a = scale(*a));
            }
            for d in &it.dsts {
                writes.push((*d, acc.clone()));
            }
        }
        for (d, v) in writes {
            mem[d.rank as usize][d.buf as usize][d.off as usize..d.off as usize + v.len()]
                .copy_from_slice(&v);
        }
    }
}
