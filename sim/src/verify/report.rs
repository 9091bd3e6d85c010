//! What verification reports: op sites, waits, the error type and the success report.

use super::*;

/// Which op: `(rank, channel, compact index, repeat copy, loop iteration)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OpSite {
    pub rank: u32,
    pub channel: u32,
    /// Index in the channel's op list as written in the schedule (before `repeat` expansion).
    pub op: u32,
    /// Which copy of a repeated op (0 for ops without `repeat`).
    pub copy: u32,
    /// Loop iteration (0 unless `loop_elems` pipelines the program).
    pub iter: u32,
    pub kind: OpKind,
}

impl fmt::Display for OpSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} channel {} op {} ({:?}",
            self.rank, self.channel, self.op, self.kind
        )?;
        if self.copy > 0 {
            write!(f, ", repeat copy {}", self.copy)?;
        }
        if self.iter > 0 {
            write!(f, ", loop iteration {}", self.iter)?;
        }
        write!(f, ")")
    }
}

/// Why a blocked op cannot run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Wait {
    /// No message has arrived from `from` on the op's channel.
    Message { from: u32 },
    /// All `slots` of the connection to `to` hold unread messages.
    Slot { to: u32, unread: u32 },
    /// A dependency on another channel of the same rank has not completed.
    Dep { channel: u32, op: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Blocked {
    pub site: OpSite,
    pub wait: Wait,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.wait {
            Wait::Message { from } => {
                write!(f, "{} waits for a message from rank {from}", self.site)
            }
            Wait::Slot { to, unread } => write!(
                f,
                "{} waits for a free slot to rank {to} ({unread} unread)",
                self.site
            ),
            Wait::Dep { channel, op } => {
                write!(f, "{} waits for channel {channel} op {op}", self.site)
            }
        }
    }
}

fn fmt_cycle(v: &[Blocked]) -> String {
    v.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("invalid schedule: {0}")]
    Invalid(#[from] ScheduleError),
    #[error("deadlock: {} op(s) blocked; wait cycle: {}", .blocked, fmt_cycle(.cycle))]
    Deadlock {
        /// Number of (rank, channel) programs that cannot finish.
        blocked: usize,
        /// A wait-for cycle (or chain ending at a finished program) through the blocked ops.
        cycle: Vec<Blocked>,
    },
    #[error("{site}: reads {buffer:?} chunk {chunk}, which holds no data yet")]
    Uninitialized {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
    },
    #[error("{site}: reduction on {buffer:?} chunk {chunk} counts rank(s) {overlap:?} twice")]
    DoubleCount {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
        overlap: Vec<u32>,
    },
    #[error("{site}: reduces {buffer:?} chunk {chunk} (piece {a}) with piece {b}: different data")]
    Misaligned {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
        a: u64,
        b: u64,
    },
    #[error("rank {rank}: output chunk {chunk} should be {expected} but is {got}")]
    WrongResult {
        rank: u32,
        chunk: u32,
        expected: String,
        got: String,
    },
    #[error("race on rank {rank} {buffer:?} chunk {chunk}: {first} and {second} touch it unordered (add a dep)")]
    Race {
        rank: u32,
        buffer: BufferKind,
        chunk: u32,
        first: OpSite,
        second: OpSite,
    },
    #[error("send/recv collective: rank {0} is the target of more than one sender")]
    BadCollective(u32),
    #[error("schedule too large to verify symbolically: {0} chunk states or ops (limit {1})")]
    TooLarge(u64, u64),
}

/// What a successful verification saw.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    pub collective: CollectiveKind,
    pub algorithm: String,
    pub nranks: u32,
    pub channels: u32,
    /// Loop iterations executed symbolically (2 when the program is pipelined, else 1).
    pub iterations: u32,
    pub ops_executed: u64,
    pub messages: u64,
    /// Most unread messages seen on one connection (<= slots).
    pub max_slots_used: u32,
    /// Whether unordered cross-channel buffer accesses were checked (see [`RACE_CHECK_LIMIT`]);
    /// false also when no chunk is shared between channels of a rank (no race is possible).
    pub race_checked: bool,
}
