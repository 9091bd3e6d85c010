//! topoplan's JSON form (docs/topology-json.md): serde over [`TopoDoc`], unknown fields rejected.

use super::doc::{TopoDoc, JSON_VERSION};
use super::error::{Diagnostic, TopoError};

/// Parses the JSON form. Errors carry line, column and the offending line.
pub fn read_json(text: &str, file: &str) -> Result<TopoDoc, TopoError> {
    // Check the version first so a future file gets "unsupported version", not "unknown field".
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        match v.get("version") {
            Some(serde_json::Value::Number(n)) if n.as_u64() == Some(JSON_VERSION as u64) => {}
            Some(other) => {
                let (line, col) = find_key(text, "version");
                return Err(TopoError::Syntax(Box::new(Diagnostic::at(
                    file,
                    text,
                    line,
                    col,
                    format!("unsupported topology JSON version {other}"),
                    Some(format!("\"version\": {JSON_VERSION}")),
                ))));
            }
            None if v.is_object() => {
                return Err(TopoError::Syntax(Box::new(Diagnostic::at(
                    file,
                    text,
                    1,
                    1,
                    "missing field `version`",
                    Some(format!(
                        "\"version\": {JSON_VERSION} in the top-level object"
                    )),
                ))))
            }
            None => {}
        }
    }
    serde_json::from_str::<TopoDoc>(text).map_err(|e| {
        let full = e.to_string();
        // serde_json appends " at line L column C"; we show position separately.
        let msg = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        let (message, expected) = match msg.split_once(", expected ") {
            Some((m, x)) => (m.to_string(), Some(x.to_string())),
            None => {
                let exp = match e.classify() {
                    serde_json::error::Category::Eof => {
                        Some("the rest of the document (it ends early)".to_string())
                    }
                    serde_json::error::Category::Syntax => Some("valid JSON".to_string()),
                    _ => Some("the topoplan JSON form (docs/topology-json.md)".to_string()),
                };
                (msg, exp)
            }
        };
        TopoError::Syntax(Box::new(Diagnostic::at(
            file,
            text,
            e.line().max(1) as u32,
            e.column().max(1) as u32,
            format!("invalid topology JSON: {message}"),
            expected,
        )))
    })
}

fn find_key(text: &str, key: &str) -> (u32, u32) {
    let pat = format!("\"{key}\"");
    for (i, l) in text.lines().enumerate() {
        if let Some(c) = l.find(&pat) {
            return (i as u32 + 1, c as u32 + 1);
        }
    }
    (1, 1)
}

/// Writes the JSON form, pretty-printed, with a trailing newline.
pub fn write_json(doc: &TopoDoc) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("documents always serialize");
    s.push('\n');
    s
}
