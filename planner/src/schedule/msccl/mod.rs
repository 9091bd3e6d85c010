//! MSCCL-IR XML (`<algo><gpu><tb><step>`, the format of MSCCL, msccl-tools/MSCCLang, TACCL and
//! ASTRA-sim's MSCCL front end) to and from the schedule IR.
//!
//! **Mapping.** An MSCCL threadblock (`tb`) has at most one send peer and one receive peer on one
//! channel and runs its steps in order; a step may wait for one step of another threadblock
//! (`depid`/`deps`; `nop` steps carry extra waits). Messages between two GPUs on one channel
//! match in order, as in our IR. Chunk offsets count chunks of the whole buffer (`i_chunks`,
//! `o_chunks`, `s_chunks` per GPU), which is our chunk numbering with
//! `chunks_per_block = i_chunks / input blocks`.
//!
//! - **Export** writes each IR channel of a rank as one threadblock per (send peer, receive peer)
//!   pair, repeated ops written out; program order across those threadblocks and IR deps become
//!   MSCCL dependencies (extra ones through `nop` steps). `tp_*` attributes (ignored by MSCCL)
//!   record what MSCCL cannot say (IR channel and op index, slots, pipelining, root, transport),
//!   so `import(export(s)) == s.expanded()`.
//! - **Import** of files without `tp_*` attributes gives every threadblock its own IR channel
//!   program; threadblocks joined by messages share an IR channel index (connected components,
//!   coloured so a rank never has two threadblocks on one index). In-place files (`o_chunks="0"`)
//!   compute in the output buffer after copying the input there.

use super::ir::*;
use super::validate::ScheduleError;
use std::fmt::Write as _;

#[derive(Debug, thiserror::Error)]
pub enum MscclError {
    #[error("{file}:{line}:{col}: {msg}")]
    At {
        file: String,
        line: u32,
        col: u32,
        msg: String,
    },
    #[error("{file}: the imported schedule is malformed: {source}")]
    Invalid {
        file: String,
        #[source]
        source: ScheduleError,
    },
    #[error("{0}")]
    Export(String),
}

/// Largest schedule (steps with repeats written out) `export` writes.
pub const MAX_EXPORT_STEPS: u64 = 1 << 22;

fn coll_msccl_name(k: CollectiveKind) -> &'static str {
    match k {
        CollectiveKind::AllReduce => "allreduce",
        CollectiveKind::AllGather => "allgather",
        CollectiveKind::ReduceScatter => "reduce_scatter",
        CollectiveKind::Broadcast => "broadcast",
        CollectiveKind::Reduce => "reduce",
        CollectiveKind::AllToAll => "alltoall",
        CollectiveKind::SendRecv => "sendrecv",
    }
}

pub(super) fn step_type(k: OpKind) -> &'static str {
    match k {
        OpKind::Send => "s",
        OpKind::Recv => "r",
        OpKind::RecvCopySend => "rcs",
        OpKind::RecvReduceSend => "rrs",
        OpKind::RecvReduceCopy => "rrc",
        OpKind::RecvReduceCopySend => "rrcs",
        OpKind::Copy => "cpy",
        OpKind::Reduce => "re",
    }
}

fn buf_char(b: BufferKind) -> char {
    match b {
        BufferKind::Input => 'i',
        BufferKind::Output => 'o',
        BufferKind::Scratch => 's',
    }
}

fn transport_name(t: Transport) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Writes `s` as one MSCCL-IR XML document named `name`.
pub fn export(s: &Schedule, name: &str) -> Result<String, MscclError> {
    check_exportable(s)?;
    let e = s.expanded();
    let counts = (
        e.buffer_chunks(BufferKind::Input),
        e.buffer_chunks(BufferKind::Output),
        e.buffer_chunks(BufferKind::Scratch),
    );
    let mut x = algo_open_tag(&e, name, counts);
    for rp in &e.ranks {
        write_gpu(&mut x, rp, counts);
    }
    x.push_str("</algo>\n");
    Ok(x)
}

