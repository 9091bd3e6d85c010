//! `Schedule::expanded`: the same schedule with every repeated op written out.

use super::ir::*;

impl Schedule {
    /// The schedule with `repeat`, strides and walks applied: every op is plain, `orders` is
    /// empty, and deps are re-pointed at the last copy of the op they named (a dependency waits
    /// for all copies). Executes exactly like the original; used by MSCCL export and tests.
    pub fn expanded(&self) -> Schedule {
        let mut out = self.clone();
        out.orders.clear();
        for rp in &mut out.ranks {
            let src = &self.ranks[rp.rank as usize];
            // Last expanded index of every raw op, per channel.
            let last: Vec<Vec<u32>> = src
                .channels
                .iter()
                .map(|ch| {
                    let mut acc = 0u32;
                    ch.ops
                        .iter()
                        .map(|o| {
                            acc += o.repeat.max(1);
                            acc - 1
                        })
                        .collect()
                })
                .collect();
            for (c, ch) in rp.channels.iter_mut().enumerate() {
                let mut ops = self.expanded_ops(rp.rank, c as u32);
                for op in &mut ops {
                    for d in &mut op.deps {
                        d.index = last[d.channel as usize][d.index as usize];
                    }
                }
                ch.ops = ops;
            }
        }
        out
    }
}
