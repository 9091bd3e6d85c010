//! No import circles inside the crates whose files call each other most: no two files of
//! `nccl/src` or of the CUDA backend import each other, directly or through others. A circle
//! means no file of it can be read, changed or tested without the others; leaf modules (the
//! call types, a communicator's CUDA state) break them.
//!
//! The graph is read from the sources: `crate::`, `super::` and `self::` paths, and `use` of a
//! child module, each resolved to the file of the longest module prefix that exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `src`, by module path (`lib.rs` is the crate root, `x/mod.rs` is `x`).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("source folder").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut m: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            out.insert(m, p);
        }
    }
    out
}

/// The module paths a file names outside its inline tests: `crate::a::b`, `super::c`,
/// `self::d`, `use child::e` (also `pub(crate) use`), and `child::f` for a child it declares.
fn references(text: &str, me: &Module) -> Vec<Module> {
    // Inline test modules (conventionally last) resolve `super::` to this file, not its parent.
    let code: String = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("mod tests {"))
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let here: Module = me.clone();
    let parent: Module = me[..me.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        let mut parts = Vec::new();
        for seg in s.split("::") {
            let seg: String = seg
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if seg.is_empty() {
                break;
            }
            parts.push(seg);
        }
        parts
    };
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", parent),
        ("self::", here.clone()),
    ] {
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[i + prefix.len()..];
            let heads: Vec<String> = if let Some(inner) = rest.strip_prefix('{') {
                let end = inner.find('}').unwrap_or(inner.len());
                inner[..end]
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .collect()
            } else {
                vec![rest.to_string()]
            };
            for h in heads {
                let mut m = base.clone();
                m.extend(ident(&h));
                out.push(m);
            }
        }
    }
    // Paths through a child module the file declares (`mod pair;` ... `pair::ProcPair`).
    let children: Vec<&str> = code
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t);
            t.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    for child in children {
        let pat = format!("{child}::");
        for (i, _) in code.match_indices(&pat) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut m = here.clone();
            m.extend(ident(&code[i..]));
            out.push(m);
        }
    }
    for line in code.lines() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(u) = t.strip_prefix("use ") else {
            continue;
        };
        if u.starts_with("crate::") || u.starts_with("super::") || u.starts_with("self::") {
            continue;
        }
        let mut m = here.clone();
        m.extend(ident(u));
        out.push(m);
    }
    out
}

/// The file-level import graph of one crate's sources.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mods = modules(src);
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, path) in &mods {
        let text = std::fs::read_to_string(path).unwrap();
        let edges = g.entry(m.clone()).or_default();
        for r in references(&text, m) {
            let target = (0..=r.len())
                .rev()
                .map(|k| r[..k].to_vec())
                .find(|p| mods.contains_key(p));
            if let Some(t) = target.filter(|t| t != m && !t.is_empty()) {
                edges.insert(t);
            }
        }
    }
    g
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let Some((w, _)) = s.g.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn assert_no_circles(src: &str) {
    let g = graph(&root().join(src));
    assert!(g.len() > 3, "{src}: only {} files found", g.len());
    let c = circles(&g);
    assert!(
        c.is_empty(),
        "{src}: files that import each other: {:?}",
        c.iter()
            .map(|comp| comp.iter().map(|m| m.join("::")).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_finder_sees_a_circle() {
    let mut g = BTreeMap::new();
    let m = |s: &str| vec![s.to_string()];
    g.insert(m("a"), BTreeSet::from([m("b")]));
    g.insert(m("b"), BTreeSet::from([m("c")]));
    g.insert(m("c"), BTreeSet::from([m("a")]));
    g.insert(m("d"), BTreeSet::from([m("a")]));
    let c = circles(&g);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].len(), 3);
    let refs = references(
        "use crate::op::{Kind, Op};\nuse crate::{comm, exec::run};\nfn f() { super::x::y(); }\n",
        &vec!["gpu".to_string(), "rank".to_string()],
    );
    assert!(refs.contains(&vec!["op".into()]));
    assert!(refs.contains(&vec!["comm".into()]));
    assert!(refs.contains(&vec!["exec".into(), "run".into()]));
    assert!(refs.contains(&vec!["gpu".into(), "x".into(), "y".into()]));
}

#[test]
fn the_nccl_library_has_no_import_circle() {
    assert_no_circles("nccl/src");
}

#[test]
fn the_cuda_backend_has_no_import_circle() {
    assert_no_circles("cuda/src");
}
