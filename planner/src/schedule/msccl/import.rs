//! MSCCL-IR XML import (see the module docs of `msccl`).

use super::components::color_components;
use super::programs::{prepend_input_copy, rank_channels};
use super::MscclError;
use crate::schedule::ir::*;
use roxmltree::Node;
use std::collections::HashMap;

struct Ctx<'a> {
    file: &'a str,
    doc: &'a roxmltree::Document<'a>,
}

impl Ctx<'_> {
    fn err(&self, node: Node, msg: String) -> MscclError {
        let p = self.doc.text_pos_at(node.range().start);
        MscclError::At {
            file: self.file.to_string(),
            line: p.row,
            col: p.col,
            msg,
        }
    }
    fn attr<'n>(&self, node: Node<'n, 'n>, name: &str) -> Result<&'n str, MscclError> {
        node.attribute(name).ok_or_else(|| {
            self.err(
                node,
                format!("<{}> needs attribute `{name}`", node.tag_name().name()),
            )
        })
    }
    fn num<T: std::str::FromStr>(&self, node: Node, name: &str) -> Result<T, MscclError> {
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
        node: Node,
        name: &str,
    ) -> Result<Option<T>, MscclError> {
        match node.attribute(name) {
            None => Ok(None),
            Some(_) => self.num(node, name).map(Some),
        }
    }
    /// Refuses a child element of `parent` that is not a `want`.
    fn expect_tag(&self, node: Node, want: &str, parent: &str) -> Result<(), MscclError> {
        if node.tag_name().name() == want {
            return Ok(());
        }
        Err(self.err(
            node,
            format!(
                "unexpected <{}> inside <{parent}>; expected <{want}>",
                node.tag_name().name()
            ),
        ))
    }
}

/// One parsed step.
pub(super) struct Step {
    pub(super) kind: Option<OpKind>, // None: nop
    pub(super) src: ChunkRef,
    pub(super) dst: ChunkRef,
    pub(super) dep: Option<(usize, usize)>,
    pub(super) tp_op: Option<u32>,
    pub(super) transport: Option<Transport>,
}

/// One `<gpu>`: i_chunks, o_chunks, s_chunks and its threadblocks.
type Gpu = (u32, u32, u32, Vec<Tb>);

pub(super) struct Tb {
    pub(super) send: Option<u32>,
    pub(super) recv: Option<u32>,
    pub(super) chan: u32,
    pub(super) tp_chan: Option<u32>,
    pub(super) steps: Vec<Step>,
}

/// What `<algo>` says about the collective.
struct Header {
    n: u32,
    coll: Collective,
    proto: Protocol,
    name: String,
}

/// How the files' chunk counts map onto IR blocks.
struct Layout {
    /// `o_chunks="0"`: the file computes in the input buffer.
    in_place: bool,
    chunks_per_block: u32,
    scratch_blocks: u32,
}

