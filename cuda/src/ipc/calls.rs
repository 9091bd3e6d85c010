//! Ranks that disagree on a call get an error, never wrong data and never a wait until the
//! timeout. Before a rank enqueues a collective, it writes what it calls ([`Desc`]: kind,
//! count, type, op, root) into its board, a shared-memory file every rank of the communicator
//! maps, and compares it with what each peer wrote for the same call; before it enqueues a
//! group's messages, it does the same for each message to or from a peer (its size), matched
//! as NCCL matches them (the k-th send from a to b is b's k-th receive from a).
//!
//! Each rank writes its entry and then reads the peer's, both sequentially consistent, so of
//! two ranks making the same call at least one sees the other's entry (if neither did, each
//! read came before the other's write, which came before its own read). A rank that finds a
//! difference enqueues nothing, writes the verdict (who, which call, both versions) on its
//! board, flags every rank's board with it and sets every rank's GPU abort word, which lives
//! on the board (registered with CUDA, `crate::abort`): a peer that already enqueued the call
//! has kernels waiting for data that never comes, and they leave at their next abort check.
//! That peer learns the verdict from its board at its next call or when its async error is
//! polled. No call of a rank that saw the difference ran, and a rank that did not see it
//! waits for data of that call, which no peer sends: nothing completes with mixed data.
//!
//! Entries live in rings (collectives: [`COLL_RING`] entries; messages: [`MSG_RING`] per peer
//! and direction). A rank overwrites an entry only once every reader has compared it (their
//! `done` counters), so a rank whose host runs that many calls ahead of a peer's waits for it;
//! nothing else ever waits. The check costs a few atomic stores and one load per peer.

use crate::direct::p2p::Transfer;
use crate::ipc::shared::{at, Exchange};
use crate::CudaError;
use planner::schedule::CollectiveKind;
use runtime::types::{DataType, ReduceOp};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

const MAXR: usize = crate::layout::MAX_RANKS;

/// What a rank calls: a collective, or one message to or from a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Desc {
    Coll {
        kind: CollectiveKind,
        count: u64,
        dtype: DataType,
        op: ReduceOp,
        root: u32,
    },
    Send {
        peer: u32,
        bytes: u64,
    },
    Recv {
        peer: u32,
        bytes: u64,
    },
}

fn index<T: PartialEq>(all: &[T], v: &T) -> u64 {
    all.iter().position(|x| x == v).unwrap_or(0) as u64
}

impl Desc {
    /// Its two words on a board (the low byte of the second says which kind of entry).
    pub fn encode(&self) -> [u64; 2] {
        match *self {
            Desc::Coll {
                kind,
                count,
                dtype,
                op,
                root,
            } => [
                count,
                1 | index(&CollectiveKind::ALL, &kind) << 8
                    | index(&DataType::ALL, &dtype) << 16
                    | index(&ReduceOp::ALL, &op) << 24
                    | u64::from(root) << 32,
            ],
            Desc::Send { peer, bytes } => [bytes, 2 | u64::from(peer) << 32],
            Desc::Recv { peer, bytes } => [bytes, 3 | u64::from(peer) << 32],
        }
    }

    /// The inverse of [`Desc::encode`]; `None` for words no rank writes.
    pub fn decode(w: [u64; 2]) -> Option<Desc> {
        let at = |shift: u32| ((w[1] >> shift) & 0xff) as usize;
        let peer = (w[1] >> 32) as u32;
        Some(match w[1] & 0xff {
            1 => Desc::Coll {
                kind: *CollectiveKind::ALL.get(at(8))?,
                count: w[0],
                dtype: *DataType::ALL.get(at(16))?,
                op: *ReduceOp::ALL.get(at(24))?,
                root: peer,
            },
            2 => Desc::Send { peer, bytes: w[0] },
            3 => Desc::Recv { peer, bytes: w[0] },
            _ => return None,
        })
    }

