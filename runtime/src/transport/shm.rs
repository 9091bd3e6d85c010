//! Ranks as processes of one host: connections live in shared-memory segments.
//!
//! One file per directed pair `from → to` (`<dir>/topoplan-<job>-<session>-<from>-<to>`, the
//! session being a random name rank 0 gives each rendezvous), holding one
//! connection region per channel (channels `0..MAX_CHANNELS`, then the p2p channel). A region is
//! `head` and `tail` on separate cache lines followed by `slots` slots. The file is sparse: only
//! the slots a connection actually uses take memory. Both ends create-or-open the file with the
//! same length and map it; after a bootstrap barrier the receiver unlinks it, so nothing is left
//! behind even if a process dies later.

// The one place of this crate that needs unsafe: slots and counters live in memory mapped
// by several processes, which Rust cannot see as owned.
#![allow(unsafe_code)]

use super::{RecvPort, SendPort, P2P_CHANNEL};
use crate::error::CommError;
use crate::protocol::{Fifo, SlotMem};
use memmap2::MmapRaw;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Channels a schedule may use over shared memory (the p2p channel comes on top).
pub const MAX_CHANNELS: u32 = 32;
const REGION_HEADER: usize = 128;

fn region_bytes(nslots: u32, slot_bytes: usize) -> usize {
    REGION_HEADER + nslots as usize * slot_bytes.next_multiple_of(64)
}

/// One connection's region inside a mapped pair file.
pub struct ShmMem {
    map: Arc<MmapRaw>,
    base: usize,
    nslots: u32,
    slot_bytes: usize,
}

impl ShmMem {
    fn counter(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `base + off` is inside the mapping (checked when the region was made), 8-byte
        // aligned (the mapping is page aligned, `base` and `off` are multiples of 64), and the
        // mapping lives as long as `self`. The word is only ever accessed atomically, by both
        // processes, so treating it as an `AtomicU64` is sound.
        unsafe { &*(self.map.as_mut_ptr().add(self.base + off) as *const AtomicU64) }
    }
    fn slot_ptr(&self, slot: u32) -> *mut u8 {
        let stride = self.slot_bytes.next_multiple_of(64);
        // SAFETY: slot < nslots, so the slot lies inside the region, which lies inside the map.
        unsafe {
            self.map
                .as_mut_ptr()
                .add(self.base + REGION_HEADER + slot as usize * stride)
        }
    }
}

impl SlotMem for ShmMem {
    type C = AtomicU64;
    fn head(&self) -> &AtomicU64 {
        self.counter(0)
    }
    fn tail(&self) -> &AtomicU64 {
        self.counter(64)
    }
    fn nslots(&self) -> u32 {
        self.nslots
    }
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }
    fn with_slot_mut<R>(&self, slot: u32, f: impl FnOnce(&mut [u8]) -> R) -> R {
        // SAFETY: the slot protocol (crate::protocol, model-checked in tests/loom.rs) gives the
        // sender exclusive access to this slot between seeing it free (acquire of `head`) and
        // publishing it (release of `tail`); the receiver does not touch it meanwhile.
        let s = unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(slot), self.slot_bytes) };
        f(s)
    }
    fn with_slot<R>(&self, slot: u32, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: as above, the receiver owns a published slot until it releases `head`.
        let s = unsafe { std::slice::from_raw_parts(self.slot_ptr(slot), self.slot_bytes) };
        f(s)
    }
}

/// A mapped pair file.
struct PairFile {
    map: Arc<MmapRaw>,
    path: PathBuf,
}

fn pair_path(dir: &Path, job: &str, from: u32, to: u32) -> PathBuf {
    dir.join(format!("topoplan-{job}-{from}-{to}"))
}

fn open_pair(path: &Path, len: usize) -> Result<PairFile, CommError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| CommError::Transport(format!("shared memory {}: {e}", path.display())))?;
    // Both ends set the same length; a second set_len to it changes nothing.
    f.set_len(len as u64)
        .map_err(|e| CommError::Transport(format!("shared memory {}: {e}", path.display())))?;
    let map = MmapRaw::map_raw(&f)
        .map_err(|e| CommError::Transport(format!("mapping {}: {e}", path.display())))?;
    if map.len() < len {
        return Err(CommError::Transport(format!(
            "{} maps {} bytes, {len} needed",
            path.display(),
            map.len()
        )));
    }
    Ok(PairFile {
        map: Arc::new(map),
        path: path.to_path_buf(),
    })
}

/// Shared-memory connections to the same-host peers of one rank.
pub struct ShmLinks {
    rank: u32,
    nslots: u32,
    slot_bytes: usize,
    out: std::collections::HashMap<u32, PairFile>,
    inb: std::collections::HashMap<u32, PairFile>,
    /// Peer pids, for liveness checks.
    pids: std::collections::HashMap<u32, u32>,
}

