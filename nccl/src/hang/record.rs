//! Each rank's record of its current call: 64 bytes in a shared-memory file
//! (`<dir>/topoplan-hang-<key>-<rank>`), eight 64-bit words the rank writes with atomic stores
//! through a `MAP_SHARED` mapping (no syscall per call) and rank 0's watchdog reads.
//!
//! Words: 0 magic and pid, 1 the call's sequence number, 2 when it started (monotonic
//! nanoseconds; 0 between calls, written last so a reader never sees a half-written call as
//! started), 3 calls completed, 4 count, 5 kind, datatype and op, 6 root or peer and the
//! batch's size, 7 unused.

use super::table::{Call, RankView, State};
use crate::abi::{NcclOp, NcclType, NUM_OPS};
use crate::op::Kind;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const WORDS: usize = 8;
pub const BYTES: usize = WORDS * 8;

/// A record that could not be made (the watchdog then runs without this rank's).
#[derive(Debug, thiserror::Error)]
pub enum HangError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// "TPHG", so a stray file of another layout reads as no record.
const MAGIC: u64 = 0x4748_5054;

const KINDS: [Kind; 10] = [
    Kind::AllReduce,
    Kind::AllGather,
    Kind::ReduceScatter,
    Kind::Broadcast,
    Kind::Reduce,
    Kind::AllToAll,
    Kind::Gather,
    Kind::Scatter,
    Kind::Send,
    Kind::Recv,
];

pub fn path(dir: &Path, key: &str, rank: u32) -> PathBuf {
    dir.join(format!("topoplan-hang-{key}-{rank}"))
}

/// Monotonic nanoseconds, the same clock in every process of the host (never 0).
pub fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux (and is
    // served by the vDSO, without a syscall).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64).max(1)
}

fn op_raw(op: NcclOp) -> u32 {
    match op {
        NcclOp::PreMulSum(v) => v as u32,
        b => (0..NUM_OPS)
            .find(|v| NcclOp::from_raw(*v) == Some(b))
            .unwrap_or(0) as u32,
    }
}

/// The words 4..=6 of `call`.
pub fn encode(call: &Call) -> [u64; 3] {
    let kind = KINDS.iter().position(|k| *k == call.kind).unwrap_or(0) as u64;
    let dtype = call.dtype.raw() as u64;
    [
        call.count,
        kind | dtype << 8 | (op_raw(call.op) as u64) << 32,
        call.peer as u64 | (call.batch as u64) << 32,
    ]
}

/// A rank's state from its record's words, `now` on the same clock as its start time.
pub fn decode(w: &[u64; WORDS], now: u64) -> State {
    if w[0] & 0xFFFF_FFFF != MAGIC {
        return State::NoRecord;
    }
    if w[2] == 0 {
        return State::Idle { done: w[3] };
    }
    let kind = KINDS.get((w[5] & 0xFF) as usize);
    let dtype = NcclType::from_raw(((w[5] >> 8) & 0xFF) as i32);
    let op = NcclOp::from_raw((w[5] >> 32) as u32 as i32);
    match (kind, dtype, op) {
        (Some(kind), Some(dtype), Some(op)) => State::InCall {
            call: Call {
                seq: w[1],
                kind: *kind,
                count: w[4],
                dtype,
                op,
                peer: w[6] as u32,
                batch: (w[6] >> 32) as u32,
            },
            waited: Duration::from_nanos(now.saturating_sub(w[2])),
        },
        _ => State::NoRecord,
    }
}

/// This rank's record, mapped for writing; the file is removed when it is dropped.
pub struct Published {
    words: *const [AtomicU64; WORDS],
    path: PathBuf,
}

// SAFETY: the mapping is only accessed through atomics, and lives until `drop`.
unsafe impl Send for Published {}
// SAFETY: as above: concurrent access goes through atomics only.
unsafe impl Sync for Published {}

