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
use std::collections::HashMap;
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

fn step_type(k: OpKind) -> &'static str {
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
    s.validate()
        .map_err(|e| MscclError::Export(format!("refusing to export an invalid schedule: {e}")))?;
    let e = s.expanded();
    let n = e.nranks;
    let (ic, oc, sc) = (
        e.buffer_chunks(BufferKind::Input),
        e.buffer_chunks(BufferKind::Output),
        e.buffer_chunks(BufferKind::Scratch),
    );
    let mut x = String::new();
    let _ = write!(
        x,
        "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{n}\" coll=\"{}\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\" tp_version=\"{}\" tp_algorithm=\"{}\" tp_chunks_per_block=\"{}\" tp_scratch_blocks=\"{}\" tp_slots=\"{}\"",
        xml_escape(name),
        e.protocol.name(),
        e.channels,
        ic.max(oc),
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
    for rp in &e.ranks {
        let _ = writeln!(
            x,
            "  <gpu id=\"{}\" i_chunks=\"{ic}\" o_chunks=\"{oc}\" s_chunks=\"{sc}\">",
            rp.rank
        );
        // Pass 1: threadblocks and every op's (tb, step) place, counting nops for extra waits.
        let key = |op: &Op| {
            (
                op.send_to.map_or(-1, |v| v as i64),
                op.recv_from.map_or(-1, |v| v as i64),
            )
        };
        let mut tbs: Vec<(u32, (i64, i64))> = Vec::new(); // (channel, peers)
        let mut tb_len: Vec<u32> = Vec::new();
        let mut place: Vec<Vec<(usize, u32)>> = Vec::new();
        let mut waits: Vec<Vec<Vec<(usize, u32)>>> = Vec::new();
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
                if i > 0 && pl.last().map(|p: &(usize, u32)| p.0) != Some(tb) {
                    nwait += 1;
                }
                tb_len[tb] += nwait.saturating_sub(1) as u32; // nops before the step
                pl.push((tb, tb_len[tb]));
                tb_len[tb] += 1;
            }
            place.push(pl);
        }
        // Pass 2: each op's waits in (tb, step) terms.
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
        let mut has_dep = vec![Vec::new(); tbs.len()];
        for (t, l) in tb_len.iter().enumerate() {
            has_dep[t] = vec![false; *l as usize];
        }
        for w in waits.iter().flatten().flatten() {
            has_dep[w.0][w.1 as usize] = true;
        }
        // Emit threadblock by threadblock.
        let mut body: Vec<String> = vec![String::new(); tbs.len()];
        for (c, ch) in rp.channels.iter().enumerate() {
            for (i, op) in ch.ops.iter().enumerate() {
                let (tb, step) = place[c][i];
                let w = &waits[c][i];
                let first = step as usize + 1 - w.len().max(1);
                for (k, dep) in w.iter().enumerate().take(w.len().saturating_sub(1)) {
                    let _ = writeln!(
                        body[tb],
                        "      <step s=\"{}\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"0\" depid=\"{}\" deps=\"{}\" hasdep=\"{}\"/>",
                        first + k,
                        dep.0,
                        dep.1,
                        has_dep[tb][first + k] as u8
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
                    body[tb],
                    "      <step s=\"{step}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\" tp_op=\"{i}\"{tr}/>",
                    step_type(op.kind),
                    buf_char(src.buffer),
                    src.chunk,
                    buf_char(dst.buffer),
                    dst.chunk,
                    src.count,
                    has_dep[tb][step as usize] as u8
                );
            }
        }
        for (t, (c, (sp, rv))) in tbs.iter().enumerate() {
            let _ = writeln!(
                x,
                "    <tb id=\"{t}\" send=\"{sp}\" recv=\"{rv}\" chan=\"{c}\" tp_chan=\"{c}\">"
            );
            x.push_str(&body[t]);
            x.push_str("    </tb>\n");
        }
        x.push_str("  </gpu>\n");
    }
    x.push_str("</algo>\n");
    Ok(x)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