impl ShmLinks {
    /// Creates or opens the pair files with every peer in `peers` (rank, pid). Call
    /// [`ShmLinks::unlink`] after a barrier that follows this call on every rank.
    pub fn open(
        dir: &Path,
        job: &str,
        rank: u32,
        peers: &[(u32, u32)],
        nslots: u32,
        slot_bytes: usize,
    ) -> Result<Self, CommError> {
        let len = region_bytes(nslots, slot_bytes) * (MAX_CHANNELS as usize + 1);
        let mut out = std::collections::HashMap::new();
        let mut inb = std::collections::HashMap::new();
        for &(p, _) in peers {
            out.insert(p, open_pair(&pair_path(dir, job, rank, p), len)?);
            inb.insert(p, open_pair(&pair_path(dir, job, p, rank), len)?);
        }
        Ok(ShmLinks {
            rank,
            nslots,
            slot_bytes,
            out,
            inb,
            // Liveness checks only for peers whose process this one can see: a peer in another
            // pid namespace would look dead. Those rely on the timeout.
            pids: peers
                .iter()
                .copied()
                .filter(|(_, pid)| Path::new(&format!("/proc/{pid}/stat")).exists())
                .collect(),
        })
    }

    /// Removes this rank's inbox files; the mappings stay valid.
    pub fn unlink(&self) {
        for f in self.inb.values() {
            let _ = std::fs::remove_file(&f.path);
        }
    }

    /// The value `from` stamps into its pair files (see [`ShmLinks::stamp`]).
    fn stamp_of(job: &str, from: u32) -> u64 {
        crate::config::fnv1a(format!("{job}|{from}").as_bytes()) | 1
    }

    fn stamp_word<'a>(&self, f: &'a PairFile) -> &'a AtomicU64 {
        // Word 2 of the first region's header: beside `head` (word 0), never used otherwise.
        // SAFETY: offset 16 lies inside the mapping and is 8-byte aligned (see ShmMem::counter);
        // both processes access the word only atomically.
        unsafe { &*(f.map.as_mut_ptr().add(16) as *const AtomicU64) }
    }

    /// Writes this rank's stamp into every file it sends through. After a barrier,
    /// [`ShmLinks::verify`] on the peers proves they map the same files.
    pub fn stamp(&self, job: &str) {
        for f in self.out.values() {
            self.stamp_word(f).store(
                Self::stamp_of(job, self.rank),
                std::sync::atomic::Ordering::SeqCst,
            );
        }
    }

    /// Checks every inbox carries its sender's stamp: ranks that share a host name but not a
    /// shared-memory directory (separate containers) are told so instead of waiting forever.
    pub fn verify(&self, job: &str) -> Result<(), CommError> {
        for (&p, f) in &self.inb {
            if self.stamp_word(f).load(std::sync::atomic::Ordering::SeqCst)
                != Self::stamp_of(job, p)
            {
                return Err(CommError::Transport(format!(
                    "rank {} and rank {p} report the same host but do not share {}: set TOPOPLAN_SHM_DIR to a directory both see, or TOPOPLAN_TRANSPORT=tcp",
                    self.rank,
                    f.path.parent().map(|d| d.display().to_string()).unwrap_or_default()
                )));
            }
        }
        Ok(())
    }

    pub fn has(&self, peer: u32) -> bool {
        self.out.contains_key(&peer)
    }

    fn region(&self, f: &PairFile, channel: u32) -> Result<ShmMem, CommError> {
        let idx = if channel == P2P_CHANNEL {
            MAX_CHANNELS
        } else if channel < MAX_CHANNELS {
            channel
        } else {
            return Err(CommError::Plan(format!(
                "schedule uses channel {channel}; shared memory carries at most {MAX_CHANNELS} channels"
            )));
        };
        Ok(ShmMem {
            map: f.map.clone(),
            base: idx as usize * region_bytes(self.nslots, self.slot_bytes),
            nslots: self.nslots,
            slot_bytes: self.slot_bytes,
        })
    }

    pub fn send_port(&self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError> {
        let f = self.out.get(&to).ok_or_else(|| {
            CommError::Transport(format!(
                "rank {} has no shared memory with rank {to}",
                self.rank
            ))
        })?;
        Ok(Arc::new(Fifo::new(self.region(f, channel)?)))
    }

    pub fn recv_port(&self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        let f = self.inb.get(&from).ok_or_else(|| {
            CommError::Transport(format!(
                "rank {} has no shared memory with rank {from}",
                self.rank
            ))
        })?;
        Ok(Arc::new(Fifo::new(self.region(f, channel)?)))
    }

    /// Whether the peer's process still runs (a dead process never frees or fills a slot).
    pub fn check(&self, peer: u32) -> super::PortResult<()> {
        let Some(pid) = self.pids.get(&peer) else {
            return Ok(());
        };
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the parenthesised command name: Z (zombie) or X (dead).
            Ok(stat) => match stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
            {
                Some("Z") | Some("X") => {
                    Err(super::PortError::Gone(format!("process {pid} has exited")))
                }
                _ => Ok(()),
            },
            Err(_) if Path::new("/proc/self/stat").exists() => {
                Err(super::PortError::Gone(format!("process {pid} has exited")))
            }
            Err(_) => Ok(()), // no procfs: rely on the timeout
        }
    }
}

impl Drop for ShmLinks {
    /// Removes every pair file still linked (set-up failed before [`ShmLinks::unlink`]); the
    /// names carry the session, so no other job's files can match.
    fn drop(&mut self) {
        for f in self.inb.values().chain(self.out.values()) {
            let _ = std::fs::remove_file(&f.path);
        }
    }
}