    /// The fields in which `self` and `other` (the same call on two ranks) differ; empty when
    /// they agree. The op counts only where the call reduces, the root only where it has one.
    pub fn differs(&self, other: &Desc) -> Vec<&'static str> {
        match (*self, *other) {
            (
                Desc::Coll {
                    kind,
                    count,
                    dtype,
                    op,
                    root,
                },
                Desc::Coll {
                    kind: k2,
                    count: c2,
                    dtype: d2,
                    op: o2,
                    root: r2,
                },
            ) => {
                use CollectiveKind::*;
                let reduces = kind.reduces();
                let rooted = matches!(kind, Broadcast | Reduce);
                [
                    ("collective", kind != k2),
                    ("count", count != c2),
                    ("type", dtype != d2),
                    ("op", kind == k2 && reduces && op != o2),
                    ("root", kind == k2 && rooted && root != r2),
                ]
                .into_iter()
                .filter_map(|(name, d)| d.then_some(name))
                .collect()
            }
            (Desc::Send { bytes: a, .. }, Desc::Recv { bytes: b, .. })
            | (Desc::Recv { bytes: a, .. }, Desc::Send { bytes: b, .. }) => {
                if a == b {
                    Vec::new()
                } else {
                    vec!["size"]
                }
            }
            _ => vec!["call"],
        }
    }

    /// "all-reduce of 1024 x float sum", "sends 64 bytes to rank 1".
    pub fn describe(&self) -> String {
        match *self {
            Desc::Coll {
                kind,
                count,
                dtype,
                op,
                root,
            } => {
                use CollectiveKind::*;
                let mut s = format!("{} of {count} x {}", kind.name(), dtype.nccl_name());
                if kind.reduces() {
                    s += &format!(" {}", op.name());
                }
                if matches!(kind, Broadcast | Reduce) {
                    s += &format!(" root {root}");
                }
                s
            }
            Desc::Send { peer, bytes } => format!("sends {bytes} bytes to rank {peer}"),
            Desc::Recv { peer, bytes } => format!("receives {bytes} bytes from rank {peer}"),
        }
    }
}

/// Two ranks' versions of one call, found by `found_by`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "rank {found_by} found that the ranks disagree on {call}: rank {} {}, rank {} {} ({} differs)",
    self.mine.0, Self::verb(&self.mine.1), self.theirs.0, Self::verb(&self.theirs.1),
    self.mine.1.differs(&self.theirs.1).join(", ")
)]
pub struct Mismatch {
    pub found_by: u32,
    /// "device collective #3", "message #0 from rank 0 to rank 1".
    pub call: String,
    pub mine: (u32, Desc),
    pub theirs: (u32, Desc),
}

impl Mismatch {
    fn verb(d: &Desc) -> String {
        match d {
            Desc::Coll { .. } => format!("calls {}", d.describe()),
            _ => d.describe(),
        }
    }

    /// Its words on the verdict area of a board (`which`: the call's number).
    fn encode(&self, which: u64, msg: bool) -> [u64; VERDICT_WORDS] {
        let (a, b) = (self.mine.1.encode(), self.theirs.1.encode());
        [
            2,
            which << 1 | u64::from(msg),
            u64::from(self.found_by),
            u64::from(self.mine.0) | u64::from(self.theirs.0) << 32,
            a[0],
            a[1],
            b[0],
            b[1],
        ]
    }

    fn decode(w: [u64; VERDICT_WORDS]) -> Option<Mismatch> {
        let mine = Desc::decode([w[4], w[5]])?;
        let theirs = Desc::decode([w[6], w[7]])?;
        let (ra, rb) = (w[3] as u32, (w[3] >> 32) as u32);
        Some(Mismatch {
            found_by: w[2] as u32,
            call: call_name(w[1] >> 1, w[1] & 1 == 1, &mine, ra, rb),
            mine: (ra, mine),
            theirs: (rb, theirs),
        })
    }
}

fn call_name(which: u64, msg: bool, mine: &Desc, me: u32, peer: u32) -> String {
    if !msg {
        return format!("device collective #{which}");
    }
    let (from, to) = match mine {
        Desc::Send { .. } => (me, peer),
        _ => (peer, me),
    };
    format!("message #{which} from rank {from} to rank {to}")
}

/// Why a board could not be made or a call could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CallsError {
    #[error(transparent)]
    Board(#[from] BoardError),
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    #[error(
        "rank {me} has run {ahead} device calls past what rank {peer} has checked, for longer \
         than TOPOPLAN_TIMEOUT ({timeout:?}): rank {peer} makes other calls, or none"
    )]
    Behind {
        me: u32,
        peer: u32,
        ahead: usize,
        timeout: Duration,
    },
    #[error("the communicator was aborted")]
    Aborted,
}

impl From<CallsError> for CudaError {
    fn from(e: CallsError) -> CudaError {
        match e {
            CallsError::Mismatch(m) => CudaError::Mismatch(m),
            CallsError::Aborted => CudaError::Aborted,
            e => CudaError::Input(e.to_string()),
        }
    }
}

