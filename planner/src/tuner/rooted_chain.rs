//! A rooted ring call's messages (broadcast from the root, reduce to it) as the engine runs
//! them: a tandem of the chain's senders, each message one step.
//!
//! A sender's op for message k starts once its op for message k − 1 is done and message k
//! landed from the previous sender (its route's latency and the protocol's hop), so the call's
//! time is the longest path through the (message, hop) grid. Where a connection's first
//! `slots` messages cost one thing and the later ones another (LL, whose later messages wait
//! for the receiver's flag-polling copy), that path turns once in each regime: it crosses the
//! unpaced messages at the dearest of the hops up to some hop a, then the paced ones from a on
//! at the dearest hop after it. The first paced message therefore crosses the chain paced from
//! a on, a second fill that a latency plus the bytes at one rate leaves out.

use super::chain_paths::ChainPaths;
use crate::schedule::CollectiveKind;

/// What one message costs a rooted chain's sender beyond its transfer, µs: the protocol's hop
/// (each landing), its step (each op), and at the chain's first sender `root_us` more (the
/// broadcast root's copy to its output, an op of its own in the IR).
#[derive(Clone, Copy, Debug)]
pub struct MessageCosts {
    pub hop_us: f64,
    pub step_us: f64,
    pub root_us: f64,
}

impl ChainPaths {
    /// A broadcast's or reduce's call of `messages` per connection on the first `nc` rings, µs
    /// beyond its launch: each sender's op its step, its hop's `send_us` and its transfer at the
    /// hop's rate (GB/s of wire, [`ChainPaths::hop_gbps`]), `fast(g)` for the first `slots`
    /// messages and `paced(g)` after; the last receive is one step more. `None` where the rings
    /// were not measured.
    pub fn rooted_messages_us(
        &self,
        (kind, root): (CollectiveKind, u32),
        nc: u32,
        (messages, slots): (u64, u32),
        c: MessageCosts,
        fast: impl Fn(f64) -> f64,
        paced: impl Fn(f64) -> f64,
    ) -> Option<f64> {
        let rings = self.used(nc);
        let n = rings.first()?.len();
        let gbps = self.hop_gbps(nc)?;
        let hops = n.saturating_sub(1);
        let mut most = 0.0f64;
        for (r, g) in rings.iter().zip(&gbps) {
            let start = self.chain_start(r, kind, root);
            let at = |i: usize| (start + i) % n;
            let own = |i: usize| {
                let root = if i == 0 { c.root_us } else { 0.0 };
                c.step_us + r[at(i)].send_us + root
            };
            let unpaced: Vec<f64> = (0..hops).map(|i| own(i) + fast(g[at(i)])).collect();
            let later: Vec<f64> = (0..hops).map(|i| own(i) + paced(g[at(i)])).collect();
            let landings: f64 = (0..hops).map(|i| r[at(i)].lat_us + c.hop_us).sum();
            let path = longest_path(&unpaced, &later, messages, slots as u64);
            most = most.max(path + landings + c.step_us);
        }
        Some(most)
    }
}

/// The longest path through a tandem of senders for `messages` messages, where message k costs
/// sender i `first[i]` while k < `slots` and `later[i]` after: from the first sender's first
/// message to the last sender's last, each step one message on or one sender on, each cell
/// its cost (the landings between senders are the same on every path and left out).
fn longest_path(first: &[f64], later: &[f64], messages: u64, slots: u64) -> f64 {
    let h = first.len();
    if h == 0 || messages == 0 {
        return 0.0;
    }
    let unpaced = messages.min(slots.max(1));
    let paced = messages - unpaced;
    let dearest = |v: &[f64]| v.iter().copied().fold(0.0f64, f64::max);
    if paced == 0 {
        return first.iter().sum::<f64>() + (unpaced - 1) as f64 * dearest(first);
    }
    // Suffix sums and maxima of the paced costs: the path from hop a on.
    let mut tail_sum = vec![0.0; h + 1];
    let mut tail_max = vec![0.0f64; h + 1];
    for i in (0..h).rev() {
        tail_sum[i] = tail_sum[i + 1] + later[i];
        tail_max[i] = tail_max[i + 1].max(later[i]);
    }
    let (mut head_sum, mut head_max, mut best) = (0.0, 0.0f64, f64::NEG_INFINITY);
    for a in 0..h {
        head_sum += first[a];
        head_max = head_max.max(first[a]);
        let through = head_sum + (unpaced - 1) as f64 * head_max;
        let after = tail_sum[a] + (paced - 1) as f64 * tail_max[a];
        best = best.max(through + after);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tandem's recursion, message by message.
    fn recursion(first: &[f64], later: &[f64], messages: u64, slots: u64) -> f64 {
        let mut done = vec![0.0f64; first.len()];
        for k in 0..messages {
            let cost = if k < slots { first } else { later };
            let mut landed = 0.0f64;
            for i in 0..done.len() {
                done[i] = done[i].max(landed) + cost[i];
                landed = done[i];
            }
        }
        done.last().copied().unwrap_or(0.0)
    }

    proptest! {
        #[test]
        fn the_longest_path_is_the_tandems_recursion(
            costs in prop::collection::vec((0.1f64..10.0, 0.0f64..10.0), 1..12),
            messages in 1u64..40,
            slots in 1u64..10,
        ) {
            let first: Vec<f64> = costs.iter().map(|c| c.0).collect();
            let later: Vec<f64> = costs.iter().map(|c| c.0 + c.1).collect();
            let want = recursion(&first, &later, messages, slots);
            let got = longest_path(&first, &later, messages, slots);
            prop_assert!((got - want).abs() <= 1e-9 * want.max(1.0), "{got} against {want}");
        }
    }

    /// A slow hop far down the chain does not hide the paced message's crossing of the hops
    /// before it: with 8 unpaced messages at 1 µs, 8 paced at 3 µs and a last hop of 1.5 µs
    /// unpaced, the first paced message still crosses every hop at 3 µs.
    #[test]
    fn the_first_paced_message_crosses_the_chain_paced() {
        let first = [1.0, 1.0, 1.0, 1.5];
        let later = [3.0, 3.0, 3.0, 3.0];
        // Unpaced at the first hop (8 × 1), then paced across all four hops and 7 more at one.
        let want = 8.0 + 4.0 * 3.0 + 7.0 * 3.0;
        assert!((longest_path(&first, &later, 16, 8) - want).abs() < 1e-12);
    }
}
