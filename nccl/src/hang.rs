//! A hang becomes a report: each rank publishes the call it is in ([`record`]), and rank 0's
//! watchdog thread reads every rank's record and, once some rank has been in a call longer
//! than `TOPOPLAN_HANG_REPORT`, prints one table ([`table`]) naming the ranks that are stuck,
//! the ranks behind, and those whose arguments differ.
//!
//! Records live in shared memory, so a call costs a few stores and rank 0 reads them without
//! disturbing the ranks; ranks on other hosts, or dead ones, show as "no record". The key in
//! the file names comes from the unique id every rank joined with (or is fresh for
//! `ncclCommInitAll`), so communicators never share records.

pub mod record;
pub mod table;

use crate::knobs::{log, Level};
use crate::op::Op;
use record::{Published, Reader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;
use table::Call;

pub use record::HangError;

/// `TOPOPLAN_HANG_REPORT`: how long a call may wait before rank 0 reports it (`None`: off).
pub fn threshold() -> Option<Duration> {
    static T: OnceLock<Option<Duration>> = OnceLock::new();
    *T.get_or_init(|| {
        let t = params::HANG_REPORT.duration().unwrap_or_else(|e| {
            log(Level::Warn, &format!("{e}; using the default"));
            params::HANG_REPORT.duration_from(&|_| None).ok().flatten()
        });
        t.filter(|d| !d.is_zero())
    })
}

/// How often the watchdog reads the records: a quarter of the threshold, at most 1 s, so a
/// report comes within the threshold plus one poll and a stop is seen within one poll.
pub fn poll_period(threshold: Duration) -> Duration {
    (threshold / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

fn dir() -> PathBuf {
    params::SHM_DIR
        .path()
        .ok()
        .flatten()
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

/// A communicator's side of the report: its rank's record, its call counter, and on rank 0
/// the watchdog. Inert when the report is off or the record could not be made.
pub struct Hang {
    record: Option<Published>,
    /// Calls started on this rank: the next call's sequence number.
    next: AtomicU64,
    watchdog: Mutex<Option<Arc<Stop>>>,
    /// Rank 0's reader of every rank's record, for removing dead ranks' records at close.
    sweep: Mutex<Option<Reader>>,
    /// The last batch enqueued on the GPU, until it is seen finished ([`Hang::settle`]).
    pending: Mutex<Option<Pending>>,
}

/// A batch whose record stays "in the call" until its device work finishes: `done` ends the
/// record with this sequence number once `finished` says so.
struct Pending {
    done: u64,
    finished: Box<dyn Fn() -> bool + Send>,
}

/// Ends the current call's record when dropped (every return path of the call), unless the
/// call's work went to the GPU ([`InCall::until`]).
pub struct InCall<'a> {
    hang: &'a Hang,
    done: u64,
    kept: bool,
}

impl InCall<'_> {
    /// The call's work was enqueued on the GPU: the record stays "in the call" until
    /// `finished` says the work is done, as [`Hang::settle`] (called from
    /// `ncclCommGetAsyncError`, which frameworks poll) or the next call finds. A rank whose
    /// kernels wait for a peer that skipped the call is then reported as stuck in it.
    pub fn until(mut self, finished: impl Fn() -> bool + Send + 'static) {
        if self.hang.record.is_some() {
            *lock(&self.hang.pending) = Some(Pending {
                done: self.done,
                finished: Box::new(finished),
            });
            self.kept = true;
        }
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if let (Some(r), false) = (&self.hang.record, self.kept) {
            r.end(self.done);
        }
    }
}

impl Hang {
    /// Publishes `rank`'s record under `key`; rank 0 also starts the watchdog of comm `comm`.
    pub fn new(key: &str, comm: usize, rank: u32, nranks: u32) -> Hang {
        // One rank has no peer to wait for.
        let Some(threshold) = threshold().filter(|_| nranks > 1) else {
            return Hang::off();
        };
        let record = match Published::create(&dir(), key, rank) {
            Ok(r) => Some(r),
            Err(e) => {
                log(
                    Level::Info,
                    &format!("comm {comm:#x} rank {rank}: no hang report: {e}"),
                );
                None
            }
        };
        let lead = rank == 0 && record.is_some();
        let watchdog = lead.then(|| Stop::start(Reader::new(&dir(), key, nranks), comm, threshold));
        Hang {
            record,
            next: AtomicU64::new(0),
            watchdog: Mutex::new(watchdog.flatten()),
            sweep: Mutex::new(lead.then(|| Reader::new(&dir(), key, nranks))),
            pending: Mutex::new(None),
        }
    }

    pub fn off() -> Hang {
        Hang {
            record: None,
            next: AtomicU64::new(0),
            watchdog: Mutex::new(None),
            sweep: Mutex::new(None),
            pending: Mutex::new(None),
        }
    }

    /// Ends the record of the last GPU batch if its work has finished. Never blocks: another
    /// thread settling or beginning a call wins.
    pub fn settle(&self) {
        let Ok(mut p) = self.pending.try_lock() else {
            return;
        };
        if let (Some(r), Some(pend)) = (&self.record, p.as_ref()) {
            if (pend.finished)() {
                r.end(pend.done);
                *p = None;
            }
        }
    }

    /// This rank enters `ops` (one batch; a group's calls are one batch, recorded by its
    /// first call and its size); the record says so until the returned guard drops.
    pub fn begin(&self, ops: &[Op]) -> InCall<'_> {
        // The new record replaces whatever the last GPU batch left (only a rank with a record
        // keeps one: a communicator without the report takes no lock here).
        if self.record.is_some() {
            *lock(&self.pending) = None;
        }
        let n = ops.len() as u64;
        let seq = self.next.fetch_add(n, Ordering::Relaxed);
        if let (Some(r), Some(op)) = (&self.record, ops.first()) {
            r.begin(&Call {
                seq,
                kind: op.kind,
                count: op.count as u64,
                dtype: op.dtype,
                op: op.op,
                peer: op.peer,
                batch: ops.len() as u32,
            });
        }
        InCall {
            hang: self,
            done: seq + n,
            kept: false,
        }
    }

    /// At destroy or abort: removes the record's file (on rank 0 also those of ranks whose
    /// process has exited) and stops the watchdog, which exits within one poll and is never
    /// waited for, so destroy is not delayed. The mapping stays until the communicator is
    /// dropped (a call may still hold it).
    pub fn close(&self) {
        if let Some(r) = &self.record {
            r.unlink();
        }
        if let Some(mut sweep) = lock(&self.sweep).take() {
            sweep.remove_exited();
        }
        if let Some(s) = lock(&self.watchdog).take() {
            s.stop();
        }
    }
}

impl Drop for Hang {
    fn drop(&mut self) {
        self.close();
    }
}

/// The watchdog's stop flag, and the condition it sleeps on between polls.
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    fn start(reader: Reader, comm: usize, threshold: Duration) -> Option<Arc<Stop>> {
        let s = Arc::new(Stop {
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        });
        let me = s.clone();
        std::thread::Builder::new()
            .name("topoplan-hang".into())
            .stack_size(256 << 10)
            .spawn(move || me.watch(reader, comm, threshold))
            .map_err(|e| log(Level::Info, &format!("comm {comm:#x}: no hang report: {e}")))
            .ok()?;
        Some(s)
    }

    fn stop(&self) {
        *lock(&self.stopped) = true;
        self.wake.notify_all();
    }

    /// Sleeps one poll; false once stopped.
    fn sleep(&self, d: Duration) -> bool {
        let g = lock(&self.stopped);
        let (g, _) = self
            .wake
            .wait_timeout_while(g, d, |s| !*s)
            .unwrap_or_else(|p| p.into_inner());
        !*g
    }

    /// Reads every record each poll; prints the report once per stuck call.
    fn watch(&self, mut reader: Reader, comm: usize, threshold: Duration) {
        let mut reported: Option<u64> = None;
        while self.sleep(poll_period(threshold)) {
            let mut views = reader.read();
            if table::analyze(&views, threshold).is_none() {
                continue;
            }
            // Only now, since it reads procfs: a dead rank's record is not a stuck rank.
            record::mark_exited(&mut views);
            let Some(r) = table::analyze(&views, threshold) else {
                continue;
            };
            if reported.is_none_or(|s| r.seq > s) {
                reported = Some(r.seq);
                log(Level::Warn, r.render(comm).trim_end());
            }
        }
    }
}