struct Ctx<'a> {
    file: &'a str,
    doc: &'a roxmltree::Document<'a>,
}

impl Ctx<'_> {
    fn err(&self, node: roxmltree::Node, msg: String) -> MscclError {
        let p = self.doc.text_pos_at(node.range().start);
        MscclError::At {
            file: self.file.to_string(),
            line: p.row,
            col: p.col,
            msg,
        }
    }
    fn attr<'n>(&self, node: roxmltree::Node<'n, 'n>, name: &str) -> Result<&'n str, MscclError> {
        node.attribute(name).ok_or_else(|| {
            self.err(
                node,
                format!("<{}> needs attribute `{name}`", node.tag_name().name()),
            )
        })
    }
    fn num<T: std::str::FromStr>(
        &self,
        node: roxmltree::Node,
        name: &str,
    ) -> Result<T, MscclError> {
        let v = self.attr(node, name)?;
        v.trim().parse().map_err(|_| {
            self.err(
                node,
                format!(
                    "<{}> attribute `{name}`=\"{v}\" is not a valid number here",
                    node.tag_name().name()
                ),
            )
        })
    }
    fn opt_num<T: std::str::FromStr>(
        &self,
        node: roxmltree::Node,
        name: &str,
    ) -> Result<Option<T>, MscclError> {
        match node.attribute(name) {
            None => Ok(None),
            Some(_) => self.num(node, name).map(Some),
        }
    }
}

/// One parsed step.
struct Step {
    kind: Option<OpKind>, // None: nop
    src: ChunkRef,
    dst: ChunkRef,
    dep: Option<(usize, usize)>,
    tp_op: Option<u32>,
    transport: Option<Transport>,
}

/// One `<gpu>`: i_chunks, o_chunks, s_chunks and its threadblocks.
type Gpu = (u32, u32, u32, Vec<Tb>);

struct Tb {
    send: Option<u32>,
    recv: Option<u32>,
    chan: u32,
    tp_chan: Option<u32>,
    steps: Vec<Step>,
}