/// One rank's side of the check: every rank's board, and how many calls of each kind it made.
pub struct Calls {
    rank: u32,
    boards: Vec<Board>,
    coll: u64,
    sent: [u64; MAXR],
    recvd: [u64; MAXR],
    timeout: Duration,
}

impl Calls {
    /// `boards`: every rank's, in rank order (this rank's its own); `timeout`: how long a rank
    /// a whole ring ahead of a peer waits for it.
    pub fn new(rank: u32, boards: Vec<Board>, timeout: Duration) -> Calls {
        Calls {
            rank,
            boards,
            coll: 0,
            sent: [0; MAXR],
            recvd: [0; MAXR],
            timeout,
        }
    }

    /// This rank's board, whose header page holds its GPU abort word.
    pub(crate) fn board(&self) -> &Board {
        self.me()
    }

    fn me(&self) -> &Board {
        &self.boards[self.rank as usize]
    }

    fn peers(&self) -> impl Iterator<Item = (u32, &Board)> {
        let me = self.rank;
        (0..self.boards.len() as u32)
            .filter(move |&p| p != me)
            .map(|p| (p, &self.boards[p as usize]))
    }

    /// The verdict a rank flagged this one with, if any.
    pub fn verdict(&self) -> Option<Mismatch> {
        let by = self.me().w(FLAGGED_W).load(SeqCst);
        let b = self.boards.get(by.checked_sub(1)? as usize)?;
        let w = std::array::from_fn(|i| b.w(VERDICT_W + i).load(SeqCst));
        Mismatch::decode(w)
    }

    /// Checks a collective `d` against every peer's version of it.
    pub fn collective(&mut self, d: &Desc) -> Result<(), CallsError> {
        self.flagged()?;
        let n = self.coll;
        for (p, _) in self.peers() {
            self.room(p, n, COLL_RING, |b| b.w(COLL_DONE_W))?;
        }
        self.me().put(COLL_W, COLL_RING, n, d.encode());
        for (p, b) in self.peers() {
            if let Some(theirs) = b.get(COLL_W, COLL_RING, n).and_then(Desc::decode) {
                if !d.differs(&theirs).is_empty() {
                    return Err(self.condemn(n, false, *d, p, theirs).into());
                }
            }
        }
        self.coll = n + 1;
        self.me().w(COLL_DONE_W).store(n + 1, SeqCst);
        Ok(())
    }

    /// Checks one message of a group (`Desc::Send` or `Desc::Recv`, a peer other than this
    /// rank) against the peer's matching receive or send.
    pub fn message(&mut self, d: &Desc) -> Result<(), CallsError> {
        self.flagged()?;
        let me = self.rank as usize;
        let (peer, send) = match *d {
            Desc::Send { peer, .. } => (peer, true),
            Desc::Recv { peer, .. } => (peer, false),
            Desc::Coll { .. } => return self.collective(d),
        };
        let p = peer as usize;
        let n = if send { self.sent[p] } else { self.recvd[p] };
        // The peer's counter of the other direction says how far it compared ours.
        let (mine, theirs, their_done) = if send {
            (SEND_W, RECV_W, RECV_DONE_W)
        } else {
            (RECV_W, SEND_W, SEND_DONE_W)
        };
        self.room(peer, n, MSG_RING, |b| b.w(their_done + me))?;
        self.me()
            .put(mine + p * MSG_RING * ENTRY, MSG_RING, n, d.encode());
        let other = self.boards[p]
            .get(theirs + me * MSG_RING * ENTRY, MSG_RING, n)
            .and_then(Desc::decode);
        if let Some(other) = other {
            if !d.differs(&other).is_empty() {
                return Err(self.condemn(n, true, *d, peer, other).into());
            }
        }
        let done = if send { SEND_DONE_W } else { RECV_DONE_W };
        self.me().w(done + p).store(n + 1, SeqCst);
        if send {
            self.sent[p] = n + 1;
        } else {
            self.recvd[p] = n + 1;
        }
        Ok(())
    }

    /// Checks a group's messages to and from peers (zero-byte ones included: a rank that
    /// skips one would leave its peer waiting), sends and receives interleaved in issue order
    /// so that two ranks a ring of messages ahead of each other never wait for each other.
    pub fn messages(&mut self, sends: &[Transfer], recvs: &[Transfer]) -> Result<(), CallsError> {
        let me = self.rank;
        for k in 0..sends.len().max(recvs.len()) {
            if let Some(t) = sends.get(k).filter(|t| t.peer != me) {
                self.message(&Desc::Send {
                    peer: t.peer,
                    bytes: t.bytes,
                })?;
            }
            if let Some(t) = recvs.get(k).filter(|t| t.peer != me) {
                self.message(&Desc::Recv {
                    peer: t.peer,
                    bytes: t.bytes,
                })?;
            }
        }
        Ok(())
    }