/// Refuses invalid schedules and ones too large once their repeats are written out.
fn check_exportable(s: &Schedule) -> Result<(), MscclError> {
    s.validate()
        .map_err(|e| MscclError::Export(format!("refusing to export an invalid schedule: {e}")))?;
    let steps: u64 = s
        .ranks
        .iter()
        .flat_map(|r| &r.channels)
        .flat_map(|c| &c.ops)
        .map(|o| o.repeat as u64)
        .sum();
    if steps > MAX_EXPORT_STEPS {
        return Err(MscclError::Export(format!(
            "the schedule has {steps} steps once repeats are written out; MSCCL-IR has no repeat, so files above {MAX_EXPORT_STEPS} steps are refused (MSCCL's runtime itself runs at most 256 steps per threadblock)"
        )));
    }
    Ok(())
}

/// The `<algo ...>` line of expanded schedule `e`, with the `tp_*` attributes MSCCL ignores.
fn algo_open_tag(e: &Schedule, name: &str, (ic, oc, _): (u32, u32, u32)) -> String {
    let mut x = String::new();
    let _ = write!(
        x,
        "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{}\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\" tp_version=\"{}\" tp_algorithm=\"{}\" tp_chunks_per_block=\"{}\" tp_scratch_blocks=\"{}\" tp_slots=\"{}\"",
        xml_escape(name),
        e.protocol.name(),
        e.channels,
        ic.max(oc),
        e.nranks,
        coll_msccl_name(e.collective.kind),
        e.version,
        xml_escape(&e.algorithm.name()),
        e.chunks_per_block,
        e.scratch_blocks,
        e.slots
    );
    if let Some(l) = e.loop_elems {
        let _ = write!(x, " tp_loop_elems=\"{l}\"");
    }
    if let Some(r) = e.collective.root {
        let _ = write!(x, " tp_root=\"{r}\"");
    }
    if !e.collective.send_peers.is_empty() {
        let v: Vec<String> = e
            .collective
            .send_peers
            .iter()
            .map(|p| p.map(|p| p.to_string()).unwrap_or_else(|| "-".into()))
            .collect();
        let _ = write!(x, " tp_send_peers=\"{}\"", v.join(","));
    }
    x.push_str(">\n");
    x
}

/// A (tb, step) place in one rank's threadblocks.
type Place = (usize, u32);

/// One rank's threadblocks: an IR channel's ops with one (send peer, receive peer) pair each.
struct TbLayout {
    /// (channel, (send peer, receive peer)) per threadblock, -1 for none.
    tbs: Vec<(u32, (i64, i64))>,
    /// Steps per threadblock, nops included.
    len: Vec<u32>,
    /// Per channel, per op: its place.
    place: Vec<Vec<Place>>,
}

/// Writes one rank as a `<gpu>` of threadblocks.
fn write_gpu(x: &mut String, rp: &RankProgram, (ic, oc, sc): (u32, u32, u32)) {
    let _ = writeln!(
        x,
        "  <gpu id=\"{}\" i_chunks=\"{ic}\" o_chunks=\"{oc}\" s_chunks=\"{sc}\">",
        rp.rank
    );
    let layout = place_ops(rp);
    let waits = op_waits(rp, &layout.place);
    let mut has_dep: Vec<Vec<bool>> = layout
        .len
        .iter()
        .map(|l| vec![false; *l as usize])
        .collect();
    for w in waits.iter().flatten().flatten() {
        has_dep[w.0][w.1 as usize] = true;
    }
    // Emit threadblock by threadblock.
    let mut body: Vec<String> = vec![String::new(); layout.tbs.len()];
    for (c, ch) in rp.channels.iter().enumerate() {
        for (i, op) in ch.ops.iter().enumerate() {
            let (tb, step) = layout.place[c][i];
            write_op(&mut body[tb], op, i, step, &waits[c][i], &has_dep[tb]);
        }
    }
    for (t, (c, (sp, rv))) in layout.tbs.iter().enumerate() {
        let _ = writeln!(
            x,
            "    <tb id=\"{t}\" send=\"{sp}\" recv=\"{rv}\" chan=\"{c}\" tp_chan=\"{c}\">"
        );
        x.push_str(&body[t]);
        x.push_str("    </tb>\n");
    }
    x.push_str("  </gpu>\n");
}

