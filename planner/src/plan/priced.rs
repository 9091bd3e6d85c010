//! Choosing by a second price. The tuner's closed form prices every candidate cheaply; the
//! simulator's engine prices the schedule itself. Where they disagree the engine is the better
//! judge, so a caller that can run it passes a [`Pricer`] and the planner chooses by its price
//! wherever it answers, and by the tuner's elsewhere (sizes or machines where the engine would
//! take too long).

use super::{Candidate, Choice, Planner};
use crate::schedule::Collective;
use crate::tuner::Filter;

/// Prices one candidate at `bytes` (nccl-tests size), in µs; `None` where it cannot (too large
/// to simulate affordably, or a schedule it does not run).
pub trait Pricer {
    fn price(&self, coll: &Collective, candidate: &Candidate, bytes: u64) -> Option<f64>;
}

/// How far above the tuner's best a candidate may be priced and still be priced again.
pub const PRICED_SPREAD: f64 = 3.0;

/// A choice and how it was priced.
#[derive(Clone, Debug, PartialEq)]
pub struct PricedChoice {
    /// The choice; its `est_us` is the price it was chosen by.
    pub choice: Choice,
    /// The tuner's closed-form estimate of the same candidate (µs).
    pub tuner_us: f64,
    /// Whether `choice.est_us` is the pricer's (else the tuner's).
    pub by_pricer: bool,
}

impl Planner {
    /// The candidate `pricer` prices fastest among those the filter allows; a candidate it
    /// cannot price keeps the tuner's estimate. Candidates the tuner prices above
    /// [`PRICED_SPREAD`] times its best are not priced again: the engine and the tuner disagree
    /// by less than that on the shipped machines.
    pub fn choose_priced(
        &self,
        coll: &Collective,
        bytes: u64,
        f: &Filter,
        pricer: &dyn Pricer,
    ) -> Option<PricedChoice> {
        let mut best: Option<(f64, bool, Candidate)> = None;
        let cands = self.candidates_filtered(coll, bytes, f);
        let cutoff = cands.first()?.time_us * PRICED_SPREAD;
        for c in cands {
            let priced = (c.time_us <= cutoff)
                .then(|| pricer.price(coll, &c, bytes))
                .flatten();
            let (t, by) = match priced {
                Some(t) => (t, true),
                None => (c.time_us, false),
            };
            if best.as_ref().is_none_or(|b| t < b.0) {
                best = Some((t, by, c));
            }
        }
        let (t, by_pricer, c) = best?;
        let algbw = bytes as f64 / 1000.0 / t;
        Some(PricedChoice {
            tuner_us: c.time_us,
            by_pricer,
            choice: Choice {
                algorithm: c.algorithm,
                protocol: c.protocol,
                channels: c.channels,
                est_us: t,
                algbw_gbps: algbw,
                busbw_gbps: algbw * coll.kind.busbw_factor(self.model.nranks),
            },
        })
    }
}
