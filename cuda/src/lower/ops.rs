//! One schedule op of one rank → work items. Local copies and reductions run on the rank's
//! SMs; a receive reads the sender's payload by the op's transport (receiver load, sender
//! store, copy engine staged through scratch when it also reduces, or LL).

use super::item::{ItemKind, LowerError, Operand};
use super::memory::{Lowerer, Payload};
use super::snapshot::Inflight;
use planner::schedule::{OpKind, Transport};

pub(super) fn lower_op(
    l: &mut Lowerer,
    r: u32,
    op: &planner::schedule::Op,
    recv: Option<Payload>,
    iter: u64,
    inflight: &mut Inflight,
    channel: u32,
) -> Result<(), LowerError> {
    let src = match &op.src {
        Some(c) => Some(l.segs(r, c, iter, false)?),
        None => None,
    };
    // A destination that is also read (`Reduce`: dst = dst ⊕ src) is read first.
    let dst_old = match (&op.dst, op.kind) {
        (Some(c), OpKind::Reduce) => Some(l.segs(r, c, iter, false)?),
        _ => None,
    };
    let dst = match &op.dst {
        Some(c) => Some(l.segs(r, c, iter, true)?),
        None => None,
    };
    if let Some(pl) = &recv {
        if !l.payload_intact(pl) {
            return Err(LowerError::Unsupported(
                "a message's source is overwritten before the receive reads it (needs staging)"
                    .into(),
            ));
        }
    }
    // The payload this op sends on, once computed.
    let mut out_payload: Option<Vec<(Operand, u64)>> = None;
    match op.kind {
        OpKind::Send => out_payload = src.clone(),
        OpKind::Copy | OpKind::Reduce => {
            let (s, d) = (src.unwrap_or_default(), dst.unwrap_or_default());
            if op.kind == OpKind::Copy && s == d {
                return Ok(()); // in-place aliasing made it a no-op
            }
            let srcs = if op.kind == OpKind::Reduce {
                vec![dst_old.unwrap_or_default(), s]
            } else {
                vec![s]
            };
            l.emit(r, ItemKind::Reduce, &srcs, std::slice::from_ref(&d), false)?;
        }
        _ => {
            let pl = recv.ok_or_else(|| LowerError::Invalid("receive without payload".into()))?;
            let target = lower_recv(l, r, op, dst.as_ref(), src.as_ref(), pl)?;
            if op.kind.sends() {
                out_payload = Some(target);
            }
        }
    }
    if op.kind.sends() {
        let to = op
            .send_to
            .ok_or_else(|| LowerError::Invalid(format!("rank {r}: send without send_to")))?;
        let segs = out_payload.unwrap_or_default();
        inflight
            .entry((channel, r, to))
            .or_default()
            .push_back(Payload {
                segs,
                transport: op.transport,
                mark: l.items.len(),
            });
    }
    Ok(())
}

type Segs = Vec<(Operand, u64)>;

/// A receive of payload `pl` into the op's dst (or scratch when it is only forwarded),
/// reduced with the op's `src` where it reduces; returns where the result is.
fn lower_recv(
    l: &mut Lowerer,
    r: u32,
    op: &planner::schedule::Op,
    dst: Option<&Segs>,
    src: Option<&Segs>,
    mut pl: Payload,
) -> Result<Segs, LowerError> {
    // Where the result goes: the op's dst, or scratch when it is only forwarded.
    let target = match (dst, op.kind) {
        (Some(d), _) => d.clone(),
        (None, OpKind::RecvReduceSend) => {
            let len = pl.segs.iter().map(|s| s.1).sum();
            l.scratch(r, len, false)?
        }
        _ => {
            return Err(LowerError::Invalid(format!(
                "rank {r}: {:?} without dst",
                op.kind
            )))
        }
    };
    let local_src = if op.kind.reduces() {
        src.cloned()
    } else {
        None
    };
    let sender = pl.segs.first().map(|s| s.0.rank).unwrap_or(r);
    if l.s.protocol == planner::schedule::Protocol::LL
        && pl.transport != Transport::CopyEngine
        && sender != r
    {
        // LL: the sender writes the message into our LL buffer (data and epoch flag
        // together); our items then read it locally, waiting on the flags.
        let ll = l.ll_push(sender, r, &pl.segs)?;
        pl.segs = ll;
        pl.transport = Transport::P2pLoad; // now local to us
    }
    emit_recv(l, r, sender, pl, local_src, &target)?;
    Ok(target)
}

/// The items of a receive by its transport: copy engine (staged in scratch when it reduces),
/// sender store, or receiver load (reducing with our own data).
fn emit_recv(
    l: &mut Lowerer,
    r: u32,
    sender: u32,
    pl: Payload,
    local: Option<Segs>,
    target: &Segs,
) -> Result<(), LowerError> {
    match (pl.transport, local) {
        (Transport::CopyEngine, local) => {
            // Pulled by the receiver's copy engine, or pushed by the sender's.
            let exec = if l.p.ce_push { sender } else { r };
            // A copy engine cannot reduce: a reducing receive is staged in scratch.
            let to = match local {
                Some(_) => {
                    let len = pl.segs.iter().map(|s| s.1).sum();
                    l.scratch(r, len, true)?
                }
                None => target.clone(),
            };
            l.emit(
                exec,
                ItemKind::Reduce,
                std::slice::from_ref(&pl.segs),
                std::slice::from_ref(&to),
                true,
            )?;
            if let Some(ls) = local {
                l.emit(
                    r,
                    ItemKind::Reduce,
                    &[to, ls],
                    std::slice::from_ref(target),
                    false,
                )?;
            }
        }
        (Transport::P2pStore, None) => {
            // The sender's SMs push the data into our buffer.
            l.emit(
                sender,
                ItemKind::Reduce,
                std::slice::from_ref(&pl.segs),
                std::slice::from_ref(target),
                false,
            )?;
        }
        // Our SMs read the message (and reduce it with our own data).
        (_, local) => {
            let mut srcs = vec![pl.segs];
            srcs.extend(local);
            l.emit(
                r,
                ItemKind::Reduce,
                &srcs,
                std::slice::from_ref(target),
                false,
            )?;
        }
    }
    Ok(())
}
