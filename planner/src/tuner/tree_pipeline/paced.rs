//! LL's first paced iteration through a tree, iteration by iteration: every rank's up and down
//! programs run their ops in order, so where a rank's unpaced iterations are still queued (an
//! interior rank forwards every child's data, a network hop pays its step) the first paced
//! iteration waits behind them, hop by hop, rather than crossing the tree as a second fill
//! right after the leaves' unpaced sends.

use super::{reduce_us, send_us, IterTerms, TreeSend, TreeSends};

/// The rates (GB/s of wire) of one tree's sends, per rank (up, down in order).
pub(super) type TreeRates<'a> = &'a [(f64, Vec<f64>)];

/// When one tree's slowest leaf has received iteration `iters` (µs from the first op), every
/// rank's programs running iterations 1 to `iters` in order, iteration `i`'s sends at
/// `rate(i)`.
pub(super) fn iterations_us<'a>(
    t: &TreeSends,
    x: &IterTerms,
    iters: u32,
    rate: impl Fn(u32) -> TreeRates<'a>,
) -> f64 {
    let n = t.up.len();
    let order = t.order();
    let lands = |s: &TreeSend| s.lat_us + x.hop_us;
    // Each program's clock (when its last op ended) and when each rank's data of the current
    // iteration ended up (up) or landed (down).
    let (mut up_prog, mut down_prog) = (vec![0.0f64; n], vec![0.0f64; n]);
    let (mut up_end, mut landed) = (vec![0.0f64; n], vec![0.0f64; n]);
    let mut last = 0.0f64;
    for i in 1..=iters {
        let r = rate(i);
        for &v in order.iter().rev() {
            let kids = &t.down[v as usize];
            let mut at = up_prog[v as usize];
            for (j, k) in kids.iter().enumerate() {
                let from = t.up[k.to as usize].as_ref().expect("a child sends up");
                at = at.max(up_end[k.to as usize] + lands(from));
                if !(j + 1 == kids.len() && t.up[v as usize].is_some()) {
                    at += reduce_us(x);
                }
            }
            if let Some(s) = &t.up[v as usize] {
                at += send_us(x, s, r[v as usize].0);
            }
            up_prog[v as usize] = at;
            up_end[v as usize] = at;
        }
        landed[t.root as usize] = up_end[t.root as usize];
        last = 0.0;
        for &v in &order {
            let mut at = down_prog[v as usize].max(landed[v as usize]);
            let sends = &t.down[v as usize];
            if sends.is_empty() {
                at += x.step_us;
                last = last.max(at);
            }
            for (s, &g) in sends.iter().zip(&r[v as usize].1) {
                at += send_us(x, s, g);
                landed[s.to as usize] = at + lands(s);
            }
            down_prog[v as usize] = at;
        }
    }
    last
}
