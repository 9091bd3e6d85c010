//! A small ring call whose connections hold few messages as the engine runs it: Simple's ring
//! pattern cuts every message into NCCL's chunk of four steps, and a connection's eight slots
//! hold two such messages, so a sender's message j waits for the receiver to have consumed its
//! message j − 2 (the receiver's whole next op) and for the credit to come back.

use super::chain_paths::ChainPaths;
use crate::schedule::CollectiveKind;

/// Most ranks whose ring calls are run message by message with their credits (n · 2(n − 1)
/// cells a ring); past them the path leaves the credits out (`ChainPaths::ring_us`).
pub const CREDIT_RANKS: usize = 256;

impl ChainPaths {
    /// What a small all-reduce, all-gather or reduce-scatter costs beyond its launch on the
    /// first `nc` rings, µs, a connection holding `slots` messages and `steps(ring, position,
    /// j)` the steps of the `j`-th message a ring position sends (the last, `j` = the call's
    /// sends, only received): a rank's message starts once its previous one ended (its steps one
    /// after another, each `step_us` and the hop's `send_us`), once its successor has consumed
    /// the message `slots` back and the credit returned (the route's latency and `hop_us`), and
    /// ends a step after its predecessor's last step landed; the last receive is its steps
    /// more. `None` past [`CREDIT_RANKS`], for broadcast and reduce, or where the rings were not
    /// measured.
    pub fn ring_credits_us(
        &self,
        kind: CollectiveKind,
        nc: u32,
        (hop_us, step_us): (f64, f64),
        (steps, slots): (impl Fn(usize, usize, usize) -> u32, u32),
    ) -> Option<f64> {
        let k = match kind {
            CollectiveKind::AllReduce => 2,
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => 1,
            _ => return None,
        };
        let rings = self.used(nc);
        let n = rings.first()?.len();
        if !(2..=CREDIT_RANKS).contains(&n) {
            return None;
        }
        let slots = slots.max(1) as usize;
        let k = k * (n - 1);
        let mut most = 0.0f64;
        for (ri, r) in rings.iter().enumerate() {
            let sub = |i: usize, j: usize| steps(ri, i, j).max(1) as f64;
            let step: Vec<f64> = r.iter().map(|h| step_us + h.send_us).collect();
            let hand_off: Vec<f64> = r.iter().map(|h| h.lat_us + hop_us).collect();
            // ends[j][i]: when rank i's message j ends.
            let first = (0..n).map(|i| sub(i, 0) * step[i]).collect();
            let mut ends: Vec<Vec<f64>> = vec![first];
            for j in 1..=k {
                let prev = &ends[j - 1];
                let last = j == k;
                let row: Vec<f64> = (0..n)
                    .map(|i| {
                        let p = (i + n - 1) % n;
                        let sub = sub(i, j);
                        // The last op only receives: its steps cost no network step.
                        let c = if last { step_us } else { step[i] };
                        let own = prev[i] + sub * c;
                        // Its i-th step after the predecessor's i-th landed: the last one a
                        // step after the predecessor's last, the first `sub − 1` of its own
                        // steps after the predecessor's first.
                        let lead = (sub - 1.0) * (c - step[p]).max(0.0);
                        let data = prev[p] + hand_off[p] + c + lead;
                        let credit = match (last, j.checked_sub(slots)) {
                            (false, Some(m)) => ends[m + 1][(i + 1) % n] + hand_off[i] + sub * c,
                            _ => f64::NEG_INFINITY,
                        };
                        own.max(data).max(credit)
                    })
                    .collect();
                ends.push(row);
            }
            most = most.max(ends[k].iter().copied().fold(0.0, f64::max));
        }
        Some(most)
    }
}