impl Published {
    /// Creates the record of `rank`, idle, under a temporary name renamed into place, so a
    /// reader never opens a file shorter than the record.
    pub fn create(dir: &Path, key: &str, rank: u32) -> Result<Published, HangError> {
        let path = path(dir, key, rank);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let io = |source| HangError::Io {
            path: tmp.clone(),
            source,
        };
        let made = || -> Result<Published, HangError> {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io)?;
            f.set_len(BYTES as u64).map_err(io)?;
            let words = map(&f).map_err(io)?;
            let p = Published {
                words,
                path: path.clone(),
            };
            p.words()[0].store(MAGIC | (std::process::id() as u64) << 32, Ordering::Relaxed);
            std::fs::rename(&tmp, &path).map_err(|source| HangError::Io {
                path: path.clone(),
                source,
            })?;
            Ok(p)
        };
        // A failure leaves no file behind (dropping a made record removes only its own name).
        made().inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    fn words(&self) -> &[AtomicU64; WORDS] {
        // SAFETY: `words` is a live, page-aligned mapping of BYTES bytes until drop.
        unsafe { &*self.words }
    }

    /// The rank enters `call`.
    pub fn begin(&self, call: &Call) {
        let w = self.words();
        let [count, kind, peer] = encode(call);
        w[1].store(call.seq, Ordering::Relaxed);
        w[4].store(count, Ordering::Relaxed);
        w[5].store(kind, Ordering::Relaxed);
        w[6].store(peer, Ordering::Relaxed);
        w[2].store(now_ns(), Ordering::Release);
    }

    /// The rank has left its call; `done` calls completed.
    pub fn end(&self, done: u64) {
        let w = self.words();
        w[3].store(done, Ordering::Relaxed);
        w[2].store(0, Ordering::Release);
    }
}

impl Published {
    pub fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.unlink();
        // SAFETY: the mapping made in `create`, unmapped once; no reference outlives self.
        unsafe { libc::munmap(self.words as *mut libc::c_void, BYTES) };
    }
}

fn map(f: &File) -> std::io::Result<*const [AtomicU64; WORDS]> {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of a file at least BYTES long; the kernel picks the
    // (page-aligned, so 8-byte-aligned) address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p as *const [AtomicU64; WORDS])
}

/// Reads other ranks' records (by `pread`, so a file that shrank is an error, not a fault);
/// files it cannot open yet are tried again at the next read.
pub struct Reader {
    paths: Vec<PathBuf>,
    files: Vec<Option<File>>,
}

impl Reader {
    pub fn new(dir: &Path, key: &str, nranks: u32) -> Reader {
        Reader {
            paths: (0..nranks).map(|r| path(dir, key, r)).collect(),
            files: (0..nranks).map(|_| None).collect(),
        }
    }

    /// Every rank's view now.
    pub fn read(&mut self) -> Vec<RankView> {
        let now = now_ns();
        (0..self.paths.len())
            .map(|r| {
                let (pid, state) = self.words(r).map_or((0, State::NoRecord), |w| {
                    ((w[0] >> 32) as u32, decode(&w, now))
                });
                RankView {
                    rank: r as u32,
                    pid,
                    state,
                }
            })
            .collect()
    }

    fn words(&mut self, r: usize) -> Option<[u64; WORDS]> {
        if self.files[r].is_none() {
            self.files[r] = File::open(&self.paths[r]).ok();
        }
        let f = self.files[r].as_ref()?;
        let read = || {
            let mut b = [0u8; BYTES];
            f.read_exact_at(&mut b, 0).ok()?;
            Some(std::array::from_fn(|i| {
                u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default())
            }))
        };
        // A call may start or end between the reads of its words: take two equal reads.
        let mut last = read()?;
        for _ in 0..4 {
            let again = read()?;
            if again == last {
                break;
            }
            last = again;
        }
        Some(last)
    }
}