/// A poisoned lock still guards valid state here (flags, a thread handle). Local, because
/// `comm` imports this module.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch enqueued on the GPU stays "in the call" until its work is seen finished; a
    /// batch that returned on the host ends at once; a new call replaces a pending one.
    #[test]
    fn a_gpu_batch_stays_in_the_call_until_its_work_finishes() {
        use crate::abi::{NcclOp, NcclType};
        use crate::op::Kind;
        use std::sync::atomic::AtomicBool;
        use table::State;
        let dir = std::env::temp_dir();
        let key = format!("gpuhang{}", std::process::id());
        let mut hang = Hang::off();
        hang.record = Some(Published::create(&dir, &key, 0).unwrap());
        let mut reader = Reader::new(&dir, &key, 1);
        let op = Op {
            call: "t",
            kind: Kind::AllReduce,
            send: 8,
            recv: 8,
            count: 4,
            dtype: NcclType::F32,
            op: NcclOp::Builtin(runtime::ReduceOp::Sum),
            peer: 0,
            stream: 0,
        };
        drop(hang.begin(&[op]));
        assert_eq!(reader.read()[0].state, State::Idle { done: 1 });
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        hang.begin(&[op]).until(move || d.load(Ordering::Relaxed));
        hang.settle();
        assert!(matches!(reader.read()[0].state, State::InCall { call, .. } if call.seq == 1));
        done.store(true, Ordering::Relaxed);
        hang.settle();
        assert_eq!(reader.read()[0].state, State::Idle { done: 2 });
        // Pending work never finishes, and the next call replaces its record.
        hang.begin(&[op]).until(|| false);
        drop(hang.begin(&[op, op]));
        hang.settle();
        assert_eq!(reader.read()[0].state, State::Idle { done: 5 });
        hang.close();
    }

    #[test]
    fn a_stopped_watchdog_wakes_at_once_and_polls_within_bounds() {
        let s = Stop {
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        };
        assert!(s.sleep(Duration::from_millis(1)));
        let t = std::time::Instant::now();
        std::thread::scope(|sc| {
            sc.spawn(|| s.stop());
            while s.sleep(Duration::from_secs(30)) {}
        });
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(
            poll_period(Duration::from_secs(1)),
            Duration::from_millis(250)
        );
        assert_eq!(poll_period(Duration::from_secs(30)), Duration::from_secs(1));
        assert_eq!(
            poll_period(Duration::from_millis(1)),
            Duration::from_millis(10)
        );
    }
}
