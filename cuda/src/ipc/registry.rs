//! Registered buffers' records and bookkeeping: the record a rank sends about a buffer it
//! registers ([`RegRecord`]), the check of the gathered table, a registration as this process
//! sees it, and every rank's input of a call in a registered buffer ([`peer_inputs`]). A leaf
//! of `ipc`; `register.rs` runs the collective steps.

use super::shared::{rank_err, IpcMapping};
use crate::CudaError;

/// First bytes of a [`RegRecord`].
pub const REG_MAGIC: &[u8; 4] = b"TPRG";
/// Version of the [`RegRecord`] layout. Bump on any change.
pub const REG_VERSION: u32 = 1;
/// Size of an encoded [`RegRecord`]: magic, version, index, padding, the 64-byte handle of the
/// allocation, the buffer's offset in it and its size.
pub const REG_BYTES: usize = 16 + 64 + 16;

/// A buffer every rank registered together: name it in [`super::ProcRequest::registered_input`].
/// Valid until [`CudaProcComm::deregister`] or the communicator's end; the buffer must stay
/// allocated until then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisteredBuffer(pub(super) u32);

/// What one rank tells the others about a buffer it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegRecord {
    /// The how-many-th registration of this communicator (must agree across ranks).
    pub index: u32,
    /// `CUipcMemHandle` of the allocation the buffer lies in.
    pub handle: [u8; 64],
    /// The buffer's offset into that allocation.
    pub offset: u64,
    pub bytes: u64,
}

impl RegRecord {
    pub fn encode(&self) -> [u8; REG_BYTES] {
        let mut b = [0u8; REG_BYTES];
        b[..4].copy_from_slice(REG_MAGIC);
        b[4..8].copy_from_slice(&REG_VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&self.index.to_le_bytes());
        b[16..80].copy_from_slice(&self.handle);
        b[80..88].copy_from_slice(&self.offset.to_le_bytes());
        b[88..96].copy_from_slice(&self.bytes.to_le_bytes());
        b
    }

    /// Decodes a record; the error says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() != REG_BYTES {
            return Err(format!(
                "registration record of {} bytes, expected {REG_BYTES}",
                b.len()
            ));
        }
        if &b[..4] != REG_MAGIC {
            return Err(format!("not a registration record (magic {:?})", &b[..4]));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
        if u32_at(4) != REG_VERSION {
            return Err(format!(
                "registration record version {}, this build reads version {REG_VERSION}",
                u32_at(4)
            ));
        }
        let mut handle = [0u8; 64];
        handle.copy_from_slice(&b[16..80]);
        Ok(Self {
            index: u32_at(8),
            handle,
            offset: u64_at(80),
            bytes: u64_at(88),
        })
    }
}

/// Decodes and checks every rank's record against this rank's own (same index, same size).
pub fn check_reg_table(
    table: &[Vec<u8>],
    me: &RegRecord,
    rank: u32,
    nranks: u32,
) -> Result<Vec<RegRecord>, CudaError> {
    if table.len() != nranks as usize {
        return Err(rank_err(
            rank,
            format!(
                "the registration exchange returned {} records for {nranks} ranks",
                table.len()
            ),
        ));
    }
    table
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let bad = |what: String| rank_err(rank, format!("rank {i}'s registration: {what}"));
            let p = RegRecord::decode(b).map_err(bad)?;
            if p.index != me.index {
                return Err(bad(format!(
                    "registration number {}, this rank's is {} (every rank must register the \
                     same buffers in the same order)",
                    p.index, me.index
                )));
            }
            if p.bytes != me.bytes {
                return Err(bad(format!(
                    "{} bytes, this rank registers {} (every rank registers a buffer of the \
                     same size)",
                    p.bytes, me.bytes
                )));
            }
            Ok(p)
        })
        .collect()
}

/// One registration as this process sees it: every rank's buffer start (the peers' through
/// the mappings it keeps open).
pub(super) struct Registration {
    pub(super) starts: [u64; 8],
    pub(super) bytes: u64,
    pub(super) _mapped: Vec<IpcMapping>,
}

