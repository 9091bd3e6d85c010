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
}

/// Ends the current call's record when dropped (every return path of the call).
pub struct InCall<'a> {
    hang: &'a Hang,
    done: u64,
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if let Some(r) = &self.hang.record {
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
        let watchdog = (rank == 0 && record.is_some())
            .then(|| Stop::start(Reader::new(&dir(), key, nranks), comm, threshold));
        Hang {
            record,
            next: AtomicU64::new(0),
            watchdog: Mutex::new(watchdog.flatten()),
        }
    }

    pub fn off() -> Hang {
        Hang {
            record: None,
            next: AtomicU64::new(0),
            watchdog: Mutex::new(None),
        }
    }

    /// This rank enters `ops` (one batch; a group's calls are one batch, recorded by its
    /// first call and its size); the record says so until the returned guard drops.
    pub fn begin(&self, ops: &[Op]) -> InCall<'_> {
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
        }
    }

    /// At destroy or abort: removes the record's file and stops the watchdog, which exits
    /// within one poll and is never waited for, so destroy is not delayed. The mapping stays
    /// until the communicator is dropped (a call may still hold it).
    pub fn close(&self) {
        if let Some(r) = &self.record {
            r.unlink();
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
