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
    /// first `nc` rings, µs, and beyond the transfers its bandwidth term bills (a rank's own
    /// sends' transfers), a connection holding `slots` messages and `steps(ring, position, j)`
    /// the steps of the `j`-th message a ring position sends (the last, `j` = the call's sends,
    /// only received) and each step's transfer, µs. A rank's message starts once its previous
    /// one ended (its steps one after another, each `step_us`, the hop's `send_us` and its
    /// transfer), once its successor has consumed the message `slots` back and the credit
    /// returned (the route's latency and `hop_us`), and ends a step after its predecessor's
    /// last step landed: a hand-off shorter than a message's other steps hides behind them. The
    /// last receive is its steps more. `None` past [`CREDIT_RANKS`], for broadcast and reduce,
    /// or where the rings were not measured.
    pub fn ring_credits_us(
        &self,
        kind: CollectiveKind,
        nc: u32,
        (hop_us, step_us): (f64, f64),
        (steps, slots): (impl Fn(usize, usize, usize) -> (u32, f64), u32),
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
        let mut billed = 0.0f64;
        for (ri, r) in rings.iter().enumerate() {
            // msg[j][i]: rank i's message j, its steps, one step's cost and its transfer (the
            // last op only receives: no network step, no transfer of its own).
            let msg: Vec<Vec<(f64, f64, f64)>> = (0..=k)
                .map(|j| {
                    (0..n)
                        .map(|i| {
                            let (sub, x) = steps(ri, i, j);
                            let c = match j == k {
                                true => step_us,
                                false => step_us + r[i].send_us + x,
                            };
                            (sub.max(1) as f64, c, x)
                        })
                        .collect()
                })
                .collect();
            let hand_off: Vec<f64> = r.iter().map(|h| h.lat_us + hop_us).collect();
            for i in 0..n {
                let sent: f64 = msg[..k].iter().map(|row| row[i].0 * row[i].2).sum();
                billed = billed.max(sent);
            }
            // ends[j][i]: when rank i's message j ends.
            let first = msg[0].iter().map(|&(sub, c, _)| sub * c).collect();
            let mut ends: Vec<Vec<f64>> = vec![first];
            for j in 1..=k {
                let prev = &ends[j - 1];
                let row: Vec<f64> = (0..n)
                    .map(|i| {
                        let p = (i + n - 1) % n;
                        let (sub, c, _) = msg[j][i];
                        let own = prev[i] + sub * c;
                        // Its i-th step after the predecessor's i-th landed: the last one a
                        // step after the predecessor's last, the first `sub − 1` of its own
                        // steps after the predecessor's first.
                        let lead = (sub - 1.0) * (c - msg[j - 1][p].1).max(0.0);
                        let data = prev[p] + hand_off[p] + c + lead;
                        let credit = match (j == k, j.checked_sub(slots)) {
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
        Some(most - billed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks, one channel, an all-reduce of two four-step messages a rank: steps of 0.5 µs
    /// fixed and 0.9 of transfer, hand-offs of `hop` µs. The transfers (2 × 4 × 0.9 = 7.2 µs)
    /// are the bandwidth term's; what is left is the path.
    fn two_rank_all_reduce(hop: f64) -> f64 {
        let paths = ChainPaths::of(&[vec![0, 1]], &[], |_, _| (0.0, vec![(0, 370.0)], 0.0));
        let steps = |_: usize, _: usize, _: usize| (4, 0.9);
        let kind = CollectiveKind::AllReduce;
        paths
            .ring_credits_us(kind, 1, (hop, 0.5), (steps, 2))
            .unwrap()
    }

    #[test]
    fn a_hand_off_shorter_than_a_messages_other_steps_hides_behind_them() {
        // Each rank's eight send steps run back to back (8 × 1.4 = 11.2 µs): the 3.4 µs
        // hand-off of the first message lands before the second is due. The last message lands
        // 3.4 µs after the predecessor's last send and is received in one more 0.5 µs step:
        // 11.2 + 3.4 + 0.5 = 15.1, less the 7.2 of transfers.
        assert!((two_rank_all_reduce(3.4) - 7.9).abs() < 1e-9);
        // A 10 µs hand-off does not hide: the second message's last step follows the first's
        // landing (5.6 + 10 + 1.4 = 17), the receive the second's (17 + 10 + 0.5).
        assert!((two_rank_all_reduce(10.0) - (27.5 - 7.2)).abs() < 1e-9);
    }
}
