//! `Schedule::validate`: structural checks every schedule must pass before anyone executes it.
//! Semantic checks (right result, no deadlock) are the simulator's job (`sim::verify`).//!
//! The parts: this file checks the schedule's shape and drives the rest; `ops` checks each op's
//! fields, chunk bounds and peers; `pairing` checks that every message has a receiver of the
//! same size (exactly, or through fingerprints for very large programs); `cycles` checks that
//! program order plus `deps` is acyclic.

mod cycles;
mod ops;
mod pairing;

use super::ir::*;
use cycles::check_cycles;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error(
        "schedule IR version {0} is not supported (this build reads version {SCHEDULE_IR_VERSION})"
    )]
    Version(u32),
    #[error("{0}")]
    Shape(String),
    #[error("rank {rank} channel {channel} op {index} ({kind:?}): {what}")]
    Op {
        rank: u32,
        channel: u32,
        index: u32,
        kind: OpKind,
        what: String,
    },
    #[error("rank {rank}: dependency cycle through channel {channel} op {index} (program order and `deps` must form no cycle)")]
    Cycle { rank: u32, channel: u32, index: u32 },
    #[error("{0}")]
    Unsupported(String),
    #[error("channel {channel}: rank {from} sends {sends} message(s) to rank {to}, which receives {recvs} from it")]
    Unmatched {
        channel: u32,
        from: u32,
        to: u32,
        sends: u64,
        recvs: u64,
    },
    #[error("channel {channel}: message {seq} from rank {from} to rank {to} sends {send_count} chunk(s) at sub-chunk {send_sub}, but the receive takes {recv_count} at sub-chunk {recv_sub}")]
    SizeMismatch {
        channel: u32,
        from: u32,
        to: u32,
        seq: u64,
        send_count: u32,
        send_sub: u32,
        recv_count: u32,
        recv_sub: u32,
    },
}

/// Expanded programs larger than this get the per-connection message-count check only, through
/// multiset fingerprints (an exact search runs only when they differ).
pub const FULL_PAIRING_LIMIT: u64 = 1 << 22;

impl Schedule {
    /// Checks the structure: shape, op fields, chunk bounds, dependencies, and that every message
    /// has a receiver of the same size. See `docs/schedule-ir.md`.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        if self.version != SCHEDULE_IR_VERSION {
            return Err(ScheduleError::Version(self.version));
        }
        let shape = |s: String| Err(ScheduleError::Shape(s));
        if self.nranks == 0 {
            return shape("nranks must be >= 1".into());
        }
        if self.ranks.len() != self.nranks as usize {
            return shape(format!(
                "nranks is {} but {} rank programs are given",
                self.nranks,
                self.ranks.len()
            ));
        }
        if self.chunks_per_block == 0 {
            return shape("chunks_per_block must be >= 1".into());
        }
        if self.slots == 0 {
            return shape("slots must be >= 1".into());
        }
        if self.loop_elems == Some(0) {
            return shape("loop_elems must be >= 1 when given".into());
        }
        if matches!(
            self.collective.kind,
            CollectiveKind::Broadcast | CollectiveKind::Reduce
        ) {
            match self.collective.root {
                Some(r) if r < self.nranks => {}
                _ => {
                    return shape(format!(
                        "{} needs a root rank below {}",
                        self.collective.kind.name(),
                        self.nranks
                    ))
                }
            }
        }
        for (i, o) in self.orders.iter().enumerate() {
            if o.is_empty() {
                return shape(format!("orders[{i}] is empty"));
            }
            if let Some(r) = o.iter().find(|r| **r >= self.nranks) {
                return shape(format!(
                    "orders[{i}] names rank {r}, not below nranks {}",
                    self.nranks
                ));
            }
        }
        // Largest block each order visits (checked once, not per walking op).
        let order_max: Vec<u32> = self
            .orders
            .iter()
            .map(|o| o.iter().copied().max().unwrap_or(0))
            .collect();
        let mut expanded_total: u64 = 0;
        for (i, rp) in self.ranks.iter().enumerate() {
            if rp.rank != i as u32 {
                return shape(format!("rank program {i} is labelled rank {}", rp.rank));
            }
            if rp.channels.len() != self.channels as usize {
                return shape(format!(
                    "rank {i} has {} channel programs, schedule has {} channels",
                    rp.channels.len(),
                    self.channels
                ));
            }
            for (c, ch) in rp.channels.iter().enumerate() {
                for (j, op) in ch.ops.iter().enumerate() {
                    self.check_op(rp.rank, c as u32, j as u32, op, rp, &order_max)?;
                    expanded_total += op.repeat as u64;
                }
            }
            check_cycles(rp)?;
        }
        if expanded_total > FULL_PAIRING_LIMIT {
            return match self.fingerprint_mismatch() {
                // Something towards this rank is unmatched: find it exactly.
                Some(to) => self.check_pairing(false, Some(to)),
                None => Ok(()),
            };
        }
        self.check_pairing(true, None)
    }
}