/// Reads an MSCCL-IR XML document into a schedule (validated). `file` names it in errors.
pub fn import(text: &str, file: &str) -> Result<Schedule, MscclError> {
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        let p = e.pos();
        MscclError::At {
            file: file.to_string(),
            line: p.row,
            col: p.col,
            msg: format!("not well-formed XML: {e}"),
        }
    })?;
    let cx = Ctx { file, doc: &doc };
    let algo = doc.root_element();
    if algo.tag_name().name() != "algo" {
        return Err(cx.err(
            algo,
            format!(
                "the root element is <{}>, MSCCL-IR files start with <algo>",
                algo.tag_name().name()
            ),
        ));
    }
    let n: u32 = cx.num(algo, "ngpus")?;
    if n == 0 {
        return Err(cx.err(algo, "ngpus must be >= 1".into()));
    }
    let coll_name = cx.attr(algo, "coll")?;
    let kind = CollectiveKind::parse(coll_name)
        .ok_or_else(|| cx.err(algo, format!("unknown collective coll=\"{coll_name}\"")))?;
    let proto = match algo.attribute("proto") {
        None => Protocol::Simple,
        Some(p) => Protocol::parse(p)
            .ok_or_else(|| cx.err(algo, format!("unknown proto=\"{p}\" (LL, LL128, Simple)")))?,
    };
    let name = algo.attribute("name").unwrap_or("unnamed").to_string();
    let mut coll = Collective::new(kind);
    coll.root = cx.opt_num(algo, "tp_root")?;
    if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) && coll.root.is_none() {
        coll.root = Some(0); // MSCCL's rooted collectives use rank 0
    }
    if let Some(sp) = algo.attribute("tp_send_peers") {
        coll.send_peers = sp
            .split(',')
            .map(|x| match x.trim() {
                "-" => Ok(None),
                v => v.parse().map(Some).map_err(|_| {
                    cx.err(algo, format!("tp_send_peers entry \"{v}\" is not a rank"))
                }),
            })
            .collect::<Result<_, _>>()?;
    }
    let (bi, bo) = coll.blocks(n);
    let mut gpus: Vec<Option<Gpu>> = (0..n).map(|_| None).collect();
    for g in algo.children().filter(|c| c.is_element()) {
        if g.tag_name().name() != "gpu" {
            return Err(cx.err(
                g,
                format!(
                    "unexpected <{}> inside <algo>; expected <gpu>",
                    g.tag_name().name()
                ),
            ));
        }
        let id: u32 = cx.num(g, "id")?;
        if id >= n {
            return Err(cx.err(g, format!("gpu id {id} is not below ngpus {n}")));
        }
        if gpus[id as usize].is_some() {
            return Err(cx.err(g, format!("gpu id {id} appears twice")));
        }
        let ic: u32 = cx.num(g, "i_chunks")?;
        let oc: u32 = cx.num(g, "o_chunks")?;
        let sc: u32 = cx.opt_num(g, "s_chunks")?.unwrap_or(0);
        let mut tbs = Vec::new();
        let mut ids = HashMap::new();
        for t in g.children().filter(|c| c.is_element()) {
            if t.tag_name().name() != "tb" {
                return Err(cx.err(
                    t,
                    format!(
                        "unexpected <{}> inside <gpu>; expected <tb>",
                        t.tag_name().name()
                    ),
                ));
            }
            let tid: i64 = cx.num(t, "id")?;
            if ids.insert(tid, tbs.len()).is_some() {
                return Err(cx.err(t, format!("tb id {tid} appears twice in gpu {id}")));
            }
            let peer = |a: &str| -> Result<Option<u32>, MscclError> {
                let v: i64 = cx.num(t, a)?;
                match v {
                    -1 => Ok(None),
                    v if v >= 0 && (v as u32) < n && v as u32 != id => Ok(Some(v as u32)),
                    v => Err(cx.err(
                        t,
                        format!("tb {a}=\"{v}\" is not another rank below {n} (or -1)"),
                    )),
                }
            };
            let mut tb = Tb {
                send: peer("send")?,
                recv: peer("recv")?,
                chan: cx.opt_num(t, "chan")?.unwrap_or(0),
                tp_chan: cx.opt_num(t, "tp_chan")?,
                steps: Vec::new(),
            };
            for st in t.children().filter(|c| c.is_element()) {
                if st.tag_name().name() != "step" {
                    return Err(cx.err(
                        st,
                        format!(
                            "unexpected <{}> inside <tb>; expected <step>",
                            st.tag_name().name()
                        ),
                    ));
                }
                let s_idx: usize = cx.num(st, "s")?;
                if s_idx != tb.steps.len() {
                    return Err(cx.err(
                        st,
                        format!(
                            "step s=\"{s_idx}\" is out of order (expected {})",
                            tb.steps.len()
                        ),
                    ));
                }
                let ty = cx.attr(st, "type")?;
                let kind = match ty {
                    "s" => Some(OpKind::Send),
                    "r" => Some(OpKind::Recv),
                    "rcs" => Some(OpKind::RecvCopySend),
                    "rrs" => Some(OpKind::RecvReduceSend),
                    "rrc" => Some(OpKind::RecvReduceCopy),
                    "rrcs" => Some(OpKind::RecvReduceCopySend),
                    "cpy" => Some(OpKind::Copy),
                    "re" => Some(OpKind::Reduce),
                    "nop" => None,
                    other => return Err(cx.err(st, format!("unknown step type \"{other}\" (s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)"))),
                };
                let buf = |a: &str| -> Result<BufferKind, MscclError> {
                    match cx.attr(st, a)? {
                        "i" => Ok(BufferKind::Input),
                        "o" => Ok(BufferKind::Output),
                        "s" => Ok(BufferKind::Scratch),
                        v => Err(cx.err(st, format!("{a}=\"{v}\" is not a buffer (i, o, s)"))),
                    }
                };
                let cnt: u32 = cx.opt_num(st, "cnt")?.unwrap_or(1);
                let depid: i64 = cx.opt_num(st, "depid")?.unwrap_or(-1);
                let deps: i64 = cx.opt_num(st, "deps")?.unwrap_or(-1);
                let dep = if depid >= 0 && deps >= 0 {
                    Some((depid as usize, deps as usize))
                } else {
                    None
                };
                let transport = match st.attribute("tp_transport") {
                    None => None,
                    Some(v) => Some(
                        serde_json::from_value(serde_json::Value::String(v.into()))
                            .map_err(|_| cx.err(st, format!("unknown tp_transport \"{v}\"")))?,
                    ),
                };
                tb.steps.push(Step {
                    kind,
                    src: ChunkRef::new(buf("srcbuf")?, cx.num(st, "srcoff")?, cnt),
                    dst: ChunkRef::new(buf("dstbuf")?, cx.num(st, "dstoff")?, cnt),
                    dep,
                    tp_op: cx.opt_num(st, "tp_op")?,
                    transport,
                });
            }
            tbs.push(tb);
        }
        // Dependencies name tb ids; store them as indices.
        for tb in &mut tbs {
            for s in &mut tb.steps {
                if let Some((t, k)) = s.dep {
                    let Some(&ti) = ids.get(&(t as i64)) else {
                        return Err(cx.err(
                            g,
                            format!("gpu {id}: a step depends on tb {t}, which does not exist"),
                        ));
                    };
                    s.dep = Some((ti, k));
                }
            }
        }
        for tb in &tbs {
            for s in &tb.steps {
                if let Some((t, k)) = s.dep {
                    if k >= tbs[t].steps.len() {
                        return Err(cx.err(
                            g,
                            format!(
                                "gpu {id}: a step depends on step {k} of a tb with {} steps",
                                tbs[t].steps.len()
                            ),
                        ));
                    }
                }
            }
        }
        gpus[id as usize] = Some((ic, oc, sc, tbs));
    }
    let mut g = Vec::with_capacity(n as usize);
    for (i, x) in gpus.into_iter().enumerate() {
        g.push(x.ok_or_else(|| cx.err(algo, format!("gpu {i} is missing (ngpus is {n})")))?);
    }
    let (ic, oc, sc) = (g[0].0, g[0].1, g[0].2);
    if g.iter().any(|x| (x.0, x.1, x.2) != (ic, oc, sc)) {
        return Err(cx.err(
            algo,
            "every <gpu> must have the same i_chunks, o_chunks and s_chunks".into(),
        ));
    }
    let in_place = oc == 0;
    if in_place && bi != bo {
        return Err(cx.err(
            algo,
            format!(
                "in-place (o_chunks=\"0\") {} files are not supported; export them out-of-place",
                kind.name()
            ),
        ));
    }
    let cpb = match cx.opt_num::<u32>(algo, "tp_chunks_per_block")? {
        Some(c) => c,
        None => {
            if ic == 0 || ic % bi != 0 || (!in_place && oc != bo * (ic / bi)) {
                return Err(cx.err(algo, format!(
                    "i_chunks {ic} and o_chunks {oc} do not fit {}: input has {bi} block(s), output {bo}",
                    kind.name()
                )));
            }
            ic / bi
        }
    };
    let scratch_blocks = match cx.opt_num::<u32>(algo, "tp_scratch_blocks")? {
        Some(s) => s,
        None => sc.div_ceil(cpb.max(1)),
    };
    let lossless = g.iter().all(|x| {
        x.3.iter().all(|tb| {
            tb.tp_chan.is_some()
                && tb
                    .steps
                    .iter()
                    .all(|s| s.kind.is_none() || s.tp_op.is_some())
        })
    });
    // IR channel of every tb.
    let chan_of: Vec<Vec<u32>> = if lossless {
        g.iter()
            .map(|x| x.3.iter().map(|tb| tb.tp_chan.unwrap()).collect())
            .collect()
    } else {
        color_components(&g.iter().map(|x| &x.3).collect::<Vec<_>>())
    };
    let nch = chan_of
        .iter()
        .flatten()
        .map(|c| c + 1)
        .max()
        .unwrap_or(1)
        .max(if lossless {
            cx.opt_num::<u32>(algo, "nchannels")?.unwrap_or(1)
        } else {
            1
        });
    let mut s = Schedule {
        version: cx
            .opt_num(algo, "tp_version")?
            .unwrap_or(SCHEDULE_IR_VERSION),
        collective: coll,
        algorithm: match algo.attribute("tp_algorithm") {
            Some(a) => serde_json::from_value(serde_json::Value::String(a.into()))
                .unwrap_or(Algorithm::Msccl(name.clone())),
            None => Algorithm::Msccl(name.clone()),
        },
        protocol: proto,
        nranks: n,
        channels: nch,
        chunks_per_block: cpb,
        scratch_blocks,
        slots: cx.opt_num(algo, "tp_slots")?.unwrap_or(8),
        loop_elems: cx.opt_num(algo, "tp_loop_elems")?,
        orders: Vec::new(),
        ranks: Vec::with_capacity(n as usize),
    };
    for (r, (_, _, _, tbs)) in g.iter().enumerate() {
        // Place every real step: (IR channel, index). Foreign files: threadblocks sharing an IR
        // channel (rare: a message chain revisiting a rank) interleave step by step.
        let mut pos: Vec<Vec<Option<(u32, u32)>>> =
            tbs.iter().map(|tb| vec![None; tb.steps.len()]).collect();
        let mut placed: Vec<(u32, u32, usize, usize)> = Vec::new(); // (chan, idx, tb, step)
        if lossless {
            for (t, tb) in tbs.iter().enumerate() {
                for (k, st) in tb.steps.iter().enumerate() {
                    if st.kind.is_some() {
                        let at = (chan_of[r][t], st.tp_op.unwrap());
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
                        keyed.push((chan_of[r][t], k, t));
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
        let mut chans: Vec<Vec<Option<Op>>> = vec![Vec::new(); nch as usize];
        for &(c, idx, t, k) in &placed {
            let tb = &tbs[t];
            let st = &tb.steps[k];
            let kind = st.kind.unwrap();
            let mut op = Op {
                kind,
                src: kind.needs_src().then_some(st.src),
                dst: kind.needs_dst().then_some(st.dst),
                send_to: if kind.sends() { tb.send } else { None },
                recv_from: if kind.receives() { tb.recv } else { None },
                transport: st.transport.unwrap_or(Transport::P2pStore),
                deps: Vec::new(),
                repeat: 1,
                chunk_stride: 0,
                peer_stride: 0,
                walk: None,
            };
            if kind.sends() && tb.send.is_none() || kind.receives() && tb.recv.is_none() {
                return Err(MscclError::At {
                    file: file.into(),
                    line: 0,
                    col: 0,
                    msg: format!(
                        "gpu {r} tb {t} step {k}: a {} step in a tb without a {} peer",
                        step_type(kind),
                        if kind.sends() && tb.send.is_none() {
                            "send"
                        } else {
                            "recv"
                        }
                    ),
                });
            }
            // Waits: this step's own and those of the nops right before it.
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
            for w in waits {
                for (dc, di) in resolve(tbs, &pos, w, 0) {
                    if dc == c {
                        if di >= idx && !lossless {
                            return Err(MscclError::At { file: file.into(), line: 0, col: 0, msg: format!("gpu {r} tb {t} step {k} waits for a later step of its own channel") });
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
            let ch = &mut chans[c as usize];
            if ch.len() <= idx as usize {
                ch.resize(idx as usize + 1, None);
            }
            ch[idx as usize] = Some(op);
        }
        let mut programs = Vec::with_capacity(nch as usize);
        for (c, ch) in chans.into_iter().enumerate() {
            let mut ops = Vec::with_capacity(ch.len());
            for (i, o) in ch.into_iter().enumerate() {
                ops.push(o.ok_or_else(|| MscclError::At {
                    file: file.into(),
                    line: 0,
                    col: 0,
                    msg: format!("gpu {r}: channel {c} has no step with tp_op=\"{i}\""),
                })?);
            }
            programs.push(ChannelProgram { ops });
        }
        if in_place {
            // In place: the data starts in the output; copy it there first, everything waits.
            let total = s.collective.blocks(n).0 * cpb;
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
        s.ranks.push(RankProgram {
            rank: r as u32,
            channels: programs,
        });
    }
    s.validate().map_err(|source| MscclError::Invalid {
        file: file.into(),
        source,
    })?;
    Ok(s)
}

/// The real steps a wait on (tb, step) stands for: the step itself, or for a nop the last real
/// step before it in its tb plus the nop's own wait.
fn resolve(
    tbs: &[Tb],
    pos: &[Vec<Option<(u32, u32)>>],
    (t, k): (usize, usize),
    depth: u32,
) -> Vec<(u32, u32)> {
    if depth > 64 {
        return Vec::new();
    }
    if let Some(p) = pos[t][k] {
        return vec![p];
    }
    let mut v = Vec::new();
    if let Some(p) = (0..k).rev().find_map(|j| pos[t][j]) {
        v.push(p);
    }
    if let Some(d) = tbs[t].steps[k].dep {
        v.extend(resolve(tbs, pos, d, depth + 1));
    }
    v
}

/// Foreign files: threadblocks joined by a connection (same MSCCL channel, one's send peer is the
/// other's rank and vice versa) must share an IR channel index. Components get the smallest index
/// free on every rank they touch.
fn color_components(g: &[&Vec<Tb>]) -> Vec<Vec<u32>> {
    let mut base = Vec::with_capacity(g.len());
    let mut total = 0usize;
    for tbs in g {
        base.push(total);
        total += tbs.len();
    }
    let mut parent: Vec<usize> = (0..total).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let nx = p[y];
            p[y] = r;
            y = nx;
        }
        r
    }
    // Receiver tb of each (from, to, chan).
    let mut recv_tb: HashMap<(u32, u32, u32), usize> = HashMap::new();
    for (r, tbs) in g.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            if let Some(from) = tb.recv {
                recv_tb.insert((from, r as u32, tb.chan), base[r] + t);
            }
        }
    }
    for (r, tbs) in g.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            if let Some(to) = tb.send {
                if let Some(&o) = recv_tb.get(&(r as u32, to, tb.chan)) {
                    let (a, b) = (find(&mut parent, base[r] + t), find(&mut parent, o));
                    parent[a] = b;
                }
            }
        }
    }
    let mut members: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    let mut order = Vec::new();
    for (r, tbs) in g.iter().enumerate() {
        for t in 0..tbs.len() {
            let root = find(&mut parent, base[r] + t);
            let e = members.entry(root).or_default();
            if e.is_empty() {
                order.push(root);
            }
            e.push((r, t));
        }
    }
    let mut used: Vec<Vec<u32>> = vec![Vec::new(); g.len()];
    let mut out: Vec<Vec<u32>> = g.iter().map(|tbs| vec![0; tbs.len()]).collect();
    for root in order {
        let m = &members[&root];
        let mut c = 0u32;
        while m.iter().any(|(r, _)| used[*r].contains(&c)) {
            c += 1;
        }
        for &(r, t) in m {
            used[r].push(c);
            out[r][t] = c;
        }
    }
    out
}