/// Pass 1: threadblocks and every op's (tb, step) place, counting nops for extra waits.
fn place_ops(rp: &RankProgram) -> TbLayout {
    let key = |op: &Op| {
        (
            op.send_to.map_or(-1, |v| v as i64),
            op.recv_from.map_or(-1, |v| v as i64),
        )
    };
    let mut tbs: Vec<(u32, (i64, i64))> = Vec::new();
    let mut tb_len: Vec<u32> = Vec::new();
    let mut place: Vec<Vec<Place>> = Vec::new();
    for (c, ch) in rp.channels.iter().enumerate() {
        let mut pl = Vec::with_capacity(ch.ops.len());
        for (i, op) in ch.ops.iter().enumerate() {
            let k = (c as u32, key(op));
            let tb = match tbs.iter().position(|t| *t == k) {
                Some(t) => t,
                None => {
                    tbs.push(k);
                    tb_len.push(0);
                    tbs.len() - 1
                }
            };
            let mut nwait = op.deps.len();
            if i > 0 && pl.last().map(|p: &Place| p.0) != Some(tb) {
                nwait += 1;
            }
            tb_len[tb] += nwait.saturating_sub(1) as u32; // nops before the step
            pl.push((tb, tb_len[tb]));
            tb_len[tb] += 1;
        }
        place.push(pl);
    }
    TbLayout {
        tbs,
        len: tb_len,
        place,
    }
}

/// Pass 2: each op's waits in (tb, step) terms: the previous op of its channel when that runs
/// in another threadblock, then its deps.
fn op_waits(rp: &RankProgram, place: &[Vec<Place>]) -> Vec<Vec<Vec<Place>>> {
    let mut waits = Vec::with_capacity(rp.channels.len());
    for (c, ch) in rp.channels.iter().enumerate() {
        let mut w = Vec::with_capacity(ch.ops.len());
        for (i, op) in ch.ops.iter().enumerate() {
            let mut v = Vec::new();
            if i > 0 && place[c][i - 1].0 != place[c][i].0 {
                v.push(place[c][i - 1]);
            }
            for d in &op.deps {
                v.push(place[d.channel as usize][d.index as usize]);
            }
            w.push(v);
        }
        waits.push(w);
    }
    waits
}

/// Writes op `i` of a channel at `step` of its threadblock, after one nop per wait beyond the
/// step's own.
fn write_op(body: &mut String, op: &Op, i: usize, step: u32, w: &[Place], has_dep: &[bool]) {
    let first = step as usize + 1 - w.len().max(1);
    for (k, dep) in w.iter().enumerate().take(w.len().saturating_sub(1)) {
        let _ = writeln!(
            body,
            "      <step s=\"{}\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"0\" depid=\"{}\" deps=\"{}\" hasdep=\"{}\"/>",
            first + k,
            dep.0,
            dep.1,
            has_dep[first + k] as u8
        );
    }
    let (depid, deps) = w.last().map_or((-1, -1), |d| (d.0 as i64, d.1 as i64));
    let src = op.src.or(op.dst).unwrap();
    let dst = op.dst.or(op.src).unwrap();
    let tr = if op.kind.sends() && op.transport != Transport::P2pStore {
        format!(" tp_transport=\"{}\"", transport_name(op.transport))
    } else {
        String::new()
    };
    let _ = writeln!(
        body,
        "      <step s=\"{step}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\" tp_op=\"{i}\"{tr}/>",
        step_type(op.kind),
        buf_char(src.buffer),
        src.chunk,
        buf_char(dst.buffer),
        dst.chunk,
        src.count,
        has_dep[step as usize] as u8
    );
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

mod components;
mod import;
mod programs;

pub use import::import;