    fn flagged(&self) -> Result<(), CallsError> {
        match self.verdict() {
            Some(m) => Err(m.into()),
            None => Ok(()),
        }
    }

    /// Waits until `peer` has compared entry `n - ring` (its `done` counter, read by `done`),
    /// so that entry `n` may overwrite it.
    fn room(
        &self,
        peer: u32,
        n: u64,
        ring: usize,
        done: impl Fn(&Board) -> &AtomicU64,
    ) -> Result<(), CallsError> {
        let Some(need) = (n + 1).checked_sub(ring as u64) else {
            return Ok(());
        };
        let w = done(&self.boards[peer as usize]);
        let start = Instant::now();
        let mut spins = 0u32;
        while w.load(SeqCst) < need {
            self.flagged()?;
            if self.me().w(ABORT_W).load(Relaxed) != 0 {
                return Err(CallsError::Aborted);
            }
            if start.elapsed() > self.timeout {
                return Err(CallsError::Behind {
                    me: self.rank,
                    peer,
                    ahead: ring,
                    timeout: self.timeout,
                });
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Ok(())
    }

    /// Records the verdict on this rank's board, flags every rank with it and sets every
    /// rank's GPU abort word; returns it.
    fn condemn(&self, n: u64, msg: bool, mine: Desc, peer: u32, theirs: Desc) -> Mismatch {
        let m = Mismatch {
            found_by: self.rank,
            call: call_name(n, msg, &mine, self.rank, peer),
            mine: (self.rank, mine),
            theirs: (peer, theirs),
        };
        // Written once: a rank stops at its first verdict.
        for (i, v) in m.encode(n, msg).into_iter().enumerate() {
            self.me().w(VERDICT_W + i).store(v, SeqCst);
        }
        for b in &self.boards {
            let flag = u64::from(self.rank) + 1;
            let _ = b.w(FLAGGED_W).compare_exchange(0, flag, SeqCst, SeqCst);
            b.w(ABORT_W).store(1, SeqCst);
        }
        m
    }
}

mod board;
use board::*;
pub use board::{board_path, Board, BoardError, COLL_RING, MSG_RING};

/// How long a rank a whole ring of calls ahead of a peer waits for it: `TOPOPLAN_TIMEOUT`
/// (unbounded where that is off).
pub fn wait_timeout() -> Duration {
    match crate::abort::timeout_ns() {
        0 => Duration::MAX,
        t => Duration::from_nanos(t),
    }
}

/// Sets up the check at the communicator's opening, between the IPC records' exchange (whose
/// table, the same on every rank, names the boards: `table_key`) and the first launch:
/// creates this rank's board, all-gathers that it exists, maps every rank's, all-gathers
/// whether that worked, and removes the files (the mappings stay; a killed rank leaves none).
/// `None` on every rank when some rank has no board (no shared-memory directory): calls are
/// then not compared.
pub fn setup(
    rank: u32,
    nranks: u32,
    table: &[Vec<u8>],
    timeout: Duration,
    exchange: &mut Exchange<'_>,
) -> Result<Option<Calls>, CudaError> {
    let dir = params::SHM_DIR
        .path()
        .ok()
        .flatten()
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
    let key = format!("{:016x}", runtime::config::fnv1a(&table.concat()));
    let own = Board::create(&dir, &key, rank);
    let all_ok = |ok: bool, ex: &mut Exchange<'_>| -> Result<bool, CudaError> {
        let got = ex(&[u8::from(ok)]).map_err(at(rank, "exchanging the call boards"))?;
        Ok(got.iter().all(|w| w.first() == Some(&1)))
    };
    let made = all_ok(own.is_ok(), exchange)?;
    let boards: Option<Vec<Board>> = match own {
        Ok(own) if made => {
            let mut own = Some(own);
            (0..nranks)
                .map(|p| match p == rank {
                    true => own.take().ok_or(()),
                    false => Board::open(&dir, &key, p).map_err(|_| ()),
                })
                .collect::<Result<_, ()>>()
                .ok()
        }
        _ => None,
    };
    let mapped = all_ok(boards.is_some(), exchange)?;
    let _ = std::fs::remove_file(board_path(&dir, &key, rank));
    Ok(boards
        .filter(|_| mapped)
        .map(|b| Calls::new(rank, b, timeout)))
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
