//! NCCL's graph dump (`NCCL_GRAPH_DUMP_FILE`): the rings and trees its search found, one
//! `<graph id pattern nchannels speedintra speedinter typeintra typeinter ...>` per pattern.
//! NCCL writes it in one fixed layout, so a scan of the `<graph` tags reads it; anything else
//! in a `<graph` tag, or a file without `<graphs`, is bad input naming the line.

use super::input::Text;
use super::nccl_log::Graph;
use crate::cli::error::CliError;

/// The value of `name="..."` in a tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')?;
    Some(&tag[at..at + end])
}

/// Every graph of the dump (patterns 1-4 and 5, 6; empty ones, `nchannels="0"`, left out).
pub fn parse(t: &Text) -> Result<Vec<Graph>, CliError> {
    if !t.body.contains("<graphs") {
        return Err(CliError::input(format!(
            "{}: not an NCCL graph dump (no <graphs> element; NCCL_GRAPH_DUMP_FILE writes one)",
            t.name
        )));
    }
    let mut out = Vec::new();
    for (i, line) in t.body.lines().enumerate() {
        let Some(at) = line.find("<graph ") else {
            continue;
        };
        let tag = &line[at..];
        let bad = |what: &str| CliError::input(format!("{}:{}: <graph> {what}", t.name, i + 1));
        let num = |k: &str| -> Result<f64, CliError> {
            attr(tag, k)
                .ok_or_else(|| bad(&format!("without {k}")))?
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad(&format!("{k} is not a number")))
        };
        let word = |k: &str| -> Result<String, CliError> {
            attr(tag, k)
                .map(str::to_string)
                .ok_or_else(|| bad(&format!("without {k}")))
        };
        let g = Graph {
            line: i + 1,
            pattern: num("pattern")? as u32,
            nchannels: num("nchannels")? as u32,
            bw_intra: num("speedintra")?,
            bw_inter: num("speedinter")?,
            type_intra: word("typeintra")?,
            type_inter: word("typeinter")?,
        };
        if g.nchannels > 0 {
            out.push(g);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::input::{from_bytes, read};

    #[test]
    fn the_h200x2_dump() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/measurements/h200x2/graph.xml"
        );
        let g = parse(&read(std::path::Path::new(p)).unwrap()).unwrap();
        assert_eq!(
            g.len(),
            2,
            "ring and tree; the empty collnet and NVLS graphs are left out"
        );
        assert_eq!((g[0].pattern, g[0].nchannels, g[0].bw_intra), (4, 12, 30.0));
        assert_eq!(
            (g[0].type_intra.as_str(), g[0].type_inter.as_str()),
            ("NVL", "PIX")
        );
        assert_eq!((g[1].pattern, g[1].nchannels, g[1].bw_intra), (1, 12, 60.0));
        assert_eq!(g[0].line, 2);
    }

    #[test]
    fn bad_dumps_name_the_line() {
        let t = from_bytes(
            "g.xml",
            b"<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" nchannels=\"x\">\n".to_vec(),
        )
        .unwrap();
        let e = parse(&t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "g.xml:2: <graph> nchannels is not a number");
        let t = from_bytes("t.xml", b"<system version=\"1\">\n".to_vec()).unwrap();
        assert!(parse(&t)
            .unwrap_err()
            .to_string()
            .starts_with("t.xml: not an NCCL graph dump"));
    }
}
