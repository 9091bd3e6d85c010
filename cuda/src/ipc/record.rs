//! The record each rank sends the others at setup ([`PeerRecord`]: its direct-path buffers'
//! IPC handles, SM count, who it is), its fixed-size versioned encoding, and the check of the
//! gathered table.

use super::shared::rank_err;
use crate::CudaError;

/// First bytes of a [`PeerRecord`].
pub const RECORD_MAGIC: &[u8; 4] = b"TPIX";
/// Version of the [`PeerRecord`] layout. Bump on any change.
pub const RECORD_VERSION: u32 = 1;
/// Size of an encoded [`PeerRecord`]: 40 header bytes, then 3 × (64-byte handle, u64 size).
pub const RECORD_BYTES: usize = 40 + 3 * (64 + 8);

/// Why an exchanged record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("IPC record of {got} bytes, expected {want}")]
    Length { got: usize, want: usize },
    #[error("not a topoplan IPC record (magic {0:?})")]
    Magic([u8; 4]),
    #[error("IPC record version {theirs}, this build reads version {ours}")]
    Version { theirs: u32, ours: u32 },
}

/// What one rank tells the others: its direct-path buffers (IPC handles and sizes: sizes
/// differ when `TOPOPLAN_DIRECT_SLOT_KB`/`SLOTS` differ, and the slot layout must agree), its SM
/// count (grids must agree on every rank), and who it is (same host, another process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRecord {
    pub rank: u32,
    pub nranks: u32,
    pub sm_count: u32,
    pub ordinal: u32,
    pub pid: u32,
    /// FNV-1a of the host name: IPC handles only open on the host that made them.
    pub host: u64,
    /// `CUipcMemHandle` bytes of the Simple slots, LL slots and flags.
    pub handles: [[u8; 64]; 3],
    pub bytes: [u64; 3],
}

pub(super) const BUF_NAMES: [&str; 3] = ["Simple slots", "LL slots", "flags"];

impl PeerRecord {
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[..4].copy_from_slice(RECORD_MAGIC);
        let words = [
            RECORD_VERSION,
            self.rank,
            self.nranks,
            self.sm_count,
            self.ordinal,
            self.pid,
            0,
        ];
        for (i, w) in words.iter().enumerate() {
            b[4 + 4 * i..8 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        b[32..40].copy_from_slice(&self.host.to_le_bytes());
        for i in 0..3 {
            let at = 40 + i * 72;
            b[at..at + 64].copy_from_slice(&self.handles[i]);
            b[at + 64..at + 72].copy_from_slice(&self.bytes[i].to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, RecordError> {
        if b.len() != RECORD_BYTES {
            return Err(RecordError::Length {
                got: b.len(),
                want: RECORD_BYTES,
            });
        }
        let magic: [u8; 4] = b[..4].try_into().expect("4 bytes");
        if &magic != RECORD_MAGIC {
            return Err(RecordError::Magic(magic));
        }
        let w = |i: usize| u32::from_le_bytes(b[4 + 4 * i..8 + 4 * i].try_into().expect("4"));
        if w(0) != RECORD_VERSION {
            return Err(RecordError::Version {
                theirs: w(0),
                ours: RECORD_VERSION,
            });
        }
        let mut handles = [[0u8; 64]; 3];
        let mut bytes = [0u64; 3];
        for i in 0..3 {
            let at = 40 + i * 72;
            handles[i].copy_from_slice(&b[at..at + 64]);
            bytes[i] = u64::from_le_bytes(b[at + 64..at + 72].try_into().expect("8"));
        }
        Ok(PeerRecord {
            rank: w(1),
            nranks: w(2),
            sm_count: w(3),
            ordinal: w(4),
            pid: w(5),
            host: u64::from_le_bytes(b[32..40].try_into().expect("8")),
            handles,
            bytes,
        })
    }
}

/// Decodes and checks the gathered records against this rank's own; returns them in rank order.
pub fn check_table(table: &[Vec<u8>], me: &PeerRecord) -> Result<Vec<PeerRecord>, CudaError> {
    let r = me.rank;
    if table.len() != me.nranks as usize {
        return Err(rank_err(
            r,
            format!(
                "the exchange returned {} records for {} ranks",
                table.len(),
                me.nranks
            ),
        ));
    }
    let mut out = Vec::with_capacity(table.len());
    for (i, b) in table.iter().enumerate() {
        let p = PeerRecord::decode(b)
            .map_err(|e| rank_err(r, format!("rank {i}'s IPC record: {e}")))?;
        let bad = |what: String| Err(rank_err(r, format!("rank {i}'s IPC record: {what}")));
        if p.rank as usize != i {
            return bad(format!("says it is rank {}", p.rank));
        }
        if p.nranks != me.nranks {
            return bad(format!("{} ranks, this rank says {}", p.nranks, me.nranks));
        }
        if i as u32 != r {
            if p.host != me.host {
                return bad("another host: CUDA IPC needs every rank on one host".into());
            }
            if p.pid == me.pid {
                return bad(format!(
                    "same process (pid {}): IPC handles open only in another process",
                    p.pid
                ));
            }
        }
        if p.bytes != me.bytes {
            return bad(format!(
                "buffers of {:?} bytes, this rank's are {:?} (TOPOPLAN_DIRECT_SLOT_KB / \
                 TOPOPLAN_DIRECT_SLOTS must be the same on every rank)",
                p.bytes, me.bytes
            ));
        }
        if p.sm_count == 0 {
            return bad("0 SMs".into());
        }
        out.push(p);
    }
    Ok(out)
}
