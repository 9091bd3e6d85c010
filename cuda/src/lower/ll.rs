//! The LL (low-latency) protocol: the sender writes data and an epoch flag together into the
//! receiver's LL buffer, and the receiver's items read it locally, waiting on the flags.

use super::item::{Buf, Item, ItemKind, LowerError, Operand, LL_DATA_BYTES};
use super::memory::Lowerer;

impl Lowerer<'_> {
    /// The sender pushes `segs` into `r`'s LL buffer; returns where they land.
    pub(super) fn ll_push(
        &mut self,
        sender: u32,
        r: u32,
        segs: &[(Operand, u64)],
    ) -> Result<Vec<(Operand, u64)>, LowerError> {
        let mut ll = Vec::new();
        for (o, len) in segs {
            let grain = (16 / self.p.elem_bytes.max(1)).max(1);
            let start = self.ll_next[r as usize].div_ceil(grain) * grain;
            if (start + len) * self.p.elem_bytes > LL_DATA_BYTES {
                return Err(LowerError::Unsupported(format!(
                    "rank {r} would receive more than {LL_DATA_BYTES} bytes through LL buffers"
                )));
            }
            self.ll_next[r as usize] = start + len;
            let d = vec![(
                Operand {
                    rank: r,
                    buf: Buf::Ll,
                    off: start,
                },
                *len,
            )];
            self.emit(
                sender,
                ItemKind::Reduce,
                &[vec![(*o, *len)]],
                std::slice::from_ref(&d),
                false,
            )?;
            ll.extend(d);
        }
        Ok(ll)
    }
}

/// Refuses lowered plans the kernel's LL path cannot run.
pub(super) fn check_ll(items: &[Item], elem_bytes: u64) -> Result<(), LowerError> {
    // LL buffers alternate two halves by epoch; a sender may rewrite a half two calls
    // later only because it had to receive from that receiver in between. A one-way LL
    // flow (broadcast, reduce) would let the sender lap the receiver: refuse it.
    // Ordered, so that the error names the same pair on every run.
    let mut pairs = std::collections::BTreeSet::new();
    for it in items {
        for d in it
            .dsts
            .iter()
            .filter(|o| o.buf == Buf::Ll && o.rank != it.exec)
        {
            pairs.insert((it.exec, d.rank));
        }
    }
    if let Some((a, b)) = pairs.iter().find(|(a, b)| !pairs.contains(&(*b, *a))) {
        return Err(LowerError::Unsupported(format!(
            "LL needs traffic both ways between ranks, but rank {a} only sends to rank {b} (use the Simple protocol)"
        )));
    }
    // The kernel's LL path moves 8-byte groups: every LL operand must start on one.
    let eb = elem_bytes.max(1);
    if items.iter().any(|i| {
        i.srcs
            .iter()
            .chain(&i.dsts)
            .any(|o| o.buf == Buf::Ll && !(o.off * eb).is_multiple_of(8))
    }) {
        return Err(LowerError::Unsupported(
            "LL transfer cut at an unaligned element".into(),
        ));
    }
    Ok(())
}
