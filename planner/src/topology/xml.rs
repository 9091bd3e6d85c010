//! NCCL topology XML (`NCCL_TOPO_DUMP_FILE` / `NCCL_TOPO_FILE`) ⇄ [`TopoDoc`].
//!
//! Reading keeps every attribute NCCL reads in typed fields and any other attribute in `extra`;
//! unknown elements are dropped with a warning, as NCCL ignores them too. Positions of elements
//! are kept for later semantic errors.

use super::doc::*;
use super::error::{Diagnostic, TopoError};
use super::xml_text::{check_shape, Positions, MAX_DEPTH, MAX_ELEMENTS};
use roxmltree::{Document, Node as XNode};
use std::fmt::Write as _;

/// Parses NCCL topology XML text. `file` names the input in errors.
pub fn read_xml(text: &str, file: &str, warnings: &mut Vec<String>) -> Result<TopoDoc, TopoError> {
    let pos = Positions::new(text);
    // Shape first: the limits hold before anything is built from the text.
    check_shape(text).map_err(|e| {
        let (line, col) = pos.at(e.offset);
        TopoError::Syntax(Box::new(Diagnostic::at(
            file,
            text,
            line,
            col,
            e.message,
            Some(format!(
                "at most {MAX_ELEMENTS} elements nested at most {MAX_DEPTH} deep"
            )),
        )))
    })?;
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        // Elements, text and comments: the element limit leaves room for the text between.
        nodes_limit: 4 * MAX_ELEMENTS as u32,
    };
    let xdoc =
        Document::parse_with_options(text, opts).map_err(|e| syntax_error(text, file, &e))?;
    let r = Reader { text, file, pos };
    let root = xdoc.root_element();
    match root.tag_name().name() {
        "system" => {}
        "graphs" => return Err(r.semantic(
            root,
            "this is an NCCL graph file (NCCL_GRAPH_DUMP_FILE: rings and trees), not a topology; \
                 give the NCCL_TOPO_DUMP_FILE of the same run",
        )),
        other => {
            return Err(r.semantic(
                root,
                format!("root element is <{other}>, expected <system version=\"1\">"),
            ))
        }
    }
    let system = r.system(root, warnings)?;
    Ok(TopoDoc::new(system))
}

fn syntax_error(text: &str, file: &str, e: &roxmltree::Error) -> TopoError {
    use roxmltree::Error as E;
    let mut pos = e.pos();
    let expected = match e {
        E::UnexpectedCloseTag(exp, _, _) => Some(format!("the closing tag </{exp}>")),
        E::UnclosedRootNode => {
            // roxmltree reports 1:1; point at the end of the file, where the tag is missing.
            let lines: Vec<&str> = text.lines().collect();
            let line = lines.len().max(1);
            let col = lines.last().map(|l| l.chars().count() + 1).unwrap_or(1);
            pos = roxmltree::TextPos::new(line as u32, col as u32);
            Some("the closing tag of every open element (e.g. </system>)".to_string())
        }
        E::NoRootNode => Some("a root element <system version=\"1\">".to_string()),
        E::InvalidAttributeValue(_) | E::InvalidString(..) => {
            Some("an attribute written as name=\"value\"".to_string())
        }
        E::DuplicatedAttribute(name, _) => Some(format!("attribute `{name}` once per element")),
        E::DtdDetected => Some("no <!DOCTYPE> (NCCL topology files have none)".to_string()),
        E::InvalidName(_) => Some("an element or attribute name".to_string()),
        _ => Some("well-formed XML as written by NCCL_TOPO_DUMP_FILE".to_string()),
    };
    TopoError::Syntax(Box::new(Diagnostic::at(
        file,
        text,
        pos.row,
        pos.col,
        {
            // roxmltree ends its message with " at L:C"; the position is shown separately.
            let m = e.to_string();
            let m = match m.rfind(" at ") {
                Some(i) if m[i + 4..].bytes().all(|b| b.is_ascii_digit() || b == b':') => {
                    m[..i].to_string()
                }
                _ => m,
            };
            format!("malformed XML: {m}")
        },
        expected,
    )))
}

