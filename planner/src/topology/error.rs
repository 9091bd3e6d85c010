//! Errors of the topology readers, with miette-style rendering of the offending line.

use super::model::ModelError;
use std::fmt;

/// A problem at a position in a file: rendered as `file:line:col: message`, the line itself, a
/// caret under the column, and a hint saying what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    /// What would have been accepted there.
    pub expected: Option<String>,
    /// The text of the offending line (without its newline), if known.
    pub source_line: Option<String>,
}

impl Diagnostic {
    /// Builds a diagnostic and fills the offending line from `text`.
    pub fn at(
        file: &str,
        text: &str,
        line: u32,
        col: u32,
        message: impl Into<String>,
        expected: Option<String>,
    ) -> Self {
        let source_line = text
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .map(|l| l.to_string());
        Diagnostic {
            file: file.to_string(),
            line,
            col,
            message: message.into(),
            expected,
            source_line,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )?;
        if let Some(src) = &self.source_line {
            // Tabs are shown as single spaces so the caret lines up with the column.
            let shown: String = src
                .chars()
                .map(|c| if c == '\t' { ' ' } else { c })
                .collect();
            let shown = if shown.chars().count() > 160 {
                let s: String = shown.chars().take(160).collect();
                format!("{s}…")
            } else {
                shown
            };
            let num = self.line.to_string();
            let pad = " ".repeat(num.len());
            let caret_col = (self.col.max(1) as usize - 1).min(shown.chars().count());
            write!(
                f,
                "\n{pad} |\n{num} | {shown}\n{pad} | {}^",
                " ".repeat(caret_col)
            )?;
        }
        if let Some(e) = &self.expected {
            write!(
                f,
                "\n{} = expected {e}",
                " ".repeat(self.line.to_string().len())
            )?;
        }
        Ok(())
    }
}

/// Everything that can go wrong reading, building, scaling or writing a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// Not a regular file, or larger than the input limit.
    #[error("{0}")]
    Read(#[from] crate::input::ReadError),
    /// Malformed XML or JSON.
    #[error("{0}")]
    Syntax(Box<Diagnostic>),
    /// Well-formed, but wrong: names the element (and its line when the file is XML, with the
    /// line itself in `snippet`).
    #[error("{file}: {element}: {message}{snippet}")]
    Semantic {
        file: String,
        element: String,
        message: String,
        snippet: String,
    },
    #[error("{file}: {source}")]
    Model {
        file: String,
        #[source]
        source: ModelError,
    },
    /// A request that cannot be honoured (e.g. a cluster as NCCL XML, an unknown GPU model).
    #[error("{0}")]
    Unsupported(String),
}

impl TopoError {
    pub fn semantic(file: &str, element: impl Into<String>, message: impl Into<String>) -> Self {
        TopoError::Semantic {
            file: file.to_string(),
            element: element.into(),
            message: message.into(),
            snippet: String::new(),
        }
    }

    /// Adds the offending line of `text` to a semantic error whose element names an XML
    /// position (every element name the XML reader and builder make ends in
    /// "at line L, column C").
    pub(crate) fn with_source(self, text: &str) -> Self {
        match self {
            TopoError::Semantic {
                file,
                element,
                message,
                snippet,
            } if snippet.is_empty() => {
                let snippet = position_in(&element)
                    .map(|(line, col)| {
                        let d = Diagnostic::at(&file, text, line, col, "", None);
                        // Keep only the rendered source lines, not the header.
                        let full = d.to_string();
                        match full.find('\n') {
                            Some(i) => full[i..].to_string(),
                            None => String::new(),
                        }
                    })
                    .unwrap_or_default();
                TopoError::Semantic {
                    file,
                    element,
                    message,
                    snippet,
                }
            }
            other => other,
        }
    }
}

/// The first "line L, column C" in an element description.
fn position_in(element: &str) -> Option<(u32, u32)> {
    let i = element.find("line ")?;
    let rest = &element[i + 5..];
    let (l, rest) = rest.split_once(", column ")?;
    let c: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((l.trim().parse().ok()?, c.parse().ok()?))
}
