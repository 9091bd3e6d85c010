//! Topology: the model (`model`), its readers and writers (NCCL XML, topoplan JSON), paths with
//! NCCL's rules, multi-node scaling and synthetic topologies for tests.
//!
//! Reading goes text → [`TopoDoc`] (a lossless mirror of the file) → [`Topology`] (the graph,
//! with NCCL's interpretation applied). Writers work from the document, so converting a file
//! never loses what NCCL reads.

mod build;
mod devices;
pub mod doc;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gpus;
mod host_paths;
mod json;
mod links;
mod model;
mod nccl;
mod paths;
pub mod report;
mod scale;
mod skeleton;
mod subset;
pub mod synth;
mod xml;
mod xml_text;

pub use doc::TopoDoc;
pub use error::{Diagnostic, TopoError};
pub use json::{read_json, write_json};
pub use model::*;
pub use nccl::{default_lat, LOC_BW};
pub use paths::{CacheCell, Path, PathType};
pub use scale::{scale, scale_doc, FabricChoice};
pub use subset::SubsetError;
pub use xml::{read_xml, write_xml};

use std::path::Path as FsPath;

/// How to read a topology file.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// GPU model for skeleton files (`h100-sxm`, `a100-sxm`, …; see [`gpus::GPU_MODELS`]).
    /// On full dumps it only sets the model name and memory bandwidth.
    pub gpu_model: Option<String>,
    /// NIC speed in Gbit/s for skeleton NICs (default: per GPU model).
    pub nic_gbps: Option<f64>,
}

/// A topology read from a file: the graph, what was assumed or ignored on the way, and the
/// document form for lossless writing.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub topology: Topology,
    pub warnings: Vec<String>,
    /// The file as read; `assume` records skeleton assumptions that were applied.
    pub doc: TopoDoc,
}

/// Which format a text is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Xml,
    Json,
}

/// Guesses the format from the file name, then from the first non-blank character.
pub fn detect_format(text: &str, name: &str) -> Format {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".json") {
        return Format::Json;
    }
    if lower.ends_with(".xml") {
        return Format::Xml;
    }
    match text.trim_start().chars().next() {
        Some('{') | Some('[') => Format::Json,
        _ => Format::Xml,
    }
}

/// Reads a topology file (XML or JSON by extension, else by content).
pub fn load_file(path: &FsPath, opts: &LoadOptions) -> Result<Loaded, TopoError> {
    let name = path.display().to_string();
    let bytes = crate::input::read_bytes(path)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let col = upto.iter().rev().take_while(|b| **b != b'\n').count() as u32 + 1;
        TopoError::Syntax(Box::new(Diagnostic {
            file: name.clone(),
            line,
            col,
            message: "the file is not valid UTF-8".into(),
            expected: Some("UTF-8 text (NCCL XML or topoplan JSON)".into()),
            source_line: None,
        }))
    })?;
    load_str(&text, &name, opts)
}

/// Reads a topology from text; `name` is used for the format guess and in messages.
pub fn load_str(text: &str, name: &str, opts: &LoadOptions) -> Result<Loaded, TopoError> {
    let mut warnings = Vec::new();
    let format = detect_format(text, name);
    let mut doc = match format {
        Format::Xml => read_xml(text, name, &mut warnings).map_err(|e| e.with_source(text))?,
        Format::Json => read_json(text, name)?,
    };
    let topology = topology_of(&mut doc, name, opts, &mut warnings).map_err(|e| match format {
        Format::Xml => e.with_source(text),
        Format::Json => e,
    })?;
    Ok(Loaded {
        topology,
        warnings,
        doc,
    })
}

/// Builds the topology a document describes (scaling it if it has a `cluster` section), and
/// records applied skeleton assumptions in `doc.assume`.
pub fn topology_of(
    doc: &mut TopoDoc,
    name: &str,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<Topology, TopoError> {
    let (node, assume) = build::build_system(doc, name, opts, warnings)?;
    if assume.is_some() {
        doc.assume = assume;
    }
    match &doc.cluster {
        None => Ok(node),
        Some(c) => {
            let fabric = scale::fabric_of(c, &node)
                .map_err(|m| TopoError::semantic(name, "\"cluster\"", m))?;
            scale(&node, c.nodes, fabric).map_err(|e| match e {
                TopoError::Unsupported(m) => TopoError::semantic(name, "\"cluster\"", m),
                other => other,
            })
        }
    }
}

/// Structural equality of two topologies: same nodes, links (in order), hosts and fabric.
pub fn same_topology(a: &Topology, b: &Topology) -> bool {
    use petgraph::visit::EdgeRef;
    a.n_hosts == b.n_hosts
        && a.fabric == b.fabric
        && a.graph.node_count() == b.graph.node_count()
        && a.graph.edge_count() == b.graph.edge_count()
        && a.graph.node_indices().all(|n| a.graph[n] == b.graph[n])
        && a.graph
            .edge_references()
            .zip(b.graph.edge_references())
            .all(|(x, y)| {
                x.source() == y.source() && x.target() == y.target() && x.weight() == y.weight()
            })
}

#[cfg(test)]
mod tests;