struct Reader<'a> {
    text: &'a str,
    file: &'a str,
    pos: Positions<'a>,
}

impl Reader<'_> {
    fn at(&self, n: XNode) -> At {
        let (line, col) = self.pos.at(n.range().start);
        At { line, col }
    }

    fn name_of(&self, n: XNode) -> String {
        let at = self.at(n);
        let mut s = format!("<{}", n.tag_name().name());
        for key in ["busid", "dev", "name", "numaid", "target"] {
            if let Some(v) = n.attribute(key) {
                let _ = write!(s, " {key}=\"{v}\"");
                break;
            }
        }
        let _ = write!(s, "> at line {}, column {}", at.line, at.col);
        s
    }

    fn semantic(&self, n: XNode, msg: impl Into<String>) -> TopoError {
        TopoError::semantic(self.file, self.name_of(n), msg)
    }

    fn attr_error(&self, n: XNode, key: &str, value: &str, what: &str) -> TopoError {
        // Point at the attribute itself and show the line, as for syntax errors.
        let (line, col) = n
            .attributes()
            .find(|a| a.name() == key)
            .map(|a| self.pos.at(a.range().start))
            .unwrap_or_else(|| {
                let a = self.at(n);
                (a.line, a.col)
            });
        TopoError::Syntax(Box::new(Diagnostic::at(
            self.file,
            self.text,
            line,
            col,
            format!(
                "<{}>: attribute {key}=\"{value}\" is not valid",
                n.tag_name().name()
            ),
            Some(what.to_string()),
        )))
    }

    fn int(&self, n: XNode, key: &str) -> Result<Option<i64>, TopoError> {
        match n.attribute(key) {
            None => Ok(None),
            Some(v) => parse_int(v)
                .map(Some)
                .ok_or_else(|| self.attr_error(n, key, v, "an integer (decimal or 0x hex)")),
        }
    }

    fn req_int(&self, n: XNode, key: &str) -> Result<i64, TopoError> {
        self.int(n, key)?
            .ok_or_else(|| self.semantic(n, format!("required attribute `{key}` is missing")))
    }

    fn string(&self, n: XNode, key: &str) -> Option<String> {
        n.attribute(key).map(str::to_string)
    }

    fn extra(&self, n: XNode, known: &[&str]) -> Extra {
        n.attributes()
            .filter(|a| !known.contains(&a.name()))
            .map(|a| (a.name().to_string(), a.value().to_string()))
            .collect()
    }

    fn unknown_child(&self, parent: XNode, c: XNode, warnings: &mut Vec<String>) {
        let at = self.at(c);
        warnings.push(format!(
            "{}:{}:{}: ignoring element <{}> inside <{}> (NCCL ignores it too)",
            self.file,
            at.line,
            at.col,
            c.tag_name().name(),
            parent.tag_name().name()
        ));
    }

    fn system(&self, n: XNode, warnings: &mut Vec<String>) -> Result<SystemDoc, TopoError> {
        match n.attribute("version") {
            Some(v) if parse_int(v) == Some(1) => {}
            Some(v) => {
                return Err(self.attr_error(
                    n,
                    "version",
                    v,
                    "version=\"1\" (the only topology XML version NCCL reads)",
                ))
            }
            None => {
                return Err(self.semantic(
                    n,
                    "required attribute `version` is missing (NCCL needs version=\"1\")",
                ))
            }
        }
        let mut sys = SystemDoc {
            name: self.string(n, "name"),
            extra: self.extra(n, &["version", "name"]),
            at: self.at(n),
            ..Default::default()
        };
        for c in n.children().filter(|c| c.is_element()) {
            match c.tag_name().name() {
                "cpu" => sys.cpus.push(self.cpu(c, warnings)?),
                _ => self.unknown_child(n, c, warnings),
            }
        }
        Ok(sys)
    }

    fn cpu(&self, n: XNode, warnings: &mut Vec<String>) -> Result<CpuDoc, TopoError> {
        let mut cpu = CpuDoc {
            host_hash: self.string(n, "host_hash"),
            numaid: self.int(n, "numaid")?,
            affinity: self.string(n, "affinity"),
            arch: self.string(n, "arch"),
            vendor: self.string(n, "vendor"),
            familyid: self.int(n, "familyid")?,
            modelid: self.int(n, "modelid")?,
            extra: self.extra(
                n,
                &[
                    "host_hash",
                    "numaid",
                    "affinity",
                    "arch",
                    "vendor",
                    "familyid",
                    "modelid",
                ],
            ),
            at: self.at(n),
            ..Default::default()
        };
        for c in n.children().filter(|c| c.is_element()) {
            match c.tag_name().name() {
                "pci" => cpu.pci.push(self.pci(c, warnings)?),
                "nic" => cpu.nics.push(self.nic(c, warnings)?),
                _ => self.unknown_child(n, c, warnings),
            }
        }
        Ok(cpu)
    }

    fn pci(&self, n: XNode, warnings: &mut Vec<String>) -> Result<PciDoc, TopoError> {
        let busid = self
            .string(n, "busid")
            .ok_or_else(|| self.semantic(n, "required attribute `busid` is missing"))?;
        let mut pci = PciDoc {
            busid,
            class: self.string(n, "class"),
            vendor: self.string(n, "vendor"),
            device: self.string(n, "device"),
            subsystem_vendor: self.string(n, "subsystem_vendor"),
            subsystem_device: self.string(n, "subsystem_device"),
            link_speed: self.string(n, "link_speed"),
            link_width: self.int(n, "link_width")?,
            extra: self.extra(
                n,
                &[
                    "busid",
                    "class",
                    "vendor",
                    "device",
                    "subsystem_vendor",
                    "subsystem_device",
                    "link_speed",
                    "link_width",
                ],
            ),
            at: self.at(n),
            ..Default::default()
        };
        for c in n.children().filter(|c| c.is_element()) {
            match c.tag_name().name() {
                "pci" => pci.pci.push(self.pci(c, warnings)?),
                "gpu" => {
                    if pci.gpu.is_some() {
                        return Err(self.semantic(c, "a <pci> holds at most one <gpu>"));
                    }
                    pci.gpu = Some(self.gpu(c, warnings)?)
                }
                "nic" => {
                    if pci.nic.is_some() {
                        return Err(self.semantic(c, "a <pci> holds at most one <nic>"));
                    }
                    pci.nic = Some(self.nic(c, warnings)?)
                }
                "pcilink" => pci.pcilinks.push(PciLinkDoc {
                    target: self.string(c, "target").ok_or_else(|| {
                        self.semantic(c, "required attribute `target` is missing")
                    })?,
                    extra: self.extra(c, &["target"]),
                    at: self.at(c),
                }),
                _ => self.unknown_child(n, c, warnings),
            }
        }
        Ok(pci)
    }

    fn gpu(&self, n: XNode, warnings: &mut Vec<String>) -> Result<GpuDoc, TopoError> {
        let mut gpu = GpuDoc {
            dev: self.int(n, "dev")?,
            sm: self.int(n, "sm")?,
            rank: self.int(n, "rank")?,
            gdr: self.int(n, "gdr")?,
            extra: self.extra(n, &["dev", "sm", "rank", "gdr"]),
            at: self.at(n),
            ..Default::default()
        };
        for c in n.children().filter(|c| c.is_element()) {
            match c.tag_name().name() {
                "nvlink" => gpu.nvlinks.push(NvLinkDoc {
                    target: self.string(c, "target").ok_or_else(|| {
                        self.semantic(c, "required attribute `target` is missing")
                    })?,
                    count: self.req_int(c, "count")?,
                    tclass: self.string(c, "tclass"),
                    extra: self.extra(c, &["target", "count", "tclass"]),
                    at: self.at(c),
                }),
                "c2c" => gpu.c2c.push(C2cDoc {
                    bw: self.req_int(c, "bw")?,
                    count: self.req_int(c, "count")?,
                    extra: self.extra(c, &["bw", "count"]),
                    at: self.at(c),
                }),
                _ => self.unknown_child(n, c, warnings),
            }
        }
        Ok(gpu)
    }

    fn nic(&self, n: XNode, warnings: &mut Vec<String>) -> Result<NicDoc, TopoError> {
        let mut nic = NicDoc {
            extra: self.extra(n, &[]),
            at: self.at(n),
            ..Default::default()
        };
        for c in n.children().filter(|c| c.is_element()) {
            match c.tag_name().name() {
                "net" => {
                    let latency = match c.attribute("latency") {
                        None => None,
                        Some(v) => Some(
                            v.trim()
                                .parse::<f64>()
                                .ok()
                                .filter(|x| x.is_finite())
                                .ok_or_else(|| {
                                    self.attr_error(c, "latency", v, "a number of microseconds")
                                })?,
                        ),
                    };
                    nic.nets.push(NetDoc {
                        name: self.string(c, "name"),
                        dev: self.int(c, "dev")?,
                        latency,
                        speed: self.int(c, "speed")?,
                        port: self.int(c, "port")?,
                        guid: self.string(c, "guid"),
                        maxconn: self.int(c, "maxconn")?,
                        gdr: self.int(c, "gdr")?,
                        coll: self.int(c, "coll")?,
                        extra: self.extra(
                            c,
                            &[
                                "name", "dev", "latency", "speed", "port", "guid", "maxconn",
                                "gdr", "coll",
                            ],
                        ),
                        at: self.at(c),
                    })
                }
                _ => self.unknown_child(n, c, warnings),
            }
        }
        Ok(nic)
    }
}

