//! The executor: runs one rank's part of a schedule (and grouped point-to-point transfers) on
//! the CPU, over any [`Transport`].
//!
//! One thread drives all of a rank's work. Every channel of a schedule (and every p2p transfer
//! of a group) is a [`Task`] state machine that advances as far as it can without blocking; the
//! [`drive`] loop sweeps all tasks and, when none can move, waits with back-off, checking the
//! abort flag, the timeout and the liveness of the peers it waits on. This is how channels run
//! "concurrently" without a thread each, and it is what lets one rank interleave sends and
//! receives that would deadlock if each blocked in turn.

pub mod agree;
mod coll;
mod pieces;

pub use coll::{schedule_fingerprint, slice_elems, CollTask, PortSource};

use crate::error::CommError;
use crate::protocol::Header;
use crate::transport::{PortError, RecvPort, SendPort, Transport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the error messages of a task say it is: e.g. `all-reduce #12`.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub what: String,
    pub seq: u64,
    pub rank: u32,
}

impl Ctx {
    pub fn gone(&self, peer: u32, e: PortError) -> CommError {
        match e {
            PortError::Gone(detail) => CommError::PeerGone {
                what: self.what.clone(),
                seq: self.seq,
                rank: self.rank,
                peer,
                detail,
            },
            PortError::Protocol(detail) => CommError::Mismatch {
                what: self.what.clone(),
                seq: self.seq,
                rank: self.rank,
                peer,
                detail,
            },
        }
    }
    pub fn mismatch(&self, peer: u32, detail: String) -> CommError {
        CommError::Mismatch {
            what: self.what.clone(),
            seq: self.seq,
            rank: self.rank,
            peer,
            detail,
        }
    }
}

/// What a blocked task waits for (for timeout errors and liveness checks).
#[derive(Clone, Debug)]
pub struct Blocked {
    pub peer: Option<u32>,
    pub what: String,
}

/// A unit of work the drive loop advances.
pub trait Task {
    /// Advances as far as possible without blocking; returns whether anything moved.
    fn step(&mut self) -> Result<bool, CommError>;
    fn done(&self) -> bool;
    /// What the task is stuck on (meaningful when `step` made no progress).
    fn blocked(&self) -> Blocked;
    fn ctx(&self) -> &Ctx;
    /// A task the caller does not wait for: [`drive`] advances it while others run, and
    /// returns when every other task is done.
    fn background(&self) -> bool {
        false
    }
}

/// Runs `0` alongside other tasks without waiting for it (see [`Task::background`]).
pub struct Background<'t, 'a>(pub &'t mut (dyn Task + 'a));

impl Task for Background<'_, '_> {
    fn step(&mut self) -> Result<bool, CommError> {
        self.0.step()
    }
    fn done(&self) -> bool {
        self.0.done()
    }
    fn blocked(&self) -> Blocked {
        self.0.blocked()
    }
    fn ctx(&self) -> &Ctx {
        self.0.ctx()
    }
    fn background(&self) -> bool {
        true
    }
}

/// Back-off and timeout policy while nothing can move.
#[derive(Clone, Debug)]
pub struct WaitPolicy {
    pub timeout: Duration,
    pub abort: Arc<AtomicBool>,
}

/// Runs `tasks` to completion. On error the tasks are left as they are: the communicator is
/// then poisoned, because peers may hold half-finished messages of this collective.
pub fn drive(
    tasks: &mut [&mut dyn Task],
    policy: &WaitPolicy,
    transport: &dyn Transport,
) -> Result<(), CommError> {
    let mut idle: u32 = 0;
    let mut last_progress = Instant::now();
    let mut last_liveness = Instant::now();
    loop {
        let epoch = transport.epoch();
        let mut progress = false;
        let mut all_done = true;
        for t in tasks.iter_mut() {
            if t.done() {
                continue;
            }
            progress |= t.step()?;
            all_done &= t.done() || t.background();
        }
        if all_done {
            return Ok(());
        }
        if progress {
            idle = 0;
            last_progress = Instant::now();
            continue;
        }
        idle = idle.saturating_add(1);
        let stuck = || tasks.iter().find(|t| !t.done() && !t.background());
        if policy.abort.load(Ordering::Relaxed) {
            let t = stuck().map(|t| t.ctx().clone()).unwrap_or(Ctx {
                what: "collective".into(),
                seq: 0,
                rank: 0,
            });
            return Err(CommError::Aborted {
                what: t.what,
                seq: t.seq,
                rank: t.rank,
            });
        }
        // Spin briefly (the peer is usually microseconds away), then yield the core (ranks may
        // outnumber cores), then sleep so that a long wait costs no CPU.
        if idle < 64 {
            std::hint::spin_loop();
        } else if idle < 1024 {
            std::thread::yield_now();
        } else {
            transport.idle_wait(epoch, idle);
        }
        if !idle.is_multiple_of(64) {
            continue;
        }
        let waited = last_progress.elapsed();
        if last_liveness.elapsed() >= Duration::from_millis(100) {
            last_liveness = Instant::now();
            for t in tasks.iter().filter(|t| !t.done()) {
                if let Some(p) = t.blocked().peer {
                    transport.check_peer(p).map_err(|e| t.ctx().gone(p, e))?;
                }
            }
        }
        if waited >= policy.timeout {
            let t = stuck().expect("not all done");
            let b = t.blocked();
            let c = t.ctx();
            return Err(CommError::Timeout {
                what: c.what.clone(),
                seq: c.seq,
                rank: c.rank,
                peer: b.peer,
                waiting_for: b.what,
                waited,
            });
        }
    }
}