impl Reader {
    /// Removes the records whose process has exited (a killed rank cannot remove its own), so
    /// a crashed job leaves no files behind once rank 0 leaves; a live rank's record stays.
    pub fn remove_exited(&mut self) {
        for r in 0..self.paths.len() {
            let Some(w) = self.words(r) else { continue };
            let pid = (w[0] >> 32) as u32;
            if w[0] & 0xFFFF_FFFF == MAGIC && pid != 0 && !running(pid) {
                let _ = std::fs::remove_file(&self.paths[r]);
            }
        }
    }
}

/// Marks the views whose process has exited (a killed rank leaves its record behind, last
/// saying it was in a call). Read from procfs, as the runtime tells a dead peer; without
/// procfs every process counts as running.
pub fn mark_exited(views: &mut [RankView]) {
    for v in views.iter_mut().filter(|v| v.pid != 0) {
        if running(v.pid) {
            continue;
        }
        v.state = match v.state {
            State::InCall { call, .. } => State::Exited {
                call: Some(call),
                done: call.seq,
            },
            State::Idle { done } => State::Exited { call: None, done },
            s => s,
        };
    }
}

fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name: Z (zombie) or X (dead).
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => !Path::new("/proc/self/stat").exists(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::ReduceOp;

    #[test]
    fn a_record_is_read_back_as_written_and_removed_at_drop() {
        let dir = std::env::temp_dir();
        let key = format!("test{}", std::process::id());
        let mut reader = Reader::new(&dir, &key, 2);
        let p = Published::create(&dir, &key, 1).unwrap();
        let call = Call {
            seq: 9,
            kind: Kind::Reduce,
            count: 1 << 40,
            dtype: NcclType::Bf16,
            op: NcclOp::PreMulSum(7),
            peer: 3,
            batch: 2,
        };
        p.begin(&call);
        let v = reader.read();
        assert_eq!(v[0].state, State::NoRecord);
        assert_eq!(v[1].pid, std::process::id());
        match v[1].state {
            State::InCall { call: c, waited } => {
                assert_eq!(c, call);
                assert!(waited < Duration::from_secs(60));
            }
            s => panic!("{s:?}"),
        }
        p.end(11);
        assert_eq!(reader.read()[1].state, State::Idle { done: 11 });
        let mut max = call;
        max.op = NcclOp::Builtin(ReduceOp::Max);
        assert_eq!(
            decode(
                &[
                    MAGIC,
                    9,
                    5,
                    0,
                    max.count,
                    encode(&max)[1],
                    encode(&max)[2],
                    0
                ],
                10
            ),
            State::InCall {
                call: max,
                waited: Duration::from_nanos(5)
            }
        );
        let mut views = reader.read();
        mark_exited(&mut views);
        assert_eq!(
            views[1].state,
            State::Idle { done: 11 },
            "this process runs"
        );
        views[1].pid = u32::MAX;
        mark_exited(&mut views);
        assert_eq!(
            views[1].state,
            State::Exited {
                call: None,
                done: 11
            }
        );
        let file = path(&dir, &key, 1);
        drop(p);
        assert!(!file.exists());
    }

    /// Rank 0 removes a killed rank's record at close, and leaves a live rank's alone.
    #[test]
    fn only_the_records_of_exited_processes_are_removed() {
        let dir = std::env::temp_dir();
        let key = format!("sweep{}", std::process::id());
        let live = Published::create(&dir, &key, 0).unwrap();
        let dead = path(&dir, &key, 1);
        let mut words = [0u8; BYTES];
        // No process has a pid above the kernel's pid_max (at most 2^22).
        words[..8].copy_from_slice(&(MAGIC | (u32::MAX as u64) << 32).to_ne_bytes());
        std::fs::write(&dead, words).unwrap();
        let stray = path(&dir, &key, 2);
        std::fs::write(&stray, [7u8; BYTES]).unwrap();
        Reader::new(&dir, &key, 3).remove_exited();
        assert!(path(&dir, &key, 0).exists(), "a live rank's record");
        assert!(!dead.exists(), "a dead rank's record");
        assert!(
            stray.exists(),
            "a file of another layout is not ours to remove"
        );
        let _ = std::fs::remove_file(&stray);
        drop(live);
    }
}