/// Parses an integer as NCCL's strtol(…, 0) would accept it: decimal, or hex with `0x`.
pub(crate) fn parse_int(v: &str) -> Option<i64> {
    let v = v.trim();
    let (neg, body) = match v.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, v),
    };
    let x = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else {
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        body.parse::<i64>().ok()?
    };
    Some(if neg { -x } else { x })
}

// ---------------------------------------------------------------------------------------------
// Writer

/// Writes a document as NCCL topology XML (2-space indentation, NCCL's attribute order).
/// A document with a `cluster` section has no XML form: NCCL's format describes one machine.
pub fn write_xml(doc: &TopoDoc) -> Result<String, TopoError> {
    if doc.cluster.is_some() {
        return Err(TopoError::Unsupported(
            "a cluster topology cannot be written as NCCL XML: NCCL's topology XML describes one \
             machine (NCCL discovers the network at run time). Write JSON instead, or convert the \
             single-node file the cluster was scaled from"
                .to_string(),
        ));
    }
    let mut w = XmlWriter::default();
    let s = &doc.system;
    let mut attrs = vec![("version", "1".to_string())];
    push_opt(&mut attrs, "name", &s.name);
    w.open("system", &attrs, &s.extra, true);
    for cpu in &s.cpus {
        w.cpu(cpu);
    }
    w.close("system");
    Ok(w.out)
}

