//! The boards of `super`: one shared-memory file per rank, every rank's mapped by every rank,
//! and their layout. A leaf.

use memmap2::MmapMut;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::*};

/// Collective entries a rank keeps: how far its host may run ahead of the slowest peer's.
pub const COLL_RING: usize = 1024;
/// Message entries per peer and direction.
pub const MSG_RING: usize = 128;
/// Words of an entry: its tag (the call's number + 1; 0: never written), then two words of
/// what the call is (`super::Desc::encode`).
pub(super) const ENTRY: usize = 4;
const MAXR: usize = crate::layout::MAX_RANKS;
// Header words (the first page, which CUDA maps for the GPU's abort word).
pub(super) const MAGIC_W: usize = 0;
pub(super) const FLAGGED_W: usize = 1;
pub(super) const COLL_DONE_W: usize = 2;
pub(super) const SEND_DONE_W: usize = 8;
pub(super) const RECV_DONE_W: usize = 16;
pub(super) const VERDICT_W: usize = 24;
pub(super) const VERDICT_WORDS: usize = 8;
/// The GPU abort word (`TpAbort.abort`): a cache line of its own.
pub(super) const ABORT_W: usize = 64;
const HEADER_BYTES: usize = 4096;
/// The rings: collectives, then sends to and receives from each peer.
pub(super) const COLL_W: usize = HEADER_BYTES / 8;
pub(super) const SEND_W: usize = COLL_W + COLL_RING * ENTRY;
pub(super) const RECV_W: usize = SEND_W + MAXR * MSG_RING * ENTRY;
const WORDS: usize = RECV_W + MAXR * MSG_RING * ENTRY;
/// "TPCL".
const MAGIC: u64 = 0x4c43_5054;

/// A board that could not be made or mapped.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct BoardError {
    path: PathBuf,
    source: std::io::Error,
}

/// A board's file name: `<dir>/topoplan-calls-<key>-<rank>`.
pub fn board_path(dir: &Path, key: &str, rank: u32) -> PathBuf {
    dir.join(format!("topoplan-calls-{key}-{rank}"))
}

/// One rank's board, mapped shared (its own for writing, the peers' for reading and flagging).
pub struct Board {
    map: MmapMut,
}

impl Board {
    /// Creates `rank`'s board (under a temporary name renamed into place, so no peer opens a
    /// short file).
    pub fn create(dir: &Path, key: &str, rank: u32) -> Result<Board, BoardError> {
        let path = board_path(dir, key, rank);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| BoardError { path: p, source }
        };
        let made = (|| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(io(&tmp))?;
            f.set_len((WORDS * 8) as u64).map_err(io(&tmp))?;
            let b = Board::map(&f).map_err(io(&tmp))?;
            b.w(MAGIC_W)
                .store(MAGIC | u64::from(std::process::id()) << 32, SeqCst);
            std::fs::rename(&tmp, &path).map_err(io(&path))?;
            Ok(b)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        made
    }

    /// Maps a peer's board.
    pub fn open(dir: &Path, key: &str, rank: u32) -> Result<Board, BoardError> {
        let path = board_path(dir, key, rank);
        let io = |source| BoardError {
            path: path.clone(),
            source,
        };
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let b = Board::map(&f).map_err(io)?;
        if b.w(MAGIC_W).load(SeqCst) & 0xffff_ffff != MAGIC {
            return Err(io(std::io::Error::other("not a topoplan call board")));
        }
        Ok(b)
    }

    fn map(f: &std::fs::File) -> std::io::Result<Board> {
        if f.metadata()?.len() < (WORDS * 8) as u64 {
            return Err(std::io::Error::other("call board too short"));
        }
        // SAFETY: a shared mapping of a file of WORDS words; every access goes through
        // atomics, so other processes writing it concurrently is sound.
        let map = unsafe { memmap2::MmapOptions::new().len(WORDS * 8).map_mut(f)? };
        Ok(Board { map })
    }

    pub(super) fn w(&self, i: usize) -> &AtomicU64 {
        assert!(i < WORDS, "board word {i}");
        // SAFETY: the mapping is page-aligned and WORDS words long (checked in `map`); it
        // lives as long as `self`; AtomicU64 has u64's layout.
        unsafe { &*(self.map.as_ptr() as *const AtomicU64).add(i) }
    }

    /// The header page, [`HEADER_BYTES`] long, which holds the GPU abort word at byte
    /// [`Board::ABORT_BYTE`]; mapped as long as `self`.
    pub(crate) fn header(&self) -> *mut u8 {
        self.map.as_ptr() as *mut u8
    }

    pub(crate) const ABORT_BYTE: usize = ABORT_W * 8;
    pub(crate) const HEADER: usize = HEADER_BYTES;

    fn entry(base: usize, ring: usize, n: u64) -> usize {
        base + (n as usize % ring) * ENTRY
    }

    /// Writes entry `n` (the `n`-th call of this kind) of the ring at `base`: its words, then
    /// its tag, sequentially consistent (the check's order).
    pub(super) fn put(&self, base: usize, ring: usize, n: u64, [a, b]: [u64; 2]) {
        let e = Self::entry(base, ring, n);
        self.w(e + 1).store(a, Relaxed);
        self.w(e + 2).store(b, Relaxed);
        self.w(e).store(n + 1, SeqCst);
    }

    /// Entry `n` of the ring at `base`, if written yet. Its writer overwrites it only after
    /// this rank compared it (`Calls::room`), so the words are the tag's.
    pub(super) fn get(&self, base: usize, ring: usize, n: u64) -> Option<[u64; 2]> {
        let e = Self::entry(base, ring, n);
        if self.w(e).load(SeqCst) != n + 1 {
            return None;
        }
        Some([self.w(e + 1).load(Relaxed), self.w(e + 2).load(Relaxed)])
    }
}
