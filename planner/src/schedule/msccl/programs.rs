//! Rank channel programs from parsed threadblocks: every real step placed on an IR channel, its
//! op with the waits it carries as deps, and the input copy of in-place files.

use super::components::resolve;
use super::import::{Channels, Tb};
use super::{step_type, MscclError};
use crate::schedule::ir::*;

/// Rank `r`'s channel programs from its threadblocks.
pub(super) fn rank_channels(
    file: &str,
    r: usize,
    tbs: &[Tb],
    chans: &Channels,
    in_place: bool,
) -> Result<Vec<ChannelProgram>, MscclError> {
    let (pos, placed) = place_steps(tbs, &chans.of[r], chans.lossless, chans.count);
    let rank = RankSteps {
        file,
        r,
        tbs,
        pos,
        lossless: chans.lossless,
    };
    let mut slots: Vec<Vec<Option<Op>>> = vec![Vec::new(); chans.count as usize];
    for &(c, idx, t, k) in &placed {
        let op = rank.op(c, idx, t, k, in_place)?;
        let ch = &mut slots[c as usize];
        if ch.len() <= idx as usize {
            ch.resize(idx as usize + 1, None);
        }
        ch[idx as usize] = Some(op);
    }
    let mut programs = Vec::with_capacity(slots.len());
    for (c, ch) in slots.into_iter().enumerate() {
        let mut ops = Vec::with_capacity(ch.len());
        for (i, o) in ch.into_iter().enumerate() {
            ops.push(o.ok_or_else(|| {
                rank.err(format!(
                    "gpu {r}: channel {c} has no step with tp_op=\"{i}\""
                ))
            })?);
        }
        programs.push(ChannelProgram { ops });
    }
    Ok(programs)
}

/// The (IR channel, index) of every step of every tb; `None` for nops.
type Positions = Vec<Vec<Option<(u32, u32)>>>;

/// Places every real step: its position, and the list of (channel, index, tb, step). Foreign
/// files: threadblocks sharing an IR channel (rare: a message chain revisiting a rank) interleave
/// step by step.
fn place_steps(
    tbs: &[Tb],
    chan_of: &[u32],
    lossless: bool,
    nch: u32,
) -> (Positions, Vec<(u32, u32, usize, usize)>) {
    let mut pos: Positions = tbs.iter().map(|tb| vec![None; tb.steps.len()]).collect();
    let mut placed: Vec<(u32, u32, usize, usize)> = Vec::new(); // (chan, idx, tb, step)
    if lossless {
        for (t, tb) in tbs.iter().enumerate() {
            for (k, st) in tb.steps.iter().enumerate() {
                if st.kind.is_some() {
                    let at = (chan_of[t], st.tp_op.unwrap());
                    pos[t][k] = Some(at);
                    placed.push((at.0, at.1, t, k));
                }
            }
        }
    } else {
        let mut keyed: Vec<(u32, usize, usize)> = Vec::new(); // (chan, step, tb)
        for (t, tb) in tbs.iter().enumerate() {
            for (k, st) in tb.steps.iter().enumerate() {
                if st.kind.is_some() {
                    keyed.push((chan_of[t], k, t));
                }
            }
        }
        keyed.sort_unstable();
        let mut counts = vec![0u32; nch as usize];
        for (c, k, t) in keyed {
            let idx = counts[c as usize];
            counts[c as usize] += 1;
            pos[t][k] = Some((c, idx));
            placed.push((c, idx, t, k));
        }
    }
    (pos, placed)
}

/// One rank's threadblocks with every real step placed on an IR channel.
struct RankSteps<'a> {
    file: &'a str,
    r: usize,
    tbs: &'a [Tb],
    pos: Positions,
    lossless: bool,
}

impl RankSteps<'_> {
    /// Errors found after parsing have no position in the file.
    fn err(&self, msg: String) -> MscclError {
        MscclError::At {
            file: self.file.into(),
            line: 0,
            col: 0,
            msg,
        }
    }

    /// The op of step `k` of tb `t`, placed at index `idx` of channel `c`.
    fn op(&self, c: u32, idx: u32, t: usize, k: usize, in_place: bool) -> Result<Op, MscclError> {
        let r = self.r;
        let tb = &self.tbs[t];
        let st = &tb.steps[k];
        let kind = st.kind.unwrap();
        let mut op = Op {
            src: kind.needs_src().then_some(st.src),
            dst: kind.needs_dst().then_some(st.dst),
            send_to: if kind.sends() { tb.send } else { None },
            recv_from: if kind.receives() { tb.recv } else { None },
            transport: st.transport.unwrap_or(Transport::P2pStore),
            ..Op::base(kind)
        };
        if kind.sends() && tb.send.is_none() || kind.receives() && tb.recv.is_none() {
            return Err(self.err(format!(
                "gpu {r} tb {t} step {k}: a {} step in a tb without a {} peer",
                step_type(kind),
                if kind.sends() && tb.send.is_none() {
                    "send"
                } else {
                    "recv"
                }
            )));
        }
        for w in step_waits(tb, k) {
            for (dc, di) in resolve(self.tbs, &self.pos, w, 0) {
                if dc == c {
                    if di >= idx && !self.lossless {
                        return Err(self.err(format!(
                            "gpu {r} tb {t} step {k} waits for a later step of its own channel"
                        )));
                    }
                    continue; // program order already implies it
                }
                let d = OpRef {
                    channel: dc,
                    index: di,
                };
                if !op.deps.contains(&d) {
                    op.deps.push(d);
                }
            }
        }
        op.deps.sort();
        if in_place {
            for b in [&mut op.src, &mut op.dst].into_iter().flatten() {
                if b.buffer == BufferKind::Input {
                    b.buffer = BufferKind::Output;
                }
            }
        }
        Ok(op)
    }
}

/// The waits of step `k`: its own and those of the nops right before it.
fn step_waits(tb: &Tb, k: usize) -> Vec<(usize, usize)> {
    let mut waits = Vec::new();
    let mut j = k;
    loop {
        if let Some(d) = tb.steps[j].dep {
            waits.push(d);
        }
        if j == 0 || tb.steps[j - 1].kind.is_some() {
            break;
        }
        j -= 1;
    }
    waits
}

/// In place the data starts in the output: copy the input there first, and everything waits.
pub(super) fn prepend_input_copy(programs: &mut [ChannelProgram], total: u32) {
    let copy = Op::copy(
        ChunkRef::new(BufferKind::Input, 0, total),
        ChunkRef::new(BufferKind::Output, 0, total),
    );
    for (c, p) in programs.iter_mut().enumerate() {
        for op in &mut p.ops {
            for d in &mut op.deps {
                if d.channel == 0 {
                    d.index += 1;
                }
            }
        }
        if c > 0 {
            if let Some(first) = p.ops.first_mut() {
                first.deps.insert(
                    0,
                    OpRef {
                        channel: 0,
                        index: 0,
                    },
                );
            }
        }
    }
    programs[0].ops.insert(0, copy);
}