#[derive(Default)]
struct XmlWriter {
    out: String,
    depth: usize,
}

fn push_opt<T: ToString>(
    attrs: &mut Vec<(&'static str, String)>,
    key: &'static str,
    v: &Option<T>,
) {
    if let Some(v) = v {
        attrs.push((key, v.to_string()));
    }
}

fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            _ => s.push(ch),
        }
    }
    s
}

impl XmlWriter {
    fn open(&mut self, tag: &str, attrs: &[(&str, String)], extra: &Extra, has_children: bool) {
        self.out.push_str(&"  ".repeat(self.depth));
        self.out.push('<');
        self.out.push_str(tag);
        for (k, v) in attrs
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .chain(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        {
            let _ = write!(self.out, " {k}=\"{}\"", escape(v));
        }
        if has_children {
            self.out.push_str(">\n");
            self.depth += 1;
        } else {
            self.out.push_str("/>\n");
        }
    }

    fn close(&mut self, tag: &str) {
        self.depth -= 1;
        let _ = writeln!(self.out, "{}</{tag}>", "  ".repeat(self.depth));
    }

    fn cpu(&mut self, c: &CpuDoc) {
        let mut a = Vec::new();
        push_opt(&mut a, "host_hash", &c.host_hash);
        push_opt(&mut a, "numaid", &c.numaid);
        push_opt(&mut a, "affinity", &c.affinity);
        push_opt(&mut a, "arch", &c.arch);
        push_opt(&mut a, "vendor", &c.vendor);
        push_opt(&mut a, "familyid", &c.familyid);
        push_opt(&mut a, "modelid", &c.modelid);
        let kids = !c.pci.is_empty() || !c.nics.is_empty();
        self.open("cpu", &a, &c.extra, kids);
        for p in &c.pci {
            self.pci(p);
        }
        for n in &c.nics {
            self.nic(n);
        }
        if kids {
            self.close("cpu");
        }
    }

    fn pci(&mut self, p: &PciDoc) {
        let mut a = vec![("busid", p.busid.clone())];
        push_opt(&mut a, "class", &p.class);
        push_opt(&mut a, "vendor", &p.vendor);
        push_opt(&mut a, "device", &p.device);
        push_opt(&mut a, "subsystem_vendor", &p.subsystem_vendor);
        push_opt(&mut a, "subsystem_device", &p.subsystem_device);
        push_opt(&mut a, "link_speed", &p.link_speed);
        push_opt(&mut a, "link_width", &p.link_width);
        let kids =
            !p.pci.is_empty() || p.gpu.is_some() || p.nic.is_some() || !p.pcilinks.is_empty();
        self.open("pci", &a, &p.extra, kids);
        for c in &p.pci {
            self.pci(c);
        }
        if let Some(g) = &p.gpu {
            self.gpu(g);
        }
        if let Some(n) = &p.nic {
            self.nic(n);
        }
        for l in &p.pcilinks {
            self.open("pcilink", &[("target", l.target.clone())], &l.extra, false);
        }
        if kids {
            self.close("pci");
        }
    }

    fn gpu(&mut self, g: &GpuDoc) {
        let mut a = Vec::new();
        push_opt(&mut a, "dev", &g.dev);
        push_opt(&mut a, "sm", &g.sm);
        push_opt(&mut a, "rank", &g.rank);
        push_opt(&mut a, "gdr", &g.gdr);
        let kids = !g.nvlinks.is_empty() || !g.c2c.is_empty();
        self.open("gpu", &a, &g.extra, kids);
        for l in &g.nvlinks {
            let mut a = vec![("target", l.target.clone()), ("count", l.count.to_string())];
            push_opt(&mut a, "tclass", &l.tclass);
            self.open("nvlink", &a, &l.extra, false);
        }
        for c in &g.c2c {
            let a = vec![("bw", c.bw.to_string()), ("count", c.count.to_string())];
            self.open("c2c", &a, &c.extra, false);
        }
        if kids {
            self.close("gpu");
        }
    }

    fn nic(&mut self, n: &NicDoc) {
        let kids = !n.nets.is_empty();
        self.open("nic", &[], &n.extra, kids);
        for net in &n.nets {
            let mut a = Vec::new();
            push_opt(&mut a, "name", &net.name);
            push_opt(&mut a, "dev", &net.dev);
            push_opt(&mut a, "latency", &net.latency);
            push_opt(&mut a, "speed", &net.speed);
            push_opt(&mut a, "port", &net.port);
            push_opt(&mut a, "guid", &net.guid);
            push_opt(&mut a, "maxconn", &net.maxconn);
            push_opt(&mut a, "gdr", &net.gdr);
            push_opt(&mut a, "coll", &net.coll);
            self.open("net", &a, &net.extra, false);
        }
        if kids {
            self.close("nic");
        }
    }
}
