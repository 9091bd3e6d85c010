//! Point-to-point messages as the engine runs them: every rank sends its messages one after
//! another (program order), each a flow over its route's links, and flows share the links
//! max-min fairly. Ranks are not held in step: a rank whose message ran over a fast link starts
//! its next one early, where it may share a link with another rank's message that a lock-step
//! schedule would keep apart (on a PCIe host, an all-to-all's messages into one GPU).

/// The time the ranks' messages take, every message of one unit of volume: `msgs[r]` is rank
/// r's messages in order, each its links (indices into `caps`, the links' rates); no flow runs
/// faster than `flow_cap`. The result is in units of volume over units of rate.
pub fn sequential_sends_time(msgs: &[Vec<Vec<usize>>], caps: &[f64], flow_cap: f64) -> f64 {
    let n = msgs.len();
    let mut next = vec![0usize; n];
    let mut left = vec![1.0f64; n];
    let mut t = 0.0;
    loop {
        let active: Vec<usize> = (0..n).filter(|&r| next[r] < msgs[r].len()).collect();
        if active.is_empty() {
            return t;
        }
        let flows: Vec<&[usize]> = active.iter().map(|&r| &msgs[r][next[r]][..]).collect();
        let rates = max_min(&flows, caps, flow_cap);
        let dt = active
            .iter()
            .zip(&rates)
            .map(|(&r, &x)| left[r] / x.max(1e-12))
            .fold(f64::INFINITY, f64::min);
        t += dt;
        for (&r, &x) in active.iter().zip(&rates) {
            left[r] -= x * dt;
            if left[r] <= 1e-9 {
                next[r] += 1;
                left[r] = 1.0;
            }
        }
    }
}

/// Max-min fair rates of `flows` (each its links) over links of rates `caps`, none above
/// `flow_cap` (progressive filling: the most constrained link fixes its flows' share first).
fn max_min(flows: &[&[usize]], caps: &[f64], flow_cap: f64) -> Vec<f64> {
    let mut rate = vec![None; flows.len()];
    let mut residual = caps.to_vec();
    loop {
        let mut count = vec![0u32; caps.len()];
        for (f, links) in flows.iter().enumerate() {
            if rate[f].is_none() {
                for &l in links.iter() {
                    count[l] += 1;
                }
            }
        }
        let share = |l: usize| residual[l] / count[l] as f64;
        let s = (0..caps.len())
            .filter(|&l| count[l] > 0)
            .map(share)
            .fold(flow_cap, f64::min);
        let mut fixed = Vec::new();
        for (f, links) in flows.iter().enumerate() {
            let bound = links.iter().any(|&l| share(l) <= s * (1.0 + 1e-12));
            if rate[f].is_none() && (bound || flow_cap <= s) {
                fixed.push(f);
            }
        }
        if fixed.is_empty() {
            return rate.into_iter().map(|r| r.unwrap_or(s)).collect();
        }
        for f in fixed {
            rate[f] = Some(s);
            for &l in flows[f] {
                residual[l] -= s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_out_of_step_share_the_link_a_lock_step_keeps_apart() {
        // Links 0 and 1 (rate 1) into two receivers; link 2 a fast one (rate 1000). Rank 0
        // sends over the fast link, then into receiver 0; rank 1 into receiver 0, then into
        // receiver 1. In lock step each step takes 1; here rank 0's second message shares
        // receiver 0's link with rank 1's first: both at 1/2 until rank 1's ends at about 2,
        // then rank 0's rest alone.
        let msgs = vec![vec![vec![2], vec![0]], vec![vec![0], vec![1]]];
        let t = sequential_sends_time(&msgs, &[1.0, 1.0, 1000.0], f64::INFINITY);
        assert!((t - 3.0).abs() < 0.01, "{t}");
        // A flow cap below the links' share paces every message.
        let one = vec![vec![vec![0]], vec![vec![1]]];
        assert!((sequential_sends_time(&one, &[1.0, 1.0], 0.5) - 2.0).abs() < 1e-9);
    }
}