/// Tag of the messages of one point-to-point transfer of `len` bytes: the top two bits 0b10,
/// then the length. A receive of another length fails at the first message instead of taking
/// bytes meant for something else (collectives tag with their sequence number, on their own
/// channels; agreement messages are `agree::TERMS_TAG`).
pub fn p2p_tag(len: usize) -> u64 {
    (0b10 << 62) | (len as u64 & ((1 << 62) - 1))
}

/// What a message's tag says it is, for error messages.
fn tag_meaning(tag: u64) -> String {
    if tag >> 62 == 0b10 {
        format!("a piece of a {}-byte send", tag & ((1 << 62) - 1))
    } else if tag == agree::TERMS_TAG {
        "the start of a collective (the peer runs one)".into()
    } else {
        format!("a message tagged {tag:#x}")
    }
}

/// The grouped `send`s to one peer, in the order they were issued: each cut into slot-sized
/// messages. One task per peer keeps that order on the wire; two tasks sharing a port could
/// interleave, and the receiver matches sends in order.
pub struct P2pSend<'a> {
    pub ctx: Ctx,
    pub port: Arc<dyn SendPort>,
    pub peer: u32,
    /// The sends, in issue order; empty ones are left out.
    pub data: Vec<&'a [u8]>,
    /// The send under way and the next byte of it.
    pub seg: usize,
    pub off: usize,
    /// The peer has taken every message: only then is the send complete.
    pub delivered: bool,
}

impl<'a> P2pSend<'a> {
    pub fn new(ctx: Ctx, port: Arc<dyn SendPort>, peer: u32) -> Self {
        P2pSend {
            ctx,
            port,
            peer,
            data: Vec::new(),
            seg: 0,
            off: 0,
            delivered: false,
        }
    }
}

impl Task for P2pSend<'_> {
    fn step(&mut self) -> Result<bool, CommError> {
        let mut moved = false;
        let cap = self.port.capacity().max(1);
        while let Some(data) = self.data.get(self.seg).copied() {
            if self.off >= data.len() {
                self.seg += 1;
                self.off = 0;
                continue;
            }
            if !self.port.ready().map_err(|e| self.ctx.gone(self.peer, e))? {
                break;
            }
            let n = cap.min(data.len() - self.off);
            let src = &data[self.off..self.off + n];
            self.port
                .post(p2p_tag(data.len()), n, &mut |slot| {
                    slot.copy_from_slice(src)
                })
                .map_err(|e| self.ctx.gone(self.peer, e))?;
            self.off += n;
            moved = true;
        }
        if self.seg >= self.data.len()
            && !self.delivered
            && self
                .port
                .delivered()
                .map_err(|e| self.ctx.gone(self.peer, e))?
        {
            self.delivered = true;
            moved = true;
        }
        Ok(moved)
    }
    fn done(&self) -> bool {
        self.seg >= self.data.len() && self.delivered
    }
    fn blocked(&self) -> Blocked {
        if self.seg >= self.data.len() {
            return Blocked {
                peer: Some(self.peer),
                what: format!(
                    "rank {} to receive what this rank sent it (does it call the matching receive?)",
                    self.peer
                ),
            };
        }
        let len = self.data.get(self.seg).map_or(0, |d| d.len());
        Blocked {
            peer: Some(self.peer),
            what: format!(
                "a free slot to send to rank {} (send {} of {}, byte {} of {})",
                self.peer,
                self.seg + 1,
                self.data.len(),
                self.off,
                len
            ),
        }
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

/// The grouped `recv`s from one peer, in the order they were issued (see [`P2pSend`]).
pub struct P2pRecv<'a> {
    pub ctx: Ctx,
    pub port: Arc<dyn RecvPort>,
    pub peer: u32,
    pub cap: usize,
    /// The receives, in issue order; empty ones are left out.
    pub data: Vec<&'a mut [u8]>,
    /// The receive under way and the next byte of it.
    pub seg: usize,
    pub off: usize,
}

impl<'a> P2pRecv<'a> {
    pub fn new(ctx: Ctx, port: Arc<dyn RecvPort>, peer: u32, cap: usize) -> Self {
        P2pRecv {
            ctx,
            port,
            peer,
            cap,
            data: Vec::new(),
            seg: 0,
            off: 0,
        }
    }
}

impl Task for P2pRecv<'_> {
    fn step(&mut self) -> Result<bool, CommError> {
        let mut moved = false;
        while self.seg < self.data.len() {
            let len = self.data[self.seg].len();
            if self.off >= len {
                self.seg += 1;
                self.off = 0;
                continue;
            }
            if !self.port.ready().map_err(|e| self.ctx.gone(self.peer, e))? {
                break;
            }
            let want = self.cap.max(1).min(len - self.off);
            let (ctx, peer, off) = (&self.ctx, self.peer, self.off);
            let dst = &mut self.data[self.seg][off..off + want];
            self.port.consume(&mut |h: Header, bytes: &[u8]| {
                if h.tag != p2p_tag(len) || h.len as usize != want {
                    return Err(ctx.mismatch(
                        peer,
                        format!(
                            "this rank receives {len} bytes from rank {peer} (piece at byte {off}), and got {} ({} bytes)",
                            tag_meaning(h.tag),
                            h.len
                        ),
                    ));
                }
                dst.copy_from_slice(bytes);
                Ok(())
            })?;
            self.off += want;
            moved = true;
        }
        Ok(moved)
    }
    fn done(&self) -> bool {
        self.seg >= self.data.len()
    }
    fn blocked(&self) -> Blocked {
        let len = self.data.get(self.seg).map_or(0, |d| d.len());
        Blocked {
            peer: Some(self.peer),
            what: format!(
                "data from rank {} (receive {} of {}, byte {} of {})",
                self.peer,
                self.seg + 1,
                self.data.len(),
                self.off,
                len
            ),
        }
    }
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}