/// Every rank's input of a call whose input is at `input` on `rank` (`in_bytes` long), in the
/// registered buffer that starts at `starts[r]` on rank r and is `bytes` long. Rank r's input
/// sits `r * stride` bytes after a common offset: `stride` 0 (the same offset on every rank), or
/// `in_bytes` for an in-place all-gather (rank r's input is block r of its output). An error
/// when some rank's input would not lie inside its buffer.
pub fn peer_inputs(
    starts: &[u64; 8],
    bytes: u64,
    nranks: u32,
    rank: u32,
    input: u64,
    in_bytes: u64,
    stride: u64,
) -> Result<[u64; 8], CudaError> {
    let mine = starts[rank as usize];
    let outside = || {
        rank_err(
            rank,
            format!(
                "the input ({in_bytes} bytes at {input:#x}) does not lie in the registered buffer \
                 it names ({bytes} bytes at {mine:#x}) at the place every rank's input must"
            ),
        )
    };
    // The common offset, then the last rank's input end, in checked arithmetic.
    let common = input
        .checked_sub(mine)
        .and_then(|o| o.checked_sub(rank as u64 * stride))
        .ok_or_else(outside)?;
    let last_end = (nranks as u64 - 1)
        .checked_mul(stride)
        .and_then(|x| x.checked_add(common))
        .and_then(|x| x.checked_add(in_bytes))
        .ok_or_else(outside)?;
    if last_end > bytes || common + rank as u64 * stride + in_bytes > bytes {
        return Err(outside());
    }
    let mut out = [0u64; 8];
    for (r, o) in out.iter_mut().enumerate().take(nranks as usize) {
        *o = starts[r] + common + r as u64 * stride;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(index: u32, bytes: u64) -> RegRecord {
        let mut handle = [0u8; 64];
        for (i, h) in handle.iter_mut().enumerate() {
            *h = (i * 3 + index as usize) as u8;
        }
        RegRecord {
            index,
            handle,
            offset: 4096,
            bytes,
        }
    }

    #[test]
    fn records_round_trip_and_bad_ones_say_why() {
        let r = rec(2, 1 << 20);
        assert_eq!(RegRecord::decode(&r.encode()).unwrap(), r);
        let mut b = r.encode();
        b[0] = b'X';
        assert!(RegRecord::decode(&b).unwrap_err().contains("magic"));
        let mut b = r.encode();
        b[4] = 9;
        assert!(RegRecord::decode(&b).unwrap_err().contains("version 9"));
        assert!(RegRecord::decode(&b[..50])
            .unwrap_err()
            .contains("50 bytes"));
    }

    #[test]
    fn ranks_must_register_alike() {
        let me = rec(1, 1 << 20);
        let ok = vec![me.encode().to_vec(), rec(1, 1 << 20).encode().to_vec()];
        assert_eq!(check_reg_table(&ok, &me, 0, 2).unwrap().len(), 2);
        let order = vec![me.encode().to_vec(), rec(0, 1 << 20).encode().to_vec()];
        let e = check_reg_table(&order, &me, 0, 2).unwrap_err().to_string();
        assert!(
            e.contains("rank 1's registration: registration number 0"),
            "{e}"
        );
        let size = vec![me.encode().to_vec(), rec(1, 1 << 19).encode().to_vec()];
        let e = check_reg_table(&size, &me, 0, 2).unwrap_err().to_string();
        assert!(
            e.contains("524288 bytes, this rank registers 1048576"),
            "{e}"
        );
        let e = check_reg_table(&ok[..1], &me, 0, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 records for 2 ranks"), "{e}");
    }

    proptest! {
        /// Whatever a peer sends, decoding never panics, and what it accepts re-encodes to the
        /// same bytes but the padding word (the fuzz target `reg_record` checks the same).
        #[test]
        fn any_bytes_decode_safely(
            body in proptest::collection::vec(any::<u8>(), REG_BYTES),
            len in prop_oneof![Just(REG_BYTES), 0usize..130],
            valid_header in any::<bool>(),
        ) {
            let mut b = body;
            b.resize(len, 0);
            if valid_header && b.len() >= 8 {
                b[..4].copy_from_slice(REG_MAGIC);
                b[4..8].copy_from_slice(&REG_VERSION.to_le_bytes());
            }
            if let Ok(r) = RegRecord::decode(&b) {
                let e = r.encode();
                prop_assert_eq!(&e[..12], &b[..12]);
                prop_assert_eq!(&e[16..], &b[16..]);
            }
        }

        /// Inside the buffer, every rank's input sits at this rank's offset into its own
        /// buffer; anything reaching outside is refused.
        #[test]
        fn peer_inputs_keep_the_offset(
            bytes in 1u64..1 << 30,
            off in 0u64..1 << 31,
            len in 0u64..1 << 31,
            rank in 0u32..4,
        ) {
            let starts = [0x1000_0000_0000, 0x2000_0000_0000, 0x3000_0000_0000, 0x4000_0000_0000, 0, 0, 0, 0];
            let input = starts[rank as usize] + off;
            match peer_inputs(&starts, bytes, 4, rank, input, len, 0) {
                Ok(v) => {
                    prop_assert!(off + len <= bytes);
                    for r in 0..4 {
                        prop_assert_eq!(v[r], starts[r] + off);
                    }
                    prop_assert_eq!(&v[4..], &[0u64; 4][..]);
                }
                Err(e) => {
                    prop_assert!(off + len > bytes);
                    prop_assert!(e.to_string().contains("does not lie in the registered buffer"));
                }
            }
        }

        /// In-place all-gather: rank r's input is block r of an output at a common offset;
        /// every rank's block must fit.
        #[test]
        fn in_place_all_gather_inputs_follow_the_rank(
            common in 0u64..1 << 20,
            block in 1u64..1 << 20,
            rank in 0u32..4,
            bytes in 1u64..1 << 23,
        ) {
            let starts = [0x10_0000_0000, 0x20_0000_0000, 0x30_0000_0000, 0x40_0000_0000, 0, 0, 0, 0];
            let input = starts[rank as usize] + common + rank as u64 * block;
            match peer_inputs(&starts, bytes, 4, rank, input, block, block) {
                Ok(v) => {
                    prop_assert!(common + 4 * block <= bytes);
                    for r in 0..4 {
                        prop_assert_eq!(v[r], starts[r] + common + r as u64 * block);
                    }
                }
                Err(_) => prop_assert!(common + 4 * block > bytes),
            }
        }
    }

    #[test]
    fn an_input_before_the_buffer_is_refused() {
        let starts = [0x2000, 0x9000, 0, 0, 0, 0, 0, 0];
        assert!(peer_inputs(&starts, 0x100, 2, 0, 0x1ff0, 16, 0).is_err());
        assert_eq!(
            peer_inputs(&starts, 0x100, 2, 0, 0x2010, 16, 0).unwrap()[..2],
            [0x2010, 0x9010]
        );
        // Rank 1 of an in-place all-gather of 16-byte blocks: its block is the second.
        assert_eq!(
            peer_inputs(&starts, 0x100, 2, 1, 0x9010, 16, 16).unwrap()[..2],
            [0x2000, 0x9010]
        );
        // Rank 1 claiming block 1 at offset 0 has no common offset.
        assert!(peer_inputs(&starts, 0x100, 2, 1, 0x9000, 16, 16).is_err());
    }
}