/// The IR channel of every threadblock.
pub(super) struct Channels {
    /// Every threadblock and real step carries `tp_chan`/`tp_op` (a file we exported).
    pub(super) lossless: bool,
    /// Per rank, per threadblock.
    pub(super) of: Vec<Vec<u32>>,
    pub(super) count: u32,
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
    let head = read_header(&cx, algo)?;
    let n = head.n;
    let g = read_gpus(&cx, algo, n)?;
    let layout = read_layout(&cx, algo, &head.coll, n, &g)?;
    let chans = ir_channels(&cx, algo, &g)?;
    let mut s = schedule_header(&cx, algo, head, &layout, chans.count)?;
    let input_chunks = s.collective.blocks(n).0 * layout.chunks_per_block;
    for (r, (_, _, _, tbs)) in g.iter().enumerate() {
        let mut programs = rank_channels(file, r, tbs, &chans, layout.in_place)?;
        if layout.in_place {
            prepend_input_copy(&mut programs, input_chunks);
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

/// `<algo>`'s rank count, collective (root, send peers) protocol and name.
fn read_header(cx: &Ctx, algo: Node) -> Result<Header, MscclError> {
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
    Ok(Header {
        n,
        coll,
        proto,
        name,
    })
}

/// Every `<gpu>` of `<algo>` in rank order; each rank below `n` appears exactly once.
fn read_gpus(cx: &Ctx, algo: Node, n: u32) -> Result<Vec<Gpu>, MscclError> {
    let mut gpus: Vec<Option<Gpu>> = (0..n).map(|_| None).collect();
    for g in algo.children().filter(|c| c.is_element()) {
        cx.expect_tag(g, "gpu", "algo")?;
        let id: u32 = cx.num(g, "id")?;
        if id >= n {
            return Err(cx.err(g, format!("gpu id {id} is not below ngpus {n}")));
        }
        if gpus[id as usize].is_some() {
            return Err(cx.err(g, format!("gpu id {id} appears twice")));
        }
        gpus[id as usize] = Some(read_gpu(cx, g, id, n)?);
    }
    let mut out = Vec::with_capacity(n as usize);
    for (i, x) in gpus.into_iter().enumerate() {
        out.push(x.ok_or_else(|| cx.err(algo, format!("gpu {i} is missing (ngpus is {n})")))?);
    }
    Ok(out)
}

/// One `<gpu>` (rank `id`): its chunk counts and threadblocks, dependencies as indices.
fn read_gpu(cx: &Ctx, g: Node, id: u32, n: u32) -> Result<Gpu, MscclError> {
    let ic: u32 = cx.num(g, "i_chunks")?;
    let oc: u32 = cx.num(g, "o_chunks")?;
    let sc: u32 = cx.opt_num(g, "s_chunks")?.unwrap_or(0);
    let mut tbs = Vec::new();
    let mut ids = HashMap::new();
    for t in g.children().filter(|c| c.is_element()) {
        cx.expect_tag(t, "tb", "gpu")?;
        let tid: i64 = cx.num(t, "id")?;
        if ids.insert(tid, tbs.len()).is_some() {
            return Err(cx.err(t, format!("tb id {tid} appears twice in gpu {id}")));
        }
        tbs.push(read_tb(cx, t, id, n)?);
    }
    link_deps(cx, g, id, &mut tbs, &ids)?;
    Ok((ic, oc, sc, tbs))
}

/// One `<tb>` of rank `id` and its steps, which must come in order.
fn read_tb(cx: &Ctx, t: Node, id: u32, n: u32) -> Result<Tb, MscclError> {
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
        cx.expect_tag(st, "step", "tb")?;
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
        tb.steps.push(read_step(cx, st)?);
    }
    Ok(tb)
}

/// One `<step>`; its dependency still names a tb id.
fn read_step(cx: &Ctx, st: Node) -> Result<Step, MscclError> {
    let kind = step_kind(cx, st)?;
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
    Ok(Step {
        kind,
        src: ChunkRef::new(buf("srcbuf")?, cx.num(st, "srcoff")?, cnt),
        dst: ChunkRef::new(buf("dstbuf")?, cx.num(st, "dstoff")?, cnt),
        dep,
        tp_op: cx.opt_num(st, "tp_op")?,
        transport,
    })
}

/// A step's `type`: an op kind, or `None` for a nop.
fn step_kind(cx: &Ctx, st: Node) -> Result<Option<OpKind>, MscclError> {
    Ok(match cx.attr(st, "type")? {
        "s" => Some(OpKind::Send),
        "r" => Some(OpKind::Recv),
        "rcs" => Some(OpKind::RecvCopySend),
        "rrs" => Some(OpKind::RecvReduceSend),
        "rrc" => Some(OpKind::RecvReduceCopy),
        "rrcs" => Some(OpKind::RecvReduceCopySend),
        "cpy" => Some(OpKind::Copy),
        "re" => Some(OpKind::Reduce),
        "nop" => None,
        other => {
            return Err(cx.err(
                st,
                format!("unknown step type \"{other}\" (s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)"),
            ))
        }
    })
}

/// Dependencies name tb ids; store them as indices into `tbs`, and check the steps exist.
fn link_deps(
    cx: &Ctx,
    g: Node,
    id: u32,
    tbs: &mut [Tb],
    ids: &HashMap<i64, usize>,
) -> Result<(), MscclError> {
    for tb in tbs.iter_mut() {
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
    for tb in tbs.iter() {
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
    Ok(())
}

/// Chunks per block and scratch blocks, from the `tp_*` attributes or the chunk counts, which
/// every `<gpu>` must share.
fn read_layout(
    cx: &Ctx,
    algo: Node,
    coll: &Collective,
    n: u32,
    g: &[Gpu],
) -> Result<Layout, MscclError> {
    let kind = coll.kind;
    let (bi, bo) = coll.blocks(n);
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
    Ok(Layout {
        in_place,
        chunks_per_block: cpb,
        scratch_blocks,
    })
}

/// Our own exports keep their channels (`tp_chan`); foreign files get connected components.
fn ir_channels(cx: &Ctx, algo: Node, g: &[Gpu]) -> Result<Channels, MscclError> {
    let lossless = g.iter().all(|x| {
        x.3.iter().all(|tb| {
            tb.tp_chan.is_some()
                && tb
                    .steps
                    .iter()
                    .all(|s| s.kind.is_none() || s.tp_op.is_some())
        })
    });
    let of: Vec<Vec<u32>> = if lossless {
        g.iter()
            .map(|x| x.3.iter().map(|tb| tb.tp_chan.unwrap()).collect())
            .collect()
    } else {
        color_components(&g.iter().map(|x| &x.3).collect::<Vec<_>>())
    };
    let count = of
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
    Ok(Channels {
        lossless,
        of,
        count,
    })
}

/// The schedule's fields but its rank programs.
fn schedule_header(
    cx: &Ctx,
    algo: Node,
    head: Header,
    layout: &Layout,
    channels: u32,
) -> Result<Schedule, MscclError> {
    let name = head.name;
    Ok(Schedule {
        version: cx
            .opt_num(algo, "tp_version")?
            .unwrap_or(SCHEDULE_IR_VERSION),
        collective: head.coll,
        algorithm: match algo.attribute("tp_algorithm") {
            Some(a) => serde_json::from_value(serde_json::Value::String(a.into()))
                .unwrap_or(Algorithm::Msccl(name)),
            None => Algorithm::Msccl(name),
        },
        protocol: head.proto,
        nranks: head.n,
        channels,
        chunks_per_block: layout.chunks_per_block,
        scratch_blocks: layout.scratch_blocks,
        slots: cx.opt_num(algo, "tp_slots")?.unwrap_or(8),
        loop_elems: cx.opt_num(algo, "tp_loop_elems")?,
        orders: Vec::new(),
        ranks: Vec::with_capacity(head.n as usize),
    })
}
